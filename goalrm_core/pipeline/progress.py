"""Where a report run is, said on the terminal: each stage's start line with its ETA, a heartbeat line
every minute while it runs, and the plan of ``goalrm report --dry-run``, all from the stage times of
the last run (or the committed reference report's, scaled to this machine's fp32 matmul rate)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from goalrm_core.paths import relative_paths, resolve_path, shown_path
from goalrm_core.pipeline.status import load_previous
from goalrm_core.train.progress_file import short_duration

#: The statuses of a stage whose artifacts stand (run now, or kept from an earlier run).
SUCCEEDED = ("ok", "kept")


def last_durations(previous: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Each stage's duration in the last run that completed it (``status.json``): the estimate of its next."""
    out = {}
    for name, entry in previous.items():
        duration = entry.get("duration_s")
        if entry.get("status") in SUCCEEDED and isinstance(duration, (int, float)) and not isinstance(duration, bool):
            out[name] = float(duration)
    return out


def progress_line(
    k: int,
    todo: list[str],
    log_path: Path | None,
    durations: Mapping[str, float],
    basis: str | Mapping[str, str] = "last run",
) -> str:
    """``[k/n NN_name] running — log: <path>, ETA ~Xs (last run: Ys), ~Zs for the m stages left``:
    where a run is, and how long the last run of this stage and of the stages left took (``basis`` says
    where ``durations`` come from when they are an estimate instead; one word for all, or one per stage)."""
    name, left = todo[k - 1], todo[k - 1 :]
    parts = [f"log: {relative_paths(str(log_path))}"] if log_path is not None else []
    last = durations.get(name)
    said = basis if isinstance(basis, str) else basis.get(name, "last run")
    parts.append(
        f"ETA ~{short_duration(last)} ({said}: {last:.1f} s)" if last is not None else "ETA unknown (no earlier run)"
    )
    known = [durations[n] for n in left if n in durations]
    if len(left) > 1 and known:
        unknown = len(left) - len(known)
        parts.append(
            f"~{short_duration(sum(known))} for the {len(left)} stages left"
            + (f" (+ {unknown} without a last run)" if unknown else "")
        )
    return f"[{k}/{len(todo)} {name}] running — " + ", ".join(parts)


#: How often a running stage says where it is on the terminal (its log has the details).
HEARTBEAT_S = 60.0


def last_log_line(log_path: Path | None, width: int = 100) -> str:
    """The last thing a stage's log says (its last non-empty line, a progress bar's latest state), shortened."""
    if log_path is None:
        return ""
    try:
        with open(log_path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            tail = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    # a progress bar rewrites its line with \r: its latest state is the last non-empty piece
    lines = [
        next((piece.strip() for piece in reversed(line.split("\r")) if piece.strip()), "")
        for line in tail.replace("\r\n", "\n").split("\n")
    ]
    lines = [line for line in lines if line]
    last = _said_plainly(lines[-1] if lines else "")
    return last if len(last) <= width else last[: width - 1] + "…"


# papermill's own bar in a stage's log: "Executing:  53%|█████▎    | 9/17 [00:31<00:28,  3.50s/cell]"
_PAPERMILL_BAR = re.compile(r"^Executing:?\s+\d+%\|[^|]*\|\s*(\d+)/(\d+)\b")


def _said_plainly(line: str) -> str:
    """A log line as the stage line shows it: papermill's bar says which cell of the notebook runs
    (``9 of 17 notebook cells done``), not a percentage that reads as the stage's progress."""
    bar = _PAPERMILL_BAR.match(line)
    return f"{bar.group(1)} of {bar.group(2)} notebook cells done" if bar else line


def training_progress(log_path: Path | None, since: float | None = None) -> str:
    """What the stage's RM trainings are doing, from the progress files they write in the stage's progress
    folder (:mod:`goalrm_core.train.progress_file`): ``baseline seed 1: step 840/2400, ETA 6m00s; ...``;
    empty when the stage trains none now."""
    if log_path is None:
        return ""
    from goalrm_core.train.progress_file import running_lines, stage_progress_dir

    return running_lines(stage_progress_dir(log_path), since)


@contextlib.contextmanager
def heartbeat(
    tag: str, log_path: Path | None, expected_s: float | None, log: Callable[[str], Any], every: float = HEARTBEAT_S
):
    """While the block runs, a line every ``every`` seconds: how long the stage has run, the time left by
    its last run's duration (or how far past it), and each RM training's step of its total with its ETA
    (:func:`training_progress`) or, when none trains, the last line of its log."""
    import threading

    done, t0, since = threading.Event(), time.monotonic(), time.time()

    def beat():
        while not done.wait(every):
            elapsed = time.monotonic() - t0
            if expected_s is None:
                eta = "no earlier run to estimate from"
            elif elapsed < expected_s:
                eta = f"ETA ~{short_duration(expected_s - elapsed)}"
            else:
                eta = f"{short_duration(elapsed - expected_s)} past the last run's {short_duration(expected_s)}"
            said = training_progress(log_path, since) or last_log_line(log_path)
            log(f"{tag} {short_duration(elapsed)} in, {eta}" + (f" — {said}" if said else ""))

    thread = threading.Thread(target=beat, daemon=True, name="goalrm-heartbeat")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)


