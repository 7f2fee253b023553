"""Every conclusion of a report, worded once.

A run's results (``metrics.json``, read through :mod:`~goalrm_core.report.metrics_view`) become
conclusion records, :class:`Conclusion`: the claim's id and text, the RM it is about, the figure (an
across-seeds summary), its interval, its minimum detectable effect, its two-sided verdict
(:mod:`goalrm_core.evaluation.verdicts`) and the sentence that states it. The verdict and the sentence of
each conclusion are worded here and nowhere else: the length gate's (:func:`gate_words`,
:func:`gate_sentence`, :func:`design_scope`), the reward comparison's, Q's at the first error, the
filter's and pruning's (:func:`sentences`). The layouts only arrange these records: the front page
(``findings``, ``index_page``: the gate notice, the primary findings, the reproduction section), the
side-by-side table of the two designs (``regimes``), the README block (``readme``), the reruns
(``reproduction``) and notebook 04 (:func:`reading`, through ``study.evaluation.primary_reading``).

>>> s = {"mean": 0.05, "ci_low": 0.01, "ci_high": 0.09, "k": 5, "n_seeds": 5, "holds": True, "verdict": "holds"}
>>> [c.claim_id for c in conclusions({"evaluation": {"primary": {"delta_auroc": s}}})]
['delta_auroc.toy-id']
>>> c = conclusions({"evaluation": {"primary": {"delta_auroc": s}}})[0]
>>> c.interval, c.verdict, c.sentence[:46]
('+0.05 [+0.01, +0.09]', 'holds', 'Reward comparison on toy-id (primary): goal-co')
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from goalrm_core.evaluation import verdicts
from goalrm_core.evaluation.auroc import delta_of
from goalrm_core.report.formats import across
from goalrm_core.report.metrics_view import Metrics, entries, mapping, section, value
from goalrm_core.study import formatting as fmt
from goalrm_core.study.rms import ID_BENCH


# --------------------------------------------------------------------------- judging across seeds


def seeds_text(s: Mapping, what: str) -> str:
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


def verdict_text(s: Any, full: bool = False, scale: float = 1.0, unit: str = "") -> str:
    """One primary conclusion's two-sided verdict (`evaluation.verdicts`): holds, reversed, not shown,
    not tested, or "cannot be judged" where undefined. ``full``: a "not shown" with the effect the run
    would have seen with 80% power (shown times ``scale``, then ``unit``), a "not tested" or
    "cannot be judged" with its reason."""
    state = verdicts.state(s)
    if state == verdicts.UNDEFINED:
        return f"cannot be judged ({verdicts.reason(s)})" if full else "cannot be judged"
    if full and state in (verdicts.NOT_SHOWN, verdicts.NOT_TESTED):
        return verdicts.words(s, scale=scale, unit=unit)
    return state


def figure_text(s: Any, what: str, **kw) -> str:
    """``"+0.03 [-0.01, +0.07], positive in 4 of 5 seeds"``; an undefined mean is plain ``undefined``
    (the verdict that follows, :func:`judge`, says why)."""
    s = s if isinstance(s, Mapping) else {}
    seeds = seeds_text(s, what)
    return fmt.across({k: v for k, v in s.items() if k != "reason"}, **kw) + (f", {seeds}" if seeds else "")


def over_questions(figures) -> bool:
    """Whether any of ``figures`` (across-seeds summaries) has an interval over questions too (newer runs
    record it per figure)."""
    return any(value(f, "interval") == "seeds and questions" for f in figures)


def scope(metrics: Mapping) -> str:
    """How far the primary conclusions reach: this policy, or the policy seeds they pool."""
    m = Metrics(metrics)
    return verdicts.policy_scope(m.primary.get("policy_seeds") or [m.parameter("seed")])


# ------------------------------------------------------------------------------------ the length gate


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
    scorers = {("length only" if k == "length_only" else k): v for k, v in gate.items()
               if k not in ("benchmark", "passed", "reason")}
    undefined = [f"{name} AUROC {fmt.undefined(fmt.reason_of(v, 'auroc'))}" for name, v in scorers.items()
                 if fmt.is_undefined(value(v, "auroc"))]
    if undefined or gate.get("passed") is None:
        return "undefined", gate.get("reason") or "; ".join(undefined) or "no verdict recorded"
    return ("passed" if gate["passed"] else "failed"), None


#: The gate's verdict in words, by state: the one wording of whether the RMs beat response length. The
#: notice on the front page opens with it, the primary findings and notebook 04 say it after "Gate <state>:".
GATE_VERDICT = {"passed": "both reward models beat the length-only scorer",
                "failed": "not shown that every reward model beats the length-only scorer",
                "undefined": "cannot be judged whether both reward models beat the length-only scorer"}


def well_formed_verdict(state: str, margin: str) -> str:
    """The gate's second condition in words, by state: does every RM beat length on well-formed errors
    by the required ``margin``?"""
    return {"passed": f"on well-formed errors, both reward models beat length by more than {margin}",
            "failed": f"on well-formed errors, not shown that every reward model beats length by more than {margin}",
            "undefined": "cannot be judged whether the reward models detect well-formed errors"}[state]


def well_formed_failure(well_formed: Mapping, gate_state: str) -> str:
    """What the gate's second condition failing means, in words that follow the share of malformed
    errors (``malformed_share``): "mostly malformed output" only where the RMs beat length on all errors
    (``gate_state``, the first condition, passed) and most errors are malformed; where every error is
    well-formed the two conditions read the same generations and differ only by the margin, so nothing
    is said of malformed output; where the share is not recorded, only what failed."""
    share = well_formed.get("malformed_share")
    if not isinstance(share, (int, float)) or not math.isfinite(share):
        return "they are not shown to check the arithmetic."
    if share == 0:
        return ("they are not shown to check the arithmetic by that margin; every incorrect solution here is "
                "well-formed, so this says nothing about malformed output.")
    of = f"{fmt.pct(share, 0)} of the incorrect solutions are malformed"
    if gate_state == "passed" and share >= 0.5:
        return f"what they detect is mostly malformed output, not wrong arithmetic ({of})."
    return f"they are not shown to check the arithmetic ({of})."


def gate_words(gate: Mapping, first_state: str | None = None) -> tuple[str, str, str | None]:
    """(state, head, what it means for the later tables) of the gate, or with ``first_state`` (the first
    condition's state) of its second condition on well-formed errors: the words of the gate's notice."""
    state, reason = gate_state(gate)
    if first_state is not None:
        margin = fmt.num(gate.get("required_margin"), 2)
        failure = well_formed_failure(gate, first_state)
        tail = {"passed": "The RMs check the arithmetic, not only the shape of a solution.",
                "failed": ("The RMs " + failure[len("they "):] if failure.startswith("they ")
                           # "what they detect is mostly malformed output": the RMs beat length on all errors
                           else failure[0].upper() + failure[1:] + " Read every later claim as 'detects malformed output'."),
                "undefined": f"Cannot be judged: {reason}."}[state]
        head = well_formed_verdict(state, margin)
        return state, head[0].upper() + head[1:], tail
    tail = {"passed": "The comparisons below measure what the RMs learned beyond response length.",
            "failed": ("The later tables compare RMs not shown to know more than a character count: they are no evidence "
                       "for or against the method. Read them as a test of the software only."),
            "undefined": (f"The gate cannot be judged: {reason}. Neither passed nor failed: until it can be judged, the later "
                          "tables are no evidence for or against the method.")}[state]
    return state, GATE_VERDICT[state][0].upper() + GATE_VERDICT[state][1:], tail


def gate_sentence(primary: Mapping) -> str:
    """The gate across seeds as one primary finding: each RM's margin over length, the verdict, and its
    second condition on well-formed errors."""
    gate = mapping(primary, "gate")
    if gate is None:
        return ""
    bench = primary.get("benchmark", ID_BENCH)
    state, reason = gate_state(gate)
    margins = gate.get("margin_over_length") or {}
    per_rm = "; ".join(f"{rm} {figure_text(m, 'above 0')}" for rm, m in margins.items())
    failing = [rm for rm, m in margins.items() if value(m, "holds") is False]
    verdict = {"passed": f"passed: {GATE_VERDICT['passed']}",
               "failed": f"failed: {GATE_VERDICT['failed']}" + (f" (not shown for {', '.join(failing)})" if failing else ""),
               "undefined": f"cannot be judged: {reason}"}[state]
    sentence = (f"Length gate on {bench}, AUROC of the RM minus AUROC of response length"
                + (f": {per_rm}" if per_rm else "") + f". Gate {verdict}.")
    second = mapping(gate, "well_formed")
    if second is not None:
        state_first = state
        state, reason = gate_state(second)
        margin = fmt.num(second.get("required_margin"), 2)
        per_rm = "; ".join(f"{rm} {figure_text(m, f'above {margin}')}" for rm, m in (second.get("margin_over_length") or {}).items())
        sentence += (" Its second condition, on correct against well-formed incorrect solutions only (every line "
                     "'a op b = c', then '#answer': the errors a scorer must check the arithmetic to see)"
                     + (f": {per_rm}" if per_rm else "") + ". "
                     + {"passed": f"Holds: both reward models beat length there by more than {margin}; they verify.",
                        "failed": f"Does not hold: not shown that every reward model beats length there by more than {margin}; "
                                  + well_formed_failure(second, state_first),
                        "undefined": f"Cannot be judged: {reason}."}[state])
    return sentence


def design_scope(primary: Mapping) -> str:
    """What the design can and cannot test, from the length gate and its well-formed condition."""
    gate = mapping(primary, "gate")
    if gate is None:
        return "What the design can test is not recorded (no length gate)."
    state, reason = gate_state(gate)
    if state == "undefined":
        return f"Whether the reward models beat response length cannot be judged ({reason}), so neither can what this design tests."
    if state == "failed":
        return ("This design cannot test the question: the reward models are not shown to beat response length, so a "
                "difference between them is a difference between two scorers not shown to be better than length.")
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


# ------------------------------------------------------------------------- the other primary findings


def delta_verdict(d: Any) -> str:
    """The primary reward comparison's verdict in words."""
    return judge(d, "the goal-conditioned RM ranks better (the interval lies above 0)", "a difference is not shown",
                 opposite="the baseline RM ranks better (the interval lies wholly below 0)")


def delta_sentence(primary: Mapping, n_exploratory: int = 0) -> str:
    d = mapping(primary, "delta_auroc")
    if d is None:
        return ""
    bench = primary.get("benchmark", ID_BENCH)
    k = n_exploratory
    comparisons = (f" It is the one reward comparison fixed before the run, so its interval needs no correction; the "
                   f"other {k} benchmark{'s' if k != 1 else ''} are {k} exploratory comparison{'s' if k != 1 else ''}, "
                   "Holm-corrected (below)." if k else " It is the one reward comparison fixed before the run.")
    return (f"Reward comparison on {bench} (primary): goal-conditioned minus baseline AUROC {figure_text(d, 'positive')}: "
            + delta_verdict(d) + "." + comparisons)


def superseded_first_error_sentence(rm: str, s: Mapping) -> str:
    """The first-error figure of a report from before 2026-12-07, named for what it measures."""
    return (f"Q of the {rm} RM after minus before the first error (superseded: the mean after it holds the last "
            f"tokens, always near the goal, so it measures position, not the error): "
            f"Δ {fmt.across({k: v for k, v in s.items() if k != 'reason'})}.")


def first_error_sentence(rm: str, s: Mapping) -> str:
    seeds = seeds_text(s, "falls")
    return (f"Q of the {rm} RM at the first wrong line (its change there minus the change at that line of correct "
            "solutions): " + (f"Q {seeds}: " if seeds else "")
            + f"Δ {fmt.across({k: v for k, v in s.items() if k != 'reason'})}: "
            + judge(s, "Q falls at the first error", "not shown that Q falls",
                    opposite="Q rises (the interval lies wholly above 0)") + ".")


def filter_sentence(rm: str, f: Mapping, bench: str) -> str:
    threshold = f.get("threshold")
    at = f"threshold {fmt.num(threshold, 2)}" if not fmt.is_undefined(threshold) else "its threshold"
    tokens, change = f.get("tokens_saved_pct"), f.get("accuracy_change")
    return (f"Q-filtered majority voting at {at} ({rm} Q, {bench}): tokens saved "
            f"{figure_text(tokens, 'more than 0', digits=1, signed=False, suffix=' %')} ("
            + judge(tokens, "a saving", "a saving is not shown", opposite="the filter adds tokens", unit=" %") + "); accuracy change "
            f"{figure_text(change, 'lower', digits=1, scale=100, suffix=' points')}: "
            + judge(change, "the filter costs accuracy", "a cost is not shown",
                    opposite="accuracy rises (the interval lies wholly above 0)", scale=100, unit=" points") + ".")


def pruning_sentence(metrics: Mapping) -> str:
    p = mapping(metrics, "decoding", "primary", "pruning")
    if p is None:
        return ""
    bench = p.get("benchmark", ID_BENCH)
    seeds = p.get("rm_seeds") if isinstance(p.get("rm_seeds"), list) else []
    n = len(seeds) or fmt.count(value(p, "tokens_ratio", "n_seeds")) or 0
    why_off = verdicts.pruning_switched_off(p)  # every seed's tuning chose pruning off: nothing was tested
    p = {**p, **{k: verdicts.mark_not_tested(p.get(k), why_off) for k in ("tokens_ratio", "accuracy_change") if k in p}}
    text = (f"Online pruning by Q on {bench} (threshold chosen per seed): tokens generated relative to no pruning "
            f"{figure_text(p.get('tokens_ratio'), 'below 1', signed=False)}: "
            + judge(p.get("tokens_ratio"), "pruning saves tokens", "a saving is not shown", opposite="pruning adds tokens")
            + f"; accuracy change {figure_text(p.get('accuracy_change'), 'lower', digits=1, scale=100, suffix=' points')}: "
            + judge(p.get("accuracy_change"), "pruning costs accuracy", "a cost is not shown",
                    opposite="accuracy rises (the interval lies wholly above 0)", scale=100, unit=" points"))
    if (wall := mapping(metrics, "timings", "decoding", "pruning_across_seeds", "wall_ratio")) is not None:
        wall = verdicts.mark_not_tested(wall, why_off)
        threads = fmt.count(value(metrics, "decoding", "threads"))
        text += (f"; wall time relative to no pruning {figure_text(wall, 'below 1', signed=False)}"
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


def _n_exploratory(metrics: Mapping) -> int:
    """How many exploratory reward comparisons the run made (the primary one's sentence counts them)."""
    exploratory = value(metrics, "evaluation", "exploratory", "delta_auroc") or {}
    return sum(isinstance(d, Mapping) for d in exploratory.values())


def sentences(metrics: Mapping) -> list[str]:
    """The primary findings, one sentence each, in reading order: the gate, the reward comparison, Q at
    the first error, the filter, pruning. Empty for schema 1 (except pruning, where recorded)."""
    primary = Metrics(metrics).primary
    n_exploratory = _n_exploratory(metrics)
    if not primary:
        items = [pruning_sentence(metrics)]
    else:
        bench = primary.get("benchmark", ID_BENCH)
        superseded = ([superseded_first_error_sentence(rm, s) for rm, s in entries(primary, "first_error_delta_q", strict=True).items()]
                      if "first_error_did" not in primary else [])  # a report from before 2026-12-07
        items = [gate_sentence(primary), delta_sentence(primary, n_exploratory), *superseded,
                 *(first_error_sentence(rm, s) for rm, s in entries(primary, "first_error_did", strict=True).items()),
                 *(filter_sentence(rm, f, bench) for rm, f in entries(primary, "filter", strict=True).items()),
                 pruning_sentence(metrics)]
    return [s for s in items if s]


def seed0_delta_sentence(deltas: Mapping[str, Mapping]) -> str:
    """Schema 1's reward comparison: goal-conditioned minus baseline AUROC at seed 0 on every benchmark
    (paired, 95% bootstrap CI), and on which the CI excludes 0."""
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
               f"{' and '.join(parts)}" + (f", a difference not shown on the other {rest}" if rest else ""))
    if unjudged:
        verdict += f"; cannot be judged on {', '.join(unjudged)} (interval undefined)"
    return head + verdict + "."


# ------------------------------------------------------------------------------------- the records


@dataclass(frozen=True)
class Conclusion:
    """One primary conclusion of a run: ``claim_id`` (stable across runs and designs), ``claim`` (what is
    claimed, with the side expected), the ``rm`` it is about ("both", or "-" for a free scorer), the
    ``figure`` (its across-seeds summary as recorded), how the figure is shown (``scale``, ``signed``,
    ``unit``) and the ``sentence`` of the primary findings that states it."""

    claim_id: str
    claim: str
    rm: str
    figure: Mapping
    scale: float = 1.0
    signed: bool = True
    unit: str = ""
    sentence: str = ""

    @property
    def interval(self) -> str:
        """``mean [low, high]`` over seeds, as the README and the tables write it."""
        return across(self.figure, self.signed, self.scale)

    @property
    def mde(self) -> float | None:
        """The effect the run would have seen with 80% power (None where it recorded none)."""
        return verdicts.mde(self.figure)

    @property
    def state(self) -> str:
        """The two-sided state as :mod:`goalrm_core.evaluation.verdicts` names it (``undefined`` where it cannot be judged)."""
        return verdicts.state(self.figure)

    @property
    def verdict(self) -> str:
        """The two-sided state: holds, reversed, not shown, not tested, or "cannot be judged"."""
        return verdict_text(self.figure)

    @property
    def verdict_words(self) -> str:
        """The verdict with what it needs beside it: the effect a "not shown" would have seen, the
        reason a "not tested" or "cannot be judged" has."""
        return verdict_text(self.figure, full=True, scale=self.scale, unit=self.unit)

    @property
    def note(self) -> str | None:
        """What :attr:`verdict_words` adds to the verdict (the effect a "not shown" would have seen, the
        reason of a "not tested" or "cannot be judged"); None where it adds nothing."""
        words, state = self.verdict_words, self.verdict
        return words[len(state):].strip().removeprefix("(").removesuffix(")") or None if words.startswith(state) else None

    @property
    def seeds(self) -> str:
        """``k of n``: the seeds that point the expected way."""
        return f"{self.figure.get('k')} of {self.figure.get('n_seeds')}"

    @property
    def cell(self) -> str:
        """``mean [low, high], k of n seeds: verdict``; plain ``undefined (...)`` where the mean is."""
        text = self.interval
        return text if fmt.is_undefined(self.figure.get("mean")) else f"{text}, {self.seeds} seeds: {self.verdict}"


def conclusions(metrics: Mapping[str, Any]) -> list[Conclusion]:
    """Every primary conclusion of a schema-2 ``metrics.json``, in reading order; empty for schema 1."""
    primary = Metrics(metrics).primary
    out: list[Conclusion] = []

    def add(claim_id, claim, rm, s, scale=1.0, signed=True, unit="", sentence=""):
        if isinstance(s, Mapping):  # a figure a damaged file does not hold is no conclusion
            out.append(Conclusion(claim_id, claim, rm, s, scale, signed, unit, sentence))

    bench = primary.get("benchmark", ID_BENCH)
    said = gate_sentence(primary)
    for rm, s in entries(primary, "gate", "margin_over_length").items():
        add(f"gate.margin.{rm}", "gate: AUROC − length-only AUROC on toy-id (> 0)", rm, s, sentence=said)
    well_formed = section(primary, "gate", "well_formed")
    for rm, s in entries(well_formed, "margin_over_length").items():
        margin = well_formed.get("required_margin", 0.15)
        add(f"gate.well_formed.margin.{rm}",
            f"gate, well-formed errors only: AUROC − length-only AUROC (> {margin:g})" if isinstance(margin, (int, float))
            else "gate, well-formed errors only: AUROC − length-only AUROC (> the required margin)", rm, s, sentence=said)
    add(f"delta_auroc.{bench}", "ΔAUROC goal-conditioned − baseline on toy-id (> 0)", "both", primary.get("delta_auroc"),
        sentence=delta_sentence(primary, _n_exploratory(metrics)))
    for rm, s in entries(primary, "first_error_did").items():
        add(f"first_error_did.{rm}", "Q's change at the first wrong line − at that line of correct solutions (< 0: Q falls)",
            rm, s, sentence=first_error_sentence(rm, s))
    if "first_error_did" not in primary:  # a report from before 2026-12-07: its figure, named for what it measures
        for rm, s in entries(primary, "first_error_delta_q").items():
            add(f"first_error_delta_q.{rm}", "Q after − before the first error (superseded: it measures position)", rm, s,
                sentence=superseded_first_error_sentence(rm, s))
    for rm, f in entries(primary, "filter").items():
        threshold = f.get("threshold")
        name = (f"threshold-{threshold:g} filter" if isinstance(threshold, (int, float)) and not fmt.is_undefined(threshold)
                else "Q filter (threshold undefined)")
        sentence = filter_sentence(rm, f, bench)
        add(f"filter.{rm}.saves_tokens", f"{name}: tokens saved, % (> 0)", rm, f.get("tokens_saved_pct"), 1.0, False, " %", sentence)
        add(f"filter.{rm}.costs_accuracy", f"{name}: accuracy change, points (< 0: costs accuracy)", rm, f.get("accuracy_change"),
            100.0, True, " points", sentence)
    pruning = mapping(metrics, "decoding", "primary", "pruning")
    if pruning:
        # every seed's tuning turned pruning off: nothing was pruned, so nothing was tested (older
        # files record only the count beside the figures)
        why = verdicts.pruning_switched_off(pruning)
        untested = lambda s: verdicts.mark_not_tested(s, why)  # noqa: E731
        sentence = pruning_sentence(metrics)
        add("pruning.saves_tokens", "online pruning: tokens pruned / unpruned (< 1)", "goal-conditioned",
            untested(pruning.get("tokens_ratio")), 1.0, False, "", sentence)
        add("pruning.costs_accuracy", "online pruning: accuracy change, points (< 0: costs accuracy)", "goal-conditioned",
            untested(pruning.get("accuracy_change")), 100.0, True, " points", sentence)
        wall = mapping(metrics, "timings", "decoding", "pruning_across_seeds", "wall_ratio")
        if wall:
            add("pruning.saves_wall_time", "online pruning: wall time pruned / unpruned (< 1)", "goal-conditioned", untested(wall),
                1.0, False, "", sentence)
    return out


def exploratory_conclusions(metrics: Mapping[str, Any]) -> list[Conclusion]:
    """The exploratory reward comparisons (schema 2): goal-conditioned − baseline AUROC across seeds on
    every benchmark other than the primary one, in benchmark order. Leads, not findings: their
    p-values are Holm-corrected over these comparisons (``p_holm`` in the figure)."""
    deltas = entries(metrics, "evaluation", "exploratory", "delta_auroc")
    return [Conclusion(f"delta_auroc.{b}", f"ΔAUROC goal-conditioned − baseline on {b} (> 0, exploratory)", "both", deltas[b])
            for b in fmt.order_benchmarks(deltas)]


def reading(primary: Mapping, policy_seeds: Any = None) -> str:
    """Notebook 04's primary conclusions in words: how far they reach and over what their intervals are,
    then the same sentences as the front page's primary findings."""
    seeds = policy_seeds if policy_seeds is not None else primary.get("policy_seeds")
    margins = value(primary, "gate", "margin_over_length") or {}
    interval = "RM seeds and questions" if over_questions(margins.values()) else "RM seeds"
    metrics = {"evaluation": {"primary": primary}}
    return " ".join([f"All conclusions are {verdicts.policy_scope(seeds)}; each interval is over {interval}.", *sentences(metrics)])
