"""What every notebook does first and last, in one place: start the clock, set the CPU threads,
resolve the run directory; at the end, record the stage's metrics and wall time in the report.
A notebook reads ``stage = Stage.start("evaluation", run_dir, reports_dir, torch_threads)`` first and
``stage.record({...})`` last.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from goalrm_core.data.rundir import RunDir
from goalrm_core.paths import project_root, resolve_path
from goalrm_core.pipeline.batch_run import BATCH_VAR
from goalrm_core.pipeline.notebook_params import declared_keys
from goalrm_core.pipeline.records import record_metrics, record_stage
from goalrm_core.threads import set_torch_threads


@dataclass
class Stage:
    """One notebook's run: its name in ``metrics.json``, its run and report folders, its threads."""

    name: str
    run: RunDir
    reports_dir: Path
    threads: int
    started: float
    #: seconds per named part of the stage (:meth:`part`), recorded with its wall time
    parts: dict[str, float] = field(default_factory=dict)

    @classmethod
    def start(
        cls, name: str, run_dir: str | os.PathLike, reports_dir: str | os.PathLike, torch_threads: int = 0
    ) -> "Stage":
        """Start the clock and use ``torch_threads`` CPU threads (0 = the cores idle now)."""
        started = time.perf_counter()
        threads = set_torch_threads(torch_threads)
        stage = cls(name, RunDir(resolve_path(run_dir)), resolve_path(reports_dir), threads, started)
        if not os.environ.get(BATCH_VAR) and stage._interactive_notebook() is not None:
            # by hand, as the runner does: until this stage finishes, its artifacts are not current (a stage
            # stopped after rewriting some files must not leave the previous run's record vouching for them)
            stage.run.stage_record(stage._interactive_notebook().stem).unlink(missing_ok=True)
        return stage

    def _interactive_notebook(self) -> Path | None:
        """This stage's notebook when it runs in a kernel by hand (not under ``goalrm report``), else None."""
        try:
            from IPython import get_ipython
        except ImportError:
            return None
        notebooks = sorted((project_root() / "notebooks").glob(f"[0-9][0-9]_{self.name}*.ipynb"))
        return notebooks[0] if get_ipython() is not None and len(notebooks) == 1 else None

    @contextlib.contextmanager
    def part(self, name: str):
        """Time one named part of the stage (``with stage.part("sft"): ...``): its seconds go to the
        stage's ``timings`` in ``metrics.json`` (``parts``) and to the run's log line for the stage."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.parts[name] = self.parts.get(name, 0.0) + time.perf_counter() - t0

    def record(self, metrics: Mapping[str, Any], **timings: Any) -> None:
        """Write the stage's metrics to ``<reports_dir>/metrics.json``, with the threads it computed
        with (floats depend on them: ``goalrm compare`` flags a mismatch) and its wall time (and any
        other ``timings``) apart from them. Returns nothing, so a notebook's last cell shows no path."""
        record_metrics(
            self.name,
            {**metrics, "threads": self.threads},
            self.reports_dir,
            timings={
                "wall_s": time.perf_counter() - self.started,
                **({"parts": {k: round(v, 2) for k, v in self.parts.items()}} if self.parts else {}),
                **timings,
            },
        )
        if not os.environ.get(BATCH_VAR):  # by hand: note what produced the run's files, as the runner does
            self._record_interactive_stage()

    def _record_interactive_stage(self) -> None:
        """Outside ``goalrm report``, write the stage record the runner would (``RunDir.stage_record``):
        the notebook's declared parameters with the values this kernel ran with, so ``--from`` and
        ``goalrm sweep`` know what produced the run's data."""
        path = self._interactive_notebook()
        if path is None:
            return
        from IPython import get_ipython

        shell = get_ipython()
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cell = next(c for c in notebook["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
        keys = declared_keys("".join(cell["source"]), path)
        record_stage(
            self.run.root,
            path.stem,
            {k: shell.user_ns[k] for k in keys if k in shell.user_ns},
            duration_s=time.perf_counter() - self.started,
        )
