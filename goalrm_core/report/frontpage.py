"""The result sections of a report's ``index.html``, built from ``metrics.json`` alone.

In reading order: a summary generated from the numbers (so it is honest whichever way they fall);
where the run recorded them (schema 2: ``evaluation.primary``, ``decoding.primary``), the primary
findings across RM seeds, one sentence each with its mean, 95% t-interval and "in k of n seeds" (the
reward comparison saying how many comparisons there are), and the exploratory benchmarks with
Holm-corrected p-values; Q along the incorrect solutions around the first error, a line per seed
(``evaluation.first_error_profile``; where absent, what is missing); then the seed-0 detail: the key
figure (AUROC per benchmark for every scorer), the key table (goal-conditioned − baseline, with Holm
over its k benchmarks), a figure and two tables of what Q saves (Q-filtered voting, online pruning:
tokens, accuracy with Wilson intervals, wall time, where tuning chose no pruning), the decoding
comparison (Wilson intervals, what the numbers show, budgets that do not match) and steering. Figures are embedded PNGs, so the page works as a single file. Every section is
left out when the metrics it needs are absent (a run that stopped early).

A conclusion is stated only where the across-seeds summary holds (its interval lies wholly on the
expected side); "reversed" where the interval lies wholly on the other side; otherwise "not shown", with
the effect the run would have seen with 80% power where it recorded one; "not tested" where the
mechanism was switched off; and "cannot be judged: <reason>" where it is undefined. An undefined number reads ``undefined``, never "nan".
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping
from typing import Any

from goalrm_core.evaluation.auroc import delta_of
from goalrm_core.evaluation import verdicts
from goalrm_core.evaluation.tables import REFERENCE_SCORERS
from goalrm_core.study import formatting as fmt
from goalrm_core.study.rms import HEADLINE_SETS, ID_BENCH, RMS
from goalrm_core.study import plots
REFERENCES = tuple(REFERENCE_SCORERS)
DETAIL = "seed 0 (detail)"
BUDGET_TOLERANCE = 0.10  # token budgets further apart than this are named as a mismatch


def _get(tree: Any, *keys, default=None):
    for key in keys:
        if not isinstance(tree, Mapping) or key not in tree:
            return default
        tree = tree[key]
    return tree


def schema_version(metrics: Mapping) -> int:
    """``metrics.json``'s schema: its ``schema_version``, 1 when absent (or unreadable)."""
    try:
        return int(metrics.get("schema_version", 1))
    except (TypeError, ValueError):
        return 1


def _benches(ev: Mapping) -> list[str]:
    names = [b for b, v in (_get(ev, "delta_auroc", default={}) or _get(ev, RMS[0], default={}) or {}).items()
             if isinstance(v, Mapping)]
    return fmt.order_benchmarks(names)


def _auroc(ev: Mapping, scorer: str, bench: str) -> tuple[Any, Any, Any]:
    row = _get(ev, scorer, bench, default={})
    row = row if isinstance(row, Mapping) else {}
    return row.get("auroc"), row.get("auroc_ci_low"), row.get("auroc_ci_high")


def _auroc_text(ev: Mapping, scorer: str, bench: str) -> str:
    return fmt.ci(*_auroc(ev, scorer, bench), reason=fmt.reason_of(_get(ev, scorer, bench), "auroc"))


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _table(df) -> str:
    return df.to_html(index=False, escape=True, border=0, na_rep=fmt.UNDEFINED)


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
        return f"cannot be judged: {fmt.reason_of(s) or (verdicts.reason(s) if isinstance(s, Mapping) and s.get('holds') is not None else 'undefined')}"
    if state == verdicts.NOT_TESTED:
        return f"not tested: {verdicts.reason(s, switched_off)}"
    return verdicts.words(s, holds=shown, reversed_=f"reversed: {opposite}" if opposite else "reversed", not_shown=not_shown,
                          scale=scale, unit=unit)


def _figure(s: Any, what: str, **kw) -> str:
    """``"+0.03 [-0.01, +0.07], positive in 4 of 5 seeds"``; an undefined mean is plain ``undefined``
    (the verdict that follows, :func:`judge`, says why)."""
    s = s if isinstance(s, Mapping) else {}
    seeds = _seeds(s, what)
    return fmt.across({k: v for k, v in s.items() if k != "reason"}, **kw) + (f", {seeds}" if seeds else "")


