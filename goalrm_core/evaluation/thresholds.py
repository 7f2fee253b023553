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


def choose_threshold(candidates: Sequence[float] | np.ndarray, outcome: Callable[[float], Mapping]) -> tuple[float, pd.DataFrame]:
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
    best = table.sort_values(["n_correct", "tokens", "threshold"], ascending=[False, True, True], kind="stable").index[0]
    return float(table.loc[best, "threshold"]), table.assign(chosen=table.index == best)
