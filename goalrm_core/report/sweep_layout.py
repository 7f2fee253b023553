"""Where a sweep keeps its files and how it names a swept value: shared by the sweep
(:mod:`goalrm_core.pipeline.sweep`) and its comparison page (:mod:`goalrm_core.report.sweep_page`), which
reads only files and never runs a sweep."""

from __future__ import annotations

from typing import Any

PLAN_FILE = "sweep.json"  # reports/<sweep>/sweep.json: the plan
POINT_MANIFEST = "point.json"  # reports/<sweep>/<point>/point.json, written last: the point is complete
PAIRED_FILE = "paired_vs_base.json"  # reports/<sweep>/<point>/paired_vs_base.json: its paired Δ against the base point


def format_value(value: Any) -> str:
    """A swept value as it appears in a point's name and on the page: short, the same for 0.5 and 0.50.

    >>> [format_value(v) for v in (0.0, 0.1, 1e-05, True, "cosine_avg")]
    ['0', '0.1', '1e-05', 'true', 'cosine_avg']
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)
