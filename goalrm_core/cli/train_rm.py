"""``goalrm train-rm``: parse the flags (:class:`~goalrm_core.train.config.TrainRMConfig`), check
what needs no model or data (:func:`~goalrm_core.train.preflight.preflight`), then
``Trainer(cfg).fit()``. The flags are parsed and range-checked before torch is imported. ``python -m
goalrm_core.train.trainer``, ``python -m goalrm_core.train_rm``
and ``deepspeed --module`` either of them run this module."""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from contextlib import nullcontext
from typing import Sequence

from goalrm_core.data.io import writer_lock
from goalrm_core.data.manifest import command_line
from goalrm_core.flags import Interrupted, interrupted_how, run_command
from goalrm_core.pipeline.signals import sigterm_as_interrupt
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.lora import missing_peft_message, peft_missing, require_four_bit

# The official train_rm.py's flags that goalrm has no setting for, each with why: one given stops the run with
# that line (exit 2) rather than argparse's "unrecognized arguments". A flag that becomes a TrainRMConfig field is
# parsed as that field instead.
UNSUPPORTED_OFFICIAL_FLAGS: dict[str, str] = {}  # none today: --load_in_4bit runs where CUDA and bitsandbytes are


def refuse_unsupported_official_flags(argv: Sequence[str]) -> None:
    """A ``ValueError`` (one line, exit 2) for the first official flag of :data:`UNSUPPORTED_OFFICIAL_FLAGS` in ``argv``
    that is no config field."""
    fields = {f.name for f in dataclasses.fields(TrainRMConfig)}
    for arg in argv:
        name = arg[2:].split("=", 1)[0] if arg.startswith("--") else ""
        if name in UNSUPPORTED_OFFICIAL_FLAGS and name not in fields:
            raise ValueError(
                f"--{name} (an official train_rm.py flag) cannot run here: {UNSUPPORTED_OFFICIAL_FLAGS[name]}; drop it"
            )


def parse_args(argv: Sequence[str] | None = None) -> TrainRMConfig:
    refuse_unsupported_official_flags(sys.argv[1:] if argv is None else argv)
    cfg = TrainRMConfig.from_argv(
        argv, description="Train a (goal-conditioned) reward model with DeepSpeed.", prog="goalrm train-rm"
    )
    if cfg.lora_rank > 0 and peft_missing():  # LoRA's one package, imported only when it trains
        raise ValueError(missing_peft_message(cfg.lora_rank))
    if cfg.load_in_4bit:  # a CUDA GPU and bitsandbytes (torch imports here, on this path only)
        require_four_bit()
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    # the trainer (torch, transformers, deepspeed) loads once the flags are parsed and in range
    from goalrm_core.train.distributed import teardown
    from goalrm_core.train.trainer import Trainer, preflight

    preflight(cfg)
    first = os.environ.get("RANK", "0").strip() in ("0", "")  # the launcher's first process holds the lock
    if cfg.s3_save_path and first:
        print(
            f"goalrm train-rm: --s3_save_path {cfg.s3_save_path}: not uploaded (goalrm saves to --save_path "
            f"{cfg.save_path} only; copy it yourself, e.g. aws s3 cp --recursive)",
            file=sys.stderr,
        )
    from goalrm_core.train.preflight import default_paths

    command = command_line("goalrm train-rm", argv)
    ckpt_dir, _ = default_paths(cfg)
    # one writer per RM folder, and per checkpoint folder: the official entry point gives every run
    # ./ckpt/checkpoints_rm,
    # and two runs into one would rotate (delete) each other's checkpoints
    with (
        writer_lock(cfg.save_path, "--save_path", command) if first else nullcontext(),
        writer_lock(ckpt_dir, "--ckpt_path", command) if first else nullcontext(),
    ):
        try:
            with sigterm_as_interrupt():
                Trainer(cfg).fit()
        except KeyboardInterrupt as stop:
            raise Interrupted(resume_hint(cfg, argv), interrupted_how(stop)) from None
        finally:
            teardown()
    return 0


def resume_hint(cfg: TrainRMConfig, argv: Sequence[str] | None) -> str:
    """What an interrupted training kept and the command that resumes it: the last checkpoint of
    ``--ckpt_path`` (its step), or that none was written and the run starts again. The RM at
    ``--save_path`` is only ever replaced whole, so an earlier one there is untouched."""
    import shlex

    from goalrm_core.train.preflight import default_paths

    ckpt_dir, _ = default_paths(cfg)
    given = list(sys.argv[1:] if argv is None else argv)
    latest = ckpt_dir / "latest"
    tag = latest.read_text(errors="replace").strip() if latest.is_file() else ""
    if tag and (ckpt_dir / tag).is_dir():
        flags = [] if cfg.load_checkpoint else ["--load_checkpoint"]
        if not cfg.ckpt_path:
            flags += ["--ckpt_path", str(ckpt_dir)]
        command = " ".join(["goalrm train-rm", *map(shlex.quote, given), *map(shlex.quote, flags)])
        return (
            f"the last complete checkpoint is {ckpt_dir / tag}; nothing was saved to --save_path {cfg.save_path}; "
            f"resume with: {command}"
        )
    every = f"--save_steps {cfg.save_steps}" if cfg.save_steps > 0 else "--save_steps -1, none"
    return (
        f"no checkpoint was written ({every}) and nothing was saved to --save_path {cfg.save_path}; "
        f"run the same command again to start over (give --save_steps N --load_checkpoint to make a run resumable)"
    )


if __name__ == "__main__":
    warnings.filterwarnings("ignore", category=FutureWarning)
    sys.exit(run_command(main, sys.argv[1:], "goalrm train-rm"))
