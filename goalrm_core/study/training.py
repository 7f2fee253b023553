"""Notebook 02: train the baseline and the goal-conditioned RM of the embedded task, every seed.

A profile's ``rm:`` block is the trainer's config by name: :func:`~goalrm_core.study.recipe.notebook_recipe`
(``study.recipe``, re-exported here) builds it from notebook 02's parameters, :func:`rm_config` adds one RM's
paths, strategy and seed, and :func:`train_rms` runs the trainer's command line for every RM and seed.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from tqdm.auto import tqdm

from goalrm_core.data.io import read_jsonl
from goalrm_core.data.rundir import RunDir, rm_metrics_path, train_summary_path
from goalrm_core.evaluation.stats import mean_ci
from goalrm_core.study.live import tail_view
from goalrm_core.study.recipe import notebook_recipe, rm_max_len  # noqa: F401 (re-exported)
from goalrm_core.study.rms import OVERRIDES as RM_OVERRIDES
from goalrm_core.study.rms import STRATEGY as RM_STRATEGIES
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.launch import run_streaming, train_command
from goalrm_core.train.progress_file import PROGRESS_FILE_VAR, PROGRESS_LABEL_VAR, progress_path, read_progress
from goalrm_core.train.store import from_store, link_stored

if TYPE_CHECKING:
    import pandas as pd


def shown_command(command: Sequence[str], run_root: str | os.PathLike) -> str:
    """A training command as notebook 02 shows it, with no machine path in it: ``python`` for this interpreter,
    a launcher by its name, the run folder as ``run``, the flags on a second line."""
    exe = "python" if command[0] == sys.executable else Path(command[0]).name
    head = " ".join([exe, *command[1:3]])
    return head + " \\\n    " + " ".join(command[3:]).replace(str(run_root), "run")


def rm_config(recipe: TrainRMConfig, run_dir, rm: str, seed: int, out_root=None, **overrides: Any) -> TrainRMConfig:
    """The config of one RM of the embedded task and one seed: ``recipe`` (:func:`notebook_recipe`) initialised
    from the base policy, trained on the run's preference pairs; saved to the run's model folder or, given
    ``out_root``, to ``out_root/<rm>-seed<k>``. ``overrides`` are trainer flags that win over the recipe."""
    from goalrm_core.tasks.toymath.pipeline import TEMPLATE  # the embedded task (its data stage loads transformers)

    run = RunDir(run_dir)
    out = run.model(rm, seed) if out_root is None else Path(out_root) / RunDir.model_name(rm, seed)
    return TrainRMConfig.from_dict(
        {
            **recipe.to_dict(),
            **{
                "pretrain": str(run.policy),
                "dataset": str(run.preference_pairs("train")),
                "eval_dataset": str(run.preference_pairs("eval")),
                "save_path": str(out),
                "metrics_path": str(rm_metrics_path(out)),
                "template": TEMPLATE,
                "reward_model_strategy": RM_STRATEGIES[rm],
                "seed": seed,
                **RM_OVERRIDES.get(rm, {}),
                **overrides,
            },
        }
    )


def config_table(cfg: TrainRMConfig, run_dir) -> pd.DataFrame:
    """One RM's configuration as a reader's table: every setting that differs from the trainer's
    default (``goalrm train-rm --help``), in the config's field order, paths shown relative to the run
    folder (``run/...``) so no machine path reaches a page."""
    import pandas as pd

    root = os.fspath(RunDir(run_dir).root)
    import dataclasses

    default = TrainRMConfig()
    rows = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if value == getattr(default, f.name):
            continue
        text = (
            ("yes" if value else "no") if isinstance(value, bool) else str(value)
        )  # a switch reads yes/no, never True
        if isinstance(value, str) and text.startswith(root):
            text = "run" + text[len(root) :]
        rows.append({"setting": f.name, "value": text})
    return pd.DataFrame(rows, columns=["setting", "value"])


def threads_per_training(threads: int | None, parallel: int = 1, num_processes: int = 1) -> int:
    """Each training process's share of the stage's pinned ``threads`` (default: this machine's cores)
    when ``parallel`` trainings of ``num_processes`` processes run at once; at least 1."""
    return max(1, (threads or os.cpu_count() or 1) // (parallel * num_processes))


def train_rm(
    cfg: TrainRMConfig,
    log,
    *,
    threads_per_process: int = 1,
    num_processes: int = 1,
    store=None,
    desc: str = "",
    live: bool = True,
) -> dict:
    """Train one RM: the trainer's command line (:func:`~goalrm_core.train.launch.train_command`, ``python -m
    goalrm_core.train.trainer`` + ``cfg.to_argv()``) in a subprocess, since DeepSpeed never runs in the
    kernel, with ``threads_per_process`` threads set explicitly (the floats depend on it) and its output in
    ``log`` (the last lines shown live unless ``live`` is off). Returns its ``train_summary.json``.
    The trainer writes its step and total to :func:`~goalrm_core.train.progress_file.progress_path` ``(log)``
    as it goes (the report runner's stage line and notebook 02's bars read it).

    ``store`` (a folder, e.g. ``RunDir.rm_store``) keeps every RM by :func:`~goalrm_core.train.store.rm_key`: an RM
    whose training
    config and inputs are already there is not trained again. ``cfg``'s model folder, its metrics and
    ``log`` then link to the stored ones, and the summary says ``reused``."""
    log = Path(log)
    progress = progress_path(log)  # of the log asked for (a stored training logs elsewhere): where the watchers look

    def run_training(c: TrainRMConfig, lg: Path) -> None:
        show = tail_view(5, desc) if live else (lambda *_: None)
        progress.unlink(missing_ok=True)  # an earlier training's file would pass for this one's
        env = {
            "OMP_NUM_THREADS": str(threads_per_process),
            PROGRESS_FILE_VAR: str(progress),
            PROGRESS_LABEL_VAR: desc or log.stem,
        }
        run_streaming(train_command(c, num_processes=num_processes), lg, desc=desc, env=env, show=show)

    reused = False
    if store is None:
        run_training(cfg, log)
    else:
        stored, reused = from_store(cfg, Path(store), run_training)
        link_stored(cfg, stored, log)
    summary = json.loads(train_summary_path(cfg.save_path).read_text())
    return {**summary, **({"reused": reused} if store is not None else {})}


def start_rm(cfg: TrainRMConfig, log, *, desc: str = "", **kwargs: Any) -> Future:
    """:func:`train_rm` in the background (a thread waiting on the trainer's subprocess), its output in
    ``log`` only and a line when it ends: notebook 02 shows one RM's call while :func:`train_rms` trains
    the others beside it (``done={(rm, seed): the future}``, which holds one of its places until it ends)."""

    def run() -> dict:
        summary = train_rm(cfg, log, desc=desc, live=False, **kwargs)
        print(
            f"{desc}: {summary.get('steps')} steps, held-out accuracy {summary.get('eval_accuracy', float('nan')):.3f}",
            flush=True,
        )
        return summary

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="goalrm-rm")
    future = pool.submit(run)
    pool.shutdown(wait=False)
    future.progress_path, future.desc = progress_path(log), desc  # for train_rms's bars while it waits on it
    return future


def show_step_bars() -> bool:
    """Whether waiting on trainings draws a bar per RM: in a Jupyter kernel run by hand, never in a batch
    run (``goalrm report``, whose pages show no progress; its terminal line reads the same files)."""
    from goalrm_core.pipeline.batch_run import BATCH_VAR
    from goalrm_core.study.live import in_kernel

    return not os.environ.get(BATCH_VAR) and in_kernel()


def wait_showing_steps(futures: dict, watched: dict, poll_s: float = 1.0, bars: bool | None = None) -> dict:
    """Wait for every future of ``futures`` (a key each) and return their results by key. Meanwhile, where
    :func:`show_step_bars` (or ``bars``) says so, each training in ``watched`` (key -> (progress file, label))
    shows its steps as a ``tqdm.auto`` bar (a widget in JupyterLab) once its trainer writes the file."""
    import concurrent.futures

    if not (show_step_bars() if bars is None else bars):
        return {key: f.result() for key, f in futures.items()}
    shown: dict = {}

    def draw() -> None:
        for key, (path, label) in watched.items():
            record = read_progress(path) if key in futures else None
            if record is None:
                continue
            bar = shown.get(key)
            if bar is None:
                bar = shown[key] = tqdm(
                    total=int(record["total"]), initial=int(record.get("initial", 0)), desc=label, unit="step"
                )
            bar.n = int(record["total"]) if record.get("done") else int(record["step"])
            bar.refresh()

    try:
        while True:
            pending = [f for f in futures.values() if not f.done()]
            draw()
            if not pending:
                break
            concurrent.futures.wait(pending, timeout=poll_s, return_when=concurrent.futures.FIRST_COMPLETED)
    finally:
        for bar in shown.values():
            bar.close()
    return {key: f.result() for key, f in futures.items()}


def _rounds(todo: list, running: Mapping, parallel: int) -> list[tuple[list, int, Mapping]]:
    """The rounds of ``train_rms``, each (jobs, places, runs still going to wait on): first the jobs that fill
    all ``parallel`` places (beside the runs still going), then the ones left over, sharing every thread."""
    left_over = min((len(running) + len(todo)) % parallel, len(todo))
    return [(todo[: len(todo) - left_over], parallel, running), (todo[len(todo) - left_over :], left_over, {})]


def _watched_progress(todo: list, running: Mapping, log_of: Callable) -> dict:
    """Each job's progress file and label, for its bar: the new trainings' (their stale files removed first) and
    those of the runs still going that have one."""
    watched = {job: (progress_path(log_of(job)), f"{job[0]} seed {job[1]}") for job in todo}
    for path, _ in watched.values():  # an earlier training's file would show as this one's until it starts
        path.unlink(missing_ok=True)
    watched.update(
        {
            job: (f.progress_path, f.desc or f"{job[0]} seed {job[1]}")
            for job, f in running.items()
            if getattr(f, "progress_path", None) is not None
        }
    )
    return watched


def train_rms(
    run_dir,
    rms: Sequence[str],
    seeds: Sequence[int],
    recipe: TrainRMConfig,
    num_processes: int = 1,
    parallel: int = 1,
    out_root=None,
    store=None,
    threads: int | None = None,
    done: dict | None = None,
    **overrides: Any,
) -> pd.DataFrame:
    """Train every RM for every seed with :func:`train_rm`; returns one row per run from its
    train_summary.json, in the order of ``rms`` then ``seeds``.

    ``threads`` is the stage's pinned thread count (default: this machine's cores); each training
    process gets ``threads // (parallel * num_processes)`` of them (:func:`threads_per_training`), set
    explicitly, so that the floats depend on the profile and not on how many cores the machine has.

    ``parallel`` > 1 runs that many trainings at once, each with its share of the threads: tiny
    models use one core poorly at a time, so independent runs side by side finish sooner. Their
    live output is then one line per finished run; the full logs are in ``logs/``. The runs left over
    when the jobs do not divide by ``parallel`` (the last ``len % parallel``, fixed by the job order, not
    by timing) run after the others, sharing every thread among themselves instead of idling the rest.

    ``store``: see :func:`train_rm`. ``done`` maps ``(rm, seed)`` to the summary of an RM trained
    already (by a :func:`train_rm` call with this recipe's config), which is not trained again, or to the
    future of one still training (:func:`start_rm`), which takes one of the ``parallel`` places until it ends."""
    if parallel < 1:
        raise ValueError(f"parallel must be >= 1, got {parallel}")
    jobs = [(rm, seed) for rm in rms for seed in seeds]
    done = dict(done or {})
    running = {job: f for job, f in done.items() if isinstance(f, Future)}
    todo = [job for job in jobs if job not in done]
    rounds = _rounds(todo, running, parallel)

    def log_of(job, cfg=None) -> Path:
        rm, seed = job
        if out_root is None:
            return RunDir(run_dir).training_log(rm, seed)
        cfg = cfg or rm_config(recipe, run_dir, rm, seed, out_root, **overrides)
        return Path(cfg.save_path + ".log")

    # each RM's steps as it trains: a bar per RM in JupyterLab (wait_showing_steps), nothing on a batch run's page
    watched = _watched_progress(todo, running, log_of)

    def train(job, per_process):
        rm, seed = job
        cfg = rm_config(recipe, run_dir, rm, seed, out_root, **overrides)
        log = log_of(job, cfg)
        summary = train_rm(
            cfg,
            log,
            threads_per_process=per_process,
            num_processes=num_processes,
            store=store,
            desc=f"{rm} seed {seed}",
            live=parallel == 1,
        )
        reused = summary.get("reused", False)
        if parallel > 1 or reused:
            said = "reused from the store" if reused else f"{summary.get('steps')} steps"
            print(
                f"{rm} seed {seed}: {said}, held-out accuracy {summary.get('eval_accuracy', float('nan')):.3f}",
                flush=True,
            )
        return summary

    # RM i of n with an ETA: a widget in JupyterLab, nothing in a batch run (its log gets a line per RM)
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo) - len(running), desc="RMs trained", unit="RM")
    for round_jobs, width, waiting in rounds:
        if round_jobs or waiting:
            per_process = threads_per_training(threads, width, num_processes)
            with ThreadPoolExecutor(max_workers=width) as pool:  # a run still going holds a place: waited on first
                futures = {
                    **{job: pool.submit(f.result) for job, f in waiting.items()},
                    **{job: pool.submit(train, job, per_process) for job in round_jobs},
                }
                for future in futures.values():
                    future.add_done_callback(lambda _: bar.update(1))
                done.update(wait_showing_steps(futures, watched))
    bar.close()
    import pandas as pd

    return pd.DataFrame([{"rm": rm, "seed": seed, **done[(rm, seed)]} for rm, seed in jobs])


def training_curves(run_dir, rms: Sequence[str], seeds: Sequence[int]) -> pd.DataFrame:
    """Every run's metrics rows (train and eval), with its ``rm`` and ``seed``."""
    import pandas as pd

    run = RunDir(run_dir)
    frames = [
        pd.DataFrame(read_jsonl(rm_metrics_path(run.model(rm, seed)))).assign(rm=rm, seed=seed)
        for rm in rms
        for seed in seeds
    ]
    return pd.concat(frames, ignore_index=True)


def seed_summary(runs: pd.DataFrame, value: str = "eval_accuracy") -> pd.DataFrame:
    """Mean and 95% t-interval over seeds, per RM."""
    import pandas as pd

    out = {}
    for rm, g in runs.groupby("rm", sort=False):
        mean, low, high = mean_ci(g[value].to_numpy())
        out[rm] = {f"{value}": mean, f"{value}_ci_low": low, f"{value}_ci_high": high, "n_seeds": len(g)}
    return pd.DataFrame.from_dict(out, orient="index")


def training_metrics(summary: pd.DataFrame, runs: pd.DataFrame, steps: int) -> tuple[dict, dict]:
    """(the ``training`` section of metrics.json, its timings): per RM the held-out accuracy over
    seeds (``seed_summary``) and the step budget; apart from them, the mean throughput and wall time."""
    recorded = {
        rm: {
            "eval_accuracy": row["eval_accuracy"],
            "eval_accuracy_ci": [row["eval_accuracy_ci_low"], row["eval_accuracy_ci_high"]],
            "steps": steps,
            "n_seeds": int(row["n_seeds"]),
        }
        for rm, row in summary.iterrows()
    }
    timings = {
        rm: {"tokens_per_s": float(g["tokens_per_s"].mean()), "wall_s": float(g["wall_s"].mean())}
        for rm, g in runs.groupby("rm")
    }
    return recorded, timings
