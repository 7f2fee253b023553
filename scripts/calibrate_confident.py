"""Policy calibration of the ``confident`` design: the paper's regime in the toy.

The policy is SFT-trained with ``--mistaught_facts`` facts taught wrong in every solution, then sampled
at a normal temperature on the toy-id questions. One row goes to the committed table
``reports/calibration/confident.jsonl`` (``kind: policy``): sampled accuracy, the share of its errors
whose first wrong line is a mis-taught fact, the share of well-formed errors, and the AUROC (with a
question-clustered bootstrap CI) of the two free scorers, length and the policy's mean log-prob. The
run directory it leaves (``runs/calibration/confident/<name>``) has the data-stage layout notebook 01
writes, with the preference pairs of a second generator (reference solutions against one-fact slips,
``pipeline.build_slip_preference_data``), so the RM recipes run on it with ``scripts/calibrate_rm.py``
and record into the same table::

    python scripts/calibrate_confident.py --name m12-s500-T1.0 --mistaught_facts 12 --temperature 1.0
    python scripts/calibrate_rm.py --run_dir runs/calibration/confident/m12-s500-T1.0 --profile confident \\
        --name base-400 --seeds 0 --parallel 1 --score_set samples --table reports/calibration/confident.jsonl

``scripts/calibration_table.py`` renders both kinds of rows.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# goalrm_core is imported after sys.path names this checkout, hence the noqa: E402 below
from goalrm_core.data.io import append_jsonl, write_jsonl  # noqa: E402
from goalrm_core.evaluation import metrics  # noqa: E402
from goalrm_core.evaluation.tables import labels, question_ids  # noqa: E402
from goalrm_core.inference.sampler import sample_completions  # noqa: E402
from goalrm_core.model.templates import apply_template  # noqa: E402
from goalrm_core.tasks.toymath import pipeline as tp  # noqa: E402
from goalrm_core.tasks.toymath import problems as toymath  # noqa: E402
from goalrm_core.tasks.toymath.policy import PolicyConfig  # noqa: E402
from goalrm_core.threads import set_torch_threads  # noqa: E402

TABLE = ROOT / "reports" / "calibration" / "confident.jsonl"
BENCH = "toy-id"


def auroc_with_ci(scores, rows, n_boot: int, seed: int) -> dict:
    """AUROC of ``scores`` for correctness, with its question-clustered bootstrap CI."""
    res = metrics.bootstrap_auroc(
        np.asarray(scores, dtype=float), labels(rows), n_boot=n_boot, seed=seed, clusters=question_ids(rows)
    ).as_dict()
    return {"auroc": _round(res["auroc"]), "ci": [_round(res["ci_low"]), _round(res["ci_high"])]}


def _round(x) -> float | None:
    """4 decimals; None when undefined (one class only), so the table stays valid JSON."""
    return round(float(x), 4) if math.isfinite(float(x)) else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", required=True, help="Row label; the run goes to runs/calibration/confident/<name>.")
    p.add_argument("--mistaught_facts", type=int, default=12)
    p.add_argument("--heldout_facts", type=int, default=12)
    p.add_argument("--policy_steps", type=int, default=500)
    p.add_argument("--policy_hidden_size", type=int, default=128)
    p.add_argument("--policy_layers", type=int, default=4)
    p.add_argument("--n_train_questions", type=int, default=20000)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--n_questions", type=int, default=400, help="toy-id questions sampled.")
    p.add_argument("--samples", type=int, default=1, help="Samples per question.")
    p.add_argument("--n_pair_questions", type=int, default=6000, help="Training questions of the slip pairs.")
    p.add_argument("--slips_per_question", type=int, default=1)
    p.add_argument("--eval_fraction", type=float, default=0.1)
    p.add_argument("--max_new_tokens", type=int, default=48)
    p.add_argument("--n_boot", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--benchmark_seed",
        type=int,
        default=None,
        help="Seed of the benchmark questions (default: --seed). A seed no reported run uses (e.g. 1000) gives a "
        "validation draw: recipes chosen on it are not chosen on a reported benchmark.",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--table", type=Path, default=TABLE)
    p.add_argument(
        "--reuse_policy",
        metavar="NAME",
        default=None,
        help="Sample the policy of an earlier row (runs/calibration/confident/NAME) instead of training one; "
        "the task and policy flags must be that row's.",
    )
    args = p.parse_args(argv)

    threads = set_torch_threads(args.threads)
    run = ROOT / "runs" / "calibration" / "confident" / args.name
    cfg = toymath.ToyMathConfig(
        min_steps=3,
        max_steps=6,
        operand_min=1,
        operand_max=9,
        operations="+-",
        modulus=10,
        heldout_facts=args.heldout_facts,
        mistaught_facts=args.mistaught_facts,
    )
    benchmark_seed = args.seed if args.benchmark_seed is None else args.benchmark_seed
    tp.write_benchmarks(run, cfg, args.n_questions, benchmark_seed)
    policy_cfg = PolicyConfig(
        hidden_size=args.policy_hidden_size, num_layers=args.policy_layers, steps=args.policy_steps, seed=args.seed
    )
    started = time.perf_counter()
    if args.reuse_policy is None:
        history = tp.train_policy(
            run, tp.training_problems(run, cfg, args.n_train_questions, args.seed), policy_cfg, progress=False
        )
        sft = {"sft_final_loss": round(history[-1]["loss"], 4), "sft_s": round(time.perf_counter() - started, 1)}
        model, tokenizer = tp.load_policy(run)
    else:
        sft = {"policy_of": args.reuse_policy}  # copied in: the RMs of this run start from it
        shutil.copytree(
            tp.data_dir(run.parent / args.reuse_policy) / "policy", tp.data_dir(run) / "policy", dirs_exist_ok=True
        )
        model, tokenizer = tp.load_policy(run)
    questions = tp.read_benchmark(run, BENCH)
    prompts = [apply_template(tp.TEMPLATE, q["question"]) for q in questions]
    completions = sample_completions(
        model,
        tokenizer,
        prompts,
        n=args.samples,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        progress=False,
    )
    records = [
        tp.generation_record(q["question"], q["expected_answer"], c, i, cfg.modulus)
        for q, comps in zip(questions, completions)
        for i, c in enumerate(comps)
    ]
    write_jsonl(tp.data_dir(run) / "generations" / BENCH / "samples.jsonl", records)
    pair_stats = tp.build_slip_preference_data(
        run,
        tp.training_problems(run, cfg, args.n_pair_questions, args.seed + 1),
        args.slips_per_question,
        args.eval_fraction,
        args.seed,
    )

    errors = [r for r in records if not r["is_correct"]]
    on_mistaught = sum(
        toymath.mistaught_error(toymath.problem_from_question(r["question"], cfg.modulus), r["generated_solution"], cfg)
        for r in errors
    )
    asks_mistaught = sum(
        any(
            (a, op, b) in toymath.mistaught_fact_table(cfg)
            for a, op, b, _ in toymath.problem_from_question(q["question"], cfg.modulus).steps
        )
        for q in questions
    )
    row = {
        "kind": "policy",
        "name": args.name,
        "task": {"mistaught_facts": args.mistaught_facts, "heldout_facts": args.heldout_facts},
        "policy_steps": args.policy_steps,
        "policy_hidden_size": args.policy_hidden_size,
        "policy_layers": args.policy_layers,
        "n_train_questions": args.n_train_questions,
        "seed": args.seed,
        "temperature": args.temperature,
        "benchmark_seed": benchmark_seed,
        "bench": BENCH,
        "n_questions": len(questions),
        "samples": args.samples,
        "n": len(records),
        **sft,
        "threads": threads,
        "accuracy": round(1 - len(errors) / len(records), 4),
        "n_errors": len(errors),
        "errors_on_mistaught": on_mistaught,
        "share_errors_on_mistaught": round(on_mistaught / max(1, len(errors)), 4),
        "share_errors_well_formed": round(
            sum(toymath.is_well_formed(r["generated_solution"]) for r in errors) / max(1, len(errors)), 4
        ),
        "share_questions_asking_mistaught": round(asks_mistaught / len(questions), 4),
        "length_auroc": auroc_with_ci([-r["num_generated_tokens"] for r in records], records, args.n_boot, args.seed),
        "logprob_auroc": auroc_with_ci([r["policy_mean_logprob"] for r in records], records, args.n_boot, args.seed),
        "pairs": {k: pair_stats[k] for k in ("n_train", "n_eval", "n_questions")}
        | {"slips_per_question": args.slips_per_question},
        "run_dir": str(run.relative_to(ROOT)),
    }
    append_jsonl(args.table, [row])
    print(
        f"{args.name}: accuracy {row['accuracy']:.3f} (n={len(records)}), "
        f"{on_mistaught}/{len(errors)} errors on mis-taught "
        f"facts, length AUROC {row['length_auroc']}, log-prob AUROC {row['logprob_auroc']}, {sft}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
