"""The result sections of a report's ``index.html`` that state findings in words: the summary generated
from the numbers, the primary findings across RM seeds (schema 2; one sentence each with its mean, 95%
t-interval, "in k of n seeds" and its two-sided verdict), and the exploratory benchmarks with
Holm-corrected p-values. The verdict words are described in :mod:`goalrm_core.report.frontpage`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from goalrm_core.evaluation import verdicts
from goalrm_core.evaluation.auroc import delta_of
from goalrm_core.report.metrics_view import Metrics, detail_seed, entries, mapping, section, value
from goalrm_core.report.page_parts import html_table
from goalrm_core.study import formatting as fmt
from goalrm_core.study import step_bench
from goalrm_core.study.evaluation import well_formed_failure
from goalrm_core.study.rms import HEADLINE_SETS, ID_BENCH, RMS


# --------------------------------------------------------------------------- judging across seeds


def _seeds(s: Mapping, what: str) -> str:
    """``"positive in 4 of 5 seeds"`` (with the undefined seeds counted apart); empty without counts."""
    k, total, n = fmt.count(s.get("k")), fmt.count(s.get("n_seeds")), fmt.count(s.get("n"))
    if k is None or not total:
        return ""
    text = f"{what} in {k} of {total} seed{'s' if total != 1 else ''}"
    if n is not None and n < total:
        text += f" ({total - n} undefined)"
    return text


def judge(s: Any, shown: str, not_shown: str = "not shown", opposite: str | None = None, *,
          switched_off: bool = False, scale: float = 1.0, unit: str = "") -> str:
    """The words for one across-seeds summary, two-sided (`evaluation.verdicts`): ``shown`` where it
    holds; "reversed" (with ``opposite``, what the other side means) where the interval lies wholly the
    unexpected way; ``not_shown`` where it contains the null, with the effect the run would have seen
    with 80% power where it recorded one; "not tested: <reason>" where the mechanism was off
    (``switched_off``); "cannot be judged: <reason>" where it is undefined."""
    state = verdicts.state(s, switched_off)
    if state == verdicts.UNDEFINED:
        why = fmt.reason_of(s) or (verdicts.reason(s) if value(s, "holds") is not None else "undefined")
        return f"cannot be judged: {why}"
    if state == verdicts.NOT_TESTED:
        return f"not tested: {verdicts.reason(s, switched_off)}"
    return verdicts.words(s, holds=shown, reversed_=f"reversed: {opposite}" if opposite else "reversed", not_shown=not_shown,
                          scale=scale, unit=unit)


def _figure(s: Any, what: str, **kw) -> str:
    """``"+0.03 [-0.01, +0.07], positive in 4 of 5 seeds"``; an undefined mean is plain ``undefined``
    (the verdict that follows, :func:`judge`, says why)."""
    s = section(s)
    seeds = _seeds(s, what)
    return fmt.across({k: v for k, v in s.items() if k != "reason"}, **kw) + (f", {seeds}" if seeds else "")


def gate_state(gate: Mapping) -> tuple[str, str | None]:
    """(``"passed"`` | ``"failed"`` | ``"undefined"``, reason): the state a gate records (schema 2), or
    the one its seed-0 AUROCs support (schema 1), where an undefined AUROC (one class: null or NaN)
    makes it ``undefined``, never failed."""
    if "state" in gate:
        state = gate["state"] if gate["state"] in ("passed", "failed", "undefined") else "undefined"
        margins = gate.get("margin_over_length") or {}

        def unjudged() -> str:
            return "; ".join(f"{rm}: {fmt.reason_of(m) or 'undefined'}" for rm, m in margins.items()
                             if value(m, "holds") is None)

        if state == "undefined":
            return state, gate.get("reason") or unjudged() or "no state recorded"
        if (missing := unjudged()) and state == "passed":  # a pass needs every margin judged
            return "undefined", missing
        return state, gate.get("reason")
    entries = {("length only" if k == "length_only" else k): v for k, v in gate.items()
               if k not in ("benchmark", "passed", "reason")}
    undefined = [f"{name} AUROC {fmt.undefined(fmt.reason_of(v, 'auroc'))}" for name, v in entries.items()
                 if fmt.is_undefined(value(v, "auroc"))]
    if undefined or gate.get("passed") is None:
        return "undefined", gate.get("reason") or "; ".join(undefined) or "no verdict recorded"
    return ("passed" if gate["passed"] else "failed"), None


# ------------------------------------------------------------------------------------- the answer


def answer(metrics: Mapping) -> str:
    """The page's first paragraph: does goal-conditioning help here (the primary ΔAUROC with its
    interval and two-sided verdict, a "not shown" with the effect the run would have seen), and what
    this design can and cannot test, read from its gates. Empty before notebook 04 recorded primary
    findings (schema 2)."""
    primary = Metrics(metrics).primary
    d = mapping(primary, "delta_auroc")
    if d is None:
        return ""
    bench = primary.get("benchmark", ID_BENCH)
    scope = _scope(metrics)
    verdict = judge(d, "yes, the goal-conditioned RM ranks them better", "not shown",
                    opposite="no, the baseline RM ranks them better")
    first = (f"Does goal-conditioning help here? Goal-conditioned minus baseline AUROC on {bench} is "
             f"{_figure(d, 'positive')}, {scope}: {verdict}.")
    return f'<p class="answer"><b>{html.escape(first)}</b> {html.escape(_design_scope(primary))}</p>'


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
    noise = (step_bench.label_noise_reading(calibration, design)
             or "What label noise (rollout-estimated against exact step labels) costs is not measured for this design.")
    return f'<p class="answer">{html.escape(step_bench.reading(result))} {html.escape(noise)}</p>'


def _design_scope(primary: Mapping) -> str:
    """What the design can and cannot test, from the length gate and its well-formed condition."""
    gate = mapping(primary, "gate")
    if gate is None:
        return "What the design can test is not recorded (no length gate)."
    state, reason = gate_state(gate)
    if state == "undefined":
        return f"Whether the reward models beat response length cannot be judged ({reason}), so neither can what this design tests."
    if state == "failed":
        return ("This design cannot test the question: the reward models are not shown to beat response length, so a "
                "difference between them is a difference between two scorers no better than length.")
    second = mapping(gate, "well_formed")
    if second is None:
        return ("The reward models beat response length; whether they check the arithmetic or only the shape of a "
                "solution is not measured, so this design tests ranking, not verification.")
    state, reason = gate_state(second)
    if state == "passed":
        return ("The reward models beat length on well-formed errors too: they check the arithmetic, so this design "
                "tests whether goal-conditioning helps a reward model verify.")
    if state == "failed":
        share = second.get("malformed_share")
        what = ("spot malformed output" if isinstance(share, (int, float)) and share >= 0.5  # NaN compares False
                else "rank solutions better than length")
        return (f"This design can test whether goal-conditioning helps a reward model {what}; it cannot test "
                "whether it helps one verify arithmetic: on well-formed errors the reward models are not shown to beat "
                "length by the margin required.")
    return f"Whether the reward models check the arithmetic cannot be judged ({reason})."


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
    whose = {"slips": f"from a second generator, not the evaluated policy (reference {task} solutions against one-fact slips)",
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
        text = (f"On {bench} ({which}), the seed-{detail_seed(metrics)} baseline RM ranks correct above incorrect "
                f"solutions with AUROC {base} and the goal-conditioned RM with {goal}")
        if "length only" in ev:
            text += f"; response length alone scores {m.auroc('length only', bench).text()}"
        sentences.append(text + ".")
        logprob = m.auroc("policy mean logprob", bench)
        best_rm = max((v for v in (m.auroc(rm, bench).value for rm in RMS) if not fmt.is_undefined(v)), default=None)
        if not fmt.is_undefined(logprob.value) and best_rm is not None and logprob.value > best_rm:
            sentences.append(f"The policy's own mean log-prob does better than either RM ({logprob.text()}): "
                             "its slips are its own unlikely tokens, so on this task it is a ceiling, not a competitor.")
    deltas = entries(ev, "delta_auroc", strict=True)
    if primary:
        n = _n_seeds(primary)
        sentences.append(f"The verdicts are the primary findings below, each over the {n or 'recorded'} RM seeds; "
                         f"the seed-{detail_seed(metrics)} tables further down are detail.")
    elif deltas:
        sentences.append(_seed0_delta_sentence(deltas))
    return "<p>" + " ".join(html.escape(s) for s in sentences) + "</p>"


def _seed0_delta_sentence(deltas: Mapping[str, Mapping]) -> str:
    order = fmt.order_benchmarks(deltas)
    judged = [b for b in order if not fmt.is_undefined(deltas[b].get("ci_low"), deltas[b].get("ci_high"))]
    unjudged = [b for b in order if b not in judged]
    better = [b for b in judged if deltas[b]["ci_low"] > 0]
    worse = [b for b in judged if deltas[b]["ci_high"] < 0]
    per_bench = ", ".join(f"{b} {fmt.signed_ci(delta_of(d), d.get('ci_low'), d.get('ci_high'), reason=fmt.reason_of(d, 'delta'))}"
                          for b, d in ((b, deltas[b]) for b in order))
    head = f"Goal-conditioned minus baseline AUROC (paired, 95% CI): {per_bench}; "
    if not judged:
        return head + f"cannot be judged: the interval is undefined on all {len(order)} benchmarks."
    if not better and not worse:
        verdict = f"the CI includes 0 on all {len(judged)} benchmarks"
        verdict += (f" with an interval: no detectable difference; cannot be judged on {', '.join(unjudged)} (interval undefined)."
                    if unjudged else ": no detectable difference.")
        return head + verdict
    parts = [f"{which} on {', '.join(benches)}" for which, benches in (("better", better), ("worse", worse)) if benches]
    rest = len(judged) - len(better) - len(worse)
    verdict = (f"the CI excludes 0 on {len(better) + len(worse)} of {len(order)} benchmarks: the goal-conditioned RM is "
               f"{' and '.join(parts)}" + (f", indistinguishable on the other {rest}" if rest else ""))
    if unjudged:
        verdict += f"; cannot be judged on {', '.join(unjudged)} (interval undefined)"
    return head + verdict + "."


# ---------------------------------------------------------------------- primary findings (schema 2)


def _gate_sentence(primary: Mapping) -> str:
    gate = mapping(primary, "gate")
    if gate is None:
        return ""
    bench = primary.get("benchmark", ID_BENCH)
    state, reason = gate_state(gate)
    margins = gate.get("margin_over_length") or {}
    per_rm = "; ".join(f"{rm} {_figure(m, 'above 0')}" for rm, m in margins.items())
    failing = [rm for rm, m in margins.items() if value(m, "holds") is False]
    verdict = {"passed": "passed: both reward models beat response length",
               "failed": "failed: not shown that every reward model beats response length"
                         + (f" (not shown for {', '.join(failing)})" if failing else ""),
               "undefined": f"cannot be judged: {reason}"}[state]
    sentence = (f"Length gate on {bench}, AUROC of the RM minus AUROC of response length"
                + (f": {per_rm}" if per_rm else "") + f". Gate {verdict}.")
    second = mapping(gate, "well_formed")
    if second is not None:
        state_first = state
        state, reason = gate_state(second)
        margin = fmt.num(second.get("required_margin"), 2)
        per_rm = "; ".join(f"{rm} {_figure(m, f'above {margin}')}" for rm, m in (second.get("margin_over_length") or {}).items())
        sentence += (" Its second condition, on correct against well-formed incorrect solutions only (every line "
                     "'a op b = c', then '#answer': the errors a scorer must check the arithmetic to see)"
                     + (f": {per_rm}" if per_rm else "") + ". "
                     + {"passed": f"Holds: both reward models beat length there by more than {margin}; they verify.",
                        "failed": f"Does not hold: not shown that every reward model beats length there by more than {margin}; "
                                  + well_formed_failure(second, state_first),
                        "undefined": f"Cannot be judged: {reason}."}[state])
    return sentence


def _delta_sentence(primary: Mapping, n_exploratory: int = 0) -> str:
    d = mapping(primary, "delta_auroc")
    if d is None:
        return ""
    bench = primary.get("benchmark", ID_BENCH)
    k = n_exploratory
    comparisons = (f" It is the one reward comparison fixed before the run, so its interval needs no correction; the "
                   f"other {k} benchmark{'s' if k != 1 else ''} are {k} exploratory comparison{'s' if k != 1 else ''}, "
                   "Holm-corrected (below)." if k else " It is the one reward comparison fixed before the run.")
    return (f"Reward comparison on {bench} (primary): goal-conditioned minus baseline AUROC {_figure(d, 'positive')}: "
            + judge(d, "the goal-conditioned RM ranks better (the interval lies above 0)", "a difference is not shown",
                    opposite="the baseline RM ranks better (the interval lies wholly below 0)") + "." + comparisons)


def _first_error_sentences(primary: Mapping) -> list[str]:
    out = []
    if "first_error_did" not in primary:  # a report from before 2026-12-07
        for rm, s in entries(primary, "first_error_delta_q", strict=True).items():
            out.append(f"Q of the {rm} RM after minus before the first error (superseded: the mean after it holds the last "
                       f"tokens, always near the goal, so it measures position, not the error): "
                       f"Δ {fmt.across({k: v for k, v in s.items() if k != 'reason'})}.")
    for rm, s in entries(primary, "first_error_did", strict=True).items():
        seeds = _seeds(s, "falls")
        out.append(f"Q of the {rm} RM at the first wrong line (its change there minus the change at that line of correct "
                   "solutions): " + (f"Q {seeds}: " if seeds else "")
                   + f"Δ {fmt.across({k: v for k, v in s.items() if k != 'reason'})}: "
                   + judge(s, "Q falls at the first error", "not shown that Q falls",
                           opposite="Q rises (the interval lies wholly above 0)") + ".")
    return out


def _filter_sentences(primary: Mapping) -> list[str]:
    out = []
    bench = primary.get("benchmark", ID_BENCH)
    for rm, f in entries(primary, "filter", strict=True).items():
        threshold = f.get("threshold")
        at = f"threshold {fmt.num(threshold, 2)}" if not fmt.is_undefined(threshold) else "its threshold"
        tokens, change = f.get("tokens_saved_pct"), f.get("accuracy_change")
        out.append(f"Q-filtered majority voting at {at} ({rm} Q, {bench}): tokens saved "
                   f"{_figure(tokens, 'more than 0', digits=1, signed=False, suffix=' %')} ("
                   + judge(tokens, "a saving", "a saving is not shown", opposite="the filter adds tokens", unit=" %") + "); accuracy change "
                   f"{_figure(change, 'lower', digits=1, scale=100, suffix=' points')}: "
                   + judge(change, "the filter costs accuracy", "a cost is not shown",
                           opposite="accuracy rises (the interval lies wholly above 0)", scale=100, unit=" points") + ".")
    return out


def _pruning_sentence(metrics: Mapping) -> str:
    p = mapping(metrics, "decoding", "primary", "pruning")
    if p is None:
        return ""
    bench = p.get("benchmark", ID_BENCH)
    seeds = p.get("rm_seeds") if isinstance(p.get("rm_seeds"), list) else []
    n = len(seeds) or fmt.count(value(p, "tokens_ratio", "n_seeds")) or 0
    why_off = verdicts.pruning_switched_off(p)  # every seed's tuning chose pruning off: nothing was tested
    p = {**p, **{k: verdicts.mark_not_tested(p.get(k), why_off) for k in ("tokens_ratio", "accuracy_change") if k in p}}
    text = (f"Online pruning by Q on {bench} (threshold chosen per seed): tokens generated relative to no pruning "
            f"{_figure(p.get('tokens_ratio'), 'below 1', signed=False)}: "
            + judge(p.get("tokens_ratio"), "pruning saves tokens", "a saving is not shown", opposite="pruning adds tokens")
            + f"; accuracy change {_figure(p.get('accuracy_change'), 'lower', digits=1, scale=100, suffix=' points')}: "
            + judge(p.get("accuracy_change"), "pruning costs accuracy", "a cost is not shown",
                    opposite="accuracy rises (the interval lies wholly above 0)", scale=100, unit=" points"))
    if (wall := mapping(metrics, "timings", "decoding", "pruning_across_seeds", "wall_ratio")) is not None:
        wall = verdicts.mark_not_tested(wall, why_off)
        threads = fmt.count(value(metrics, "decoding", "threads"))
        text += (f"; wall time relative to no pruning {_figure(wall, 'below 1', signed=False)}"
                 + (f" ({threads} thread{'s' if threads != 1 else ''})" if threads else "") + ": "
                 + judge(wall, "pruning saves wall time", "a wall-time saving is not shown",
                         opposite="pruning is slower (the interval lies wholly above 1)"))
    text += "."
    off = fmt.count(p.get("pruning_off"))
    if off is not None and n:
        text += (f" {off} of {n} seeds chose pruning off (threshold ≤ −1: no sample stopped, no RM calls)"
                 + (": every seed's tuning turned pruning off, so nothing was pruned and nothing about pruning was tested."
                    if off == n else "."))
    return text


def over_questions(figures) -> bool:
    """Whether any of ``figures`` (across-seeds summaries) has an interval over questions too (newer runs
    record it per figure)."""
    return any(value(f, "interval") == "seeds and questions" for f in figures)


def _scope(metrics: Mapping) -> str:
    """How far the primary conclusions reach: this policy, or the policy seeds they pool."""
    m = Metrics(metrics)
    return verdicts.policy_scope(m.primary.get("policy_seeds") or [m.parameter("seed")])


def primary_findings(metrics: Mapping) -> str:
    """Schema 2: each primary finding in one sentence generated from the across-seeds numbers (mean,
    95% t-interval, in k of n seeds), a conclusion only where it holds; empty for schema 1."""
    primary = Metrics(metrics).primary
    exploratory = value(metrics, "evaluation", "exploratory", "delta_auroc") or {}
    n_exploratory = sum(isinstance(d, Mapping) for d in exploratory.values())
    items = [_gate_sentence(primary), _delta_sentence(primary, n_exploratory), *_first_error_sentences(primary),
             *_filter_sentences(primary), _pruning_sentence(metrics)] if primary else [_pruning_sentence(metrics)]
    items = [s for s in items if s]
    if not items:
        return ""
    n = _n_seeds(primary) or fmt.count(value(metrics, "decoding", "primary", "pruning", "tokens_ratio", "n_seeds"))
    which = HEADLINE_SETS.get(primary.get("headline"), "")
    figures = [primary.get("delta_auroc"), *(value(primary, "gate", "margin_over_length") or {}).values()]
    head = ("<p>Computed once per RM seed (" + (f"{n} seeds" if n else "seeds")
            + (f"; the reward comparisons on {html.escape(which)}" if which else "")
            + f"), all {html.escape(_scope(metrics))}: the mean across seeds with its 95% "
            + ("interval over RM seeds and questions (a two-level bootstrap)" if over_questions(figures)
               else "t-interval over RM seeds (the questions held fixed)")
            + ", and in how many seeds the figure points the expected way. A conclusion holds only where the "
              "interval lies wholly on the expected side, and reads \"reversed\" where it lies wholly on the other; "
              "\"not tested\" where the mechanism was switched off.</p>")
    return head + "<ul>\n" + "\n".join(f"<li>{html.escape(s)}</li>" for s in items) + "\n</ul>"


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
    sentence = (f"Exploratory, not primary: goal-conditioned minus baseline AUROC on {k} other benchmark"
                f"{'s' if k != 1 else ''}, {k} comparison{'s' if k != 1 else ''} with Holm-corrected p-values; "
                "these are leads, not findings: "
                + "; ".join(f"{b} {_figure(deltas[b], 'positive')}, Holm p = {fmt.p_value(deltas[b].get('p_holm'))}"
                            + ("" if deltas[b].get("holds") is not None else f" ({judge(deltas[b], '', '')})")
                            for b in order) + ".")
    rows = [{"benchmark": b,
             "Δ AUROC across seeds [95% t-interval]": fmt.across(d),
             "positive in": _seeds(d, "").strip() or fmt.UNDEFINED,
             "p-value (Holm)": fmt.p_value(d.get("p_holm")),
             "reading": judge(d, "interval above 0 (a lead)", "a difference is not shown",
                              opposite="interval wholly below 0 (a lead)")}
            for b, d in ((b, deltas[b]) for b in order)]
    note = value(ex, "note")
    return (f"<p>{html.escape(sentence)}</p>" + (f"<p class=\"meta\">{html.escape(str(note))}</p>" if isinstance(note, str) and note else "")
            + html_table(pd.DataFrame(rows)))
