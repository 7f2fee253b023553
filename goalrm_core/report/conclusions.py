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
from goalrm_core.evaluation.stats import SD_TARGET, sd_upper
from goalrm_core.evaluation.verdicts import EQUIVALENCE, LENGTH_TARGET, clears_length
from goalrm_core.report.formats import across
from goalrm_core.report.metrics_view import Metrics, detail_seed, entries, mapping, section, value
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


def judge(
    s: Any,
    shown: str,
    not_shown: str = "not shown",
    opposite: str | None = None,
    *,
    switched_off: bool = False,
    scale: float = 1.0,
    unit: str = "",
) -> str:
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
    return verdicts.words(
        s,
        holds=shown,
        reversed_=f"reversed: {opposite}" if opposite else "reversed",
        not_shown=not_shown,
        scale=scale,
        unit=unit,
    )


def verdict_text(s: Any, full: bool = False, scale: float = 1.0, unit: str = "") -> str:
    """One primary conclusion's two-sided verdict (`evaluation.verdicts`): holds, reversed, not shown,
    not tested ("not testable here" where the design cannot test it, :func:`untestable`), or "cannot be
    judged" where undefined. ``full``: a "not shown" with the effect the run would have seen with 80% power
    (shown times ``scale``, then ``unit``), a "not tested", "not testable here" or "cannot be judged" with
    its reason."""
    state = verdicts.state(s)
    if state == verdicts.UNDEFINED:
        return f"cannot be judged ({verdicts.reason(s)})" if full else "cannot be judged"
    if state == verdicts.NOT_TESTED and (verdicts.reason(s) or "").startswith(NOT_TESTABLE):
        return verdicts.reason(s) if full else NOT_TESTABLE  # the design cannot test it (:func:`untestable`)
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
            return "; ".join(
                f"{rm}: {fmt.reason_of(m) or 'undefined'}" for rm, m in margins.items() if value(m, "holds") is None
            )

        if state == "undefined":
            return state, gate.get("reason") or unjudged() or "no state recorded"
        if (missing := unjudged()) and state == "passed":  # a pass needs every margin judged
            return "undefined", missing
        return state, gate.get("reason")
    scorers = {
        ("length only" if k == "length_only" else k): v
        for k, v in gate.items()
        if k not in ("benchmark", "passed", "reason")
    }
    undefined = [
        f"{name} AUROC {fmt.undefined(fmt.reason_of(v, 'auroc'))}"
        for name, v in scorers.items()
        if fmt.is_undefined(value(v, "auroc"))
    ]
    if undefined or gate.get("passed") is None:
        return "undefined", gate.get("reason") or "; ".join(undefined) or "no verdict recorded"
    return ("passed" if gate["passed"] else "failed"), None


#: The gate's verdict in words, by state: the one wording of whether the RMs beat response length. The
#: notice on the front page opens with it, the primary findings and notebook 04 say it after "Gate <state>:".
GATE_VERDICT = {
    "passed": "both reward models beat the length-only scorer",
    "failed": "not shown that every reward model beats the length-only scorer",
    "undefined": "cannot be judged whether both reward models beat the length-only scorer",
}