def _stage_timings(metrics_path: Path, names: list[str]) -> dict[str, float]:
    """Each stage's wall time as its notebook recorded it in a report's ``metrics.json`` (``timings.<stage>.wall_s``,
    stage ``02_training`` under ``training``): an earlier run's own time where ``status.json`` has none."""
    try:
        timings = json.loads(Path(metrics_path).read_text(encoding="utf-8")).get("timings", {})
    except (OSError, ValueError, AttributeError):
        return {}
    out = {}
    for name in names:
        entry = timings.get(name.split("_", 1)[-1]) if isinstance(timings, dict) else None
        wall = entry.get("wall_s") if isinstance(entry, dict) else None
        if isinstance(wall, (int, float)) and not isinstance(wall, bool) and wall > 0:
            out[name] = float(wall)
    return out


def _recorded_durations(run_dir: Path | None, names: list[str]) -> dict[str, float]:
    """Each stage's duration as the run folder's stage record notes it (``RunDir.stage_record``: the runner
    and a notebook run by hand write ``duration_s``)."""
    if run_dir is None:
        return {}
    from goalrm_core.data.rundir import RunDir

    out = {}
    for name in names:
        try:
            duration = json.loads(RunDir(run_dir).stage_record(name).read_text(encoding="utf-8")).get("duration_s")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(duration, (int, float)) and not isinstance(duration, bool) and duration > 0:
            out[name] = float(duration)
    return out


def own_durations(out_dir: Path, names: list[str], run_dir: Path | None = None) -> tuple[dict[str, float], list[str]]:
    """(each stage's time in an earlier run of its own, where one exists; where they come from): the report
    folder's ``status.json`` (:func:`last_durations`), else the stage's wall time in its ``metrics.json``, else
    the run folder's stage record. Times of this machine and this profile: no scaling."""
    found: dict[str, float] = {}
    sources = []
    for source, durations in (
        (f"the last run in {shown_path(out_dir)}", last_durations(load_previous(out_dir / "status.json"))),
        (f"the stage times in {shown_path(out_dir / 'metrics.json')}", _stage_timings(out_dir / "metrics.json", names)),
        (f"the stage records in {shown_path(run_dir)}" if run_dir else "", _recorded_durations(run_dir, names)),
    ):
        new = {k: v for k, v in durations.items() if k not in found and (k in names or not names)}
        if new:
            found.update(new)
            sources.append(source)
    return found, sources


def loaded_probe_note(gflops: float, threads: int, load: float | None, cores: int | None = None) -> str | None:
    """The line that says the speed probe ran on a loaded machine (its rate then low, the scaled ETA long):
    when the 1-minute load average leaves fewer idle cores than the probe's ``threads``; else None."""
    cores = cores or os.cpu_count() or 1
    if load is None or load < max(1.0, cores - threads + 1):
        return None
    return (
        f"speed probe {gflops:.0f} GFLOP/s with load {load:.1f} on {cores} core{'s' if cores != 1 else ''}: "
        f"the ETA may be long"
    )


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