def gate_state(gate: Mapping) -> tuple[str, str | None]:
    """(``"passed"`` | ``"failed"`` | ``"undefined"``, reason): the state a gate records (schema 2), or
    the one its seed-0 AUROCs support (schema 1), where an undefined AUROC (one class: null or NaN)
    makes it ``undefined``, never failed."""
    if "state" in gate:
        state = gate.get("state") if gate.get("state") in ("passed", "failed", "undefined") else "undefined"
        margins = gate.get("margin_over_length") or {}
        if state == "undefined":
            reason = gate.get("reason") or "; ".join(
                f"{rm}: {fmt.reason_of(m) or 'undefined'}" for rm, m in margins.items()
                if not isinstance(m, Mapping) or m.get("holds") is None) or "no state recorded"
            return state, reason
        missing = [rm for rm, m in margins.items() if not isinstance(m, Mapping) or m.get("holds") is None]
        if state == "passed" and missing:  # a pass needs every margin judged
            return "undefined", "; ".join(f"{rm}: {fmt.reason_of(margins.get(rm)) or 'undefined'}" for rm in missing)
        return state, gate.get("reason")
    entries = {("length only" if k == "length_only" else k): v for k, v in gate.items()
               if k not in ("benchmark", "passed", "reason")}
    undefined = [f"{name} AUROC {fmt.undefined(fmt.reason_of(v, 'auroc'))}" for name, v in entries.items()
                 if not isinstance(v, Mapping) or fmt.is_undefined(v.get("auroc"))]
    if undefined or gate.get("passed") is None:
        return "undefined", gate.get("reason") or "; ".join(undefined) or "no verdict recorded"
    return ("passed" if gate["passed"] else "failed"), None


# ------------------------------------------------------------------------------------- summary


def _n_seeds(primary: Mapping) -> int | None:
    seeds = primary.get("rm_seeds")
    return fmt.count(primary.get("n_seeds")) or (len(seeds) if isinstance(seeds, list) and seeds else None)


def _primary(metrics: Mapping) -> Mapping:
    p = _get(metrics, "evaluation", "primary")
    return p if isinstance(p, Mapping) else {}


def summary(metrics: Mapping) -> str:
    """3-5 sentences from the numbers: what was trained, how the seed-0 RMs rank generations against
    the free scorers and (schema 1) whether the goal-conditioned RM beat the baseline (paired Δ with
    CI). With schema 2 the verdicts are the primary findings across seeds (:func:`primary_findings`)."""
    ev, training, data = metrics.get("evaluation", {}), metrics.get("training", {}), metrics.get("data", {})
    ev = ev if isinstance(ev, Mapping) else {}
    primary = _primary(metrics)
    if not all(rm in ev for rm in RMS) and not primary:
        return ""
    e = html.escape
    sentences = []
    task = _get(data, "task", "name", default="ToyMath")
    seeds = {int(v) for v in (_get(training, rm, "n_seeds") for rm in RMS) if not fmt.is_undefined(v)}
    steps = {int(v) for v in (_get(training, rm, "steps") for rm in RMS) if not fmt.is_undefined(v)}
    pairs = _get(data, "preference", "n_train")
    trained = "Two reward models, a baseline (pairwise loss) and a goal-conditioned one (pairwise + contrastive term),"
    detail = []
    if seeds:
        detail.append(f"{'/'.join(map(str, sorted(seeds)))} seed{'s' if max(seeds) > 1 else ''} each")
    if steps:
        detail.append(f"{'/'.join(map(str, sorted(steps)))} steps")
    source = _get(metrics, "provenance", "profile", "parameters", "pair_source")
    whose = (f"from a second generator, not the evaluated policy (reference {task} solutions against one-fact slips)"
             if source == "slips" else f"of the policy's own {task} solutions")
    on = f" on {int(pairs):,} preference pairs {whose}" if not fmt.is_undefined(pairs) else f" on {task}"
    acc = {rm: _get(training, rm, "eval_accuracy") for rm in RMS}
    if all(isinstance(_get(training, rm), Mapping) and "eval_accuracy" in training[rm] for rm in RMS):
        detail.append(f"held-out pairwise accuracy {fmt.pct(acc['baseline'])} and {fmt.pct(acc['goal-conditioned'])}")
    sentences.append(f"{trained} were trained{on}" + (f" ({'; '.join(detail)})." if detail else "."))
    benches = _benches(ev)
    bench = ID_BENCH if ID_BENCH in benches else (benches or [None])[0]
    if bench and all(rm in ev for rm in RMS):
        which = HEADLINE_SETS.get(ev.get("headline"), "the headline generations")
        base, goal = (_auroc_text(ev, rm, bench) for rm in RMS)
        text = (f"On {bench} ({which}), the seed-0 baseline RM ranks correct above incorrect solutions with AUROC "
                f"{base} and the goal-conditioned RM with {goal}")
        if "length only" in ev:
            text += f"; response length alone scores {_auroc_text(ev, 'length only', bench)}"
        sentences.append(text + ".")
        logprob = _auroc(ev, "policy mean logprob", bench)[0]
        best_rm = max((v for v in (_auroc(ev, rm, bench)[0] for rm in RMS) if not fmt.is_undefined(v)), default=None)
        if not fmt.is_undefined(logprob) and best_rm is not None and logprob > best_rm:
            sentences.append(f"The policy's own mean log-prob does better than either RM ({_auroc_text(ev, 'policy mean logprob', bench)}): "
                             "its slips are its own unlikely tokens, so on this task it is a ceiling, not a competitor.")
    deltas = {b: d for b, d in (ev.get("delta_auroc") or {}).items() if isinstance(d, Mapping)}
    if primary:
        n = _n_seeds(primary)
        sentences.append(f"The verdicts are the primary findings below, each over the {n or 'recorded'} RM seeds; "
                         "the seed-0 tables further down are detail.")
    elif deltas:
        sentences.append(_seed0_delta_sentence(deltas))
    return "<p>" + " ".join(e(s) for s in sentences) + "</p>"