def well_formed_verdict(state: str, margin: str) -> str:
    """The gate's second condition in words, by state: does every RM beat length on well-formed errors
    by the required ``margin``?"""
    return {
        "passed": f"on well-formed errors, both reward models beat length by more than {margin}",
        "failed": f"on well-formed errors, not shown that every reward model beats length by more than {margin}",
        "undefined": "cannot be judged whether the reward models detect well-formed errors",
    }[state]


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
        return (
            "they are not shown to check the arithmetic by that margin; every incorrect solution here is "
            "well-formed, so this says nothing about malformed output."
        )
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
        tail = {
            "passed": "The RMs check the arithmetic, not only the shape of a solution.",
            "failed": (
                "The RMs " + failure[len("they ") :]
                if failure.startswith("they ")
                # "what they detect is mostly malformed output": the RMs beat length on all errors
                else failure[0].upper() + failure[1:] + " Read every later claim as 'detects malformed output'."
            ),
            "undefined": f"Cannot be judged: {reason}.",
        }[state]
        head = well_formed_verdict(state, margin)
        return state, head[0].upper() + head[1:], tail
    tail = {
        "passed": "The comparisons below measure what the RMs learned beyond response length.",
        "failed": (
            "The later tables compare RMs not shown to know more than a character count: they are no evidence "
            "for or against the method. Read them as a test of the software only."
        ),
        "undefined": (
            f"The gate cannot be judged: {reason}. Neither passed nor failed: until it can be judged, the later "
            "tables are no evidence for or against the method."
        ),
    }[state]
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
    verdict = {
        "passed": f"passed: {GATE_VERDICT['passed']}",
        "failed": f"failed: {GATE_VERDICT['failed']}" + (f" (not shown for {', '.join(failing)})" if failing else ""),
        "undefined": f"cannot be judged: {reason}",
    }[state]
    sentence = (
        f"Length gate on {bench}, AUROC of the RM minus AUROC of response length"
        + (f": {per_rm}" if per_rm else "")
        + f". Gate {verdict}."
    )
    second = mapping(gate, "well_formed")
    if second is not None:
        state_first = state
        state, reason = gate_state(second)
        margin = fmt.num(second.get("required_margin"), 2)
        per_rm = "; ".join(
            f"{rm} {figure_text(m, f'above {margin}')}" for rm, m in (second.get("margin_over_length") or {}).items()
        )
        sentence += (
            " Its second condition, on correct against well-formed incorrect solutions only (every line "
            "'a op b = c', then '#answer': the errors a scorer must check the arithmetic to see)"
            + (f": {per_rm}" if per_rm else "")
            + ". "
            + {
                "passed": f"Holds: both reward models beat length there by more than {margin}; they verify.",
                "failed": f"Does not hold: not shown that every reward model beats length there by more than {margin}; "
                + well_formed_failure(second, state_first),
                "undefined": f"Cannot be judged: {reason}.",
            }[state]
        )
    return sentence


def detail_gate_reading(metrics: Mapping) -> str:
    """Where the detail seed's own gate (``evaluation.gate``: one RM seed's point estimates) reads otherwise
    than the verdict over seeds (``evaluation.primary.gate``), that reading worded as the detail seed's, so
    the page holds one verdict; empty where they agree or either is missing."""
    m = Metrics(metrics)
    over_seeds, detail = mapping(m.primary, "gate"), mapping(metrics, "evaluation", "gate")
    if over_seeds is None or detail is None:
        return ""
    state, _ = gate_state(over_seeds)
    seed_state, _ = gate_state(detail)
    if seed_state == state:
        return ""
    scorers = [
        (("length only" if k == "length_only" else k), v)
        for k, v in detail.items()
        if isinstance(v, Mapping) and "auroc" in v
    ]
    aurocs = ", ".join(f"{name} {fmt.num(v.get('auroc'), 3)}" for name, v in scorers)
    n = fmt.count(m.primary.get("n_seeds"))
    seed = detail_seed(metrics)
    said = {"passed": "passed", "failed": "failed", "undefined": "cannot be judged"}
    return (
        f"RM seed {seed} alone (the detail seed of the tables below, point estimates"
        + (f": AUROC {aurocs}" if aurocs else "")
        + f") reads the gate as {said[seed_state]}: that is one seed's reading; the gate's verdict is over "
        + (f"all {n} RM seeds" if n else "the RM seeds")
        + f": {said[state]}."
    )


def design_scope(primary: Mapping) -> str:
    """What the design can and cannot test, from the length gate and its well-formed condition."""
    gate = mapping(primary, "gate")
    if gate is None:
        return "What the design can test is not recorded (no length gate)."
    state, reason = gate_state(gate)
    if state == "undefined":
        return (
            f"Whether the reward models beat response length cannot be judged ({reason}), so neither can what "
            "this design tests."
        )
    if state == "failed":
        return (
            "This design cannot test the question: the reward models are not shown to beat response length, so a "
            "difference between them is a difference between two scorers not shown to be better than length."
        )
    second = mapping(gate, "well_formed")
    if second is None:
        return (
            "The reward models beat response length; whether they check the arithmetic or only the shape of a "
            "solution is not measured, so this design tests ranking, not verification."
        )
    state, reason = gate_state(second)
    if state == "passed":
        return (
            "The reward models beat length on well-formed errors too: they check the arithmetic, so this design "
            "tests whether goal-conditioning helps a reward model verify."
        )
    if state == "failed":
        share = second.get("malformed_share")
        what = (
            "spot malformed output"
            if isinstance(share, (int, float)) and share >= 0.5  # NaN compares False
            else "rank solutions better than length"
        )
        return (
            f"This design can test whether goal-conditioning helps a reward model {what}; it cannot test "
            "whether it helps one verify arithmetic: on well-formed errors the reward models are not shown to beat "
            "length by the margin required."
        )
    return f"Whether the reward models check the arithmetic cannot be judged ({reason})."


