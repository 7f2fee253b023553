"""What produced a report: git commit, profile, package versions, machine, threads and date,
recorded in ``metrics.json`` under ``provenance`` and shown at the foot of the index."""

from __future__ import annotations

import html
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from goalrm_core.report.profiles import resolve_path
from goalrm_core.threads import idle_cores, matmul_gflops

PROVENANCE_KEY = "provenance"


def _now() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


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
        "threads": {"torch_threads": requested, "used": used,
                    "rule": "as set" if requested > 0 else "idle cores at the start of the run"},
        "date": _now(),
    }


def speed_text(machine: Mapping[str, Any]) -> str:
    """``"; fp32 matmul 67 GFLOP/s at 2 threads"`` from a provenance ``machine``, or ``""``
    for a report recorded before the speed was measured."""
    speed = machine.get("speed") if isinstance(machine, Mapping) else None
    if not isinstance(speed, Mapping) or not isinstance(speed.get("matmul_gflops"), (int, float)):
        return ""
    return f"; fp32 matmul {speed['matmul_gflops']:.0f} GFLOP/s at {speed.get('threads', '?')} threads"


def provenance_html(metrics: Mapping[str, Any]) -> str:
    """The ``provenance`` section of ``metrics`` as a small table (escaped); empty when absent."""
    prov = metrics.get(PROVENANCE_KEY) if isinstance(metrics, Mapping) else None
    if not isinstance(prov, Mapping) or not prov:
        return ""
    e = html.escape

    def part(key: str) -> Mapping:
        value = prov.get(key)
        return value if isinstance(value, Mapping) else {}

    git, profile, versions, machine, threads = (part(k) for k in ("git", "profile", "versions", "machine", "threads"))
    if git.get("commit"):
        state = {True: " (work tree dirty)", False: " (clean)"}.get(git.get("dirty"), "")
        commit = f"<code>{e(str(git['commit'])[:12])}</code>{e(state)}"
    else:
        commit = "unknown (no git)"
    parameters = profile.get("parameters") if isinstance(profile.get("parameters"), Mapping) else {}
    params = ", ".join(f"{e(str(k))}={e(json.dumps(v))}" for k, v in parameters.items())
    gpu = machine.get("gpu")
    gpu_text = gpu.get("name") if isinstance(gpu, Mapping) else (gpu or "none")
    rows = [
        ("commit", commit),
        ("profile", f"{e(str(profile.get('name', '')))}"
                    f"<details><summary>{len(parameters)} parameters</summary><code>{params}</code></details>"),
        ("versions", e(", ".join(f"{k} {v if v is not None else 'absent'}" for k, v in versions.items()))),
        ("machine", e(f"{machine.get('cpu') or 'unknown CPU'}, {machine.get('cores', '?')} cores; GPU: {gpu_text}"
                      f"{speed_text(machine)}")),
        ("threads", e(f"{threads.get('used', '?')} (torch_threads={threads.get('torch_threads', '?')}: {threads.get('rule', '')})")),
        ("date", e(str(prov.get("date", "")))),
    ]
    body = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in rows)
    return f'<table class="provenance">{body}</table>'
