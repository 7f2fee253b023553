"""What notebook 05 and the decoding study still read under their old names (until they move)."""

from __future__ import annotations

from pathlib import Path

from goalrm_core.data.rundir import RunDir
from goalrm_core.study.artifacts import benchmarks, load_rm, read_goal_state as load_goal_state  # noqa: F401


def eval_dir(run_dir, rm: str, seed: int = 0) -> Path:
    return RunDir(run_dir).eval(rm, seed)
