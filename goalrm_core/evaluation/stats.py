"""Small uncertainty helpers shared by the metrics: t and Wilson intervals, percentile
intervals of a bootstrap, and a paired t-test that says why it is undefined."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats




def mean_ci(values: Sequence[float] | np.ndarray, alpha: float = 0.05) -> tuple[float, float, float]:
    """Mean and two-sided Student-t confidence interval, e.g. of a metric over training seeds.

    With one value there is no spread to estimate, so the bounds are NaN (not the value itself,
    which would pretend to certainty); with none, everything is NaN. NaN inputs propagate:
    filter them out first if a seed's metric was undefined and that is what you want.
    """
    check_alpha(alpha)
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size == 1:
        return mean, math.nan, math.nan
    half = stats.t.ppf(1 - alpha / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return mean, float(mean - half), float(mean + half)


def wilson_interval(n_success: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for a proportion (an accuracy over ``n`` questions).

    Chosen over the normal approximation because it stays inside [0, 1] and behaves at 0 % and
    100 %, which small smoke-profile evaluations hit often.
    """
    check_alpha(alpha)
    if n <= 0:
        return math.nan, math.nan
    z = stats.norm.ppf(1 - alpha / 2)
    p = n_success / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))


def check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")


def percentile_interval(values: np.ndarray, alpha: float) -> tuple[float, float]:
    if values.size == 0:
        return math.nan, math.nan
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)



def paired_t_pvalue(after: np.ndarray, before: np.ndarray, what: str) -> tuple[float, str | None]:
    """Two-sided paired t-test p-value, or NaN and the reason it is undefined."""
    d = after - before
    if d.size < 2:
        return math.nan, f"fewer than 2 {what}: paired t-test undefined"
    if np.all(d == 0):
        return math.nan, f"no difference on any of the {d.size} {what}: paired t-test undefined"
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(stats.ttest_rel(after, before).pvalue)
    if math.isnan(p):
        return p, f"paired t-test undefined on these {what} (zero variance of the differences)"
    return p, None
