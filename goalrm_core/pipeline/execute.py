"""Execute one notebook stage with papermill, atomically: a stage's output notebook appears only when
it ran (or failed with its error recorded), its log goes to a file, and the kernel it started is
gone when it returns. :mod:`goalrm_core.pipeline.runner` orders the stages of a profile."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Mapping

from goalrm_core.data.io import atomic_path, timestamp
from goalrm_core.paths import project_root
from goalrm_core.pipeline.batch_run import batch_environment
from goalrm_core.pipeline.signals import interrupts_deferred
from goalrm_core.train.progress_file import stage_progress_dir

STAGE_PATTERN = re.compile(r"^\d{2}_[A-Za-z0-9_\-]+\.ipynb$")


def discover_stages(notebooks_dir: Path) -> list[Path]:
    """The ``NN_topic.ipynb`` notebooks in run order; whichever exist are the stages."""
    if not notebooks_dir.is_dir():
        return []
    return sorted(p for p in notebooks_dir.iterdir() if STAGE_PATTERN.match(p.name))


def match_stage(selector: str, names: list[str]) -> str:
    """The stage named by ``selector``: its ``NN`` prefix, its full name, or its file name."""
    wanted = selector.strip()
    if wanted.endswith(".ipynb"):
        wanted = wanted[: -len(".ipynb")]
    for name in names:
        if wanted == name or wanted == name.split("_", 1)[0]:
            return name
    raise ValueError(f"unknown stage {selector!r}: stages are {', '.join(names) or 'none'}")


def error_info(exc: BaseException) -> dict:
    """What the index shows about a failure: papermill's cell error when there is one."""
    ename = getattr(exc, "ename", None) or type(exc).__name__
    evalue = getattr(exc, "evalue", None)
    if evalue is None:
        evalue = str(exc)
    return {
        "ename": str(ename),
        "evalue": str(evalue),
        "cell_index": getattr(exc, "cell_index", None),
        "exec_count": getattr(exc, "exec_count", None),
    }


class _NothingWritten(Exception):
    """Raised inside ``atomic_path`` to abandon an empty output instead of renaming it."""


@contextlib.contextmanager
def _environment(values: Mapping[str, str]):
    """``os.environ`` with ``values`` set for the block (a kernel started inside inherits them)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@contextlib.contextmanager
def _papermill_logging_to(stream):
    """papermill's log records (cell starts, kernel messages) into ``stream`` instead of the terminal."""
    import logging

    logger = logging.getLogger("papermill")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def execute_stage(
    notebook: Path, output: Path, parameters: dict, kernel_name: str, cwd: Path, log_path: Path | None = None
) -> tuple[BaseException | None, bool]:
    """Run one notebook into ``output`` atomically; return (its exception or None, whether it was written).

    papermill keeps writing the output while cells run, so it goes to a temporary file that is
    renamed when execution ends, whether it succeeded or not: a failed notebook, with its traceback,
    is exactly what the reader needs. Only when papermill wrote nothing (the kernel never started)
    is the temporary file dropped.

    The kernel runs as a batch run (:func:`goalrm_core.pipeline.batch_run.batch_environment`, and the
    ``goalrm_core.pipeline.batch_run`` IPython extension): no progress bars, warnings or library log records
    in the cells. Those, papermill's own progress bar and log, and a transcript of every cell's
    printed output go to ``log_path`` (created afresh) when it is given.
    """
    import papermill as pm

    error: BaseException | None = None
    written = False
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(f"# {notebook.name} -> {output}, started {timestamp()}\n", encoding="utf-8")
        # the stage's trainings' progress files (batch_environment): none from an earlier run
        shutil.rmtree(stage_progress_dir(log_path), ignore_errors=True)
    # append mode: the kernel appends its held-back warnings to the same file
    log = open(log_path, "a", encoding="utf-8") if log_path is not None else open(os.devnull, "w")
    with contextlib.ExitStack() as stack:
        stack.enter_context(log)
        stack.enter_context(_papermill_logging_to(log))
        stack.enter_context(_environment(batch_environment(log_path)))
        stack.enter_context(contextlib.suppress(_NothingWritten))
        tmp = stack.enter_context(atomic_path(output, suffix=".ipynb"))
        # the kernel's sockets, as files in a folder of this stage's own (see _kernel_manager_writing_to)
        sockets = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="goalrm-kernel-")))
        before = _child_pids()
        try:
            pm.execute_notebook(
                str(notebook),
                str(tmp),
                parameters=parameters,
                kernel_name=kernel_name,
                cwd=str(cwd),
                # TQDM_DISABLE is set for the kernel, not for this bar: keep it on, in the log
                progress_bar={"file": log, "disable": False, "mininterval": 5.0},
                stdout_file=log,
                stderr_file=log,
                # the extension quiets the kernel; its own start-up chatter (e.g. "running over TCP
                # without encryption") would otherwise land on the terminal between the stage lines
                extra_arguments=[
                    "--IPKernelApp.extra_extensions=goalrm_core.pipeline.batch_run",
                    "--IPKernelApp.log_level=ERROR",
                ],
                # and what the kernel process itself writes (native libraries, the errors of a kernel
                # shut down by Ctrl-C) goes to the log as well
                kernel_manager_class=_kernel_manager_writing_to(log, sockets),
                execution_timeout=None,
                start_timeout=120,
            )
        except Exception as exc:  # any failure is reported in the index, not raised
            error = exc
        except KeyboardInterrupt:
            # the kernel runs in a session of its own: Ctrl-C reached this process only. Stop the
            # kernel and whatever it started (an RM training) instead of leaving them to finish.
            with interrupts_deferred():
                _stop_new_children(before)
            raise
        if tmp.stat().st_size == 0:
            raise _NothingWritten
        with contextlib.suppress(json.JSONDecodeError, OSError):
            relative_papermill_paths(tmp, notebook, output)
        written = True
    return error, written


