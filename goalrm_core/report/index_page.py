"""A profile report's ``index.html``: the length gate, the result sections (``frontpage``), the stage
table with links and failures, every metric and the provenance, in one self-contained page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from goalrm_core.report.conclusions import conclusions, detail_gate_reading, gate_state, gate_words, over_questions
from goalrm_core.report.frontpage import answer, real_text_answer, result_sections, step_answer
from goalrm_core.report.metrics_view import PROVENANCE_KEY, TIMINGS_KEY, Metrics, detail_seed, entries, mapping, value
from goalrm_core.report.provenance import provenance_html
from goalrm_core.report.regimes import regimes_html
from goalrm_core.report.reproduction import dropped, reruns_of, verdicts
from goalrm_core.report.templating import part, render, stage_view
from goalrm_core.study import formatting as fmt


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, Mapping):
        rows = []
        for key, item in obj.items():
            rows.extend(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return rows
    return [(prefix, obj)]


def _format_value(x: Any) -> str:
    """One metric of the "all metrics" table: floats to 4 significant digits, undefined ones (null,
    NaN) as ``undefined``, lists and dicts as short JSON with their undefined numbers spelled so."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        if fmt.is_undefined(x):
            return fmt.UNDEFINED
        text = f"{x:.4g}"
        return "0" if float(text) == 0 else text
    if x is None:
        return fmt.UNDEFINED
    if isinstance(x, (list, tuple, dict)):
        text = json.dumps(_spell_undefined(x), ensure_ascii=False)
        return text if len(text) <= 80 else text[:77] + "..."
    return str(x)