def _seed0_delta_sentence(deltas: Mapping[str, Mapping]) -> str:
    order = fmt.order_benchmarks(deltas)
    judged = [b for b in order if not (fmt.is_undefined(deltas[b].get("ci_low")) or fmt.is_undefined(deltas[b].get("ci_high")))]
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
    parts = []
    if better:
        parts.append(f"better on {', '.join(better)}")
    if worse:
        parts.append(f"worse on {', '.join(worse)}")
    rest = len(judged) - len(better) - len(worse)
    verdict = (f"the CI excludes 0 on {len(better) + len(worse)} of {len(order)} benchmarks: the goal-conditioned RM is "
               f"{' and '.join(parts)}" + (f", indistinguishable on the other {rest}" if rest else ""))
    if unjudged:
        verdict += f"; cannot be judged on {', '.join(unjudged)} (interval undefined)"
    return head + verdict + "."


# ---------------------------------------------------------------------- primary findings (schema 2)


def _gate_sentence(primary: Mapping) -> str:
    gate = primary.get("gate")
    if not isinstance(gate, Mapping):
        return ""
    bench = primary.get("benchmark", ID_BENCH)
    state, reason = gate_state(gate)
    margins = {rm: m for rm, m in (gate.get("margin_over_length") or {}).items()}
    per_rm = "; ".join(f"{rm} {_figure(m, 'above 0')}" for rm, m in margins.items())
    failing = [rm for rm, m in margins.items() if isinstance(m, Mapping) and m.get("holds") is False]
    verdict = {"passed": "passed: both reward models beat response length",
               "failed": "failed: not shown that every reward model beats response length"
                         + (f" (not shown for {', '.join(failing)})" if failing else ""),
               "undefined": f"cannot be judged: {reason}"}[state]
    sentence = (f"Length gate on {bench}, AUROC of the RM minus AUROC of response length"
                + (f": {per_rm}" if per_rm else "") + f". Gate {verdict}.")
    second = gate.get("well_formed")
    if isinstance(second, Mapping):
        state, reason = gate_state(second)
        margin = fmt.num(second.get("required_margin"), 2)
        per_rm = "; ".join(f"{rm} {_figure(m, f'above {margin}')}" for rm, m in (second.get("margin_over_length") or {}).items())
        sentence += (f" Its second condition, on correct against well-formed incorrect solutions only (every line "
                     f"'a op b = c', then '#answer': the errors a scorer must check the arithmetic to see)"
                     + (f": {per_rm}" if per_rm else "") + ". "
                     + {"passed": f"Holds: both reward models beat length there by more than {margin}; they verify.",
                        "failed": f"Does not hold: not shown that every reward model beats length there by more than {margin}; "
                                  "what the reward models detect is mostly malformed output.",
                        "undefined": f"Cannot be judged: {reason}."}[state])
    return sentence


def _delta_sentence(primary: Mapping, n_exploratory: int = 0) -> str:
    d = primary.get("delta_auroc")
    if not isinstance(d, Mapping):
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
    for key, where in (("first_error_delta_q", "the first error"),
                       ("first_error_delta_q_well_formed", "the first error of well-formed incorrect solutions")):
        out += _first_error_sentences_of(primary.get(key) or {}, where)
    return out


def _first_error_sentences_of(figures: Mapping, where: str) -> list[str]:
    out = []
    for rm, s in figures.items():
        if not isinstance(s, Mapping):
            continue
        seeds = _seeds(s, "falls")
        out.append(f"Q of the {rm} RM at {where} (mean Q after minus before): " + (f"Q {seeds}: " if seeds else "")
                   + f"Δ {fmt.across({k: v for k, v in s.items() if k != 'reason'})}: "
                   + judge(s, "Q falls at the first error", "not shown that Q falls",
                           opposite="Q rises (the interval lies wholly above 0)") + ".")
    return out