# ------------------------------------------------------------------------- the other primary findings


def delta_verdict(d: Any) -> str:
    """The primary reward comparison's verdict in words; a "not shown" whose whole interval lies inside
    ±:data:`EQUIVALENCE` adds that it is equivalent within that bound."""
    words = judge(
        d,
        "the goal-conditioned RM ranks better (the interval lies above 0)",
        "a difference is not shown",
        opposite="the baseline RM ranks better (the interval lies wholly below 0)",
    )
    return words + (f"; {equivalence_words()} (the whole interval lies inside it)" if verdicts.equivalent(d) else "")


# ------------------------------------------------------------------ the answer: the page's first sentence


def equivalence_words(bound: float = EQUIVALENCE) -> str:
    return f"equivalent within ±{bound:g}"


#: The first sentence's verdict, by state: the answer to "does goal-conditioning help here?".
ANSWER_VERDICT = {
    verdicts.HOLDS: "Yes (holds)",
    verdicts.REVERSED: "No, reversed (the baseline RM ranks better)",
    verdicts.NOT_SHOWN: "Not shown",
    verdicts.NOT_TESTED: "Not tested",
    verdicts.UNDEFINED: "Cannot be judged",
}


def answer_verdict(d: Any) -> str:
    """The verdict that opens the first sentence: holds / reversed / not shown, a "not shown" whose whole
    interval lies inside ±:data:`EQUIVALENCE` reading "Not shown; equivalent within ±0.05" (never "shown
    equal"); "Not tested" or "Cannot be judged" with its reason."""
    state = verdicts.state(d)
    head = ANSWER_VERDICT[state]
    if state == verdicts.NOT_SHOWN and verdicts.equivalent(d):
        return f"{head}; {equivalence_words()}"
    if state in (verdicts.NOT_TESTED, verdicts.UNDEFINED):
        why = fmt.reason_of(d) if state == verdicts.UNDEFINED else None
        return f"{head} ({why or verdicts.reason(d)})"
    return head


def paired_seeds_text(d: Mapping) -> str:
    """``"over 5 paired RM seeds"``, with the undefined ones counted apart; empty where none is recorded."""
    total, n = fmt.count(d.get("n_seeds")), fmt.count(d.get("n"))
    if not total:
        return ""
    if n is not None and n < total:
        return f"over {n} of {total} paired RM seeds ({total - n} undefined)"
    return f"over {total} paired RM seed{'s' if total != 1 else ''}"


def answer_sentence(metrics: Mapping) -> str:
    """The front page's first sentence: does goal-conditioning help here? The verdict (:func:`answer_verdict`),
    then the primary ΔAUROC (goal-conditioned − baseline) with its 95% interval, the number of paired RM
    seeds and the MDE, every number from ``evaluation.primary.delta_auroc``. Empty before notebook 04
    recorded it (schema 2).

    >>> d = {
    ...     "mean": 0.0619, "ci_low": -0.0270, "ci_high": 0.1508, "mde": 0.1226,
    ...     "n": 5, "n_seeds": 5, "verdict": "not shown",
    ... }
    >>> answer_sentence({"evaluation": {"primary": {"delta_auroc": d}}})
    'Does goal-conditioning help here? Not shown: ΔAUROC (goal-conditioned − baseline RM, toy-id) +0.062 [−0.027, +0.151] over 5 paired RM seeds, MDE 0.123.'
    """  # noqa: E501  (the doctest's expected output is one string repr, 157 columns, that cannot be wrapped)
    primary = Metrics(metrics).primary
    d = mapping(primary, "delta_auroc")
    if d is None:
        return ""
    bench = primary.get("benchmark", ID_BENCH)
    mde = verdicts.mde(d)
    shown = {k: v for k, v in d.items() if k != "reason"}  # the verdict says why it cannot be judged, once
    parts = [
        f"ΔAUROC (goal-conditioned − baseline RM, {bench}) {across(shown, True, 1.0, digits=3)}",
        paired_seeds_text(d),
    ]
    tail = ", ".join(
        p for p in (" ".join(p for p in parts if p), f"MDE {fixed3(mde)}" if mde is not None else "MDE not recorded")
    )
    return f"Does goal-conditioning help here? {answer_verdict(d)}: {tail}."


def fixed3(x: Any) -> str:
    return fmt.num(x, 3, minus="−")


