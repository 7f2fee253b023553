"""One way to pick a Q threshold on held-out questions, whatever the threshold does.

A Q threshold is used twice: the offline filter drops a scored generation once its Q falls below
it (``metrics.choose_filter_threshold``), and online pruning stops a sample while it is generated
(``inference.pruning.choose_online_threshold``). Both pick it the same way and differ only in the
outcome a candidate threshold has on the validation questions, so the picking lives here and the
outcome is an argument: the most questions voted right, then the fewest tokens generated, then the
lower (less aggressive) threshold. Choose on validation questions and report on other ones, or the
reported accuracy is tuned on itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

#: What ``outcome(threshold)`` must report: integer counts, so ties are exact.
OUTCOME_KEYS = ("threshold", "n_correct", "tokens")


def choose_threshold(
    candidates: Sequence[float] | np.ndarray, outcome: Callable[[float], Mapping]
) -> tuple[float, pd.DataFrame]:
    """The candidate whose ``outcome`` has the most ``n_correct``, then the fewest ``tokens``
    (generated, so fewer is cheaper), then the lowest ``threshold``.

    ``outcome(threshold)`` returns one table row with at least ``OUTCOME_KEYS``. Returns the chosen
    threshold and the table of all candidates, ``chosen`` marking the winner.

    >>> outcome = lambda t: {"threshold": t, "n_correct": 3 if t < 0.5 else 2, "tokens": 100 - int(100 * t)}
    >>> choose_threshold([0.0, 0.2, 0.6], outcome)[0]
    0.2
    """
    cands = np.asarray(candidates, dtype=np.float64).ravel()
    if cands.size == 0:
        raise ValueError("no candidate thresholds")
    import pandas as pd  # here: a command that only declares its flags loads no pandas

    table = pd.DataFrame([dict(outcome(float(t))) for t in cands])
    missing = [k for k in OUTCOME_KEYS if k not in table.columns]
    if missing:
        raise ValueError(f"the outcome of a threshold lacks {', '.join(missing)}")
    best = table.sort_values(["n_correct", "tokens", "threshold"], ascending=[False, True, True], kind="stable").index[
        0
    ]
    return float(table.loc[best, "threshold"]), table.assign(chosen=table.index == best)


def choose_cheapest_within(
    candidates: Sequence[float] | np.ndarray,
    outcome: Callable[[float], Mapping],
    n_questions: int,
    max_drop: float = 0.01,
) -> tuple[float, pd.DataFrame]:
    """The frontier's rule: among the candidates whose ``outcome`` votes at most ``max_drop`` (a
    fraction of the ``n_questions``) fewer questions right than ``n_correct_unfiltered``, the one with
    the fewest ``tokens``, then the most ``n_correct``, then the lowest ``threshold``; where none
    qualifies, :func:`choose_threshold`'s pick. ``outcome`` also reports ``n_correct_unfiltered``.

    >>> outcome = lambda t: {"threshold": t, "n_correct": [100, 100, 99, 90][int(10 * t)], "n_correct_unfiltered": 100,
    ...                      "tokens": 1000 - int(1000 * t)}
    >>> (
    ...     choose_threshold([0.0, 0.1, 0.2, 0.3], outcome)[0],
    ...     choose_cheapest_within([0.0, 0.1, 0.2, 0.3], outcome, 100)[0],
    ... )
    (0.1, 0.2)
    """
    if not 0.0 <= max_drop < 1.0:
        raise ValueError(f"max_drop must be in [0, 1), got {max_drop}")
    if n_questions < 1:
        raise ValueError(f"n_questions must be >= 1, got {n_questions}")
    fallback, table = choose_threshold(candidates, outcome)
    if "n_correct_unfiltered" not in table.columns:
        raise ValueError("the outcome of a threshold lacks n_correct_unfiltered")
    within = table[table["n_correct_unfiltered"] - table["n_correct"] <= max_drop * n_questions + 1e-9]
    if within.empty:
        return fallback, table
    best = within.sort_values(["tokens", "n_correct", "threshold"], ascending=[True, False, True], kind="stable").index[
        0
    ]
    return float(table.loc[best, "threshold"]), table.assign(chosen=table.index == best)
