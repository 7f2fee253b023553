"""One chunk of a power run: train RM seeds of a profile and commit each one's evaluation as a record.

    python scripts/power_run.py --profile confident-power --records reports/confident/records --stop-after 85

Run it from a ``git worktree`` at a pinned commit (docs/power-run.md), so that code changed meanwhile cannot
reach a running RM. What it does, resuming from what is complete:

1. the profile's data stage (notebook 01: the policy, its pairs and its generations), once per run folder; or,
   where the records folder holds the run's data snapshot (``data-<fingerprint>.tar.gz``), that snapshot
   unpacked in its place. The first chunk writes the snapshot, so every later chunk, on any machine, trains
   on the same data: the data stage's floats depend on the CPU, and records of other data do not pool;
2. for each seed of the profile's ``rm_seeds`` without both records, in order: the baseline and the
   goal-conditioned RM side by side (one thread each, the profile's recipe), each one's goal state
   (notebook 03's ``mean_last``, from the training pairs), dense scoring of the in-distribution benchmark's
   samples, then one record per arm (``goalrm_core.study.records``), written last and atomically;
3. the exact-label PRM arm on the first ``--prm-seeds`` seeds, two at a time, once every primary seed is done.

No new seed starts after ``--stop-after`` minutes, so a chunk ends within its budget plus one seed's time.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


#: what the RMs of a power run read from the data stage, relative to the run folder: the policy (the RMs'
#: backbone), the benchmarks, the preference pairs and the in-distribution benchmark's generations
SNAPSHOT_PARTS = ("data/policy", "data/benchmarks", "data/preference", "data/generations/{bench}")


def snapshot_name(data: str) -> str:
    return f"data-{data}.tar.gz"


def write_snapshot(root: Path, bench: str, path: Path) -> None:
    """The run's data as one tar.gz (sorted members, no owners or times), written to a temp name then renamed."""
    files = sorted(f for part in SNAPSHOT_PARTS for f in (root / part.format(bench=bench)).rglob("*") if f.is_file())
    tmp = path.with_name(path.name + ".tmp")

    def plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        info.mode = 0o644
        return info

    with (
        open(tmp, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for f in files:
            tar.add(f, arcname=str(f.relative_to(root)), filter=plain)
    os.replace(tmp, path)


def read_snapshot(path: Path, root: Path) -> None:
    """Unpack a data snapshot into the run folder ``root`` (its members are plain files under data/)."""
    with tarfile.open(path, "r:gz") as tar:
        members = tar.getmembers()
        bad = [
            m.name for m in members if not m.isfile() or not m.name.startswith("data/") or ".." in Path(m.name).parts
        ]
        if bad:
            raise SystemExit(f"power_run: {path}: member {bad[0]!r} is not a plain file under data/")
        tar.extractall(root, members=members, filter="data")


def log(msg: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {msg}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="confident-power")
    ap.add_argument("--records", default="reports/confident/records")
    ap.add_argument("--prm-seeds", type=int, default=5, help="the PRM arm runs on the first N seeds (default 5)")
    ap.add_argument("--stop-after", type=float, default=85.0, help="minutes after which no new seed starts")
    ap.add_argument("--seeds", type=int, nargs="*", default=None, help="a subset of the profile's rm_seeds")
    args = ap.parse_args(argv)

    import torch

    from goalrm_core.data.rundir import RunDir
    from goalrm_core.evaluation.tables import read_scored
    from goalrm_core.inference.scoring import eval_rm
    from goalrm_core.pipeline.profile_files import load_profile
    from goalrm_core.study import records
    from goalrm_core.study import representations as rep
    from goalrm_core.study import training as tr
    from goalrm_core.study.rms import BASELINE, GOAL_CONDITIONED, ID_BENCH, PRM
    from goalrm_core.tasks.toymath.pipeline import TEMPLATE
    from goalrm_core.threads import matmul_gflops

    start = time.monotonic()
    p = load_profile(args.profile)
    torch.set_num_threads(int(p["torch_threads"]))
    seeds = [int(s) for s in p["rm_seeds"]]
    if args.seeds:
        unknown = sorted(set(args.seeds) - set(seeds))
        if unknown:
            raise SystemExit(f"power_run: --seeds {unknown} are not in params/{args.profile}.yaml's rm_seeds")
        seeds = [s for s in seeds if s in args.seeds]
    prm_seeds = [int(s) for s in p["rm_seeds"][: args.prm_seeds]] if p.get("prm_arm") else []
    run = RunDir(p["run_dir"])
    out = Path(args.records)
    out.mkdir(parents=True, exist_ok=True)

    # 1. the data stage, once: from the records' data snapshot where there is one
    snapshots = sorted(out.glob(snapshot_name("*")))
    if len(snapshots) > 1:
        raise SystemExit(
            f"power_run: {out} holds {len(snapshots)} data snapshots ({', '.join(p.name for p in snapshots)}): "
            "one run's records share one set of data"
        )
    if not (run.generations / ID_BENCH / "samples.jsonl").exists() and snapshots:
        log(f"data of {args.profile} from {snapshots[0]}")
        read_snapshot(snapshots[0], Path(run.root))
    if not (run.generations / ID_BENCH / "samples.jsonl").exists():
        log(f"data stage of {args.profile} into {run.root}")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "goalrm_core.cli",
                "report",
                "--profile",
                args.profile,
                "--only",
                "01",
                "--reports-dir",
                str(run.root / "pages"),
            ],
            cwd=ROOT,
            check=True,
        )
    data_files = [
        run.generations / ID_BENCH / "samples.jsonl",
        run.preference_pairs("train"),
        run.preference_pairs("eval"),
        *sorted(run.policy.glob("*.safetensors")),
    ]
    data = records.fingerprint(data_files)
    if snapshots and snapshots[0].name != snapshot_name(data):
        raise SystemExit(
            f"power_run: {run.root}'s data has fingerprint {data}, the records' snapshot is {snapshots[0].name}: "
            f"move {run.root}/data aside to train on the snapshot's data"
        )
    if not snapshots:
        write_snapshot(Path(run.root), ID_BENCH, out / snapshot_name(data))
        log(
            f"data snapshot {out / snapshot_name(data)} "
            f"({(out / snapshot_name(data)).stat().st_size // 1024} KiB): commit it"
        )
    others = sorted({r["made"]["data"] for r in map(records.read_record, out.glob("*.json.gz"))} - {data})
    if others:
        raise SystemExit(
            f"power_run: {out} holds records of data {', '.join(others)}, this run's data is {data}: "
            "records of other data do not pool"
        )
    recipe = tr.notebook_recipe(p)
    max_len = recipe.max_len
    threads = int(p["torch_threads"])
    speed = round(matmul_gflops(threads), 1)
    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    log(
        f"commit {commit[:10]}{' (dirty)' if dirty else ''}, data {data}, "
        f"{cpu_model()}, {speed} GFLOP/s at {threads} threads"
    )

    def made(arm: str, seed: int) -> dict:
        cfg = tr.rm_config(recipe, run, arm, seed)
        fields = {
            k: v
            for k, v in dataclasses.asdict(cfg).items()
            if k not in ("pretrain", "dataset", "eval_dataset", "save_path", "metrics_path", "seed")
        }
        recipe_hash = hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return {
            "commit": commit,
            "dirty": dirty,
            "profile": args.profile,
            "recipe": fields,
            "recipe_hash": recipe_hash,
            "data": data,
            "cpu": cpu_model(),
            "matmul_gflops": speed,
            "threads": threads,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }

    def finish(arm: str, seed: int, summary: dict) -> None:
        goal = None
        if arm != PRM:
            rep.save_goal_states(
                run,
                arm,
                [p["goal_method"]],
                seed=p["seed"],
                rm_seed=seed,
                max_len=max_len,
                encoding=p["encoding"],
                readout=p["readout"],
            )
            goal = run.goal_state(arm, seed, p["goal_method"])
        eval_rm(
            run.generations,
            run.model(arm, seed),
            run.eval_root,
            [ID_BENCH],
            goal,
            vanilla=goal is None,
            template=TEMPLATE,
            batch_size=64,
            max_len=max_len,
            progress=False,
            encoding=p["encoding"],
            readout=p["readout"],
        )
        rows = read_scored(run.eval(arm, seed), ID_BENCH, "all")
        train = {k: summary.get(k) for k in ("steps", "eval_accuracy", "wall_s", "tokens_per_s")}
        path = records.write_record(out, arm, seed, ID_BENCH, rows, made(arm, seed), train)
        log(f"{arm} seed {seed}: {len(rows)} samples -> {path} ({path.stat().st_size // 1024} KiB)")

    def todo(arms, seed):
        return [a for a in arms if not (out / records.record_name(a, seed)).exists()]

    jobs = [(s, todo([BASELINE, GOAL_CONDITIONED], s)) for s in seeds]
    jobs += [(pair, [PRM]) for pair in zip(prm_seeds[0::2], prm_seeds[1::2] + [None])]
    for seed, arms in jobs:
        if isinstance(seed, tuple):  # two PRM seeds side by side
            pair = [s for s in seed if s is not None and s in seeds and todo([PRM], s)]
            if not pair:
                continue
            arms_seeds = [(PRM, s) for s in pair]
        else:
            if not arms:
                continue
            arms_seeds = [(a, seed) for a in arms]
        minutes = (time.monotonic() - start) / 60
        if minutes > args.stop_after:
            log(f"stopping after {minutes:.0f} min: {arms_seeds} and later seeds are left for the next chunk")
            break
        t0 = time.monotonic()
        summaries = {}
        # each RM its own trainer process, one thread each, side by side (the profile's layout)
        futures = [
            (
                a,
                s,
                tr.start_rm(
                    tr.rm_config(recipe, run, a, s),
                    run.training_log(a, s),
                    desc=f"{a} seed {s}",
                    threads_per_process=tr.threads_per_training(threads, 2, 1),
                ),
            )
            for a, s in arms_seeds
        ]
        for a, s, f in futures:
            summaries[(a, s)] = f.result()
        os.environ["OMP_NUM_THREADS"] = str(threads)
        for a, s in arms_seeds:
            finish(a, s, summaries[(a, s)])
        log(f"{arms_seeds}: {time.monotonic() - t0:.0f} s")
    done = sorted(p.name for p in out.glob("*.json.gz"))
    log(f"{len(done)} records in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
