"""The filtering rules on benchmark questions drawn with a new seed (the final frontier, not tuned to the \
questions it was developed on).

The rules of ``goalrm_core.study.filter_rules`` were developed on the demo's benchmark questions. This
script draws a fresh set of every benchmark (same configs, a new seed, no question that the policy
trained on or that the original benchmarks hold), samples the run's policy on it, scores the samples
with the run's trained RMs and goal states (linked, not retrained), and appends the rules' rows to
``reports/calibration/filter-rules.jsonl`` under ``--name``, as ``scripts/filter_rules.py`` does for
the original questions.

    python scripts/fresh_benchmark.py --run_dir runs/demo --out runs/demo-fresh1000 \
        --benchmark_seed 1000 --name demo-400-fresh1000 --seeds 0 1 2

``--run_dir`` must hold notebook 01's data, 02's RMs and 03's goal states for ``--seeds``; its stage
records give the profile's values (questions, samples, temperature).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import filter_rules  # noqa: E402  (the sibling script: one way to compute and record the rules)

from goalrm_core.data.io import atomic_write_json, write_jsonl  # noqa: E402
from goalrm_core.data.rundir import RunDir  # noqa: E402
from goalrm_core.study import evaluation as ev  # noqa: E402
from goalrm_core.study.rms import GOAL_CONDITIONED  # noqa: E402
from goalrm_core.study.training import rm_max_len  # noqa: E402
from goalrm_core.tasks.toymath import pipeline as tp  # noqa: E402
from goalrm_core.tasks.toymath import problems as toymath  # noqa: E402


def stage_parameters(run: RunDir, stage: str) -> dict:
    return json.loads(run.stage_record(stage).read_text())["parameters"]


def fresh_benchmarks(src: RunDir, dst: RunDir, data: dict, benchmark_seed: int) -> dict[str, int]:
    """Every benchmark of ``src`` redrawn with ``benchmark_seed``, excluding the questions the policy
    was trained on (SFT and preference pairs, redrawn as notebook 01 drew them) and ``src``'s own
    benchmark questions."""
    train_cfg, _ = tp.configs_from_profile(data)
    original = {row["question"] for name in tp.benchmark_names(src) for row in tp.read_benchmark(src, name)}
    trained = {p.question for p in tp.training_problems(src, train_cfg, data["n_train_questions"], data["seed"])}
    trained |= {p.question for p in tp.training_problems(src, train_cfg, data["n_pair_questions"], data["seed"] + 1)}
    configs = toymath.benchmark_configs(train_cfg)
    counts = {}
    for name in tp.benchmark_names(src):
        problems = toymath.generate_problems(
            configs[name],
            data["n_benchmark_questions"],
            toymath.benchmark_seed(name, benchmark_seed),
            exclude=original | trained,
        )
        counts[name] = write_jsonl(dst.benchmark_questions(name), map(toymath.problem_to_row, problems))
    task = json.loads(src.task_json.read_text())
    atomic_write_json(dst.task_json, task)
    return counts


def link(src: Path, dst: Path) -> None:
    """``dst`` -> ``src`` (absolute), replacing an older link."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink():
        dst.unlink()
    os.symlink(src.resolve(), dst)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run_dir", required=True, help="the run whose policy, RMs and goal states are used")
    p.add_argument("--out", required=True, help="a new run directory for the fresh questions")
    p.add_argument("--benchmark_seed", type=int, required=True)
    p.add_argument("--name", required=True, help="label of this run in the filter-rules table")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args, rest = p.parse_known_args(argv)
    src, dst = RunDir(args.run_dir), RunDir(args.out)
    if Path(args.out).resolve() == Path(args.run_dir).resolve():
        p.error("--out must differ from --run_dir")
    data = stage_parameters(src, "01_data")
    evaluation = stage_parameters(src, "04_evaluation")
    if args.benchmark_seed == data["seed"]:
        p.error(f"--benchmark_seed {args.benchmark_seed} is the run's own benchmark seed")

    counts = fresh_benchmarks(src, dst, data, args.benchmark_seed)
    print(f"fresh questions: {counts}")
    link(src.policy, dst.policy)
    for seed in args.seeds:
        link(src.model(GOAL_CONDITIONED, seed), dst.model(GOAL_CONDITIONED, seed))
        link(
            src.representations / RunDir.model_name(GOAL_CONDITIONED, seed),
            dst.representations / RunDir.model_name(GOAL_CONDITIONED, seed),
        )
    policy, tokenizer = tp.load_policy(dst)
    tp.generate_for_benchmarks(
        dst,
        policy,
        tokenizer,
        data["n_samples"],
        data["sampling_temperature"],
        data["seed"],
        data["max_new_tokens"],
        progress=False,
    )
    print(tp.benchmark_table(dst).to_string())
    ev.score_all(
        dst,
        [GOAL_CONDITIONED],
        args.seeds,
        max_len=rm_max_len(data["max_new_tokens"]),
        goal_method=evaluation["goal_method"],
        encoding=evaluation["encoding"],
        readout=evaluation["readout"],
        progress=False,
    )
    return filter_rules.main(
        ["--run_dir", args.out, "--name", args.name, "--rm", GOAL_CONDITIONED, "--seeds", *map(str, args.seeds), *rest]
    )


if __name__ == "__main__":
    sys.exit(main())
