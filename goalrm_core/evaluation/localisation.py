"""Does Q fall at the first error? A difference in differences over line-end Q.

The earlier figure, "mean Q after the first error minus mean Q before it", compares a solution's last tokens
(whose state always sits near the goal state, right or wrong) with its first ones: it measures position, and a Q
that only rises along a solution looks "reversed". The difference in differences compares like with like:

- for an incorrect solution whose first wrong line is ``k ≥ 1``: the change of line-end Q from line ``k − 1`` to
  line ``k`` (``Δ_err``);
- the same change at line ``k`` in **reference** correct solutions (``Δ_ref``), chosen in this order, fixed before
  the power run (reports/confident/analysis-plan.md): correct solutions of the same question reaching line ``k``;
  else correct solutions of other questions with the same number of lines; else any correct solution reaching
  line ``k``;
- ``DiD = mean over incorrect solutions of (Δ_err − Δ_ref)``. A Q that drops at the error gives DiD < 0; a Q that
  rises with position and ignores errors gives DiD ≈ 0.

Solutions with ``k = 0`` (no line before the error) or no reference are counted, not used. The reference means are
taken as fixed within the question bootstrap (they pool many solutions; their noise is second order).

>>> rising = [0.1, 0.2, 0.3, 0.4]
>>> r = first_error_did([rising, rising, rising], [None, None, 2], [True, True, False], ["a", "b", "c"])
>>> round(r.did, 6), r.references
(0.0, {'same question': 0, 'same length': 1, 'any length': 0, 'none': 0, 'first line': 0})
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

#: the references in the order they are tried
REFERENCES = ("same question", "same length", "any length")


@dataclass(frozen=True)
class DidResult:
    """:func:`first_error_did`'s figures: ``did`` (NaN with no usable solution), each used solution's
    contribution ``Δ_err − Δ_ref`` and its question, and how many solutions each reference served
    (``none``: no reference reached the line; ``first line``: the error is on line 0)."""

    did: float
    contributions: np.ndarray
    questions: list[str]
    references: dict[str, int] = field(default_factory=dict)
    mean_error_change: float = math.nan
    mean_reference_change: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        return {
            "did": self.did,
            "n": int(self.contributions.size),
            "references": dict(self.references),
            "mean_error_change": self.mean_error_change,
            "mean_reference_change": self.mean_reference_change,
        }


def _change(q: Sequence[float], k: int) -> float:
    return float(q[k]) - float(q[k - 1])


def first_error_did(
    line_q: Sequence[Sequence[float]],
    first_error_line: Sequence[int | None],
    correct: Sequence[bool],
    question: Sequence[str],
    references: Sequence[str] = REFERENCES,
) -> DidResult:
    """The difference in differences of line-end Q at the first error (module docstring). ``line_q[i]``: solution
    ``i``'s Q at each line's last token; ``first_error_line[i]``: its first wrong line (None where correct or not
    located); ``correct[i]``; ``question[i]``. ``references``: the reference correct solutions tried, in order
    (names from :data:`REFERENCES`; the analysis plan's order is the default)."""
    unknown = [r for r in references if r not in REFERENCES]
    if unknown or not references or len(set(references)) != len(references):
        raise ValueError(
            f"first_error_did: references {list(references)!r}: give each of {', '.join(REFERENCES)} at most once"
        )
    n = len(line_q)
    if not (len(first_error_line) == len(correct) == len(question) == n):
        raise ValueError(
            f"first_error_did: {n} Q traces but {len(first_error_line)} first-error lines, "
            f"{len(correct)} labels and {len(question)} questions"
        )
    by_question: dict[tuple[str, int], list[float]] = defaultdict(list)
    by_length: dict[tuple[int, int], list[float]] = defaultdict(list)
    anywhere: dict[int, list[float]] = defaultdict(list)
    for q, ok, qid in zip(line_q, correct, question):
        if not ok:
            continue
        for k in range(1, len(q)):
            d = _change(q, k)
            by_question[(qid, k)].append(d)
            by_length[(len(q), k)].append(d)
            anywhere[k].append(d)
    counts = {name: 0 for name in (*REFERENCES, "none", "first line")}
    contributions, questions, err_changes, ref_changes = [], [], [], []
    for q, e, ok, qid in zip(line_q, first_error_line, correct, question):
        if ok or e is None or int(e) >= len(q):
            continue
        k = int(e)
        if k == 0:
            counts["first line"] += 1
            continue
        pools = dict(zip(REFERENCES, (by_question.get((qid, k)), by_length.get((len(q), k)), anywhere.get(k))))
        for name in references:
            pool = pools[name]
            if pool:
                counts[name] += 1
                ref = float(np.mean(pool))
                break
        else:
            counts["none"] += 1
            continue
        d = _change(q, k)
        contributions.append(d - ref)
        questions.append(qid)
        err_changes.append(d)
        ref_changes.append(ref)
    values = np.asarray(contributions, dtype=np.float64)
    mean = float(values.mean()) if values.size else math.nan
    return DidResult(
        mean,
        values,
        questions,
        counts,
        float(np.mean(err_changes)) if err_changes else math.nan,
        float(np.mean(ref_changes)) if ref_changes else math.nan,
    )


def after_minus_before(
    line_q: Sequence[Sequence[float]], first_error_line: Sequence[int | None], correct: Sequence[bool]
) -> float:
    """The superseded figure on line-end Q, for comparison only: per incorrect solution with ``k ≥ 1``, the mean Q
    of lines ``k…`` minus the mean of lines ``…k−1``, averaged. It confounds position with errors (module
    docstring)."""
    deltas = [
        float(np.mean(q[int(e) :])) - float(np.mean(q[: int(e)]))
        for q, e, ok in zip(line_q, first_error_line, correct)
        if not ok and e is not None and 0 < int(e) < len(q)
    ]
    return float(np.mean(deltas)) if deltas else math.nan
