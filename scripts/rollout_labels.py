"""Rollout-estimated step labels for a calibration's training pairs, beside their exact twins.

Reads the pairs ``scripts/calibrate_rm.py`` trained on (``<run_dir>/calibration/<name>/data/train.jsonl``),
draws a fixed seeded subset of ``--n`` of them and writes, beside that file:

* ``exact-<n>.jsonl``: the subset as it is (each ``first_error_char`` exact);
* ``rollout-k<k>-<n>.jsonl``: the same pairs with ``first_error_char`` estimated from ``--k`` rollouts of the
  run's policy per line end of each incorrect solution (``goalrm_core.tasks.toymath.rollout_labels``);
* ``rollout-k<k>-<n>.labels.jsonl``: per pair, the exact and the estimated first wrong line and each line's
  number of rollouts that reached the right answer.

Training a process reward model on each file (``--dataset <file> --dense_loss_coef 1
--preference_loss_coef 0``) gives two arms that differ by label noise only. One row of label agreement
(same line, estimated earlier, later, none) goes to ``reports/calibration/rollout-labels.jsonl``::

    OMP_NUM_THREADS=1 python scripts/rollout_labels.py --run_dir runs/calibration/confident/val1000-reported \\
        --name valA-pairwise --n 2000 --k 8

The sampling temperature and the rollouts' token budget default to ``--profile``'s ``sampling_temperature``
and ``max_new_tokens`` (the data stage's). A rerun with the same settings overwrites the files.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from goalrm_core.data.io import append_jsonl, read_jsonl, write_jsonl  # noqa: E402
from goalrm_core.pipeline.profile_files import load_profile  # noqa: E402
from goalrm_core.tasks.toymath import rollout_labels  # noqa: E402
from goalrm_core.tasks.toymath.pipeline import load_policy, task_config  # noqa: E402

TABLE = ROOT / "reports" / "calibration" / "rollout-labels.jsonl"


def subset(pairs: list[dict], n: int, seed: int) -> list[dict]:
    """``n`` of ``pairs`` drawn with ``seed``, in their file order."""
    return [pairs[i] for i in sorted(random.Random(seed).sample(range(len(pairs)), n))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--run_dir", required=True, help="a run whose data stage saved the policy (data/policy) and the task"
    )
    p.add_argument(
        "--name",
        required=True,
        help="the calibration whose training pairs are read (<run_dir>/calibration/<name>/data/)",
    )
    p.add_argument("--n", type=int, default=2000, help="pairs in the subset")
    p.add_argument("--subset_seed", type=int, default=0)
    p.add_argument("--k", type=int, default=8, help="rollouts per line end")
    p.add_argument("--seed", type=int, default=0, help="seed of the rollouts")
    p.add_argument(
        "--profile",
        default="confident",
        help="the profile whose sampling_temperature and max_new_tokens are the defaults",
    )
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--max_new_tokens", type=int, default=None)
    p.add_argument("--batch_size", type=int, default=256, help="rows (prefix x rollout) per sampler batch")
    p.add_argument("--table", type=Path, default=TABLE)
    args = p.parse_args(argv)
    profile = load_profile(args.profile)
    temperature = profile["sampling_temperature"] if args.temperature is None else args.temperature
    max_new_tokens = profile["max_new_tokens"] if args.max_new_tokens is None else args.max_new_tokens
    if args.k < 1 or args.n < 1:
        p.error(f"--k and --n must be >= 1, got --k {args.k} --n {args.n}")

    run = Path(args.run_dir)
    source = run / "calibration" / args.name / "data" / "train.jsonl"
    if not source.is_file():
        p.error(f"{source}: no training pairs (scripts/calibrate_rm.py --name {args.name} writes them)")
    pairs = read_jsonl(source, required=("question", "correct", "incorrect", "first_error_char"))
    if args.n > len(pairs):
        p.error(f"--n {args.n}: {source} holds only {len(pairs)} pairs")
    chosen = subset(pairs, args.n, args.subset_seed)
    policy, tokenizer = load_policy(run)
    modulus = task_config(run).modulus

    load = os.getloadavg()[0]  # the machine's load when the rollouts start: the seconds below depend on it
    started = time.perf_counter()
    estimated, labels = rollout_labels.estimate_first_errors(
        policy,
        tokenizer,
        chosen,
        k=args.k,
        temperature=temperature,
        seed=args.seed,
        modulus=modulus,
        max_new_tokens=max_new_tokens,
        batch_size=args.batch_size,
        progress=True,
    )
    seconds = time.perf_counter() - started

    folder = source.parent
    exact_file, rollout_file = folder / f"exact-{args.n}.jsonl", folder / f"rollout-k{args.k}-{args.n}.jsonl"
    write_jsonl(exact_file, chosen)
    write_jsonl(rollout_file, estimated)
    write_jsonl(
        rollout_file.with_suffix(".labels.jsonl"),
        (
            {
                "question": pair["question"],
                "exact_line": lab.exact_line,
                "estimated_line": lab.estimated_line,
                "hits": list(lab.hits),
                "exact_first_error_char": pair["first_error_char"],
                "estimated_first_error_char": lab.first_error_char,
            }
            for pair, lab in zip(chosen, labels)
        ),
    )
    n_rollouts = args.k * sum(lab.n_lines - 1 for lab in labels)
    row = {
        "name": args.name,
        "run_dir": str(run),
        "pairs": str(source),
        "n_available": len(pairs),
        "n_pairs": args.n,
        "subset_seed": args.subset_seed,
        "k": args.k,
        "temperature": temperature,
        "max_new_tokens": max_new_tokens,
        "seed": args.seed,
        "batch_size": args.batch_size,
        "n_rollouts": n_rollouts,
        **rollout_labels.agreement(labels),
        "exact_file": exact_file.name,
        "rollout_file": rollout_file.name,
        "threads": torch.get_num_threads(),
        "load_average_1min": round(load, 2),
        "seconds": round(seconds, 1),
        "seconds_per_pair": round(seconds / args.n, 3),
    }
    append_jsonl(args.table, [row])
    share = {key: "n/a" if row[key] is None else f"{row[key]:.1%}" for key in ("same_line", "earlier", "later", "none")}
    print(
        f"{args.n} pairs, k={args.k}, T={temperature}: estimated first wrong line = exact on {share['same_line']}, "
        f"earlier {share['earlier']}, later {share['later']}, none {share['none']}; "
        f"{n_rollouts:,} rollouts in {seconds:.0f}s ({seconds / args.n:.2f}s per pair)\n"
        f"wrote {exact_file} and {rollout_file}; row appended to {args.table}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
