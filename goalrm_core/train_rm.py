"""``python -m goalrm_core.train_rm`` and ``deepspeed --module goalrm_core.train_rm``: the seed's
command lines, kept working. The trainer itself is :mod:`goalrm_core.train.trainer`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("goalrm_core.train.trainer", run_name="__main__", alter_sys=True)