def answer_note(metrics: Mapping) -> str:
    """What the first sentence's numbers are: the interval's reach, the MDE's meaning, the policy they are for."""
    primary = Metrics(metrics).primary
    d = mapping(primary, "delta_auroc") or {}
    interval = "RM seeds and questions" if over_questions([d]) else "RM seeds"
    return (
        f"The interval is 95%, over {interval}; the MDE is the effect this run would have seen with 80% power; "
        f"all {scope(metrics)}."
    )


# ----------------------------------------------------------- each arm's spread over seeds, against its targets


@dataclass(frozen=True)
class Spread:
    """One arm's per-seed AUROC on the primary benchmark against the targets: its SD over seeds with the SD's
    80% upper bound (chi-square), and how many seeds clear length-only + :data:`LENGTH_TARGET`."""

    rm: str
    n: int
    sd: float | None
    sd_upper: float | None
    clearing: int

    @property
    def sd_state(self) -> str:
        """``met`` (the 80% upper bound within :data:`SD_TARGET`), ``missed`` (the SD above it), ``not shown``
        (the SD within, its upper bound above), or ``undefined`` (fewer than two seeds)."""
        if self.sd is None or self.sd_upper is None:
            return "undefined"
        return "met" if self.sd_upper <= SD_TARGET else "missed" if self.sd > SD_TARGET else "not shown"


def spreads(metrics: Mapping) -> list[Spread]:
    """Each arm's :class:`Spread`, from the gate's per-seed margins over length-only
    (``evaluation.primary.gate.margin_over_length.<rm>.per_seed``: each seed's AUROC − length-only AUROC on the
    same generations). Length-only scores the policy's generations, the same for every RM seed, so the SD of
    the per-seed AUROC is the SD of these margins. Empty where no per-seed margin is recorded."""
    out = []
    for rm, m in entries(Metrics(metrics).primary, "gate", "margin_over_length", strict=True).items():
        per_seed = m.get("per_seed")
        if not isinstance(per_seed, list) or not per_seed:
            continue
        defined = [float(v) for v in per_seed if not fmt.is_undefined(v)]
        sd = upper = None
        if len(defined) >= 2:
            mean = sum(defined) / len(defined)
            sd = math.sqrt(sum((v - mean) ** 2 for v in defined) / (len(defined) - 1))
            upper = sd_upper(defined)
        out.append(Spread(rm, len(defined), sd, upper, sum(clears_length(v) for v in defined)))
    return out


def spread_sentence(metrics: Mapping) -> str:
    """Each arm's SD of per-seed AUROC with its 80% upper bound and how many seeds clear length-only + 0.15,
    against the targets; empty where no per-seed margin is recorded."""
    rows = spreads(metrics)
    if not rows:
        return ""
    bench = Metrics(metrics).primary.get("benchmark", ID_BENCH)

    def one(s: Spread) -> str:
        sd = (
            f"SD {fixed3(s.sd)} (80% upper bound {fixed3(s.sd_upper)}): {s.sd_state}"
            if s.sd is not None
            else f"SD undefined ({s.n} seed{'s' if s.n != 1 else ''} defined)"
        )
        return f"{s.rm} {sd}; {s.clearing} of {s.n} seeds clear length-only + {LENGTH_TARGET:g}"

    return (
        f"Each arm's per-seed AUROC on {bench} against the targets (SD over RM seeds ≤ {SD_TARGET:g}, met only where "
        f"its 80% upper bound is too; AUROC ≥ length-only + {LENGTH_TARGET:g} in each seed): "
        + "; ".join(one(s) for s in rows)
        + "."
    )


# ------------------------------------------------------------ what a design cannot test: the filter's rule

#: A Q filter's saving is testable only where the oracle filter (each wrong sample dropped at its first
#: wrong line, the most any filter can save at no cost) saves at least this share of the primary benchmark's
#: tokens, in percent: below it a Q filter has nothing to find.
FILTER_TESTABLE_PCT = 1.0
#: The verdict of a claim the design cannot test (a "not tested" state whose reason begins so).
NOT_TESTABLE = "not testable here"


