"""Policy calibration on the embedded task: SFT a ToyMath policy, then measure its accuracy on every
benchmark, greedy and sampled at several temperatures. One row per (benchmark, decoding) goes to
``reports/calibration/policy.jsonl`` (committed), so the choice of SFT steps and temperature in
``params/demo.yaml`` stays on record with the evidence behind it.

    python scripts/calibrate_policy.py --name chain-500 --policy_steps 500 --temperatures 1.0 1.3 1.6

The task flags default to the demo's digit chains; ``scripts/calibration_table.py`` renders the table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core.data.io import append_jsonl  # noqa: E402
from goalrm_core.inference.sampler import sample_completions  # noqa: E402
from goalrm_core.model.templates import apply_template  # noqa: E402
from goalrm_core.tasks.toymath import pipeline as tp  # noqa: E402
from goalrm_core.tasks.toymath import problems as toymath  # noqa: E402
from goalrm_core.tasks.toymath.policy import PolicyConfig  # noqa: E402
from goalrm_core.threads import set_torch_threads  # noqa: E402

TABLE = ROOT / "reports" / "calibration" / "policy.jsonl"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", required=True, help="Row label; the run goes to runs/calibration/<name>.")
    p.add_argument("--policy_steps", type=int, default=500)
    p.add_argument("--policy_batch_size", type=int, default=64)
    p.add_argument("--policy_learning_rate", type=float, default=2e-3)
    p.add_argument("--n_train_questions", type=int, default=20000)
    p.add_argument("--min_steps", type=int, default=3)
    p.add_argument("--max_steps", type=int, default=6)
    p.add_argument("--operand_min", type=int, default=1)
    p.add_argument("--operand_max", type=int, default=9)
    p.add_argument("--operations", default="+-")
    p.add_argument("--modulus", type=int, default=10)
    p.add_argument("--heldout_facts", type=int, default=12)
    p.add_argument("--n_questions", type=int, default=300, help="Questions per benchmark.")
    p.add_argument("--samples", type=int, default=4, help="Samples per question at each temperature.")
    p.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 1.3, 1.6])
    p.add_argument("--max_new_tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--table", type=Path, default=TABLE)
    p.add_argument(
        "--reuse_policy",
        action="store_true",
        help="Measure the policy already in runs/calibration/<name> (more temperatures) instead of training it.",
    )
    args = p.parse_args(argv)

    threads = set_torch_threads(args.threads)
    run = ROOT / "runs" / "calibration" / args.name
    cfg = toymath.ToyMathConfig(
        min_steps=args.min_steps,
        max_steps=args.max_steps,
        operand_min=args.operand_min,
        operand_max=args.operand_max,
        operations=args.operations,
        modulus=args.modulus,
        heldout_facts=args.heldout_facts,
    )
    tp.write_benchmarks(run, cfg, args.n_questions, args.seed)
    policy_cfg = PolicyConfig(
        steps=args.policy_steps,
        batch_size=args.policy_batch_size,
        learning_rate=args.policy_learning_rate,
        seed=args.seed,
    )
    started = time.perf_counter()
    if not (args.reuse_policy and (run / "data" / "policy" / "config.json").exists()):
        tp.train_policy(
            run, tp.training_problems(run, cfg, args.n_train_questions, args.seed), policy_cfg, progress=False
        )
        sft_s = time.perf_counter() - started
    else:
        sft_s = None  # trained by an earlier row of the same name
    model, tokenizer = tp.load_policy(run)
    settings = {
        "name": args.name,
        "task": {
            k: v
            for k, v in vars(args).items()
            if k in ("min_steps", "max_steps", "operand_min", "operand_max", "operations", "modulus", "heldout_facts")
        },
        "policy_steps": args.policy_steps,
        "policy_batch_size": args.policy_batch_size,
        "policy_learning_rate": args.policy_learning_rate,
        "n_train_questions": args.n_train_questions,
        "sft_s": None if sft_s is None else round(sft_s, 1),
        "threads": threads,
    }
    rows = []
    for bench in tp.benchmark_names(run):
        questions = tp.read_benchmark(run, bench)
        prompts = [apply_template(tp.TEMPLATE, q["question"]) for q in questions]
        for temperature in [None, *args.temperatures]:
            n = 1 if temperature is None else args.samples
            completions = sample_completions(
                model,
                tokenizer,
                prompts,
                n=n,
                temperature=temperature or 1.0,
                greedy=temperature is None,
                max_new_tokens=args.max_new_tokens,
                seed=args.seed,
                progress=False,
            )
            records = [
                tp.generation_record(q["question"], q["expected_answer"], c, i, cfg.modulus)
                for q, comps in zip(questions, completions)
                for i, c in enumerate(comps)
            ]
            accuracy = sum(r["is_correct"] for r in records) / len(records)
            rows.append(
                {
                    **settings,
                    "benchmark": bench,
                    "decoding": "greedy" if temperature is None else f"T={temperature}",
                    "n": len(records),
                    "accuracy": round(accuracy, 4),
                }
            )
            print(f"{bench:12s} {rows[-1]['decoding']:8s} {accuracy:.3f} (n={len(records)})", flush=True)
    append_jsonl(args.table, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
