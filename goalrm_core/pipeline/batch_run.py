"""Batch runs: a notebook executed by ``goalrm report`` is read as a finished page.

Progress bars, library warnings and machine paths are noise there, while the same notebook in
JupyterLab keeps its live bars. The runner starts each kernel with :func:`batch_environment`
(inherited by the kernel's subprocesses, such as the RM trainings) and loads this module as an
IPython extension, which runs :func:`quiet_batch_run`. What is held back from the page goes to the
stage's log file instead.
"""

from __future__ import annotations

import logging
import os

from goalrm_core.paths import relative_paths

BATCH_VAR = "GOALRM_BATCH"
STAGE_LOG_VAR = "GOALRM_STAGE_LOG"
# DeepSpeed probes these packages before it falls back to the CPU (and says so in a warning).
_DEEPSPEED_ACCELERATOR_PACKAGES = (
    "intel_extension_for_pytorch",
    "torch_npu",
    "torch_sdaa",
    "habana_frameworks",
    "torch_mlu",
    "torch_supa",
    "torch_xmlir",
)


def _deepspeed_falls_back_to_cpu() -> bool:
    """Whether DeepSpeed's accelerator detection would end on the CPU here (no CUDA, MPS or plugin)."""
    import importlib.util

    import torch  # here, not at import: the runner's command line answers without loading torch

    try:
        if torch.cuda.is_available() or torch.backends.mps.is_available():
            return False
    except Exception:  # a broken driver: let DeepSpeed detect and report it itself
        return False
    return not any(importlib.util.find_spec(name) for name in _DEEPSPEED_ACCELERATOR_PACKAGES)


def batch_environment(stage_log: str | os.PathLike | None = None) -> dict[str, str]:
    """Environment variables for a kernel that runs a notebook as a report page.

    Progress bars off (tqdm, Hugging Face; an RM training's step goes to a file in the stage's progress
    folder instead, :mod:`goalrm_core.train.progress_file`), transformers and PyTorch at errors only, Python warnings
    ignored in subprocesses (the kernel itself sends them to ``stage_log``). Where DeepSpeed would
    pick the CPU anyway it is told so up front, which skips its "Setting accelerator to CPU" warning.
    """
    env = {
        BATCH_VAR: "1",
        "TQDM_DISABLE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
        "TORCH_CPP_LOG_LEVEL": "ERROR",
        "PYTHONWARNINGS": "ignore",
    }
    # waiting OpenMP threads sleep instead of spinning: on shared cores a spinning thread can make a
    # stage 10x slower (measured: 897 s against 58 s); the numbers do not change
    env.setdefault("OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    if "DS_ACCELERATOR" not in os.environ and _deepspeed_falls_back_to_cpu():
        env["DS_ACCELERATOR"] = "cpu"
    if stage_log is not None:
        env[STAGE_LOG_VAR] = str(stage_log)
        # where the stage's RM trainings say their step (the runner's heartbeat line reads it)
        from goalrm_core.train.progress_file import PROGRESS_DIR_VAR, stage_progress_dir

        env[PROGRESS_DIR_VAR] = str(stage_progress_dir(stage_log))
    return env


class _Divert(logging.Filter):
    """A logger filter: records below ERROR go to ``handler`` (the stage log, if any), not the page."""

    def __init__(self, handler: logging.Handler | None):
        super().__init__()
        self.handler = handler

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        if self.handler is not None and record.levelno >= logging.WARNING:
            self.handler.handle(record)
        return False


def _quiet_tqdm() -> None:
    """Bars off for every ``from tqdm.auto import tqdm`` made from now on, even with ``disable=False``."""
    import tqdm.auto
    import tqdm.autonotebook

    if getattr(tqdm.auto.tqdm, "_goalrm_quiet", False):
        return

    class QuietTqdm(tqdm.auto.tqdm):
        _goalrm_quiet = True

        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    def trange(*args, **kwargs):
        return QuietTqdm(range(*args), **kwargs)

    tqdm.auto.tqdm = tqdm.autonotebook.tqdm = QuietTqdm
    tqdm.auto.trange = tqdm.autonotebook.trange = trange


_quiet = False


def quiet_batch_run(shell=None) -> None:
    """Make this process print only what a report reader needs (see :func:`batch_environment`).

    Python warnings and library log records below ERROR are written to ``$GOALRM_STAGE_LOG`` when
    it is set (and dropped otherwise); tqdm bars are off; IPython shows paths relative to the
    project. Errors and their tracebacks are untouched. ``goalrm report`` arranges this for every
    kernel it starts; a notebook opened in JupyterLab is left as it is.
    """
    import sys
    import warnings
    from pathlib import PurePath

    global _quiet
    if shell is not None:
        plain = shell.display_formatter.formatters["text/plain"]
        plain.for_type(PurePath, lambda path, printer, cycle: printer.text(relative_paths(str(path))))
    if _quiet:
        return
    _quiet = True
    for key, value in batch_environment().items():
        os.environ.setdefault(key, value)
    log_path = os.environ.get(STAGE_LOG_VAR)
    handler: logging.Handler | None = None
    if log_path:
        handler = logging.FileHandler(log_path, mode="a", encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("[kernel] %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.WARNING)

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if handler is not None:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write("[kernel] " + warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = showwarning
    warnings.simplefilter("default" if handler is not None else "ignore")

    root = logging.getLogger()
    root.addHandler(handler if handler is not None else logging.NullHandler())
    # DeepSpeed logs through its own stdout handler, past the root logger (transformers is held
    # back by its verbosity; other libraries propagate to the root handler above)
    logging.getLogger("DeepSpeed").addFilter(_Divert(handler))
    if "transformers" in sys.modules:  # imported before us: the environment came too late for it
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    _quiet_tqdm()


def load_ipython_extension(shell) -> None:
    """``--IPKernelApp.extra_extensions=goalrm_core.pipeline.batch_run``: how the report runner quiets a kernel."""
    quiet_batch_run(shell)
