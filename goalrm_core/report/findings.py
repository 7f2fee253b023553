"""The result sections of a report's ``index.html`` that state findings in words: the summary generated
from the numbers, the primary findings across RM seeds (schema 2; one sentence each with its mean, 95%
t-interval, "in k of n seeds" and its two-sided verdict), and the exploratory benchmarks with
Holm-corrected p-values. The verdict words are described in :mod:`goalrm_core.report.frontpage`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from goalrm_core.report.conclusions import (
    answer_note,
    answer_sentence,
    design_scope,
    figure_text,
    gate_state,  # noqa: F401
    judge,
    over_questions,
    scope,
    seed0_delta_sentence,
    seeds_text,
    sentences,
    spread_sentence,
)
from goalrm_core.report.metrics_view import Metrics, detail_seed, entries, mapping, section, value
from goalrm_core.report.page_parts import html_table
from goalrm_core.report.templating import part
from goalrm_core.study import formatting as fmt
from goalrm_core.study import step_bench
from goalrm_core.study.rms import HEADLINE_SETS, ID_BENCH, RMS

# ------------------------------------------------------------------------------------- the answer


def answer(metrics: Mapping) -> str:
    """The page's first paragraph: does goal-conditioning help here? Its first sentence
    (:func:`~goalrm_core.report.conclusions.answer_sentence`) gives the verdict, the primary ΔAUROC with its
    interval, the paired RM seeds and the MDE; then what those numbers cover and what this design can and
    cannot test, read from its gates; then each arm's spread over seeds against its targets
    (:func:`~goalrm_core.report.conclusions.spread_sentence`). Empty before notebook 04 recorded primary
    findings (schema 2)."""
    first = answer_sentence(metrics)
    if not first:
        return ""
    spread = spread_sentence(metrics)
    return part("answer", first=first, scope=f"{answer_note(metrics)} {design_scope(Metrics(metrics).primary)}") + (
        part("paragraph", text=spread, css="answer") if spread else ""
    )


#: The real-text report's designs: (section of ``evaluation.primary``, measure, what one item is, its words)
REAL_TEXT_DESIGNS = (
    ("gsm8k", "auroc", "questions", "GSM8K: AUROC of the reward on held-out model solutions"),
    ("hh", "accuracy", "dialogues", "HH-RLHF harmless: pairwise accuracy on held-out pairs"),
)
REAL_TEXT_SCOPE = (
    "A 135M-parameter model trained on a CPU says nothing about the paper's 7-8B results; SmolLM2 may have seen "
    "GSM8K during pre-training; and HH here is a split of one test set (harmless-base test pairs)."
)


def _interval(summary: Mapping) -> str:
    return (
        f"{fmt.fixed(summary.get('mean'), 3)} [{fmt.fixed(summary.get('ci_low'), 3)}, "
        f"{fmt.fixed(summary.get('ci_high'), 3)}], MDE {fmt.fixed(summary.get('mde'), 3)}: "
        f"{summary.get('verdict', 'undefined')}"
    )


def real_text_answer(metrics: Mapping) -> str:
    """The real-text report's first paragraphs (``evaluation.primary`` with a ``gsm8k`` section): per design, the
    paired goal-conditioned − baseline difference with its interval over RM seeds and questions (or dialogues),
    its MDE and verdict, then each RM against chance and the scorers that need no training; then what a 135M
    model on a CPU cannot say. Empty for any other report."""
    primary = Metrics(metrics).primary
    if mapping(primary, "gsm8k") is None:
        return ""
    seeds = primary.get("rm_seeds") or []
    out = []
    for key, measure, items, words in REAL_TEXT_DESIGNS:
        part_ = section(primary, key)
        delta = section(part_, f"delta_{measure}")
        arms = "; ".join(f"{rm} {_interval(section(part_, rm, measure))} (against 0.5)" for rm in RMS)
        reference = ", ".join(
            f"{name} {fmt.fixed(value(r, 'estimate'), 3)}" for name, r in section(part_, "reference").items()
        )
        first = (
            f"{words}, {len(seeds)} paired RM seeds, {part_.get(items, '?')} {items} of the "
            f"{primary.get('split', '?')} split: goal-conditioned − baseline {_interval(delta)}."
        )
        out.append(part("answer", first=first, scope=f"{arms}. No training needed: {reference}."))
    return "".join(out) + part("paragraph", text=REAL_TEXT_SCOPE, css="answer")


def step_answer(metrics: Mapping, calibration: Sequence[Mapping] = (), design: str = "") -> str:
    """The front page's second sentence: the step-verifier bench's comparison (goal-conditioned Q against the
    baseline RM's partial reward, first-error F1 on exact labels), then what label noise costs where the
    design's calibration rows (``calibration``, step-verifier rows) measured it; empty when the run
    recorded no bench."""
    bench = Metrics(metrics).step_verifiers
    figures = mapping(bench, "figures")
    if mapping(figures, "f1") is None:
        return ""
    result = {"summaries": figures, "reference": bench.get("reference"), "bench": bench.get("bench", ID_BENCH)}
    noise = (
        step_bench.label_noise_reading(calibration, design)
        or "What label noise (rollout-estimated against exact step labels) costs is not measured for this design."
    )
    return part("paragraph", text=f"{step_bench.reading(result)} {noise}", css="answer")


# ------------------------------------------------------------------------------------- summary


def _n_seeds(primary: Mapping) -> int | None:
    seeds = primary.get("rm_seeds")
    return fmt.count(primary.get("n_seeds")) or (len(seeds) if isinstance(seeds, list) and seeds else None)


def summary(metrics: Mapping) -> str:
    """3-5 sentences from the numbers: what was trained, how the seed-0 RMs rank generations against
    the free scorers and (schema 1) whether the goal-conditioned RM beat the baseline (paired Δ with
    CI). With schema 2 the verdicts are the primary findings across seeds (:func:`primary_findings`)."""
    m = Metrics(metrics)
    ev, training, primary = m.evaluation, m.training, m.primary
    if not all(rm in ev for rm in RMS) and not primary:
        return ""
    sentences = []
    task = value(m.data, "task", "name", default="ToyMath")
    seeds = {int(v) for v in (value(training, rm, "n_seeds") for rm in RMS) if not fmt.is_undefined(v)}
    steps = {int(v) for v in (value(training, rm, "steps") for rm in RMS) if not fmt.is_undefined(v)}
    pairs = value(m.data, "preference", "n_train")
    trained = "Two reward models, a baseline (pairwise loss) and a goal-conditioned one (pairwise + contrastive term),"
    detail = []
    if seeds:
        detail.append(f"{'/'.join(map(str, sorted(seeds)))} seed{'s' if max(seeds) > 1 else ''} each")
    if steps:
        detail.append(f"{'/'.join(map(str, sorted(steps)))} steps")
    whose = {
        "slips": f"from a second generator, not the evaluated policy (reference {task} solutions against one-fact "
        "slips)",
        "confident+slips": f"from two generators other than the evaluated policy (reference {task} solutions against "
        f"one-fact slips and against a confidently wrong generator's solutions)",
    }.get(m.parameter("pair_source"), f"of the policy's own {task} solutions")
    on = f" on {int(pairs):,} preference pairs {whose}" if not fmt.is_undefined(pairs) else f" on {task}"
    if all("eval_accuracy" in section(training, rm) for rm in RMS):
        base, goal = (fmt.pct(training[rm]["eval_accuracy"]) for rm in RMS)
        detail.append(f"held-out pairwise accuracy {base} and {goal}")
    sentences.append(f"{trained} were trained{on}" + (f" ({'; '.join(detail)})." if detail else "."))
    benches = m.benchmarks
    bench = ID_BENCH if ID_BENCH in benches else (benches or [None])[0]
    if bench and all(rm in ev for rm in RMS):
        which = HEADLINE_SETS.get(ev.get("headline"), "the headline generations")
        base, goal = (m.auroc(rm, bench).text() for rm in RMS)
        text = (
            f"On {bench} ({which}), the seed-{detail_seed(metrics)} baseline RM ranks correct above incorrect "
            f"solutions with AUROC {base} and the goal-conditioned RM with {goal}"
        )
        if "length only" in ev:
            text += f"; response length alone scores {m.auroc('length only', bench).text()}"
        sentences.append(text + ".")
        logprob = m.auroc("policy mean logprob", bench)
        best_rm = max((v for v in (m.auroc(rm, bench).value for rm in RMS) if not fmt.is_undefined(v)), default=None)
        if not fmt.is_undefined(logprob.value) and best_rm is not None and logprob.value > best_rm:
            sentences.append(
                f"The policy's own mean log-prob does better than either RM ({logprob.text()}): "
                "its slips are its own unlikely tokens, so on this task it is a ceiling, not a competitor."
            )
    deltas = entries(ev, "delta_auroc", strict=True)
    if primary:
        n = _n_seeds(primary)
        sentences.append(
            f"The verdicts are the primary findings below, each over the {n or 'recorded'} RM seeds; "
            f"the seed-{detail_seed(metrics)} tables further down are detail."
        )
    elif deltas:
        sentences.append(seed0_delta_sentence(deltas))
    return part("paragraph", text=" ".join(sentences))


# ---------------------------------------------------------------------- primary findings (schema 2)


def primary_findings(metrics: Mapping) -> str:
    """Schema 2: each primary finding in one sentence generated from the across-seeds numbers (mean,
    95% t-interval, in k of n seeds), a conclusion only where it holds; empty for schema 1."""
    primary = Metrics(metrics).primary
    items = sentences(metrics)
    if not items:
        return ""
    n = _n_seeds(primary) or fmt.count(value(metrics, "decoding", "primary", "pruning", "tokens_ratio", "n_seeds"))
    which = HEADLINE_SETS.get(primary.get("headline"), "")
    figures = [primary.get("delta_auroc"), *(value(primary, "gate", "margin_over_length") or {}).values()]
    return part(
        "primary_findings",
        seeds=f"{n} seeds" if n else "seeds",
        which=which,
        scope=scope(metrics),
        over_questions=over_questions(figures),
        items=items,
    )


def exploratory_section(metrics: Mapping) -> str:
    """The exploratory benchmarks (schema 2): goal-conditioned − baseline AUROC across seeds on every
    benchmark other than the primary one, with Holm-corrected p-values over those k comparisons."""
    import pandas as pd

    ex = value(metrics, "evaluation", "exploratory")
    deltas = entries(ex, "delta_auroc", strict=True)
    if not deltas:
        return ""
    order = fmt.order_benchmarks(deltas)
    k = len(order)
    sentence = (
        f"Exploratory, not primary: goal-conditioned minus baseline AUROC on {k} other benchmark"
        f"{'s' if k != 1 else ''}, {k} comparison{'s' if k != 1 else ''} with Holm-corrected p-values; "
        "these are leads, not findings: "
        + "; ".join(
            f"{b} {figure_text(deltas[b], 'positive')}, Holm p = {fmt.p_value(deltas[b].get('p_holm'))}"
            + ("" if deltas[b].get("holds") is not None else f" ({judge(deltas[b], '', '')})")
            for b in order
        )
        + "."
    )
    rows = [
        {
            "benchmark": b,
            "Δ AUROC across seeds [95% t-interval]": fmt.across(d),
            "positive in": seeds_text(d, "").strip() or fmt.UNDEFINED,
            "p-value (Holm)": fmt.p_value(d.get("p_holm")),
            "reading": judge(
                d, "interval above 0 (a lead)", "a difference is not shown", opposite="interval wholly below 0 (a lead)"
            ),
        }
        for b, d in ((b, deltas[b]) for b in order)
    ]
    note = value(ex, "note")
    return (
        part("paragraph", text=sentence)
        + (part("paragraph", text=note, css="meta") if isinstance(note, str) and note else "")
        + html_table(pd.DataFrame(rows))
    )
