"""Where a report run is, said on the terminal: each stage's start line with its ETA, a heartbeat line
every minute while it runs, and the plan of ``goalrm report --dry-run``, all from the stage times of
the last run (or the committed reference report's, scaled to this machine's fp32 matmul rate)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from goalrm_core.paths import relative_paths, shown_path
from goalrm_core.pipeline.status import load_previous

#: The statuses of a stage whose artifacts stand (run now, or kept from an earlier run).
SUCCEEDED = ("ok", "kept")


def _clock(seconds: float) -> str:
    """``41s``, ``7m12s``, ``1h05m``: a duration as a person reads it."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def last_durations(previous: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Each stage's duration in the last run that completed it (``status.json``): the estimate of its next."""
    out = {}
    for name, entry in previous.items():
        duration = entry.get("duration_s")
        if entry.get("status") in SUCCEEDED and isinstance(duration, (int, float)) and not isinstance(duration, bool):
            out[name] = float(duration)
    return out


def progress_line(k: int, todo: list[str], log_path: Path | None, durations: Mapping[str, float], basis: str = "last run") -> str:
    """``[k/n NN_name] running — log: <path>, ETA ~Xs (last run: Ys), ~Zs for the m stages left``:
    where a run is, and how long the last run of this stage and of the stages left took (``basis`` says
    where ``durations`` come from when they are an estimate instead)."""
    name, left = todo[k - 1], todo[k - 1:]
    parts = [f"log: {relative_paths(str(log_path))}"] if log_path is not None else []
    last = durations.get(name)
    parts.append(f"ETA ~{_clock(last)} ({basis}: {last:.1f} s)" if last is not None else "ETA unknown (no earlier run)")
    known = [durations[n] for n in left if n in durations]
    if len(left) > 1 and known:
        unknown = len(left) - len(known)
        parts.append(f"~{_clock(sum(known))} for the {len(left)} stages left"
                     + (f" (+ {unknown} without a last run)" if unknown else ""))
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
    lines = [next((piece.strip() for piece in reversed(line.split("\r")) if piece.strip()), "")
             for line in tail.replace("\r\n", "\n").split("\n")]
    lines = [line for line in lines if line]
    last = lines[-1] if lines else ""
    return last if len(last) <= width else last[:width - 1] + "…"


@contextlib.contextmanager
def heartbeat(tag: str, log_path: Path | None, expected_s: float | None, log: Callable[[str], Any], every: float = HEARTBEAT_S):
    """While the block runs, a line every ``every`` seconds: how long the stage has run, the time left by
    its last run's duration (or how far past it), and the last line of its log (which RM, which step)."""
    import threading

    done, t0 = threading.Event(), time.monotonic()

    def beat():
        while not done.wait(every):
            elapsed = time.monotonic() - t0
            if expected_s is None:
                eta = "no earlier run to estimate from"
            elif elapsed < expected_s:
                eta = f"ETA ~{_clock(expected_s - elapsed)}"
            else:
                eta = f"{_clock(elapsed - expected_s)} past the last run's {_clock(expected_s)}"
            said = last_log_line(log_path)
            log(f"{tag} {_clock(elapsed)} in, {eta}" + (f" — {said}" if said else ""))

    thread = threading.Thread(target=beat, daemon=True, name="goalrm-heartbeat")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)


def estimated_durations(profile: str, out_dir: Path, threads: int, reference_root: Path) -> tuple[dict[str, float], str]:
    """Each stage's expected seconds here, and where the figure comes from: this report folder's last run,
    else the committed reference report of the profile scaled by the ratio of its machine's fp32 matmul
    rate to this one's (a rough guide: time does not follow the matmul rate exactly)."""
    durations = last_durations(load_previous(out_dir / "status.json"))
    if durations:
        return durations, f"the last run in {shown_path(out_dir)}"
    reference = Path(reference_root) / profile
    durations = last_durations(load_previous(reference / "status.json"))
    if not durations:
        return {}, "no earlier run of this profile"
    try:
        import json

        then = json.loads((reference / "metrics.json").read_text())["provenance"]["machine"]["speed"]["matmul_gflops"]
    except (OSError, ValueError, KeyError, TypeError):
        return durations, f"the committed {shown_path(reference)} (its machine's speed unknown: not scaled)"
    from goalrm_core.threads import matmul_gflops

    here = matmul_gflops(threads)
    return ({k: v * then / here for k, v in durations.items()},
            f"the committed {shown_path(reference)}, scaled by fp32 matmul {then:.0f} GFLOP/s there against {here:.0f} here "
            "(a rough guide)")


def plan_lines(profile: str, selected: list[str], out_dir: Path, settings: Mapping[str, Any], reference_root: Path) -> list[str]:
    """What ``goalrm report --dry-run`` prints: the checked run's folders, each stage to run with its time
    estimate for this machine (:func:`estimated_durations`), the total, and that nothing ran."""
    threads = settings.get("torch_threads") or os.cpu_count() or 1
    durations, source = estimated_durations(profile, out_dir, int(threads), reference_root)
    lines = [f"goalrm report --dry-run: profile {profile!r} and every --set checked; it would report to {shown_path(out_dir)} "
             f"and run in {settings.get('run_dir') or 'the profile run_dir'}, {len(selected)} stage(s):"]
    for name in selected:
        lines.append(f"  {name}: " + (f"~{_clock(durations[name])}" if name in durations else "no estimate"))
    known = [durations[n] for n in selected if n in durations]
    lines.append(f"  in all: ~{_clock(sum(known))}" + (f" (+ {len(selected) - len(known)} without an estimate)"
                                                        if len(known) < len(selected) else "") + f"; estimated from {source}")
    lines.append("nothing was run")
    return lines