class Estimates:
    """Each stage's expected seconds here (``durations``), the word for where each comes from (``bases``:
    ``last run`` or ``estimated from the committed report``), the sources in a phrase (``source``) and the
    line that says the speed probe ran on a loaded machine (``note``, else None)."""

    def __init__(self, durations: dict[str, float], bases: dict[str, str], source: str, note: str | None = None):
        self.durations, self.bases, self.source, self.note = durations, bases, source, note


def stage_estimates(
    profile: str,
    out_dir: Path,
    threads: int,
    reference_root: Path,
    names: list[str] | None = None,
    run_dir: Path | None = None,
    probe: Callable[[int], float] | None = None,
    load: Callable[[], float | None] | None = None,
) -> Estimates:
    """Each stage's expected seconds here: an earlier run's own time where one exists (:func:`own_durations`),
    else the committed reference report's time scaled by the ratio of its machine's fp32 matmul rate to this
    one's (``probe``, :func:`goalrm_core.threads.matmul_gflops`; a rough guide: time does not follow the matmul
    rate exactly). The probe runs only when a stage needs it; when it ran on a loaded machine
    (``load``, the 1-minute load average, against the cores), ``note`` says so."""
    names = list(names or [])
    durations, sources = own_durations(out_dir, names, run_dir)
    bases = {k: "last run" for k in durations}
    reference = Path(reference_root) / profile
    wanted = {
        k: v
        for k, v in last_durations(load_previous(reference / "status.json")).items()
        if k not in durations and (k in names or not names)
    }
    note = None
    if wanted:
        try:
            then = json.loads((reference / "metrics.json").read_text())["provenance"]["machine"]["speed"][
                "matmul_gflops"
            ]
        except (OSError, ValueError, KeyError, TypeError):
            then = None
        if then is None:
            scaled, said = wanted, f"the committed {shown_path(reference)} (its machine's speed unknown: not scaled)"
        else:
            if probe is None:
                from goalrm_core.threads import matmul_gflops as probe
            busy = (
                load or _load_average
            )()  # what competes with the probe (the 1-minute average: the probe's second barely moves it)
            here = probe(threads)
            note = loaded_probe_note(here, threads, busy)
            scaled = {k: v * then / here for k, v in wanted.items()}
            said = (
                f"the committed {shown_path(reference)}, scaled by fp32 matmul {then:.0f} GFLOP/s there against "
                f"{here:.0f} here (a rough guide)"
            )
        durations.update(scaled)
        bases.update({k: "estimated from the committed report" for k in scaled})
        sources.append(said)
    source = " and ".join(sources) if sources else "no earlier run of this profile"
    return Estimates(durations, bases, source, note)


def estimated_durations(
    profile: str, out_dir: Path, threads: int, reference_root: Path
) -> tuple[dict[str, float], str]:
    """(:func:`stage_estimates`'s durations, its source): every stage either run has."""
    estimate = stage_estimates(profile, out_dir, threads, reference_root)
    return estimate.durations, estimate.source


def plan_lines(
    profile: str, selected: list[str], out_dir: Path, settings: Mapping[str, Any], reference_root: Path
) -> list[str]:
    """What ``goalrm report --dry-run`` prints: the checked run's folders, each stage to run with its time
    estimate for this machine (:func:`estimated_durations`), the total, and that nothing ran."""
    threads = settings.get("torch_threads") or os.cpu_count() or 1
    run_dir = settings.get("run_dir")
    estimate = stage_estimates(
        profile,
        out_dir,
        int(threads),
        reference_root,
        names=selected,
        run_dir=resolve_path(run_dir) if run_dir else None,
    )
    durations, source = estimate.durations, estimate.source
    lines = [
        f"goalrm report --dry-run: profile {profile!r} and every --set checked; it would report to "
        f"{shown_path(out_dir)} and run in {settings.get('run_dir') or 'the profile run_dir'}, {len(selected)} "
        "stage(s):"
    ]
    for name in selected:
        lines.append(f"  {name}: " + (f"~{short_duration(durations[name])}" if name in durations else "no estimate"))
    known = [durations[n] for n in selected if n in durations]
    lines.append(
        f"  in all: ~{short_duration(sum(known))}"
        + (f" (+ {len(selected) - len(known)} without an estimate)" if len(known) < len(selected) else "")
        + f"; estimated from {source}"
    )
    if estimate.note:
        lines.append(f"  ({estimate.note})")
    lines.append("nothing was run")
    return lines
