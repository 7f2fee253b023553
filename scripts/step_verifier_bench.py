"""The step-verifier bench on RMs a calibration trained: first-error F1 against ToyMath's exact labels.

For each RM (``<run_dir>/calibration/<name>/<strategy>-seed<s>``, as ``scripts/calibrate_rm.py`` leaves
them) the script forms the goal state from the preferred side of the pairs that RM trained on
(``<run_dir>/calibration/<name>/data/train.jsonl``, mean last-token state, ``--n_goal_pairs`` drawn
with a fixed seed), scores every sample of ``--bench`` with it, and reads two verifiers per RM at each
line's last token: Q (the cosine to the goal) and the partial reward; and the policy's own log-prob
(a line's least likely token). ``goalrm_core.study.step_bench``
chooses each verifier's threshold on half the questions and reports F1 on the other half. One row per
verifier and seed, then one summary row per verifier (and per difference against ``--reference``),
go to ``reports/calibration/step-verifier.jsonl``::

    python scripts/step_verifier_bench.py --run_dir runs/calibration/confident/val1000-reported \\
        --name valA-pairwise --seeds 0 1 --profile confident

Each figure of ``step_bench.METRICS`` is summarised (first-error F1, line AUROC, final AUROC, and each
verifier as a filter of majority voting: tokens saved as a share of the oracle's saving, ``filter_share``,
and the accuracy change, ``filter_accuracy_change``, at a threshold chosen on the validation half).
``--arm LABEL=NAME:STRATEGY`` adds the RMs of another calibration with the same seeds, read by their partial
reward only (a process reward model's per-token value), e.g. ``--arm "exact-label PRM=valA-prm:baseline"``.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# imported after sys.path names this checkout, hence the noqa: E402 below
from transformers import AutoTokenizer  # noqa: E402

from goalrm_core.data.io import append_jsonl, read_jsonl  # noqa: E402
from goalrm_core.inference.goal_state import goal_state_from_pairs  # noqa: E402
from goalrm_core.inference.scoring import score_generations  # noqa: E402
from goalrm_core.model.reward_model import load_reward_model  # noqa: E402
from goalrm_core.pipeline.profile_files import load_profile  # noqa: E402
from goalrm_core.study import step_bench  # noqa: E402
from goalrm_core.study.filter_rules import with_policy_logprobs  # noqa: E402
from goalrm_core.study.recipe import rm_max_len  # noqa: E402
from goalrm_core.study.rms import BASELINE, GOAL_CONDITIONED, STRATEGY  # noqa: E402
from goalrm_core.tasks.toymath.pipeline import TEMPLATE, read_generations  # noqa: E402

TABLE = ROOT / "reports" / "calibration" / "step-verifier.jsonl"


def _clean(x):
    return None if isinstance(x, float) and not math.isfinite(x) else (round(x, 4) if isinstance(x, float) else x)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run_dir", required=True)
    p.add_argument("--name", required=True, help="the calibration whose RMs are read (<run_dir>/calibration/<name>/)")
    p.add_argument("--strategies", nargs="+", default=[BASELINE, GOAL_CONDITIONED], choices=list(STRATEGY))
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--profile", default="confident", help="the profile whose max_new_tokens sets the scoring length")
    p.add_argument("--bench", default="toy-id")
    p.add_argument("--n_goal_pairs", type=int, default=2000)
    p.add_argument("--split_seed", type=int, default=0, help="seed of the validation/reported split of the questions")
    p.add_argument(
        "--reference", default=f"{BASELINE} partial reward", help="the verifier the others are compared with"
    )
    p.add_argument(
        "--arm",
        action="append",
        default=[],
        metavar="LABEL=NAME:STRATEGY",
        help="another calibration's RMs (same seeds), read by their partial reward, under LABEL",
    )
    p.add_argument("--n_boot", type=int, default=1000)
    p.add_argument("--table", type=Path, default=TABLE)
    args = p.parse_args(argv)
    arms = [
        (Path(args.run_dir) / "calibration" / args.name, strategy, strategy, tuple(step_bench.SCORE_KEYS.items()))
        for strategy in args.strategies
    ]
    for spec in args.arm:
        label, _, source = spec.partition("=")
        name, _, strategy = source.partition(":")
        if not (label and name and strategy in STRATEGY):
            p.error(f"--arm {spec!r}: expected LABEL=NAME:STRATEGY with STRATEGY one of {', '.join(STRATEGY)}")
        arms.append(
            (Path(args.run_dir) / "calibration" / name, strategy, label, (("partial reward", "partial_rewards"),))
        )

    run = Path(args.run_dir)
    root = run / "calibration" / args.name
    max_len = rm_max_len(load_profile(args.profile)["max_new_tokens"])
    rows = read_generations(run, args.bench, "samples")
    validation, _ = step_bench.split_questions(rows, args.split_seed)
    pairs = read_jsonl(root / "data" / "train.jsonl")
    goal_pairs = random.Random(0).sample(pairs, min(args.n_goal_pairs, len(pairs)))
    per_seed: dict[str, list[dict]] = {}
    records = []
    logprob_rows = with_policy_logprobs(run, rows)  # the policy's own per-token log-prob: no RM, no seed
    for arm_index, (arm_root, strategy, label, kinds) in enumerate(arms):
        for seed in args.seeds:
            path = arm_root / f"{strategy}-seed{seed}"
            started = time.perf_counter()
            model, tokenizer = load_reward_model(path), AutoTokenizer.from_pretrained(path)
            goal = goal_state_from_pairs(
                model, tokenizer, goal_pairs, TEMPLATE, max_len=max_len, batch_size=128, encoding="split", readout="eos"
            )
            import torch

            scored = score_generations(
                model,
                tokenizer,
                rows,
                TEMPLATE,
                goal=torch.as_tensor(goal),
                max_len=max_len,
                batch_size=128,
                progress=False,
                encoding="split",
                readout="eos",
            )
            readings = [(f"{label} {kind}", key, scored) for kind, key in kinds]
            if arm_index == 0:  # once per seed, so it pairs with every RM seed (its seed spread is 0)
                lines = [
                    dict(r, policy_token_logprobs=lp["policy_token_logprobs"]) for r, lp in zip(scored, logprob_rows)
                ]
                readings.append(("policy log-prob", "policy_token_logprobs", lines))
            for verifier, key, source in readings:
                result = step_bench.verifier_f1(source, key, validation)
                per_seed.setdefault(verifier, []).append(result)
                records.append(
                    {
                        "kind": "seed",
                        "name": args.name,
                        "run_dir": str(run),
                        "bench": args.bench,
                        "verifier": verifier,
                        "seed": seed,
                        "split_seed": args.split_seed,
                        "n_goal_pairs": len(goal_pairs),
                        "filter_max_drop": step_bench.FRONTIER_DROP,
                        **{k: _clean(v) for k, v in result.items() if not k.startswith("_")},
                        "score_s": round(time.perf_counter() - started, 1),
                    }
                )
                r = records[-1]
                print(
                    f"{verifier} seed {seed}: F1 {r['f1']} "
                    f"(erroneous {r['acc_erroneous']}, correct {r['acc_correct']}; "
                    f"threshold {r['threshold']} chosen at validation F1 {r['validation_f1']}); "
                    f"line AUROC {r['line_auroc']}, "
                    f"final AUROC {r['final_auroc']}; as a filter {r['filter_share']} of the oracle's saving at "
                    f"{r['filter_accuracy_change']} accuracy change",
                    flush=True,
                )
    reference = args.reference if args.reference in per_seed else None
    for metric, by_verifier in step_bench.summaries(per_seed, reference, n_boot=args.n_boot).items():
        for verifier, summary in by_verifier.items():
            difference = (
                " − " in verifier
            )  # a verdict means something for a difference; "F1 > 0" for one verifier does not
            keep = {
                k: _clean(v)
                for k, v in summary.items()
                if k
                in ("mean", "per_seed", "ci_low", "ci_high", "interval", "n_questions", "se_seeds", "se_questions")
                + (("verdict", "mde") if difference else ())
            }
            records.append(
                {
                    "kind": "summary",
                    "name": args.name,
                    "run_dir": str(run),
                    "bench": args.bench,
                    "verifier": verifier,
                    "metric": metric,
                    "seeds": args.seeds,
                    "split_seed": args.split_seed,
                    **keep,
                }
            )
            print(
                f"{verifier}: {metric} {keep.get('mean')} [{keep.get('ci_low')}, {keep.get('ci_high')}]"
                + (f" ({keep.get('verdict')}, MDE {keep.get('mde')})" if difference else "")
            )
    append_jsonl(args.table, records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
