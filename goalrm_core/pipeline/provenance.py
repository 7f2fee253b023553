"""What produced a report: git commit, profile, package versions, machine, threads and date, collected
at the start of a run and recorded in ``metrics.json`` under ``provenance``
(:func:`goalrm_core.pipeline.records.record_provenance`). The index shows it
(:func:`goalrm_core.report.provenance.provenance_html`)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from goalrm_core.data.io import timestamp
from goalrm_core.paths import resolve_path
from goalrm_core.threads import idle_cores, matmul_gflops

PROVENANCE_PACKAGES = ("torch", "transformers", "deepspeed", "papermill")


def _git(*args: str, cwd: Path) -> str | None:
    """``git args`` in ``cwd``: its output, or None where git or the repository is missing."""
    import subprocess

    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (``model name``; ``Hardware``/``Model`` on ARM)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        import platform

        return platform.processor() or None
    for key in ("model name", "Hardware", "Model", "cpu model"):
        match = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if match:
            return match.group(1).strip()
    return None


def _package_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def code_version(root: Path | None = None) -> str | None:
    """The code a stage runs on, as its page names it: the short commit, ``+ uncommitted changes`` when the
    work tree differs from it outside ``reports/`` (as :func:`collect_provenance` judges); None without git."""
    root = root if root is not None else resolve_path(".")
    commit = _git("rev-parse", "--short=7", "HEAD", cwd=root)
    if commit is None:
        return None
    status = _git("status", "--porcelain", "--", ".", ":(exclude)reports", cwd=root)
    return commit + (" + uncommitted changes" if status else "")


def collect_provenance(profile: str, settings: Mapping[str, Any], root: Path | None = None) -> dict:
    """What produced a report: commit (and whether the work tree differed from it), the profile and
    every parameter it resolved to, package versions, the machine, the thread count and the date.

    ``torch_threads: 0`` means "the cores idle when a notebook starts"; the count recorded is the
    one measured now, at the start of the run. Paths stay as the profile wrote them (relative to the
    project), so the record does not name the machine's folders.
    """
    import platform

    root = root if root is not None else resolve_path(".")
    commit = _git("rev-parse", "HEAD", cwd=root)
    # the report folders are outputs, rewritten by the run itself: a change there does not make the code dirty
    status = _git("status", "--porcelain", "--", ".", ":(exclude)reports", cwd=root) if commit is not None else None
    gpu = None
    requested = settings.get("torch_threads", 0)
    requested = requested if isinstance(requested, int) and not isinstance(requested, bool) else 0
    used = requested if requested > 0 else idle_cores()
    try:
        import torch

        if torch.cuda.is_available():
            gpu = {"name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count()}
    except Exception:  # no torch or a broken driver: the report still runs, without a GPU line
        gpu = None
    try:  # how fast this machine multiplies, so the report's seconds can be read on another one
        speed = {"matmul_gflops": round(matmul_gflops(used), 1), "threads": used, "n": 1024}
    except Exception:  # no torch: the report still runs, without a speed
        speed = None
    return {
        "git": {"commit": commit, "dirty": None if status is None else bool(status), "dirty_excludes": "reports/"},
        "profile": {"name": profile, "parameters": dict(settings)},
        "versions": {"python": platform.python_version(), **{p: _package_version(p) for p in PROVENANCE_PACKAGES}},
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "gpu": gpu, "speed": speed},
        "threads": {
            "torch_threads": requested,
            "used": used,
            "rule": "as set" if requested > 0 else "idle cores at the start of the run",
        },
        "date": timestamp(),
    }
