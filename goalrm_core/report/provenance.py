"""What produced a report, as its pages show it: the ``provenance`` section of ``metrics.json`` (collected
by :mod:`goalrm_core.pipeline.provenance`) at the foot of the index, and the machine's speed beside the
README's timings."""

from __future__ import annotations

import json
from typing import Any, Mapping

from goalrm_core.report.metrics_view import PROVENANCE_KEY
from goalrm_core.report.templating import part


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

    def entry(key: str) -> Mapping:
        value = prov.get(key)
        return value if isinstance(value, Mapping) else {}

    git, profile, versions, machine, threads = (entry(k) for k in ("git", "profile", "versions", "machine", "threads"))
    commit = str(git["commit"])[:12] if git.get("commit") else None
    state = {True: " (work tree dirty)", False: " (clean)"}.get(git.get("dirty"), "")
    parameters = profile.get("parameters") if isinstance(profile.get("parameters"), Mapping) else {}
    gpu = machine.get("gpu")
    gpu_text = gpu.get("name") if isinstance(gpu, Mapping) else (gpu or "none")
    return part(
        "provenance",
        commit=commit,
        state=state,
        profile=str(profile.get("name", "")),
        parameters=[(str(k), json.dumps(v)) for k, v in parameters.items()],
        versions=", ".join(f"{k} {v if v is not None else 'absent'}" for k, v in versions.items()),
        machine=f"{machine.get('cpu') or 'unknown CPU'}, {machine.get('cores', '?')} cores; GPU: "
        f"{gpu_text}{speed_text(machine)}",
        threads=f"{threads.get('used', '?')} (torch_threads={threads.get('torch_threads', '?')}: "
        f"{threads.get('rule', '')})",
        date=str(prov.get("date", "")),
    )
