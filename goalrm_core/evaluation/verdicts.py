"""The verdict of one primary conclusion, two-sided, as a state and in words.

A conclusion is summarised over seeds (``stats.across_seeds``, or ``hierarchical.across_seeds_and_questions``
where question variance is in the interval too): a mean, a 95% interval, the ``null`` it is judged against
and the side it is ``expect``-ed on. Its verdict is one of five states:

* ``holds``: the interval lies wholly on the expected side of the null;
* ``reversed``: the interval lies wholly on the *other* side: a difference the run found, the opposite way
  (never "not shown");
* ``not shown``: the interval contains the null; it comes with the run's minimum detectable effect at 80%
  power (``mde``, from the interval's standard error), so a null says how large an effect it rules out;
* ``not tested``: the mechanism the conclusion is about was switched off (online pruning tuned to "off"
  in every seed): no data on it, so no null finding either;
* ``undefined``: fewer than two defined seeds, an undefined interval, or an interval of zero width from
  seeds alone (every seed gave the same value and the run recorded no question variance: that says
  nothing about other questions).

Summaries written before these states existed carry ``holds`` (True/False/None) and their interval, not
``verdict``: :func:`state` derives the same states from those fields (``reversed`` from the interval),
and :func:`mde` derives their minimum detectable effect from the seeds-only t-interval they recorded.
Nothing here imports numpy; scipy only to read such an older summary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from goalrm_core.evaluation.numeric import num

HOLDS, REVERSED, NOT_SHOWN, NOT_TESTED, UNDEFINED = "holds", "reversed", "not shown", "not tested", "undefined"
STATES = (HOLDS, REVERSED, NOT_SHOWN, NOT_TESTED, UNDEFINED)
#: The power the minimum detectable effect is stated at.
POWER = 0.8


#: The equivalence bound of the analysis plan: a "not shown" whose whole interval lies inside ±this reads
#: "equivalent within ±0.05"; one that reaches past it stays "not shown" (never "shown equal").
EQUIVALENCE = 0.05
#: A seed "clears" length-only when its AUROC exceeds length-only's by at least this (issue 50's target).
LENGTH_TARGET = 0.15


def equivalent(summary: Any, bound: float = EQUIVALENCE) -> bool:
    """Whether a "not shown" summary's whole interval lies inside ``±bound`` (both bounds strictly).

    >>> s = {"verdict": "not shown", "ci_low": -0.03, "ci_high": 0.04}
    >>> equivalent(s), equivalent({**s, "ci_low": -0.06}), equivalent({**s, "verdict": "holds"})
    (True, False, False)
    """
    if state(summary) != NOT_SHOWN:
        return False
    lo, hi = num(summary.get("ci_low")), num(summary.get("ci_high"))
    return lo is not None and hi is not None and -bound < lo and hi < bound


def clears_length(margin: Any, target: float = LENGTH_TARGET) -> bool:
    """Whether one seed's AUROC − length-only AUROC reaches ``target`` (False where it is undefined)."""
    m = num(margin)
    return m is not None and m >= target


def judge_interval(low: Any, high: Any, null: float = 0.0, expect: str = "greater") -> str:
    """``holds`` / ``reversed`` / ``not shown`` for an interval against ``null``; ``undefined`` when a
    bound is.

    >>> judge_interval(0.01, 0.05), judge_interval(-0.05, -0.01), judge_interval(-0.01, 0.02)
    ('holds', 'reversed', 'not shown')
    >>> judge_interval(-0.05, -0.01, expect="less"), judge_interval(None, 0.1)
    ('holds', 'undefined')
    """
    lo, hi = num(low), num(high)
    if lo is None or hi is None:
        return UNDEFINED
    above, below = lo > null, hi < null
    if expect == "less":
        above, below = below, above
    return HOLDS if above else REVERSED if below else NOT_SHOWN