def filter_untestable(metrics: Mapping) -> str | None:
    """Why the Q-filter claim cannot be tested on this run (the oracle's saving on the primary benchmark,
    ``evaluation.filter_rules.<bench>["oracle (first error)"].tokens_saved_pct``, is below
    :data:`FILTER_TESTABLE_PCT`); None where it can, or where no oracle saving is recorded."""
    bench = Metrics(metrics).primary.get("benchmark", ID_BENCH)
    saved = value(metrics, "evaluation", "filter_rules", bench, "oracle (first error)", "tokens_saved_pct")
    if fmt.is_undefined(saved) or not isinstance(saved, (int, float)) or saved >= FILTER_TESTABLE_PCT:
        return None
    return (
        f"the oracle filter (each wrong sample dropped at its first wrong line) saves only {fmt.num(saved, 2)}% of "
        f"{bench} tokens, under the {FILTER_TESTABLE_PCT:g}% a saving needs to be testable: the filter saves nothing "
        "in a question whose every sample is wrong (it falls back to plain voting there), so a saving this small "
        "means the wrong samples sit almost only in such questions"
    )


def delta_sentence(primary: Mapping, n_exploratory: int = 0) -> str:
    d = mapping(primary, "delta_auroc")
    if d is None:
        return ""
    bench = primary.get("benchmark", ID_BENCH)
    k = n_exploratory
    comparisons = (
        f" It is the one reward comparison fixed before the run, so its interval needs no correction; the "
        f"other {k} benchmark{'s' if k != 1 else ''} are {k} exploratory comparison{'s' if k != 1 else ''}, "
        "Holm-corrected (below)."
        if k
        else " It is the one reward comparison fixed before the run."
    )
    return (
        f"Reward comparison on {bench} (primary): goal-conditioned minus baseline AUROC {figure_text(d, 'positive')}: "
        + delta_verdict(d)
        + "."
        + comparisons
    )


def superseded_first_error_sentence(rm: str, s: Mapping) -> str:
    """The first-error figure of a report from before 2026-12-07, named for what it measures."""
    return (
        f"Q of the {rm} RM after minus before the first error (superseded: the mean after it holds the last "
        f"tokens, always near the goal, so it measures position, not the error): "
        f"Δ {fmt.across({k: v for k, v in s.items() if k != 'reason'})}."
    )


def first_error_sentence(rm: str, s: Mapping) -> str:
    seeds = seeds_text(s, "falls")
    return (
        f"Q of the {rm} RM at the first wrong line (its change there minus the change at that line of correct "
        "solutions): "
        + (f"Q {seeds}: " if seeds else "")
        + f"Δ {fmt.across({k: v for k, v in s.items() if k != 'reason'})}: "
        + judge(
            s,
            "Q falls at the first error",
            "not shown that Q falls",
            opposite="Q rises (the interval lies wholly above 0)",
        )
        + "."
    )


def filter_sentence(rm: str, f: Mapping, bench: str, untestable: str | None = None) -> str:
    """The Q filter's finding for one RM; where the claim cannot be tested on this run (``untestable``, the
    reason :func:`filter_untestable` gives), "not testable here" with that reason, the figures only recorded."""
    threshold = f.get("threshold")
    at = f"threshold {fmt.num(threshold, 2)}" if not fmt.is_undefined(threshold) else "its threshold"
    tokens, change = f.get("tokens_saved_pct"), f.get("accuracy_change")
    if untestable:
        return (
            f"Q-filtered majority voting at {at} ({rm} Q, {bench}): {NOT_TESTABLE}: {untestable}. Recorded, not "
            f"judged: tokens saved {figure_text(tokens, 'more than 0', digits=1, signed=False, suffix=' %')}; accuracy "
            f"change {figure_text(change, 'lower', digits=1, scale=100, suffix=' points')}."
        )
    return (
        f"Q-filtered majority voting at {at} ({rm} Q, {bench}): tokens saved "
        f"{figure_text(tokens, 'more than 0', digits=1, signed=False, suffix=' %')} ("
        + judge(tokens, "a saving", "a saving is not shown", opposite="the filter adds tokens", unit=" %")
        + "); accuracy change "
        f"{figure_text(change, 'lower', digits=1, scale=100, suffix=' points')}: "
        + judge(
            change,
            "the filter costs accuracy",
            "a cost is not shown",
            opposite="accuracy rises (the interval lies wholly above 0)",
            scale=100,
            unit=" points",
        )
        + "."
    )


