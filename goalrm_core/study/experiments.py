"""Notebook 02's training runs: every RM and seed trained in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from goalrm_core.data.io import read_jsonl
from goalrm_core.data.rundir import RunDir
from goalrm_core.evaluation import metrics
from goalrm_core.study.artifacts import benchmarks, load_rm, read_goal_state as load_goal_state  # noqa: F401  (notebook 05 until it moves)
from goalrm_core.study.rms import STRATEGY as RM_STRATEGIES
from goalrm_core.tasks.toymath.pipeline import TEMPLATE


def model_dir(run_dir, rm: str, seed: int = 0) -> Path:
    return RunDir(run_dir).model(rm, seed)


def eval_dir(run_dir, rm: str, seed: int = 0) -> Path:  # the decoding study's, until it moves to RunDir
    return RunDir(run_dir).eval(rm, seed)


def rm_train_args(run_dir, rm: str, seed: int, out_root=None, **overrides) -> dict:
    """The seed's train_rm flags for one RM of the embedded task (initialised from the base policy);
    the RM goes to ``model_dir`` or, given ``out_root``, to ``out_root/<rm>-seed<k>``."""
    out = model_dir(run_dir, rm, seed) if out_root is None else Path(out_root) / f"{rm}-seed{seed}"
    args = {
        "pretrain": str(Path(run_dir) / "data" / "policy"),
        "dataset": str(Path(run_dir) / "data" / "preference" / "train.jsonl"),
        "eval_dataset": str(Path(run_dir) / "data" / "preference" / "eval.jsonl"),
        "save_path": str(out),
        "metrics_path": str(out) + ".metrics.jsonl",
        "template": TEMPLATE,
        "reward_model_strategy": RM_STRATEGIES[rm],
        "seed": seed,
        "zero_stage": 0,
        "logging_steps": 5,
    }
    args.update(overrides)
    return args


def train_rms(run_dir, rms, seeds, num_processes: int = 1, parallel: int = 1, out_root=None, **overrides) -> pd.DataFrame:
    """Train every RM for every seed in a subprocess (DeepSpeed never runs in the kernel); returns
    one row per run from its train_summary.json.

    ``parallel`` > 1 runs that many trainings at once, each with cores // parallel threads: tiny
    models use one core poorly at a time, so independent runs side by side finish sooner. Their
    live output is then one line per finished run; the full logs are in ``logs/``."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from goalrm_core.train.launch import run_streaming, train_command

    if parallel < 1:
        raise ValueError(f"parallel must be >= 1, got {parallel}")
    jobs = [(rm, seed) for rm in rms for seed in seeds]
    threads = max(1, (os.cpu_count() or 1) // (parallel * num_processes))

    def train(job):
        rm, seed = job
        args = rm_train_args(run_dir, rm, seed, out_root, **overrides)
        log = Path(args["save_path"] + ".log") if out_root is not None else Path(run_dir) / "logs" / f"train-{rm}-seed{seed}.log"
        quiet = {"show": (lambda *_: None)} if parallel > 1 else {}
        env = {"OMP_NUM_THREADS": str(threads)} if parallel > 1 else None
        run_streaming(train_command(args, num_processes=num_processes), log, desc=f"{rm} seed {seed}", env=env, **quiet)
        summary = json.loads((Path(args["save_path"]) / "train_summary.json").read_text())
        if parallel > 1:
            print(f"{rm} seed {seed}: {summary.get('steps')} steps, held-out accuracy {summary.get('eval_accuracy', float('nan')):.3f}", flush=True)
        return {"rm": rm, "seed": seed, **summary}

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        rows = list(pool.map(train, jobs))
    return pd.DataFrame(rows)


def training_curves(run_dir, rms, seeds) -> pd.DataFrame:
    frames = []
    for rm in rms:
        for seed in seeds:
            path = Path(str(model_dir(run_dir, rm, seed)) + ".metrics.jsonl")
            frames.append(pd.DataFrame(read_jsonl(path)).assign(rm=rm, seed=seed))
    return pd.concat(frames, ignore_index=True)


def seed_summary(runs: pd.DataFrame, value: str = "eval_accuracy") -> pd.DataFrame:
    """Mean and 95% t-interval over seeds, per RM."""
    out = {}
    for rm, g in runs.groupby("rm", sort=False):
        mean, low, high = metrics.mean_ci(g[value].to_numpy())
        out[rm] = {f"{value}": mean, f"{value}_ci_low": low, f"{value}_ci_high": high, "n_seeds": len(g)}
    return pd.DataFrame.from_dict(out, orient="index")
