"""Where a running RM training is, as a small JSON file that others read while it runs.

The trainer (rank 0) writes ``{"label", "step", "total", "initial", "train_s", "elapsed_s", "updated",
"pid", "done"}`` to the path in ``$GOALRM_PROGRESS_FILE`` when that is set, atomically replaced at most
every :data:`EVERY_S` seconds (and once at the start and at the end). :func:`goalrm_core.study.training.train_rm`
sets the variable for each training it starts (:func:`progress_path`): beside the training's log or, in a
``goalrm report`` run, in the stage's progress folder (``$GOALRM_PROGRESS_DIR``, set by the runner), where
the runner's heartbeat line reads every file (:func:`running_lines`) and says each RM's step and ETA.
In JupyterLab, notebook 02's waiting loop draws a bar per RM from the same files.

This module imports nothing heavy: the report runner reads these files without torch.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any, Mapping

#: The file one training writes (set by ``train_rm`` for its trainer subprocess).
PROGRESS_FILE_VAR = "GOALRM_PROGRESS_FILE"
#: What the training is called there (``baseline seed 1``).
PROGRESS_LABEL_VAR = "GOALRM_PROGRESS_LABEL"
#: The folder a report stage's trainings write their files to (set by the runner for the stage's kernel).
PROGRESS_DIR_VAR = "GOALRM_PROGRESS_DIR"
#: The file is replaced at most this often while the steps go.
EVERY_S = 2.0
SUFFIX = ".progress.json"


def progress_path(log: str | os.PathLike, environ: Mapping[str, str] | None = None) -> Path:
    """The progress file of the training logged to ``log``: ``<dir>/<log name>.progress.json`` in the
    folder ``$GOALRM_PROGRESS_DIR`` names (a report run), else beside the log."""
    environ = os.environ if environ is None else environ
    log = Path(log)
    name = (log.stem if log.suffix == ".log" else log.name) + SUFFIX
    folder = environ.get(PROGRESS_DIR_VAR)
    return Path(folder) / name if folder else log.with_name(name)


def stage_progress_dir(stage_log: str | os.PathLike) -> Path:
    """The folder a report stage's trainings write their progress files to: ``logs/02_training.progress/``
    beside the stage's log ``logs/02_training.log``."""
    stage_log = Path(stage_log)
    return stage_log.with_name(stage_log.stem + ".progress")


class ProgressWriter:
    """The trainer's side: ``update(step)`` in the step loop, ``finish(step)`` at the end. A write that
    fails (a full disk, a folder removed) is dropped: progress must never stop a training."""

    def __init__(
        self,
        path: str | os.PathLike | None,
        total: int,
        initial: int = 0,
        label: str = "",
        every_s: float = EVERY_S,
        clock=time.time,
    ):
        self.path = Path(path) if path else None
        self.total, self.initial, self.label, self.every_s, self.clock = int(total), int(initial), label, every_s, clock
        self.started = clock()
        self.last_written: float | None = None
        self.step = self.initial

    @classmethod
    def from_environment(cls, total: int, initial: int = 0, **kw: Any) -> "ProgressWriter":
        """A writer to ``$GOALRM_PROGRESS_FILE`` (none when unset), labelled ``$GOALRM_PROGRESS_LABEL``."""
        return cls(
            os.environ.get(PROGRESS_FILE_VAR) or None, total, initial, os.environ.get(PROGRESS_LABEL_VAR, ""), **kw
        )

    def record(self, done: bool = False) -> dict:
        now = self.clock()
        return {
            "label": self.label,
            "step": self.step,
            "total": self.total,
            "initial": self.initial,
            "train_s": round(now - self.started, 3),
            "updated": now,
            "pid": os.getpid(),
            "done": done,
        }

    def update(self, step: int, force: bool = False) -> None:
        self.step = int(step)
        if self.path is None:
            return
        if not force and self.last_written is not None and self.clock() - self.last_written < self.every_s:
            return
        self._write(self.record())

    def finish(self, step: int | None = None) -> None:
        if step is not None:
            self.step = int(step)
        if self.path is not None:
            self._write(self.record(done=True))

    def _write(self, record: dict) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            return
        self.last_written = self.clock()


def read_progress(path: str | os.PathLike) -> dict | None:
    """A progress file's record, or None when it is absent, half-written or not one."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not all(isinstance(record.get(k), (int, float)) for k in ("step", "total")):
        return None
    return record


def eta_s(record: Mapping[str, Any], now: float | None = None) -> float | None:
    """Seconds left at the rate of the steps done so far (None before the first step). ``now``: the
    time to count from (the time since the file was written counts as done)."""
    done = record["step"] - record.get("initial", 0)
    train_s = record.get("train_s")
    if done <= 0 or not isinstance(train_s, (int, float)) or train_s <= 0:
        return None
    left = (record["total"] - record["step"]) * train_s / done
    if now is not None and isinstance(record.get("updated"), (int, float)):
        left -= max(0.0, now - record["updated"])
    return max(0.0, left)


def short_duration(seconds: float) -> str:
    """``41s``, ``7m12s``, ``1h05m``: a duration as a person reads it (rounded to the second, never negative).

    >>> short_duration(41.4), short_duration(432), short_duration(3900), short_duration(-3)
    ('41s', '7m12s', '1h05m', '0s')
    """
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def describe(record: Mapping[str, Any], now: float | None = None, fallback_label: str = "RM") -> str:
    """``baseline seed 1: step 840/2400, ETA 6m00s`` (``ETA unknown`` before the first step, ``evaluating and
    saving`` after the last)."""
    label = record.get("label") or fallback_label
    left = eta_s(record, now)
    if record.get("done"):
        eta = "done"
    elif record["step"] >= record["total"]:
        eta = "evaluating and saving"
    else:
        eta = "ETA unknown" if left is None else f"ETA {short_duration(left)}"
    return f"{label}: step {int(record['step'])}/{int(record['total'])}, {eta}"


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return True  # cannot tell: keep it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def stage_progress(folder: str | os.PathLike | None, since: float | None = None) -> tuple[list[dict], int]:
    """(the records of the trainings running now, how many have finished) among the progress files in
    ``folder``, written at or after ``since``. A file whose trainer is gone without finishing is left out."""
    if folder is None:
        return [], 0
    try:
        paths = sorted(Path(folder).glob("*" + SUFFIX))
    except OSError:
        return [], 0
    running, finished = [], 0
    for path in paths:
        record = read_progress(path)
        if record is None or (
            since is not None and isinstance(record.get("updated"), (int, float)) and record["updated"] < since
        ):
            continue
        if record.get("done"):
            finished += 1
        elif _alive(record.get("pid")):
            running.append({**record, "label": record.get("label") or re.sub(r"\.progress\.json$", "", path.name)})
    return running, finished


def running_lines(folder: str | os.PathLike | None, since: float | None = None, now: float | None = None) -> str:
    """``baseline seed 1: step 840/2400, ETA 6m00s; goal-conditioned seed 1: step 12/2400, ETA 31m10s (2 RMs done)``:
    what the trainings of a stage are doing, for its heartbeat line; empty when none is running."""
    running, finished = stage_progress(folder, since)
    if not running:
        return ""
    now = time.time() if now is None else now
    said = "; ".join(describe(r, now) for r in running)
    return said + (f" ({finished} RM{'s' if finished != 1 else ''} done)" if finished else "")