def state(summary: Any, switched_off: bool = False) -> str:
    """The verdict of one across-seeds summary (see the module's docstring). ``switched_off``: the
    caller knows the mechanism was off in every seed (older files record it beside the figure, as
    ``pruning_off``), which makes it ``not tested``.

    >>> state({"holds": False, "ci_low": -0.03, "ci_high": -0.015, "null": 0.0, "expect": "greater"})
    'reversed'
    >>> state({"holds": True, "ci_low": -0.0067, "ci_high": -0.0067, "expect": "less"})
    'undefined'
    >>> state({"holds": False, "ci_low": 1.0, "ci_high": 1.0, "null": 1.0}, switched_off=True)
    'not tested'
    """
    if switched_off:
        return NOT_TESTED
    if not isinstance(summary, Mapping):
        return UNDEFINED
    recorded = summary.get("verdict")
    if recorded in STATES:
        return recorded
    if summary.get("holds") is None:
        return UNDEFINED
    low, high = num(summary.get("ci_low")), num(summary.get("ci_high"))
    if low is not None and high is not None and low == high and "se_questions" not in summary:
        return UNDEFINED  # zero width from seeds alone: every seed the same, question variance not recorded
    null = num(summary.get("null"))
    return judge_interval(low, high, 0.0 if null is None else null, summary.get("expect", "greater"))


def reason(summary: Any, switched_off: bool = False) -> str | None:
    """Why a summary is ``undefined`` or ``not tested`` (None for the other states)."""
    s = state(summary, switched_off)
    recorded = summary.get("reason") if isinstance(summary, Mapping) else None
    recorded = recorded.strip() if isinstance(recorded, str) and recorded.strip() else None
    if s == NOT_TESTED:
        return recorded or "the mechanism was switched off in every seed"
    if s != UNDEFINED:
        return None
    if recorded:
        return recorded
    if isinstance(summary, Mapping) and summary.get("holds") is not None:
        return (
            "every seed gave the same value, and this run recorded no question variance: "
            "an interval of zero width says nothing about other questions"
        )
    return "no verdict recorded"


def pruning_switched_off(section: Any) -> str | None:
    """Why a ``decoding.primary.pruning`` section tested nothing: every seed's tuning chose pruning
    off (``pruning_off`` equals its number of seeds); None where some seed pruned."""
    if not isinstance(section, Mapping):
        return None
    seeds, off = section.get("rm_seeds") or [], section.get("pruning_off")
    if seeds and off == len(seeds):
        return f"every seed's tuning ({off} of {len(seeds)}) chose pruning off: nothing was pruned"
    return None


def mark_not_tested(summary: Any, why: str | None) -> Any:
    """``summary`` marked ``not tested`` for ``why`` (an older summary that recorded no verdict of its
    own); unchanged when ``why`` is None or the summary records its verdict."""
    if why is None or not isinstance(summary, Mapping) or summary.get("verdict"):
        return summary
    return {**summary, "verdict": NOT_TESTED, "holds": None, "reason": why}


def mde(summary: Any, alpha: float = 0.05) -> float | None:
    """The minimum detectable effect at 80% power: the one the run recorded, else (a summary written
    before it was recorded) the one its own t-interval over seeds implies,
    ``(t_{n−1, 1−α/2} + t_{n−1, 0.8}) · s/√n`` from its ``per_seed`` values; None where neither exists.

    >>> round(mde({"per_seed": [0.01, -0.02, 0.03, 0.0, -0.01]}), 3)
    0.032
    """
    if not isinstance(summary, Mapping):
        return None
    recorded = num(summary.get("mde"))
    if recorded is not None or "mde" in summary:
        return recorded
    values = [v for v in (num(x) for x in summary.get("per_seed") or []) if v is not None]
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    if sd == 0:
        return None
    from scipy import stats  # only where an older file is read

    return float((stats.t.ppf(1 - alpha / 2, n - 1) + stats.t.ppf(POWER, n - 1)) * sd / math.sqrt(n))


def _effect(x: float, scale: float, digits: int, unit: str) -> str:
    text = f"{abs(x) * scale:.{digits}f}"
    return text + unit


