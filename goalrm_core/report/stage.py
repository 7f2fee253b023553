"""What every notebook does first and last, in one place: start the clock, set the CPU threads,
resolve the run directory; at the end, record the stage's metrics and wall time in the report.
A notebook reads ``stage = Stage.start("evaluation", run_dir, reports_dir, torch_threads)`` first and
``stage.record({...})`` last.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from goalrm_core.data.rundir import RunDir
from goalrm_core.report.profiles import resolve_path
from goalrm_core.report.runner import record_metrics
from goalrm_core.runtime import set_torch_threads


@dataclass
class Stage:
    """One notebook's run: its name in ``metrics.json``, its run and report folders, its threads."""

    name: str
    run: RunDir
    reports_dir: Path
    threads: int
    started: float

    @classmethod
    def start(cls, name: str, run_dir: str | os.PathLike, reports_dir: str | os.PathLike, torch_threads: int = 0) -> "Stage":
        """Start the clock and use ``torch_threads`` CPU threads (0 = the cores idle now)."""
        started = time.perf_counter()
        threads = set_torch_threads(torch_threads)
        return cls(name, RunDir(resolve_path(run_dir)), resolve_path(reports_dir), threads, started)

    def record(self, metrics: Mapping[str, Any], **timings: Any) -> Path:
        """Write the stage's metrics to ``<reports_dir>/metrics.json``, with its wall time (and any
        other ``timings``) apart from them."""
        return record_metrics(self.name, metrics, self.reports_dir, timings={"wall_s": time.perf_counter() - self.started, **timings})
