"""Small uncertainty helpers shared by the metrics: t and Wilson intervals, percentile
intervals of a bootstrap, and a paired t-test that says why it is undefined. scipy is imported by
the functions that compute with it, so that a command line that only declares its flags loads none of it."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence

import numpy as np

from goalrm_core.evaluation.numeric import num


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
    from scipy import stats

    half = stats.t.ppf(1 - alpha / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return mean, float(mean - half), float(mean + half)


def wilson_interval(n_success: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for a proportion (an accuracy over ``n`` questions).

    Chosen over the normal approximation because it stays inside [0, 1] and behaves at 0 % and
    100 %, which small smoke-profile evaluations hit often.
    """
    return wilson_rate_interval(n_success / n if n > 0 else math.nan, n, alpha)


def wilson_rate_interval(p: float, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """:func:`wilson_interval` of a proportion ``p`` over ``n`` trials, where the metrics record the
    rate and not the count; NaN where ``p`` or ``n`` is undefined or there are no trials.

    >>> [round(v, 3) for v in wilson_rate_interval(0.8, 100)]
    [0.711, 0.867]
    >>> wilson_rate_interval(float("nan"), 100)
    (nan, nan)
    """
    check_alpha(alpha)
    if num(p) is None or num(n) is None or n <= 0:
        return math.nan, math.nan
    z = _normal_quantile(1 - alpha / 2)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))


@functools.lru_cache(maxsize=16)
def _normal_quantile(q: float) -> float:
    """The standard normal's ``q`` quantile, computed once per ``q`` (a sweep of filter thresholds
    asks for the same one hundreds of times)."""
    from scipy import stats

    return stats.norm.ppf(q)


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
    from scipy import stats

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(stats.ttest_rel(after, before).pvalue)
    if math.isnan(p):
        return p, f"paired t-test undefined on these {what} (zero variance of the differences)"
    return p, None


def across_seeds(
    values: Sequence[float | None], null: float = 0.0, expect: str = "greater", alpha: float = 0.05
) -> dict:
    """One primary figure summarised over training seeds: mean ± t·s/√n, how many seeds point the
    expected way, and whether the conclusion holds (the t-interval lies wholly on the ``expect``
    side of ``null``).

    ``values`` holds one number per seed, ``None`` or NaN where that seed's figure is undefined;
    those seeds are counted apart and left out of the interval. ``holds`` is ``True``/``False``, or
    ``None`` with a ``reason`` when fewer than two seeds are defined (no spread to estimate):
    undefined is a state, never a verdict.

    >>> s = across_seeds([0.2, 0.25, 0.15])
    >>> s["n"], s["k"], s["holds"], round(s["mean"], 3)
    (3, 3, True, 0.2)
    >>> across_seeds([0.2, None])["holds"], across_seeds([0.2, None])["reason"]
    (None, '1 of 2 seeds defined: no spread over seeds to judge by')
    """
    if expect not in ("greater", "less"):
        raise ValueError(f"expect must be 'greater' or 'less', got {expect!r}")
    per_seed = [None if v is None or not math.isfinite(float(v)) else float(v) for v in values]
    defined = np.array([v for v in per_seed if v is not None], dtype=np.float64)
    mean, low, high = mean_ci(defined, alpha) if defined.size else (math.nan, math.nan, math.nan)
    side = (lambda v: v > null) if expect == "greater" else (lambda v: v < null)
    out = {
        "per_seed": per_seed,
        "n_seeds": len(per_seed),
        "n": int(defined.size),
        "mean": mean,
        "ci_low": low,
        "ci_high": high,
        "null": null,
        "expect": expect,
        "k": int(sum(side(v) for v in defined)),
        "holds": None,
        "reason": None,
    }
    if defined.size < 2:
        out["reason"] = f"{defined.size} of {len(per_seed)} seeds defined: no spread over seeds to judge by"
        return out
    if not (math.isfinite(low) and math.isfinite(high)):
        out["reason"] = "the t-interval over seeds is undefined"
        return out
    out["holds"] = bool(side(low) and side(high))
    if defined.size > 1 and float(defined.std(ddof=1)) > 0:
        from scipy import stats

        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            out["p_value"] = float(stats.ttest_1samp(defined, null).pvalue)
        # the t-interval's standard error, and the effect it would detect with 80% power:
        # (t_{n-1, 1-alpha/2} + t_{n-1, 0.8}) * s / sqrt(n)
        df = defined.size - 1
        out["se"] = float(defined.std(ddof=1)) / math.sqrt(defined.size)
        out["mde"] = float((stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(0.8, df)) * out["se"])
    else:
        out["p_value"] = math.nan
    return out


#: The spread an arm's per-seed AUROC may have (issue 50's target): an SD over RM seeds of at most this.
SD_TARGET = 0.03


def sd_upper(values: Sequence[float | None], power: float = 0.8) -> float:
    """The one-sided ``power`` upper confidence bound of the SD of ``values`` (chi-square, n − 1 df):
    ``sqrt((n − 1) s² / χ²_{1−power, n−1})``; undefined values (None, NaN) are left out, and fewer than
    two defined values give NaN.

    >>> round(sd_upper([0.611, 0.685, 0.786, 0.618, 0.650]), 3)  # SD 0.071 over 5 seeds
    0.111
    >>> sd_upper([0.5, None])
    nan
    """
    from scipy import stats

    v = np.asarray([float(x) for x in values if num(x) is not None], dtype=np.float64)
    if v.size < 2:
        return math.nan
    return float(math.sqrt((v.size - 1) * v.var(ddof=1) / stats.chi2.ppf(1 - power, v.size - 1)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order; NaN stays NaN and does not count as a test.

    >>> [round(p, 3) for p in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    """
    p = [float(v) if v is not None else math.nan for v in p_values]
    order = sorted((i for i, v in enumerate(p) if math.isfinite(v)), key=lambda i: p[i])
    m, running, out = len(order), 0.0, [math.nan] * len(p)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out