def _filter_sentences(primary: Mapping) -> list[str]:
    out = []
    bench = primary.get("benchmark", ID_BENCH)
    for rm, f in (primary.get("filter") or {}).items():
        if not isinstance(f, Mapping):
            continue
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
    p = _get(metrics, "decoding", "primary", "pruning")
    if not isinstance(p, Mapping):
        return ""
    bench = p.get("benchmark", ID_BENCH)
    seeds = p.get("rm_seeds") if isinstance(p.get("rm_seeds"), list) else []
    n = len(seeds) or fmt.count(_get(p, "tokens_ratio", "n_seeds")) or 0
    why_off = verdicts.pruning_switched_off(p)  # every seed's tuning chose pruning off: nothing was tested
    p = {**p, **{k: verdicts.mark_not_tested(p.get(k), why_off) for k in ("tokens_ratio", "accuracy_change") if k in p}}
    text = (f"Online pruning by Q on {bench} (threshold chosen per seed): tokens generated relative to no pruning "
            f"{_figure(p.get('tokens_ratio'), 'below 1', signed=False)}: "
            + judge(p.get("tokens_ratio"), "pruning saves tokens", "a saving is not shown", opposite="pruning adds tokens")
            + f"; accuracy change {_figure(p.get('accuracy_change'), 'lower', digits=1, scale=100, suffix=' points')}: "
            + judge(p.get("accuracy_change"), "pruning costs accuracy", "a cost is not shown",
                    opposite="accuracy rises (the interval lies wholly above 0)", scale=100, unit=" points"))
    wall = verdicts.mark_not_tested(_get(metrics, "timings", "decoding", "pruning_across_seeds", "wall_ratio"), why_off)
    if isinstance(wall, Mapping):
        threads = fmt.count(_get(metrics, "decoding", "threads"))
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


def _interval_covers_questions(primary: Mapping) -> bool:
    """Whether the run's primary intervals include question variance (newer runs record it per figure)."""
    d = primary.get("delta_auroc") if isinstance(primary, Mapping) else None
    figures = [d] + list((_get(primary, "gate", "margin_over_length") or {}).values())
    return any(isinstance(f, Mapping) and f.get("interval") == "seeds and questions" for f in figures)


def primary_findings(metrics: Mapping) -> str:
    """Schema 2: each primary finding in one sentence generated from the across-seeds numbers (mean,
    95% t-interval, in k of n seeds), a conclusion only where it holds; empty for schema 1."""
    primary = _primary(metrics)
    n_exploratory = len([d for d in (_get(metrics, "evaluation", "exploratory", "delta_auroc") or {}).values()
                         if isinstance(d, Mapping)])
    items = [_gate_sentence(primary), _delta_sentence(primary, n_exploratory), *_first_error_sentences(primary),
             *_filter_sentences(primary), _pruning_sentence(metrics)] if primary else [_pruning_sentence(metrics)]
    items = [s for s in items if s]
    if not items:
        return ""
    n = _n_seeds(primary) or fmt.count(_get(metrics, "decoding", "primary", "pruning", "tokens_ratio", "n_seeds"))
    which = HEADLINE_SETS.get(primary.get("headline"), "")
    scope = verdicts.policy_scope(primary.get("policy_seeds") or [_get(metrics, "provenance", "profile", "parameters", "seed")])
    over_questions = _interval_covers_questions(primary)
    head = ("<p>Computed once per RM seed (" + (f"{n} seeds" if n else "seeds")
            + (f"; the reward comparisons on {html.escape(which)}" if which else "")
            + f"), all {html.escape(scope)}: the mean across seeds with its 95% "
            + ("interval over RM seeds and questions (a two-level bootstrap)" if over_questions
               else "t-interval over RM seeds (the questions held fixed)")
            + ", and in how many seeds the figure points the expected way. A conclusion holds only where the "
              "interval lies wholly on the expected side, and reads \"reversed\" where it lies wholly on the other; "
              "\"not tested\" where the mechanism was switched off.</p>")
    return head + "<ul>\n" + "\n".join(f"<li>{html.escape(s)}</li>" for s in items) + "\n</ul>"


def exploratory_section(metrics: Mapping) -> str:
    """The exploratory benchmarks (schema 2): goal-conditioned − baseline AUROC across seeds on every
    benchmark other than the primary one, with Holm-corrected p-values over those k comparisons."""
    import pandas as pd

    ex = _get(metrics, "evaluation", "exploratory")
    deltas = {b: d for b, d in ((_get(ex, "delta_auroc") or {}).items()) if isinstance(d, Mapping)}
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
    note = _get(ex, "note")
    return (f"<p>{html.escape(sentence)}</p>" + (f"<p class=\"meta\">{html.escape(str(note))}</p>" if isinstance(note, str) and note else "")
            + _table(pd.DataFrame(rows)))


# ------------------------------------------------------------------------------------- figures


def auroc_frame(ev: Mapping):
    import pandas as pd

    rows = []
    for scorer in [*RMS, *REFERENCES]:
        for bench in _benches(ev):
            auroc, low, high = _auroc(ev, scorer, bench)
            if not fmt.is_undefined(auroc):
                rows.append({"scorer": scorer, "benchmark": bench, "auroc": auroc,
                             "ci_low": auroc if fmt.is_undefined(low) else low, "ci_high": auroc if fmt.is_undefined(high) else high})
    return pd.DataFrame(rows)