def words(
    summary: Any,
    *,
    holds: str = HOLDS,
    reversed_: str = REVERSED,
    not_shown: str = NOT_SHOWN,
    switched_off: bool = False,
    scale: float = 1.0,
    digits: int = 2,
    unit: str = "",
) -> str:
    """The verdict in words: ``holds`` / ``reversed`` / ``not shown`` (each replaceable by the caller's
    words), the latter with the minimum detectable effect when the run recorded one; ``not tested`` and
    ``undefined`` with their reason. ``scale``/``digits``/``unit`` show the effect as the figure is shown.

    >>> s = {"verdict": "not shown", "mde": 0.051}
    >>> words(s)
    'not shown (an effect of 0.05 would have been seen with 80% power)'
    >>> words({"verdict": "reversed"}, reversed_="reversed: the baseline ranks better")
    'reversed: the baseline ranks better'
    >>> words({"holds": None, "reason": "1 of 5 seeds defined"})
    'undefined (1 of 5 seeds defined)'
    """
    s = state(summary, switched_off)
    if s == HOLDS:
        return holds
    if s == REVERSED:
        return reversed_
    if s == NOT_SHOWN:
        m = mde(summary)
        if m is None:
            return not_shown
        if m == 0:
            return f"{not_shown} (no variation in any seed or question: no effect could be seen)"
        return (
            f"{not_shown} (an effect of {_effect(m, scale, digits, unit)} would have been seen with {POWER:.0%} power)"
        )
    return f"{s} ({reason(summary, switched_off)})"


def short(summary: Any, switched_off: bool = False) -> str:
    """The state alone, for a table cell or a comparison of runs (``not shown`` without its effect)."""
    return state(summary, switched_off)


def policy_scope(policy_seeds: Any) -> str:
    """How far a run's conclusions reach: "for this policy (policy seed 0)" unless the primary
    conclusions pool two or more policy seeds.

    >>> policy_scope([0]), policy_scope([0, 1]), policy_scope(None)
    ('for this policy (policy seed 0)', 'over 2 policy seeds', 'for this policy')
    """
    seeds = [s for s in policy_seeds if num(s) is not None] if isinstance(policy_seeds, (list, tuple)) else []
    if len(seeds) >= 2:
        return f"over {len(seeds)} policy seeds"
    return f"for this policy (policy seed {int(seeds[0])})" if seeds else "for this policy"


MOSTLY_WRONG = 0.5  # below this share of correct steered solutions, a style rate counts words in wrong answers


def steering_cost(accuracy: float | None, accuracy_unguided: float | None) -> str:
    """What steering toward a style cost in correctness, in words: both accuracies where the steered one is
    below the unguided one, and, whichever is higher, that where most steered solutions are wrong their
    style share counts explanation words in wrong solutions; empty where either is unknown, or where
    steering cost nothing and most steered solutions are right.

    >>> steering_cost(0.094, 0.125)[:60]
    'Steering costs correctness: 9.4% of the steered solutions ar'
    >>> steering_cost(0.31, 0.12)[:73]
    'Steering costs no correctness (31.0% of the steered solutions are correct'
    >>> steering_cost(0.6, 0.4)
    ''
    """

    def known(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")

    if not (known(accuracy) and known(accuracy_unguided)):
        return ""
    both = (
        f"{100 * accuracy:.1f}% of the steered solutions are correct, against {100 * accuracy_unguided:.1f}% unguided"
    )
    mostly_wrong = accuracy < MOSTLY_WRONG
    if accuracy >= accuracy_unguided and not mostly_wrong:
        return ""
    words = (
        "their style share counts explanation words in wrong solutions: a style rate bought this way is not a success"
    )
    if accuracy < accuracy_unguided:
        wrong = f", so most steered solutions are wrong and {words}" if mostly_wrong else ""
        return f"Steering costs correctness: {both}{wrong}."
    return f"Steering costs no correctness ({both}), but most steered solutions are wrong, and {words}."
