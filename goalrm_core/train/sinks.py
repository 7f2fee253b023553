"""Where a run's metrics go: the metrics JSONL always, tensorboard and wandb when asked (rank 0 only)."""

from __future__ import annotations

import json
import math
import os
import socket
import sys
from datetime import datetime
from pathlib import Path

from goalrm_core.data.io import atomic_write_text
from goalrm_core.train.config import TrainRMConfig


def _wandb_online(timeout: float = 3.0) -> bool:
    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("//")[-1].split("/")[0].split(":")[0]
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def is_metrics_log(path: Path) -> bool:
    """Whether ``path`` is empty or a metrics JSONL that train-rm wrote (its first rows are objects with
    ``step`` and ``split``): the only files a new run may empty."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line for line, _ in zip(f, range(5)) if line.strip()]
        rows = [json.loads(line) for line in lines]
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return all(isinstance(row, dict) and "step" in row and "split" in row for row in rows)


def wandb_run_name(cfg: TrainRMConfig, now: datetime | None = None) -> str:
    """``--wandb_run_name``, or the official code's default: ``rm_`` and the start time as ``MMDDTHH:MM``.

    >>> wandb_run_name(TrainRMConfig(pretrain="p"), datetime(2024, 5, 6, 7, 8))
    'rm_0506T07:08'
    """
    return cfg.wandb_run_name or f"rm_{(now or datetime.now()):%m%dT%H:%M}"


def partial_log(metrics_path: Path) -> Path:
    """Where a run writes its metrics log until its RM is saved: ``<metrics_path>.partial``."""
    return metrics_path.with_name(metrics_path.name + ".partial")


class MetricSinks:
    """The metrics JSONL plus optional tensorboard and wandb, on rank 0 only.

    The rows go to :func:`partial_log` while the run trains (a resume continues that file) and it becomes
    ``metrics_path`` only when the RM is saved (:meth:`finish`): a run that fails (a full disk, a crash,
    Ctrl-C) leaves the earlier RM's log beside the earlier RM untouched."""

    def __init__(self, cfg: TrainRMConfig, metrics_path: Path, enabled: bool, resume: bool):
        self.enabled = enabled
        self.final = metrics_path
        self.path = partial_log(metrics_path)
        self.tb = None
        self.wandb = None
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not resume:
            self.path.write_text("")
        elif not self.path.is_file() and self.final.is_file():  # a run stopped before logs were written beside
            atomic_write_text(self.path, self.final.read_text(encoding="utf-8"))
        if cfg.use_tensorboard:
            from torch.utils.tensorboard import (
                SummaryWriter,
            )  # lazy: needs the optional tensorboard package (checked in preflight)

            self.tb = SummaryWriter(cfg.use_tensorboard)
        if cfg.use_wandb:
            self.wandb = self._start_wandb(cfg)

    @staticmethod
    def _start_wandb(cfg: TrainRMConfig):
        try:
            import wandb  # lazy: optional, and slow to import; only --use_wandb runs need it
        except ImportError:
            print(
                "warning: --use_wandb given but wandb is not installed (pip install wandb); logging to the metrics "
                "JSONL only",
                file=sys.stderr,
            )
            return None
        offline = (
            cfg.use_wandb.lower() == "offline"
            or os.environ.get("WANDB_MODE") in ("offline", "disabled")
            or not _wandb_online()
        )
        try:
            if not offline:
                wandb.login(key=cfg.use_wandb, relogin=True, timeout=10)
            return wandb.init(
                project=cfg.wandb_project,
                group=cfg.wandb_group or None,
                entity=cfg.wandb_org or None,
                name=wandb_run_name(cfg),
                config=cfg.to_dict(),
                mode="offline" if offline else "online",
            )
        except Exception as e:  # wandb must never stop a training run
            print(f"warning: wandb could not start ({type(e).__name__}: {e}); continuing without it", file=sys.stderr)
            return None

    def drop_rows_after(self, step: int) -> None:
        """On resume, forget rows the interrupted run logged after its last checkpoint."""
        if not self.path.is_file():
            return
        kept = [
            line
            for line in self.path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line)["step"] <= step
        ]
        atomic_write_text(self.path, "".join(line + "\n" for line in kept))

    def log(self, row: dict) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(
                json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()})
                + "\n"
            )
        numbers = {
            f"{row['split']}/{k}": v
            for k, v in row.items()
            if k not in ("step", "split") and isinstance(v, (int, float))
        }
        if self.tb is not None:
            for key, value in numbers.items():
                self.tb.add_scalar(key, value, row["step"])
        if self.wandb is not None:
            self.wandb.log(numbers, step=row["step"])

    def finish(self) -> None:
        """The RM is saved: its log takes the place of the earlier one (one rename)."""
        if self.enabled and self.path.is_file():
            os.replace(self.path, self.final)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()
