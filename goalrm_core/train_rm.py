"""``python -m goalrm_core.train_rm`` and ``deepspeed --module goalrm_core.train_rm``: the official
code's command lines. They run :mod:`goalrm_core.cli.train_rm`; the trainer itself is
:mod:`goalrm_core.train.trainer`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("goalrm_core.cli.train_rm", run_name="__main__", alter_sys=True)