def pruning_sentence(metrics: Mapping) -> str:
    p = mapping(metrics, "decoding", "primary", "pruning")
    if p is None:
        return ""
    bench = p.get("benchmark", ID_BENCH)
    seeds = p.get("rm_seeds") if isinstance(p.get("rm_seeds"), list) else []
    n = len(seeds) or fmt.count(value(p, "tokens_ratio", "n_seeds")) or 0
    why_off = verdicts.pruning_switched_off(p)  # every seed's tuning chose pruning off: nothing was tested
    p = {**p, **{k: verdicts.mark_not_tested(p.get(k), why_off) for k in ("tokens_ratio", "accuracy_change") if k in p}}
    text = (
        f"Online pruning by Q on {bench} (threshold chosen per seed): tokens generated relative to no pruning "
        f"{figure_text(p.get('tokens_ratio'), 'below 1', signed=False)}: "
        + judge(p.get("tokens_ratio"), "pruning saves tokens", "a saving is not shown", opposite="pruning adds tokens")
        + f"; accuracy change {figure_text(p.get('accuracy_change'), 'lower', digits=1, scale=100, suffix=' points')}: "
        + judge(
            p.get("accuracy_change"),
            "pruning costs accuracy",
            "a cost is not shown",
            opposite="accuracy rises (the interval lies wholly above 0)",
            scale=100,
            unit=" points",
        )
    )
    if (wall := mapping(metrics, "timings", "decoding", "pruning_across_seeds", "wall_ratio")) is not None:
        wall = verdicts.mark_not_tested(wall, why_off)
        threads = fmt.count(value(metrics, "decoding", "threads"))
        text += (
            f"; wall time relative to no pruning {figure_text(wall, 'below 1', signed=False)}"
            + (f" ({threads} thread{'s' if threads != 1 else ''})" if threads else "")
            + ": "
            + judge(
                wall,
                "pruning saves wall time",
                "a wall-time saving is not shown",
                opposite="pruning is slower (the interval lies wholly above 1)",
            )
        )
        tokens = p.get("tokens_ratio")
        if (
            verdicts.state(tokens) == verdicts.HOLDS
            and isinstance(wall.get("ci_low"), (int, float))
            and wall["ci_low"] >= 1
        ):
            text += (
                " (pruning saves tokens but not wall time: at this model's size a sampling step costs about the same "
                "however many rows still run, and the pruned run adds the RM's scoring)"
            )
    text += "."
    off = fmt.count(p.get("pruning_off"))
    if off is not None and n:
        text += f" {off} of {n} seeds chose pruning off (threshold ≤ −1: no sample stopped, no RM calls)" + (
            ": every seed's tuning turned pruning off, so nothing was pruned and nothing about pruning was tested."
            if off == n
            else "."
        )
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
        superseded = (
            [
                superseded_first_error_sentence(rm, s)
                for rm, s in entries(primary, "first_error_delta_q", strict=True).items()
            ]
            if "first_error_did" not in primary
            else []
        )  # a report from before 2026-12-07
        items = [
            gate_sentence(primary),
            delta_sentence(primary, n_exploratory),
            *superseded,
            *(first_error_sentence(rm, s) for rm, s in entries(primary, "first_error_did", strict=True).items()),
            *(
                filter_sentence(rm, f, bench, filter_untestable(metrics))
                for rm, f in entries(primary, "filter", strict=True).items()
            ),
            pruning_sentence(metrics),
        ]
    return [s for s in items if s]


def seed0_delta_sentence(deltas: Mapping[str, Mapping]) -> str:
    """Schema 1's reward comparison: goal-conditioned minus baseline AUROC at seed 0 on every benchmark
    (paired, 95% bootstrap CI), and on which the CI excludes 0."""
    order = fmt.order_benchmarks(deltas)
    judged = [b for b in order if not fmt.is_undefined(deltas[b].get("ci_low"), deltas[b].get("ci_high"))]
    unjudged = [b for b in order if b not in judged]
    better = [b for b in judged if deltas[b]["ci_low"] > 0]
    worse = [b for b in judged if deltas[b]["ci_high"] < 0]
    per_bench = ", ".join(
        f"{b} {fmt.signed_ci(delta_of(d), d.get('ci_low'), d.get('ci_high'), reason=fmt.reason_of(d, 'delta'))}"
        for b, d in ((b, deltas[b]) for b in order)
    )
    head = f"Goal-conditioned minus baseline AUROC (paired, 95% CI): {per_bench}; "
    if not judged:
        return head + f"cannot be judged: the interval is undefined on all {len(order)} benchmarks."
    if not better and not worse:
        verdict = f"the CI includes 0 on all {len(judged)} benchmarks"
        verdict += (
            f" with an interval: no detectable difference; cannot be judged on {', '.join(unjudged)} (interval "
            "undefined)."
            if unjudged
            else ": no detectable difference."
        )
        return head + verdict
    parts = [f"{which} on {', '.join(benches)}" for which, benches in (("better", better), ("worse", worse)) if benches]
    rest = len(judged) - len(better) - len(worse)
    verdict = (
        f"the CI excludes 0 on {len(better) + len(worse)} of {len(order)} benchmarks: the goal-conditioned RM is "
        f"{' and '.join(parts)}" + (f", a difference not shown on the other {rest}" if rest else "")
    )
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
        """The two-sided state as :mod:`goalrm_core.evaluation.verdicts` names it (``undefined`` where it cannot be
        judged)."""
        return verdicts.state(self.figure)

    @property
    def verdict(self) -> str:
        """The two-sided state: holds, reversed, not shown, not tested ("not testable here" where the design
        cannot test the claim), or "cannot be judged"."""
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
        if not words.startswith(state):
            return None
        return words[len(state) :].strip().removeprefix(":").strip().removeprefix("(").removesuffix(")") or None

    @property
    def seeds(self) -> str:
        """``k of n``: the seeds that point the expected way."""
        return f"{self.figure.get('k')} of {self.figure.get('n_seeds')}"

    @property
    def cell(self) -> str:
        """``mean [low, high], k of n seeds: verdict``; plain ``undefined (...)`` where the mean is."""
        text = self.interval
        return text if fmt.is_undefined(self.figure.get("mean")) else f"{text}, {self.seeds} seeds: {self.verdict}"


