"""Which primary conclusions a report's reruns reproduce.

A report folder ``reports/<name>/`` may have reruns of itself under ``reports/reproducibility/<rerun>/``
(their ``metrics.json``: another policy seed, another thread count; ``goalrm compare`` compares them
figure by figure). A primary conclusion is *stated* only where every run reaches the same verdict;
the others are listed as dropped, with each run's verdict. Verdicts are two-sided (holds, reversed,
not shown, not tested, cannot be judged: `evaluation.verdicts`), so a run that finds the difference the
other way does not read the same as one that finds none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from goalrm_core.report.conclusions import conclusions, verdict_text  # noqa: F401 (verdict_text: read here by older callers)
from goalrm_core.report.metrics_view import read_metrics, reports_under

REPRODUCIBILITY = "reproducibility"
#: ``holds`` of a summary as words, for readers that have nothing else (prefer :func:`verdict_text`).
VERDICT = {True: "holds", False: "not shown", None: "cannot be judged"}


def primary_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str, Mapping, float, bool]]:
    """(claim, RM, across-seeds figure, display scale, signed) of every primary conclusion
    (:func:`goalrm_core.report.conclusions.conclusions`, whose records the layouts read); empty for schema 1."""
    return [(c.claim, c.rm, c.figure, c.scale, c.signed) for c in conclusions(metrics)]


def _profile_name(metrics: Mapping[str, Any]) -> str | None:
    return metrics.get("provenance", {}).get("profile", {}).get("name")


def reruns_of(report_dir: Path) -> dict[str, dict]:
    """The reruns of a report, by name: ``<report_dir>/../reproducibility/*/metrics.json`` whose profile is
    the report's own (a rerun of the demo is no rerun of another design's report beside it)."""
    own = read_metrics(report_dir)
    profile = _profile_name(own) if own is not None else None
    out = {}
    for name, metrics in reports_under(Path(report_dir).parent / REPRODUCIBILITY).items():
        if metrics is not None and (profile is None or _profile_name(metrics) in (None, profile)):
            out[name] = metrics
    return out


def verdicts(label: str, rm: str, runs: Sequence[Mapping]) -> list[str]:
    """Each run's verdict on one primary conclusion ("absent" where a run lacks it)."""
    out = []
    for m in runs:
        match = [c for c in conclusions(m) if c.claim == label and c.rm == rm]
        out.append(match[0].verdict if match else "absent")
    return out


def reproduced(label: str, rm: str, runs: Sequence[Mapping]) -> bool:
    return len(set(verdicts(label, rm, runs))) == 1


def dropped(metrics: Mapping, reruns: Mapping[str, Mapping]) -> list[tuple[str, str, list[str]]]:
    """(figure, RM, verdict per run) of every primary conclusion whose verdict differs between the
    report and its reruns."""
    runs = [metrics, *reruns.values()]
    return [
        (c.claim, c.rm, verdicts(c.claim, c.rm, runs))
        for c in conclusions(metrics)
        if not reproduced(c.claim, c.rm, runs)
    ]