def _spell_undefined(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {k: _spell_undefined(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_spell_undefined(v) for v in x]
    if x is None or (isinstance(x, float) and fmt.is_undefined(x)):
        return fmt.UNDEFINED
    return x


def _gate(metrics: Mapping[str, Any]) -> str:
    """The length gate, first on the page; empty before notebook 04 ran. Across seeds
    (``evaluation.primary.gate``, schema 2) where recorded, else the seed-0 gate (schema 1)."""
    primary = Metrics(metrics).primary
    if (gate := mapping(primary, "gate")) is not None:
        return gate_html(
            dict(gate),
            benchmark=primary.get("benchmark"),
            n_seeds=primary.get("n_seeds"),
            detail_reading=detail_gate_reading(metrics),
        )
    gate = mapping(metrics, "evaluation", "gate")
    return "" if gate is None else gate_html(dict(gate))


GATE_STYLE = {  # state -> (background, border)
    "passed": ("#e8f5e9", "#2e7d32"),
    "failed": ("#ffebee", "#c62828"),
    "undefined": ("#fff8e1", "#b7791f"),  # amber: neither a pass nor a failure
}
#: The detail seed's own gate in the "all metrics" table: annotated where it reads otherwise than the verdict over
#: seeds.
DETAIL_GATE_KEY = "evaluation.gate.passed"
GATE_KEYS = ("benchmark", "passed", "length_only", "state", "reason", "margin_over_length", "n_seeds")


def gate_html(gate: Mapping, benchmark: str | None = None, n_seeds: int | None = None, detail_reading: str = "") -> str:
    """The gate as a coloured notice, in one of three states: green (both RMs above length-only), red
    (the later tables are no evidence about the method), amber ("cannot be judged: <reason>", an undefined AUROC or too
    few seeds: neither a pass nor a failure). Takes the seed-0 gate (``benchmark``, ``passed``, per
    scorer ``auroc``/``ci_low``/``ci_high``) or the across-seeds one (``state``, ``reason``,
    ``margin_over_length``: per RM an ``evaluation.stats.across_seeds`` summary). ``detail_reading``: where
    the detail seed's own gate reads otherwise (`conclusions.detail_gate_reading`), that reading, said as one
    seed's after the verdict over seeds."""
    bench = str(gate.get("benchmark") or benchmark or "toy-id")
    if "state" in gate:
        margins = entries(gate, "margin_over_length")
        seeds = fmt.count(n_seeds) or max((fmt.count(m.get("n_seeds")) or 0 for m in margins.values()), default=0)
        parts = _margins(margins, "0")
        scores = (f" over {seeds} RM seed{'s' if seeds != 1 else ''}" if seeds else "") + (
            f" (AUROC of the RM minus AUROC of response length, mean across seeds with {_interval_words(margins)}): "
            + "; ".join(parts)
            + "."
            if parts
            else "."
        )
        failing = [rm for rm, m in margins.items() if m.get("holds") is False]
    else:

        def shown(v):
            return fmt.ci(value(v, "auroc"), value(v, "ci_low"), value(v, "ci_high"), reason=fmt.reason_of(v, "auroc"))

        rms = [k for k in gate if k not in GATE_KEYS]
        scores = (
            " (AUROC, 95% CI): "
            + "; ".join(f"{rm} {shown(gate[rm])}" for rm in rms)
            + f"; length only {shown(gate.get('length_only'))}."
        )
        failing = []
    state, head, tail = gate_words(gate)
    if state == "failed" and failing:
        tail = f"Not shown for {', '.join(failing)}. " + tail
    if detail_reading:
        tail += " " + detail_reading
    second = mapping(gate, "well_formed")
    notice = _notice("gate", state, head, bench, scores, tail)
    return notice if second is None else notice + well_formed_gate_html(second, bench, state)


def _notice(css: str, state: str, head: str, bench: str, scores: str, tail: str) -> str:
    """A gate's notice, coloured by its state (:data:`GATE_STYLE`)."""
    colour, border = GATE_STYLE[state]
    return part(
        "gate_notice",
        css=css,
        state=state,
        colour=colour,
        border=border,
        head=head,
        bench=bench,
        scores=scores,
        tail=tail,
    )


def _interval_words(margins: Mapping) -> str:
    """What the margins' intervals cover: RM seeds and questions (the two-level bootstrap) or seeds alone."""
    both = over_questions(margins.values())
    return "95% interval over RM seeds and questions" if both else "95% t-interval over RM seeds"


def _margins(margins: Mapping[str, Mapping], above: str) -> list[str]:
    """Each RM's margin over length across seeds, with the seeds above ``above`` where counted."""
    parts = []
    for rm, m in margins.items():
        k, total = fmt.count(m.get("k")), fmt.count(m.get("n_seeds"))
        seeds = f", above {above} in {k} of {total} seeds" if k is not None and total else ""
        parts.append(f"{rm} {fmt.across(m)}{seeds}")
    return parts


def well_formed_gate_html(gate: Mapping, bench: str, first_state: str = "undefined") -> str:
    """The gate's second condition as a notice of its own: on correct against *well-formed* incorrect
    generations, does each RM beat response length by the required margin over seeds? Passed means the
    RMs check the arithmetic; failed means they are not shown to, and what they detect is mostly
    malformed output only where the first condition (``first_state``) passed and most errors are
    malformed (`conclusions.well_formed_failure`)."""
    state, head, tail = gate_words(gate, first_state)
    margin = fmt.num(gate.get("required_margin"), 2)
    margins = entries(gate, "margin_over_length")
    parts = _margins(margins, margin)
    scores = (
        (
            " (correct against well-formed incorrect solutions; AUROC of the RM minus AUROC of response length, mean "
            f"across seeds with {_interval_words(margins)}): " + "; ".join(parts) + "."
        )
        if parts
        else "."
    )
    return _notice("gate gate-well-formed", state, head, bench, scores, tail)


def reproduction_html(metrics: Mapping[str, Any], out_dir: Path) -> str:
    """Do the reruns beside this report (``reports/reproducibility/*``) reach the same verdict on each
    primary conclusion? A conclusion is stated only where they all do; the others are tabled as
    dropped, with each run's verdict (the agreed ones are not listed again). Empty when there are no reruns or no
    primary conclusions."""
    reruns = reruns_of(out_dir)
    records = conclusions(metrics)
    if not reruns or not records:
        return ""
    runs = [metrics, *reruns.values()]
    disagree = []  # only the conclusions the runs disagree on: the others are stated once, in the primary findings
    for c in records:
        seen = verdicts(c.claim, c.rm, runs)
        if len(set(seen)) > 1:
            disagree.append((c.claim, c.rm, seen))
    lost = dropped(metrics, reruns)
    said = (
        f"{len(records) - len(lost)} of {len(records)} primary conclusions reach the same verdict in all {len(runs)} "
        "runs; "
        + (
            f"{len(lost)} {'is' if len(lost) == 1 else 'are'} dropped (the runs' verdicts differ): "
            + "; ".join(f"{label} ({rm})" for label, rm, _ in lost)
            + "."
            if lost
            else "none is dropped."
        )
    )
    return part("reproduction", reruns=list(reruns), said=said, names=["this report", *reruns], rows=disagree)


# Profile reports that present the same study under two designs: each front page links the other
# where the other report exists beside it (reports/<name>/index.html).
COMPANION_REPORTS: Mapping[str, tuple[str, str]] = {
    "demo": ("confident", "the same study under the confident design"),
    "confident": ("demo", "the same study under the demo design"),
}


def companion_of(profile: str, out_dir: Path) -> tuple[str, str] | None:
    """The companion report (:data:`COMPANION_REPORTS`) and what it is, only where its index.html exists."""
    other = COMPANION_REPORTS.get(profile)
    return other if other and (out_dir.parent / other[0] / "index.html").exists() else None


def _drawn(what: str, draw, *args) -> str:
    """A section's HTML; when it cannot be drawn, a line saying so, so that the rest of the page still is."""
    try:
        return draw(*args)
    except Exception as exc:
        return part("paragraph", text=f"{what} could not be drawn: {type(exc).__name__}: {exc}", css="error")


def calibration_rows(out_dir: Path) -> list[dict]:
    """The committed calibration's step-verifier rows beside this report (``<reports>/calibration/``), or none."""
    path = Path(out_dir).parent / "calibration" / "step-verifier.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def render_index(profile: str, generated: str, stages: list[dict], metrics: Mapping[str, Any], out_dir: Path) -> str:
    """A self-contained page (``templates/index.html.j2``), in reading order: the answer (``findings.answer``),
    the length gate, a summary generated from the numbers, the key figures and tables (``frontpage``),
    the stage table with links and failures, then every metric in a collapsible section."""
    rows = _flatten({k: v for k, v in metrics.items() if k not in (TIMINGS_KEY, PROVENANCE_KEY)})
    # where the detail seed's gate reads otherwise than the verdict over seeds, its row says whose reading it is
    seed_only = (
        f" (RM seed {detail_seed(metrics)} alone; over seeds the gate "
        f"{gate_state(Metrics(metrics).primary['gate'])[0]}: evaluation.primary.gate.state)"
        if detail_gate_reading(metrics)
        else ""
    )
    metric_rows = [(k, _format_value(v) + (seed_only if k == DETAIL_GATE_KEY else "")) for k, v in rows]
    # a real-text report (evaluation.primary by data set) opens on its own answer; the ToyMath sections do not apply
    toymath = mapping(Metrics(metrics).primary, "gsm8k") is None
    sections = [
        _drawn("The answer", answer, metrics),
        _drawn("The real-text answer", real_text_answer, metrics),
        _drawn("The step-verifier answer", step_answer, metrics, calibration_rows(out_dir), profile),
        _drawn("The length gate", _gate, metrics),
        (_drawn("The result sections", result_sections, metrics) if toymath else "")
        + _drawn("The reproduction section", reproduction_html, metrics, out_dir)
        + _drawn("The side-by-side section", regimes_html, profile, out_dir),
    ]
    return render(
        "index.html.j2",
        profile=profile,
        generated=generated,
        companion=companion_of(profile, out_dir),
        sections=sections,
        stages=[stage_view(s, out_dir) for s in stages],
        metric_rows=metric_rows,
        provenance=provenance_html(metrics),
    )