def untestable(summary: Any, why: str | None) -> Any:
    """``summary`` marked ``not tested`` for ``why`` (the design cannot test the claim, whatever the figure
    recorded); unchanged where ``why`` is None or there is no summary."""
    if why is None or not isinstance(summary, Mapping):
        return summary
    return {**summary, "verdict": verdicts.NOT_TESTED, "holds": None, "reason": f"{NOT_TESTABLE}: {why}"}


def _gate_conclusions(primary: Mapping) -> list[Conclusion]:
    """The length gate's two conditions, one record per RM: its margin over response length on all
    generations, then on the well-formed errors only."""
    said = gate_sentence(primary)
    out = [
        Conclusion(f"gate.margin.{rm}", "gate: AUROC − length-only AUROC on toy-id (> 0)", rm, s, sentence=said)
        for rm, s in entries(primary, "gate", "margin_over_length").items()
    ]
    well_formed = section(primary, "gate", "well_formed")
    for rm, s in entries(well_formed, "margin_over_length").items():
        margin = well_formed.get("required_margin", 0.15)
        claim = (
            f"gate, well-formed errors only: AUROC − length-only AUROC (> {margin:g})"
            if isinstance(margin, (int, float))
            else "gate, well-formed errors only: AUROC − length-only AUROC (> the required margin)"
        )
        out.append(Conclusion(f"gate.well_formed.margin.{rm}", claim, rm, s, sentence=said))
    return out


def _first_error_conclusions(primary: Mapping) -> list[Conclusion]:
    """Q at the first error, per RM: the difference-in-differences, or a report's older after − before figure
    (named for what it measures) where it has no other."""
    out = [
        Conclusion(
            f"first_error_did.{rm}",
            "Q's change at the first wrong line − at that line of correct solutions (< 0: Q falls)",
            rm,
            s,
            sentence=first_error_sentence(rm, s),
        )
        for rm, s in entries(primary, "first_error_did").items()
    ]
    if "first_error_did" not in primary:  # a report from before 2026-12-07: its figure, named for what it measures
        out += [
            Conclusion(
                f"first_error_delta_q.{rm}",
                "Q after − before the first error (superseded: it measures position)",
                rm,
                s,
                sentence=superseded_first_error_sentence(rm, s),
            )
            for rm, s in entries(primary, "first_error_delta_q").items()
        ]
    return out


def _filter_conclusions(metrics: Mapping, primary: Mapping, bench: str) -> list[Conclusion]:
    """Each RM's Q filter: the tokens it saves and the accuracy it costs, both "not tested" where the design
    cannot test a filter."""
    why_untestable = filter_untestable(metrics)  # the oracle itself saves (almost) nothing here: nothing to test
    out = []
    for rm, f in entries(primary, "filter").items():
        threshold = f.get("threshold")
        name = (
            f"threshold-{threshold:g} filter"
            if isinstance(threshold, (int, float)) and not fmt.is_undefined(threshold)
            else "Q filter (threshold undefined)"
        )
        sentence = filter_sentence(rm, f, bench, why_untestable)
        out += [
            Conclusion(
                f"filter.{rm}.saves_tokens",
                f"{name}: tokens saved, % (> 0)",
                rm,
                untestable(f.get("tokens_saved_pct"), why_untestable),
                1.0,
                False,
                " %",
                sentence,
            ),
            Conclusion(
                f"filter.{rm}.costs_accuracy",
                f"{name}: accuracy change, points (< 0: costs accuracy)",
                rm,
                untestable(f.get("accuracy_change"), why_untestable),
                100.0,
                True,
                " points",
                sentence,
            ),
        ]
    return out


