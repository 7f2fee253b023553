"""The paper's claims in the two embedded designs, side by side.

The ``demo`` design samples a policy at T = 1.7, so its errors are its own unlikely tokens and the policy's
log-prob is a near-perfect verifier; the ``confident`` design teaches a few facts wrong, samples at
T = 1.0 and trains the RMs on a second generator's slips, as the paper's setting does.
This module puts each primary conclusion of both committed reports in one table (the records of
``conclusions.conclusions``, plus steering and the free scorers), for both front pages and the
README. Every cell is read from the reports' ``metrics.json``; a design whose report is absent is left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from goalrm_core.evaluation.numeric import num
from goalrm_core.report.conclusions import conclusions
from goalrm_core.report.formats import ci
from goalrm_core.report.metrics_view import detail_seed, read_metrics
from goalrm_core.report.templating import part

#: The designs, in the order the table shows them, with what sets each apart.
DESIGNS: dict[str, str] = {
    "demo": "T = 1.7 slips; pairs from the policy's own samples",
    "confident": "12 facts taught wrong, T = 1.0; pairs from a second generator's slips",
}


def _free_scorer_rows(metrics: Mapping) -> list[tuple[str, str, str]]:
    """Seed 0's AUROC of the free scorers on the primary benchmark: what an RM has to beat."""
    ev = metrics.get("evaluation", {})
    bench = ev.get("primary", {}).get("benchmark", "toy-id")
    rows = []
    for scorer in ("length only", "policy mean logprob"):
        cell = ev.get(scorer, {}).get(bench)
        if isinstance(cell, Mapping):
            rows.append(
                (
                    f"free scorer: {scorer} AUROC on {bench} (seed-0 generations)",
                    "-",
                    ci(cell.get("auroc"), cell.get("auroc_ci_low"), cell.get("auroc_ci_high")),
                )
            )
    accuracy = metrics.get("data", {}).get("benchmarks", {}).get(bench, {}).get("sample_accuracy")
    if num(accuracy) is not None:
        rows.insert(0, (f"policy sampled accuracy on {bench}", "-", f"{100 * accuracy:.1f}%"))
    return rows


def _steering_rows(metrics: Mapping) -> list[tuple[str, str, str]]:
    s = metrics.get("decoding", {}).get("steering")
    if not isinstance(s, Mapping) or num(s.get("attribute_rate")) is None:
        return []
    n = s.get("n_questions")
    # the detail RM seed goes in the cell, not the label: designs with other detail seeds share the row
    return [
        (
            "steering (the detail RM seed): style rate steered / unguided",
            "goal-conditioned",
            f"{100 * s['attribute_rate']:.0f}% / {100 * (num(s.get('attribute_rate_unguided')) or 0):.0f}% of {n} "
            f"(seed {detail_seed(metrics)})",
        )
    ]


def claim_cells(metrics: Mapping) -> dict[tuple[str, str], str]:
    """``{(claim, RM): cell}`` of one report, in its order."""
    cells = {(label, rm): v for label, rm, v in _free_scorer_rows(metrics)}
    cells.update({(c.claim, c.rm): c.cell for c in conclusions(metrics)})
    cells.update({(label, rm): v for label, rm, v in _steering_rows(metrics)})
    return cells


def read_reports(root: Path) -> dict[str, dict]:
    """The committed reports of :data:`DESIGNS` under ``root`` (``<root>/<design>/metrics.json``), by design."""
    out = {}
    for name in DESIGNS:
        metrics = read_metrics(Path(root) / name, strict=True)
        if metrics is not None:
            out[name] = metrics
    return out


def side_by_side(reports: Mapping[str, Mapping]) -> tuple[list[str], list[tuple[str, str, list[str]]]]:
    """The designs shown and one row per claim: (claim, RM, one cell per design; "absent" where a
    design's report has no such figure)."""
    designs = [d for d in DESIGNS if d in reports] + [d for d in reports if d not in DESIGNS]
    cells = {d: claim_cells(reports[d]) for d in designs}
    keys: list[tuple[str, str]] = []
    for d in designs:
        keys += [k for k in cells[d] if k not in keys]
    return designs, [(claim, rm, [cells[d].get((claim, rm), "absent") for d in designs]) for claim, rm in keys]


def markdown(reports: Mapping[str, Mapping], link_prefix: str = "reports/") -> str:
    """The side-by-side table as Markdown (the README's); empty unless both designs are present."""
    if len(reports) < 2:
        return ""
    designs, rows = side_by_side(reports)
    head = " | ".join(f"[`{d}`]({link_prefix}{d}/index.html)" for d in designs)
    out = [
        "| claim | RM | " + head + " |",
        "|---|---|" + "---|" * len(designs),
        "| design | | " + " | ".join(DESIGNS.get(d, "") for d in designs) + " |",
    ]
    out += [f"| {claim} | {rm} | " + " | ".join(values) + " |" for claim, rm, values in rows]
    return "\n".join(out) + "\n"


def regimes_html(profile: str, out_dir: Path) -> str:
    """The side-by-side section of a front page: this report (``out_dir``) and its companion
    beside it (``out_dir.parent``); empty unless both are there."""
    reports = read_reports(Path(out_dir).parent)
    if profile not in reports or len(reports) < 2:
        return ""
    designs, rows = side_by_side(reports)
    return part("regimes", profile=profile, designs=[(d, DESIGNS.get(d, "")) for d in designs], rows=rows)