def _undefined_aurocs(ev: Mapping) -> str:
    missing = []
    for scorer in [*RMS, *REFERENCES]:
        for bench in _benches(ev):
            if isinstance(_get(ev, scorer, bench), Mapping) and fmt.is_undefined(_auroc(ev, scorer, bench)[0]):
                reason = fmt.reason_of(_get(ev, scorer, bench), "auroc")
                missing.append(f"{scorer} on {bench}" + (f" ({reason})" if reason else ""))
    return f"<p class=\"meta\">Not drawn, AUROC undefined: {html.escape('; '.join(missing))}.</p>" if missing else ""


def auroc_figure(metrics: Mapping) -> str:
    ev = metrics.get("evaluation", {})
    if not isinstance(ev, Mapping):
        return ""
    frame = auroc_frame(ev)
    undefined = _undefined_aurocs(ev)
    if frame.empty:
        return undefined
    which = HEADLINE_SETS.get(ev.get("headline"), "headline generations")
    return ("<p>How well each scorer ranks correct above incorrect solutions (AUROC, 0.5 = chance) on every "
            f"benchmark, {html.escape(which)}, seed-0 RMs; bars are 95% bootstrap CIs over questions. The free "
            "reference scorers stand beside the RMs: a reward model is only interesting where it beats response "
            "length.</p>" + _png(plots.auroc_bars(frame, title="AUROC per benchmark (95% CI)")) + undefined)


def delta_table(metrics: Mapping) -> str:
    import pandas as pd

    deltas = _get(metrics, "evaluation", "delta_auroc", default={})
    if not isinstance(deltas, Mapping) or not deltas:
        return ""
    ev = metrics["evaluation"]
    from goalrm_core.evaluation.stats import holm

    order = [b for b in fmt.order_benchmarks(deltas) if isinstance(deltas.get(b), Mapping)]
    if not order:
        return ""
    raw = [deltas[b].get("p_value") for b in order]
    adjusted = holm([float("nan") if fmt.is_undefined(p) else float(p) for p in raw])
    k = sum(not fmt.is_undefined(p) for p in raw)
    rows = [{"benchmark": b, "baseline": _auroc_text(ev, "baseline", b),
             "goal-conditioned": _auroc_text(ev, "goal-conditioned", b),
             "Δ AUROC [95% CI]": fmt.signed_ci(delta_of(d), d.get("ci_low"), d.get("ci_high"), reason=fmt.reason_of(d, "delta")),
             "p-value": fmt.p_value(p, reason=fmt.reason_of(d, "p_value")),
             f"p-value, Holm over {k}": fmt.p_value(p_holm)}
            for b, p, p_holm in zip(order, raw, adjusted) if isinstance(d := deltas.get(b), Mapping)]
    low = [(b, p, q) for b, p, q in zip(order, raw, adjusted) if not fmt.is_undefined(p) and p < 0.05]
    if low:
        note = ("Uncorrected p below 0.05 on " + ", ".join(f"{b} (p = {fmt.p_value(p)}, Holm {fmt.p_value(q)})" for b, p, q in low)
                + f": one of {k} comparisons on one seed, so " + ("it does not survive the correction." if all(q >= 0.05 for _, _, q in low)
                                                                  else "read the Holm-corrected value."))
    else:
        note = f"No uncorrected p below 0.05 among the {k} comparisons."
    return ("<p>The paired difference on the same generations (goal-conditioned − baseline), seed-0 RMs, bootstrapped "
            f"over questions; a CI that contains 0 means no detectable difference at this sample size. The {k} benchmarks are "
            f"{k} comparisons: the last column corrects their p-values for that (Holm). {html.escape(note)} The verdicts are "
            "the across-seed findings above.</p>" + _table(pd.DataFrame(rows)))