def _pruning_conclusions(metrics: Mapping) -> list[Conclusion]:
    """Online pruning's tokens, accuracy and (where recorded) wall time; nothing where the run decoded none."""
    pruning = mapping(metrics, "decoding", "primary", "pruning")
    if not pruning:
        return []
    # every seed's tuning turned pruning off: nothing was pruned, so nothing was tested (older
    # files record only the count beside the figures)
    why = verdicts.pruning_switched_off(pruning)

    def untested(s):
        return verdicts.mark_not_tested(s, why)

    sentence = pruning_sentence(metrics)
    out = [
        Conclusion(
            "pruning.saves_tokens",
            "online pruning: tokens pruned / unpruned (< 1)",
            "goal-conditioned",
            untested(pruning.get("tokens_ratio")),
            1.0,
            False,
            "",
            sentence,
        ),
        Conclusion(
            "pruning.costs_accuracy",
            "online pruning: accuracy change, points (< 0: costs accuracy)",
            "goal-conditioned",
            untested(pruning.get("accuracy_change")),
            100.0,
            True,
            " points",
            sentence,
        ),
    ]
    wall = mapping(metrics, "timings", "decoding", "pruning_across_seeds", "wall_ratio")
    if wall:
        out.append(
            Conclusion(
                "pruning.saves_wall_time",
                "online pruning: wall time pruned / unpruned (< 1)",
                "goal-conditioned",
                untested(wall),
                1.0,
                False,
                "",
                sentence,
            )
        )
    return out


def _delta_conclusion(metrics: Mapping, primary: Mapping, bench: str) -> Conclusion:
    """The reward comparison at the primary benchmark: goal-conditioned − baseline AUROC."""
    return Conclusion(
        f"delta_auroc.{bench}",
        "ΔAUROC goal-conditioned − baseline on toy-id (> 0)",
        "both",
        primary.get("delta_auroc"),
        sentence=delta_sentence(primary, _n_exploratory(metrics)),
    )


def conclusions(metrics: Mapping[str, Any]) -> list[Conclusion]:
    """Every primary conclusion of a schema-2 ``metrics.json``, in reading order; empty for schema 1."""
    primary = Metrics(metrics).primary
    bench = primary.get("benchmark", ID_BENCH)
    found = [
        *_gate_conclusions(primary),
        _delta_conclusion(metrics, primary, bench),
        *_first_error_conclusions(primary),
        *_filter_conclusions(metrics, primary, bench),
        *_pruning_conclusions(metrics),
    ]
    return [c for c in found if isinstance(c.figure, Mapping)]  # a figure a damaged file does not hold is no conclusion


def exploratory_conclusions(metrics: Mapping[str, Any]) -> list[Conclusion]:
    """The exploratory reward comparisons (schema 2): goal-conditioned − baseline AUROC across seeds on
    every benchmark other than the primary one, in benchmark order. Leads, not findings: their
    p-values are Holm-corrected over these comparisons (``p_holm`` in the figure)."""
    deltas = entries(metrics, "evaluation", "exploratory", "delta_auroc")
    return [
        Conclusion(
            f"delta_auroc.{b}", f"ΔAUROC goal-conditioned − baseline on {b} (> 0, exploratory)", "both", deltas[b]
        )
        for b in fmt.order_benchmarks(deltas)
    ]


def reading(primary: Mapping, policy_seeds: Any = None) -> str:
    """Notebook 04's primary conclusions in words: how far they reach and over what their intervals are,
    then the same sentences as the front page's primary findings."""
    seeds = policy_seeds if policy_seeds is not None else primary.get("policy_seeds")
    margins = value(primary, "gate", "margin_over_length") or {}
    interval = "RM seeds and questions" if over_questions(margins.values()) else "RM seeds"
    metrics = {"evaluation": {"primary": primary}}
    return " ".join(
        [f"All conclusions are {verdicts.policy_scope(seeds)}; each interval is over {interval}.", *sentences(metrics)]
    )
