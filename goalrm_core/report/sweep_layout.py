"""Where a sweep keeps its files and how it names a swept value: shared by the sweep
(:mod:`goalrm_core.pipeline.sweep`) and its comparison page (:mod:`goalrm_core.report.sweep_page`), which
reads only files and never runs a sweep."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any, Mapping

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


def renamed_point(name: str) -> str:
    """A point's folder name read through the profile keys' rename rule (``study.recipe.renamed``): an older
    sweep's ``contrastive_beta=0.1`` is the point ``contrastive_loss_beta=0.1``.

    >>> renamed_point("contrastive_beta=0.1__goal_method=mean_all_tokens"), renamed_point("base")
    ('contrastive_loss_beta=0.1__goal_method=mean_all_tokens', 'base')
    """
    from goalrm_core.study.recipe import renamed

    def part(text: str) -> str:
        key, sep, value = text.partition("=")
        return f"{renamed(key)}{sep}{value}" if sep else text

    return "__".join(part(p) for p in name.split("__"))


def point_folder(report_dir: Path, name: str) -> Path:
    """The folder of point ``name`` in ``report_dir``: its own, or an older sweep's whose name reads as ``name``
    through the rename rule (:func:`renamed_point`); its own when neither is there."""
    own = Path(report_dir) / name
    if own.exists() or not Path(report_dir).is_dir():
        return own
    return next((p for p in sorted(Path(report_dir).iterdir()) if p.is_dir() and renamed_point(p.name) == name), own)


def renamed_parameters(parameters: Mapping[str, Any]) -> dict:
    """A point's parameters as an older sweep recorded them (a manifest's ``overrides``, a report's recorded
    profile) under today's names: every key through the rename rule, and the point's run folder (``run_dir``)
    named as its point is now.

    >>> renamed_parameters({"rm_steps": 200, "run_dir": "runs/demo-sweep-ablations/contrastive_beta=0.1"})
    {'max_steps': 200, 'run_dir': 'runs/demo-sweep-ablations/contrastive_loss_beta=0.1'}
    """
    from goalrm_core.study.recipe import renamed

    out = {renamed(k): v for k, v in parameters.items()}
    if isinstance(out.get("run_dir"), str):
        run_dir = PurePosixPath(out["run_dir"])
        out["run_dir"] = str(run_dir.parent / renamed_point(run_dir.name))
    return out


def renamed_record(record: Mapping[str, Any], names: bool = True) -> dict:
    """A sweep's record (``sweep.json``, a ``point.json``) with every profile key and (``names``) point name read
    through the rename rule, so an older sweep's files read under today's names. Without ``names`` the points
    keep their folders' names (the comparison page links to the folders as they are)."""
    from goalrm_core.study.recipe import renamed

    def keys(mapping: Any) -> Any:
        return {renamed(k): v for k, v in mapping.items()} if isinstance(mapping, Mapping) else mapping

    out = dict(record)
    for field in ("values", "overrides", "common", "base_values", "grid"):
        if field in out:
            out[field] = keys(out[field])
    for field in ("point", "default_point") if names else ():
        if isinstance(out.get(field), str):
            out[field] = renamed_point(out[field])
    if names and isinstance(out.get("overrides"), Mapping):
        out["overrides"] = renamed_parameters(out["overrides"])
    if isinstance(out.get("points"), list):
        out["points"] = [
            {**p, "name": renamed_point(p["name"]) if names else p["name"], "values": keys(p.get("values", {}))}
            if isinstance(p, Mapping)
            else p
            for p in out["points"]
        ]
    return out
