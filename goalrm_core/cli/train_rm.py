"""``goalrm train-rm``: parse the flags (:class:`~goalrm_core.train.config.TrainRMConfig`), check
what needs no model or data (:func:`~goalrm_core.train.trainer.preflight`), then
``Trainer(cfg).fit()``. The flags are parsed and range-checked before torch is imported. ``python -m goalrm_core.train.trainer``, ``python -m goalrm_core.train_rm``
and ``deepspeed --module`` either of them run this module."""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import nullcontext
from typing import Sequence

from goalrm_core.data.io import writer_lock
from goalrm_core.data.manifest import command_line
from goalrm_core.flags import run_command
from goalrm_core.train.config import TrainRMConfig


def parse_args(argv: Sequence[str] | None = None) -> TrainRMConfig:
    return TrainRMConfig.from_argv(argv, description="Train a (goal-conditioned) reward model with DeepSpeed.", prog="goalrm train-rm")


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    # the trainer (torch, transformers, deepspeed) loads once the flags are parsed and in range
    from goalrm_core.train.distributed import teardown
    from goalrm_core.train.trainer import Trainer, preflight

    preflight(cfg)
    first = os.environ.get("RANK", "0").strip() in ("0", "")  # the launcher's first process holds the lock
    with writer_lock(cfg.save_path, "--save_path", command_line("goalrm train-rm", argv)) if first else nullcontext():
        try:
            Trainer(cfg).fit()
        finally:
            teardown()
    return 0


if __name__ == "__main__":
    warnings.filterwarnings("ignore", category=FutureWarning)
    sys.exit(run_command(main, sys.argv[1:], "goalrm train-rm"))