def _kernel_manager_writing_to(stream, sockets: Path | None = None):
    """jupyter_client's kernel manager, with the kernel process's own stdout and stderr on ``stream``
    instead of this process's terminal.

    Where ``sockets`` (an empty folder) is given and the system has Unix sockets, the kernel talks
    over them, as files in that folder, instead of over TCP ports. jupyter_client picks a kernel's
    TCP ports by binding and releasing free ones before the kernel binds them again: kernels started
    at the same moment by other processes (the test suite's workers, a sweep beside a report) can
    take the same port in between, and the kernel then dies with "Address already in use" while its
    stage waits out the start timeout. A folder of its own cannot be taken.
    """
    from jupyter_client import AsyncKernelManager

    class StageKernelManager(AsyncKernelManager):
        def __init__(self, **kw):
            # (a Unix socket's path holds at most ~100 bytes: a very long TMPDIR keeps TCP)
            if sockets is not None and hasattr(socket, "AF_UNIX") and len(str(sockets)) < 80:
                kw.setdefault("transport", "ipc")
                kw.setdefault("ip", str(sockets / "kernel"))  # sockets kernel-1 ... kernel-5
            super().__init__(**kw)

        async def _async_launch_kernel(self, kernel_cmd, **kw):  # jupyter_client's override point
            kw.setdefault("stdout", stream)
            kw.setdefault("stderr", stream)
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return StageKernelManager


def _child_pids() -> set[int]:
    """The pids of this process's descendants now (empty where psutil is missing)."""
    try:
        import psutil

        return {p.pid for p in psutil.Process().children(recursive=True)}
    except Exception:
        return set()


def _stop_new_children(before: set[int], timeout: float = 5.0) -> None:
    """Stop this process's descendants that were not in ``before``: the processes a stage started.
    What the kernel started (an RM training) is terminated first, and killed if it has not exited
    within ``timeout``; then the kernel itself is killed (terminated, it would print the traceback
    of the reply it can no longer send onto this terminal)."""
    try:
        import psutil

        me = psutil.Process()
        procs = [p for p in me.children(recursive=True) if p.pid not in before]
        kernels = [p for p in procs if p.ppid() == me.pid]
    except Exception:
        return
    for group, polite in ((([p for p in procs if p not in kernels]), True), (kernels, False)):
        for proc in group:
            with contextlib.suppress(Exception):
                proc.terminate() if polite else proc.kill()
        with contextlib.suppress(Exception):
            _, alive = psutil.wait_procs(group, timeout=timeout)
            for proc in alive:
                with contextlib.suppress(Exception):
                    proc.kill()


def project_relative(path: Path) -> str:
    """``path`` relative to the project root when it lies inside it (executed notebooks then name
    no folder of the machine), else as it is."""
    try:
        return str(Path(path).resolve().relative_to(project_root()))
    except ValueError:
        return str(path)


def relative_papermill_paths(notebook_path: Path, source: Path, output: Path) -> None:
    """papermill records absolute input/output paths (the output's a temporary name) in the executed
    notebook's metadata: record the project-relative source and final output instead."""
    data = json.loads(notebook_path.read_text(encoding="utf-8"))
    meta = data.get("metadata", {}).get("papermill")
    if isinstance(meta, dict):
        meta["input_path"], meta["output_path"] = project_relative(source), project_relative(output)
        notebook_path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
