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

from goalrm_core.evaluation import verdicts as states
from goalrm_core.report.metrics_view import read_metrics, reports_under

REPRODUCIBILITY = "reproducibility"
#: ``holds`` of a summary as words, for readers that have nothing else (prefer :func:`verdict_text`).
VERDICT = {True: "holds", False: "not shown", None: "cannot be judged"}


def verdict_text(s: Any, full: bool = False, scale: float = 1.0, unit: str = "") -> str:
    """One primary conclusion's two-sided verdict (`evaluation.verdicts`): holds, reversed, not shown,
    not tested, or "cannot be judged" where undefined. ``full``: a "not shown" with the effect the run
    would have seen with 80% power (shown times ``scale``, then ``unit``), a "not tested" or
    "cannot be judged" with its reason."""
    state = states.state(s)
    if state == states.UNDEFINED:
        return f"cannot be judged ({states.reason(s)})" if full else "cannot be judged"
    if full and state in (states.NOT_SHOWN, states.NOT_TESTED):
        return states.words(s, scale=scale, unit=unit)
    return state


def primary_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str, Mapping, float, bool]]:
    """(figure, RM, across-seeds figure, display scale, signed) of every primary conclusion in a
    schema-2 ``metrics.json``; empty for schema 1."""
    primary = metrics.get("evaluation", {}).get("primary", {})
    rows = []
    for rm, s in primary.get("gate", {}).get("margin_over_length", {}).items():
        rows.append(("gate: AUROC − length-only AUROC on toy-id (> 0)", rm, s, 1.0, True))
    well_formed = primary.get("gate", {}).get("well_formed", {})
    for rm, s in well_formed.get("margin_over_length", {}).items():
        rows.append((f"gate, well-formed errors only: AUROC − length-only AUROC (> {well_formed.get('required_margin', 0.15):g})",
                     rm, s, 1.0, True))
    if "delta_auroc" in primary:
        rows.append(("ΔAUROC goal-conditioned − baseline on toy-id (> 0)", "both", primary["delta_auroc"], 1.0, True))
    for rm, s in primary.get("first_error_did", {}).items():
        rows.append(("Q's change at the first wrong line − at that line of correct solutions (< 0: Q falls)", rm, s, 1.0, True))
    if "first_error_did" not in primary:  # a report from before 2026-12-07: its figure, named for what it measures
        for rm, s in primary.get("first_error_delta_q", {}).items():
            rows.append(("Q after − before the first error (superseded: it measures position)", rm, s, 1.0, True))
    for rm, f in primary.get("filter", {}).items():
        threshold = f.get("threshold")
        name = f"threshold-{threshold:g} filter" if isinstance(threshold, (int, float)) else "Q filter (threshold undefined)"
        rows.append((f"{name}: tokens saved, % (> 0)", rm, f["tokens_saved_pct"], 1.0, False))
        rows.append((f"{name}: accuracy change, points (< 0: costs accuracy)", rm, f["accuracy_change"], 100.0, True))
    pruning = metrics.get("decoding", {}).get("primary", {}).get("pruning")
    if pruning:
        # every seed's tuning turned pruning off: nothing was pruned, so nothing was tested (older
        # files record only the count beside the figures)
        why = states.pruning_switched_off(pruning)
        untested = lambda s: states.mark_not_tested(s, why)  # noqa: E731
        rows.append(("online pruning: tokens pruned / unpruned (< 1)", "goal-conditioned", untested(pruning["tokens_ratio"]), 1.0, False))
        rows.append(("online pruning: accuracy change, points (< 0: costs accuracy)", "goal-conditioned",
                     untested(pruning["accuracy_change"]), 100.0, True))
        wall = metrics.get("timings", {}).get("decoding", {}).get("pruning_across_seeds", {}).get("wall_ratio")
        if wall:
            rows.append(("online pruning: wall time pruned / unpruned (< 1)", "goal-conditioned", untested(wall), 1.0, False))
    return rows


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
        match = [s for lab, r, s, _, _ in primary_rows(m) if lab == label and r == rm]
        out.append(verdict_text(match[0]) if match else "absent")
    return out


def reproduced(label: str, rm: str, runs: Sequence[Mapping]) -> bool:
    return len(set(verdicts(label, rm, runs))) == 1


def dropped(metrics: Mapping, reruns: Mapping[str, Mapping]) -> list[tuple[str, str, list[str]]]:
    """(figure, RM, verdict per run) of every primary conclusion whose verdict differs between the
    report and its reruns."""
    runs = [metrics, *reruns.values()]
    return [(label, rm, verdicts(label, rm, runs)) for label, rm, *_ in primary_rows(metrics) if not reproduced(label, rm, runs)]