def first_error_section(metrics: Mapping) -> str:
    """Q along the incorrect solutions around their first error, a line per RM seed
    (``evaluation.first_error_profile``, notebook 04); where the run did not record it, what is
    missing and each seed's Δ Q instead."""
    profile = _get(metrics, "evaluation", "first_error_profile")
    primary = _primary(metrics)
    deltas = {rm: s.get("per_seed") for rm, s in (primary.get("first_error_delta_q") or {}).items() if isinstance(s, Mapping)}
    seeds = primary.get("rm_seeds") if isinstance(primary.get("rm_seeds"), list) else []
    def seed(s) -> str:
        return f"seed {fmt.undefined() if fmt.count(s) is None else fmt.count(s)}"

    per_seed = "; ".join(f"{rm}: " + ", ".join(f"{seed(s)} {fmt.num(v, 2, signed=True)}" for s, v in zip(seeds or range(len(vals)), vals))
                         for rm, vals in deltas.items() if isinstance(vals, list))
    if isinstance(profile, Mapping):
        if not plots.first_error_profile_frame(profile).empty:
            bench = profile.get("benchmark", ID_BENCH)
            return (f"<p>The mean Q (cosine to the goal state) of the incorrect {html.escape(str(bench))} solutions at each token "
                    f"from {profile.get('window', '')} before to {profile.get('window', '')} after their first wrong token (0), one "
                    "line per RM seed: a goal state that means \"on track\" makes Q drop at 0. The primary finding above is "
                    "the mean after minus before, per seed"
                    + (f" ({html.escape(per_seed)})" if per_seed else "") + ".</p>"
                    + _png(plots.first_error_profiles(profile, title=f"Q around the first error (0 = first wrong token), {bench}, every RM seed")))
    if not deltas:
        return ""
    return ("<p>Not drawn: this run's metrics.json has no per-seed Q profile around the first error "
            "(<code>evaluation.first_error_profile</code>, recorded by notebook 04 from this version on; regenerate the report "
            "to draw it). Each seed's mean Q after minus before the first error: " + html.escape(per_seed) + ".</p>")


def savings_text(metrics: Mapping) -> str:
    """The savings in numbers, seed-0 goal-conditioned RM, one row per benchmark in two tables:
    Q-filtered voting (tokens saved, majority-vote accuracy before and after with Wilson intervals
    over the questions) and online pruning (its threshold, "no pruning" where tuning chose it, tokens
    saved, accuracy, wall time); then where pruning was off and what it cost in wall time."""
    import pandas as pd

    ev, dec = metrics.get("evaluation", {}), metrics.get("decoding", {})
    params = _get(metrics, "provenance", "profile", "parameters", default={}) or {}
    filtered, pruned, off, slower = [], [], [], []
    for bench in _benches(ev if isinstance(ev, Mapping) else {}):
        f = _get(ev, "goal-conditioned", bench, "filter")
        if isinstance(f, Mapping):
            n_votes = _get(metrics, "data", "benchmarks", bench, "n_questions")
            filtered.append({"benchmark": bench, "Q threshold": fmt.num(f.get("threshold")),
                             "tokens saved": fmt.pct(f.get("tokens_saved_pct"), already_percent=True),
                             "accuracy, all samples [95% CI]": fmt.rate_ci(f.get("accuracy_unfiltered"), n_votes),
                             "accuracy, filtered [95% CI]": fmt.rate_ci(f.get("accuracy"), n_votes)})
        p = _get(dec, "pruning", bench)
        if isinstance(p, Mapping):
            n_decoded = _get(p, "n_questions") or params.get("decode_questions")
            threshold = p.get("threshold")
            is_off = not fmt.is_undefined(threshold) and threshold <= -1
            if is_off:
                off.append(bench)
            row = {"benchmark": bench, "Q threshold": "no pruning (≤ −1)" if is_off else fmt.num(threshold),
                   "tokens saved": fmt.pct(p.get("tokens_saved_pct"), already_percent=True),
                   "accuracy, unpruned [95% CI]": fmt.rate_ci(p.get("accuracy_unpruned"), n_decoded),
                   "accuracy, pruned [95% CI]": fmt.rate_ci(p.get("accuracy"), n_decoded)}
            wall = _get(metrics, "timings", "decoding", "pruning", bench)
            if isinstance(wall, Mapping) and _defined(wall.get("wall_s"), wall.get("wall_s_unpruned")):
                row["wall time, unpruned"] = f"{wall['wall_s_unpruned']:.2f} s"
                row["wall time, pruned"] = f"{wall['wall_s']:.2f} s"
                if not is_off and wall["wall_s"] > wall["wall_s_unpruned"]:
                    slower.append(f"{bench} {wall['wall_s']:.2f} s against {wall['wall_s_unpruned']:.2f} s")
            pruned.append(row)
    if not filtered and not pruned:
        return ""
    said = []
    if off:
        said.append(f"Tuning on validation questions chose no pruning on {len(off)} of {len(pruned)} benchmarks ({', '.join(off)}): "
                    "there no sample is stopped and no RM runs, so the pruned and unpruned runs generate the same tokens "
                    "and any wall-time difference is timing noise.")
    if slower:
        said.append("Where pruning ran, it took longer than sampling without it (the RM, a second model of the policy's size, "
                    "reads every sampled token, and a batch runs until its longest sample stops): "
                    + "; ".join(slower) + ".")
    elif len(pruned) > len(off):
        said.append("Where pruning ran, it was not slower than sampling without it.")
    out = ("<p>The same savings in numbers, seed-0 goal-conditioned RM, accuracy with 95% Wilson intervals over the "
           "questions voted on; the across-seed intervals for toy-id are the primary findings above.</p>")
    if filtered:
        out += "<p>Q-filtered majority voting (samples of notebook 04):</p>" + _table(pd.DataFrame(filtered))
    if pruned:
        out += (f"<p>Online pruning (notebook 05). {html.escape(' '.join(said))}</p>" + _table(pd.DataFrame(pruned)))
    return out


