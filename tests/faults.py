"""Faults for the tests, put in by monkeypatching the library inside the process that runs a
command line; the production code reads no switch for them.

* ``nan_loss_at_step N``: the training objective's preference loss (and so its total) is NaN on the
  first micro-batch of optimiser step N.
* ``sigint_at_step N``: Ctrl-C (SIGINT to the process itself) as optimiser step N starts.
* ``disk_full_at_save 1``: the final save of the RM finds the disk full (ENOSPC at its first byte).
* ``kill_after_rows N``: eval-rm's process is SIGKILLed (no clean-up, as by a power cut or the OOM
  killer) once N generations are scored, counted over all its files.

``python tests/faults.py FAULT N ARGV...`` does what ``python -m goalrm_core.cli ARGV...`` does,
with the fault in place; :func:`apply` puts one in the calling process (the corpus's fork server).
"""

from __future__ import annotations

import os
import signal
import sys


def nan_loss_at_step(step: int) -> None:
    from goalrm_core.train.trainer import Trainer

    compute_loss = Trainer.compute_loss
    done: set[int] = set()

    def poisoned(self, batch):
        out = compute_loss(self, batch)
        if self.step + 1 == step and step not in done:
            done.add(step)
            out.loss = out.loss * float("nan")
            out.preference_loss = out.preference_loss * float("nan")
        return out

    Trainer.compute_loss = poisoned


def sigint_at_step(step: int) -> None:
    from goalrm_core.train.trainer import Trainer

    train_step = Trainer.train_step

    def interrupted(self, micro_batches, epoch):
        if self.step + 1 == step:
            os.kill(os.getpid(), signal.SIGINT)
        return train_step(self, micro_batches, epoch)

    Trainer.train_step = interrupted


def disk_full_at_save(_: int) -> None:
    import errno

    from goalrm_core.train import trainer

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    trainer.save_reward_model = full


def kill_after_rows(rows: int) -> None:
    from goalrm_core.inference import scoring

    score_generations = scoring.score_generations
    scored = 0

    def killed(*args, **kwargs):
        nonlocal scored
        before = scored

        def after_row(done: int) -> None:
            if before + done >= rows:
                os.kill(os.getpid(), signal.SIGKILL)

        out = score_generations(*args, **kwargs, after_row=after_row)
        scored += len(out)
        return out

    scoring.score_generations = killed


FAULTS = {
    "nan_loss_at_step": nan_loss_at_step,
    "sigint_at_step": sigint_at_step,
    "disk_full_at_save": disk_full_at_save,
    "kill_after_rows": kill_after_rows,
}


def apply(name: str, value: int) -> None:
    FAULTS[name](int(value))


if __name__ == "__main__":
    apply(sys.argv[1], sys.argv[2])
    from goalrm_core import cli

    sys.exit(cli.main(sys.argv[3:]))