def _defined(*values) -> bool:
    return not any(fmt.is_undefined(v) for v in values)


def savings_figure(metrics: Mapping) -> str:
    import pandas as pd

    ev, dec = metrics.get("evaluation", {}), metrics.get("decoding", {})
    rows = []
    for bench in _benches(ev if isinstance(ev, Mapping) else {}):
        f = _get(ev, "goal-conditioned", bench, "filter")
        if isinstance(f, Mapping) and _defined(f.get("accuracy"), f.get("accuracy_unfiltered"), f.get("tokens_saved_pct")):
            rows.append({"method": "Q-filtered voting", "benchmark": bench, "tokens": 1.0, "accuracy": f["accuracy_unfiltered"], "end": False})
            rows.append({"method": "Q-filtered voting", "benchmark": bench, "tokens": 1 - f["tokens_saved_pct"] / 100, "accuracy": f["accuracy"], "end": True})
        p = _get(dec, "pruning", bench)
        if (isinstance(p, Mapping) and _defined(p.get("tokens_generated"), p.get("tokens_generated_unpruned"), p.get("accuracy"),
                                                p.get("accuracy_unpruned")) and p["tokens_generated_unpruned"]):
            rows.append({"method": "online pruning", "benchmark": bench, "tokens": 1.0, "accuracy": p["accuracy_unpruned"], "end": False})
            rows.append({"method": "online pruning", "benchmark": bench, "tokens": p["tokens_generated"] / p["tokens_generated_unpruned"],
                         "accuracy": p["accuracy"], "end": True})
    if not rows:
        return ""
    return ("<p>What the goal-conditioned RM's Q-values save, seed-0 RMs: majority-vote accuracy against the tokens "
            "generated, as a share of every sample in full (x = 1; the axis spans the points). Each line runs from the "
            "unfiltered vote (open circle) to the filtered or pruned one (dot); left is cheaper, up is more accurate.</p>"
            + _png(plots.savings_panels(pd.DataFrame(rows))) + savings_text(metrics))


# decoding methods as notebook 05 names them (metrics.json keeps them as snake_case keys)
METHOD_NAMES = {"greedy": "greedy", "majority_vote": "majority vote", "q_guided_beam_search": "Q-guided beam search",
                "best_of_n_baseline_reward": "best-of-N baseline reward",
                "best_of_n_goal_conditioned_reward": "best-of-N goal-conditioned reward", "best_of_n_final_q": "best-of-N final Q"}


def method_name(key: str) -> str:
    """A decoding method's name for a reader: :data:`METHOD_NAMES`, else the key with spaces."""
    return METHOD_NAMES.get(key, key.replace("_", " "))


def budget_mismatches(methods: Mapping[str, Mapping]) -> list[str]:
    """One sentence per benchmark whose matched-budget methods (all but greedy) generate token counts
    more than 10% apart; greedy is the one-sample reference, outside the budget."""
    out = []
    for bench in fmt.order_benchmarks(methods):
        tokens = {name: r["tokens"] for name, r in (methods[bench] or {}).items()
                  if name != "greedy" and isinstance(r, Mapping) and _defined(r.get("tokens"))}
        if len(tokens) < 2:
            continue
        low, high = min(tokens, key=tokens.get), max(tokens, key=tokens.get)
        if tokens[low] > 0 and tokens[high] > (1 + BUDGET_TOLERANCE) * tokens[low]:
            out.append(f"Budget mismatch on {bench}: {method_name(low)} generates {tokens[low]:.0f} tokens per question, "
                       f"{method_name(high)} {tokens[high]:.0f} ({100 * (tokens[high] / tokens[low] - 1):.0f}% more), "
                       "so the budgets there are not matched within 10%.")
    return out


def _decode_questions(metrics: Mapping, row: Mapping) -> int | None:
    """The questions a decoding accuracy is over: the row's own count, else the profile's ``decode_questions``."""
    return fmt.count(row.get("n_questions")) or fmt.count(_get(metrics, "provenance", "profile", "parameters", "decode_questions"))


def decoding_reading(metrics: Mapping, methods: Mapping[str, Mapping]) -> str:
    """What the decoding table shows, from its numbers: Q-guided beam search against greedy decoding
    and against the best other method at its budget, each with whether their Wilson intervals overlap."""
    beam_key, greedy_key = "q_guided_beam_search", "greedy"
    said, level = [], 0
    benches = [b for b in fmt.order_benchmarks(methods) if isinstance(methods[b].get(beam_key), Mapping)]
    for bench in benches:
        m = methods[bench]
        beam, greedy = m[beam_key], m.get(greedy_key)
        if isinstance(greedy, Mapping) and _defined(greedy.get("accuracy"), beam.get("accuracy")):
            level += greedy["accuracy"] >= beam["accuracy"]
    greedy_tokens = [m[greedy_key]["tokens"] for m in methods.values() if isinstance(m.get(greedy_key), Mapping) and _defined(m[greedy_key].get("tokens"))]
    beam_tokens = [methods[b][beam_key]["tokens"] for b in benches if _defined(methods[b][beam_key].get("tokens"))]
    if benches and greedy_tokens and beam_tokens:
        said.append(f"Greedy decoding ({min(greedy_tokens):.0f}–{max(greedy_tokens):.0f} tokens per question) is level with or "
                    f"above Q-guided beam search ({min(beam_tokens):.0f}–{max(beam_tokens):.0f} tokens) on {level} of {len(benches)} "
                    "benchmarks.")
    n = max((_decode_questions(metrics, r) or 0 for m in methods.values() for r in m.values() if isinstance(r, Mapping)), default=0)
    if n:
        said.append(f"Each accuracy is over {n} questions (one question is {100 / n:.1f} points), so its 95% interval is "
                    "wide: a difference between two methods whose intervals overlap is not shown by this run.")
    return " ".join(said)


def decoding_table(metrics: Mapping) -> str:
    import pandas as pd

    methods = _get(metrics, "decoding", "methods", default={})
    if not isinstance(methods, Mapping) or not methods:
        return ""
    methods = {b: m for b, m in methods.items() if isinstance(m, Mapping)}
    benches = fmt.order_benchmarks(methods)
    names = list(dict.fromkeys(m for b in benches for m in methods[b]))
    rows = []
    for name in names:
        row = {"method": method_name(name)}
        for b in benches:
            r = methods[b].get(name)
            row[b] = ("not run" if not isinstance(r, Mapping)
                      else fmt.accuracy_cell(r.get("accuracy"), _decode_questions(metrics, r), r.get("tokens"), r.get("n")))
        rows.append(row)
    mismatch = budget_mismatches(methods)
    return ("<p>Q-guided beam search against greedy decoding, majority voting and best-of-N at the smallest N whose "
            "token budget reaches the beam search's, seed-0 RMs, one run: accuracy with its 95% Wilson interval over the "
            "questions (generated tokens per question, N samples per question). "
            + html.escape(decoding_reading(metrics, methods)) + "</p>"
            + _table(pd.DataFrame(rows))
            + ("<p>" + " ".join(html.escape(s) for s in mismatch) + "</p>" if mismatch else ""))


def steering_section(metrics: Mapping) -> str:
    """Steering toward a style goal, seed 0: one run, so detail, not a conclusion."""
    s = _get(metrics, "decoding", "steering")
    if not isinstance(s, Mapping) or not s:
        return ""
    n = fmt.count(s.get("n_questions"))
    text = (f"Q-guided decoding of the steering policy toward a style goal, seed-0 RM"
            + (f", {n} questions" if n else "") + " (95% Wilson intervals): the style appears in "
            f"{fmt.rate_ci(s.get('attribute_rate'), n)} of steered solutions against {fmt.rate_ci(s.get('attribute_rate_unguided'), n)} unguided")
    if "attribute_rate_correctness_goal" in s:
        text += f" and {fmt.rate_ci(s.get('attribute_rate_correctness_goal'), n)} when the same search steers toward the correctness goal"
    text += (f"; accuracy {fmt.rate_ci(s.get('accuracy'), n)} steered, {fmt.rate_ci(s.get('accuracy_unguided'), n)} unguided")
    if "accuracy_correctness_goal" in s:
        text += f", {fmt.rate_ci(s.get('accuracy_correctness_goal'), n)} toward the correctness goal"
    text += "."
    if "goal_separation_auroc" in s:
        text += f" The style goal's cosine separates styled from plain solutions with AUROC {fmt.num(s.get('goal_separation_auroc'))}."
    text += " One seed and one run: a description, not a finding."
    return f"<p>{html.escape(text)}</p>"


def result_sections(metrics: Mapping) -> str:
    """Everything between the gate and the stage table."""
    detail = f" — {DETAIL}"
    parts = [("Summary", summary(metrics)),
             ("Primary findings across seeds", primary_findings(metrics)),
             ("Exploratory benchmarks", exploratory_section(metrics)),
             ("Q around the first error, every seed", first_error_section(metrics)),
             ("Reward models against the free scorers" + detail, auroc_figure(metrics)),
             ("Goal-conditioned − baseline" + detail, delta_table(metrics)),
             ("Tokens saved by Q" + detail, savings_figure(metrics)),
             ("Decoding at matched budgets" + detail, decoding_table(metrics)),
             ("Steering" + detail, steering_section(metrics))]
    return "\n".join(f"<h2>{html.escape(title)}</h2>\n{body}" for title, body in parts if body)
