"""AUROC of scores against correctness, with bootstrap intervals: one scorer
(`bootstrap_auroc`), the paired difference of two scorers on the same generations
(`paired_bootstrap_delta`), and AUROC of partial generations (`prefix_index`, `partial_auroc`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from goalrm_core.evaluation.stats import check_alpha, percentile_interval

#: Percentiles of a response at which partial AUROC is reported (0 = first token, 1 = last).
DEFAULT_PERCENTILES: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))

# The bootstrap builds a (resamples x items) weight matrix; it is processed in chunks of at most
# this many cells (~32 MB of float64) so memory stays bounded for large evaluation sets.
_MAX_BOOTSTRAP_CELLS = 4_000_000


# --------------------------------------------------------------------------------------------
# AUROC with a vectorised bootstrap
# --------------------------------------------------------------------------------------------


@dataclass
class AurocResult:
    """AUROC of scores against binary labels with a percentile-bootstrap interval.

    ``auroc`` is the estimate on the full data; ``ci_low``/``ci_high`` the ``1 - alpha`` interval
    over the bootstrap resamples that contained both classes (``n_boot_used``); resamples with a
    single class have no AUROC and are skipped and counted (``n_boot_skipped``). When the data
    itself has a single class, all three numbers are NaN and ``undefined_reason`` says why.
    """

    auroc: float
    ci_low: float
    ci_high: float
    n: int
    n_positive: int
    undefined_reason: str | None
    n_boot_used: int = 0
    n_boot_skipped: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _binary_labels(labels: Any) -> np.ndarray:
    """Labels as float 0/1 (float so they can weight bincounts directly)."""
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got shape {y.shape}")
    y = y.astype(np.float64)
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("labels must be booleans or 0/1")
    return y


def _scores(scores: Any, n: int, name: str = "scores") -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.shape[0] != n:
        raise ValueError(f"{name} must be one-dimensional with {n} entries (one per label), got shape {s.shape}")
    if np.isnan(s).any():
        raise ValueError(f"{name} contain NaN at positions {np.flatnonzero(np.isnan(s))[:10].tolist()}")
    return s


def _single_class_reason(
    n: int, n_positive: int, items: str = "generations", positive: str = "correct", negative: str = "incorrect"
) -> str | None:
    if n == 0:
        return f"no {items}: AUROC undefined"
    if n_positive == n:
        return f"all {n} {items} are {positive}: AUROC undefined"
    if n_positive == 0:
        return f"all {n} {items} are {negative}: AUROC undefined"
    return None


class _SortedScores:
    """Scores sorted once, with the boundaries of runs of equal scores (tie groups).

    A bootstrap resample contains the same items in the same score order, only with different
    multiplicities, so the expensive sort happens once and each resample is a weighted count.
    """

    def __init__(self, scores: np.ndarray):
        self.order = np.argsort(scores, kind="stable")
        ordered = scores[self.order]
        self.group_starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])


def _weighted_auroc(weights: np.ndarray, labels: np.ndarray, sorted_scores: _SortedScores) -> np.ndarray:
    """AUROC for each row of ``weights`` (resamples x items, item multiplicities in input order).

    Mann-Whitney U counted per tie group g, so ties count half as in the standard AUROC:
    ``U = sum_g pos_g * (neg_below_g + neg_g / 2) = sum_g pos_g * cumneg_g - sum_g pos_g * neg_g / 2``
    and ``AUROC = U / (n_pos * n_neg)``. Without ties every group is one item, which is either
    positive or negative, so the second sum vanishes. Rows without a positive or without a
    negative get NaN.
    """
    w = weights[:, sorted_scores.order]
    pos = w * labels[sorted_scores.order].astype(w.dtype)
    neg = w - pos
    ties = sorted_scores.group_starts.size < w.shape[1]
    if ties:  # sum each run of equal scores into one group
        pos = np.add.reduceat(pos, sorted_scores.group_starts, axis=1)
        neg = np.add.reduceat(neg, sorted_scores.group_starts, axis=1)
    cumneg = np.cumsum(neg, axis=1)
    u = np.einsum("ij,ij->i", pos, cumneg).astype(np.float64)
    if ties:
        u -= 0.5 * np.einsum("ij,ij->i", pos, neg)
    denom = pos.sum(axis=1).astype(np.float64) * cumneg[:, -1]
    out = np.full(u.shape, np.nan)
    ok = denom > 0
    out[ok] = u[ok] / denom[ok]
    return out


def _resample_weights(rng: np.random.Generator, n_boot: int, n: int, clusters: Any = None):
    """Yield chunks of bootstrap item multiplicities, shape (rows, n), in input order.

    Without ``clusters`` items are resampled independently. With ``clusters`` (one id per item),
    whole clusters are resampled and every item inherits its cluster's multiplicity: use it when
    items are correlated, e.g. the 50 samples of one question or the prefixes of one generation,
    otherwise the interval comes out too narrow.
    """
    if clusters is None:
        unit_of_item, n_units = None, n
    else:
        ids = np.asarray(clusters)
        if ids.shape != (n,):
            raise ValueError(f"clusters must have one id per item ({n}), got shape {ids.shape}")
        _, unit_of_item = np.unique(ids, return_inverse=True)
        n_units = int(unit_of_item.max()) + 1
    rows_per_chunk = max(1, _MAX_BOOTSTRAP_CELLS // max(n, n_units, 1))
    done = 0
    while done < n_boot:
        rows = min(rows_per_chunk, n_boot - done)
        draws = rng.integers(0, n_units, size=(rows, n_units))
        flat = (np.arange(rows)[:, None] * n_units + draws).ravel()
        counts = np.bincount(flat, minlength=rows * n_units).reshape(rows, n_units)
        yield counts if unit_of_item is None else counts[:, unit_of_item]
        done += rows


def _check_n_boot(n_boot: int) -> None:
    if int(n_boot) != n_boot or n_boot < 0:
        raise ValueError(f"n_boot must be a non-negative integer, got {n_boot}")


def bootstrap_auroc(
    scores: Any,
    labels: Any,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    clusters: Any = None,
) -> AurocResult:
    """AUROC of ``scores`` for separating ``labels == 1`` (correct) from 0, with a bootstrap CI.

    The interval is the percentile interval over ``n_boot`` resamples drawn with
    ``numpy.random.default_rng(seed)``, so the same seed gives the same interval. Pass
    ``clusters`` (e.g. question ids) to resample whole clusters of correlated items.
    1000 resamples of 5,000 items take a fraction of a second: each resample is a row of item
    multiplicities and all rows are scored at once.
    """
    return clustered_bootstrap_auroc(
        scores, labels, n_boot, seed, alpha, clusters, ("generations", "correct", "incorrect")
    )


def clustered_bootstrap_auroc(
    scores: Any, labels: Any, n_boot: int, seed: int, alpha: float, clusters: Any, wording: tuple[str, str, str]
) -> AurocResult:
    """``bootstrap_auroc`` with the words its undefined_reason uses: (items, positive, negative)."""
    check_alpha(alpha)
    _check_n_boot(n_boot)
    y = _binary_labels(labels)
    s = _scores(scores, y.size)
    n, n_pos = int(y.size), int(y.sum())
    reason = _single_class_reason(n, n_pos, *wording)
    if reason is not None:
        return AurocResult(math.nan, math.nan, math.nan, n, n_pos, reason)
    sorted_scores = _SortedScores(s)
    point = float(_weighted_auroc(np.ones((1, n), dtype=np.int64), y, sorted_scores)[0])
    rng = np.random.default_rng(seed)
    chunks = [_weighted_auroc(w, y, sorted_scores) for w in _resample_weights(rng, n_boot, n, clusters)]
    boots = np.concatenate(chunks) if chunks else np.empty(0)
    valid = boots[np.isfinite(boots)]
    low, high = percentile_interval(valid, alpha)
    return AurocResult(point, low, high, n, n_pos, None, int(valid.size), int(n_boot - valid.size))


# --------------------------------------------------------------------------------------------
# Paired difference of two scorers on the same generations
# --------------------------------------------------------------------------------------------


def delta_of(summary: Mapping[str, Any]) -> Any:
    """The difference a :func:`paired_bootstrap_delta` summary holds (``evaluation.delta_auroc.<bench>``
    in metrics.json): its ``delta``, or ``mean``, the name older metrics.json files give it; None
    when neither is there.

    >>> delta_of({"delta": 0.1, "ci_low": 0.0}), delta_of({"mean": 0.1}), delta_of({})
    (0.1, 0.1, None)
    """
    return summary.get("delta", summary.get("mean"))


def paired_bootstrap_delta(
    scores_a: Any,
    scores_b: Any,
    labels: Any,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    clusters: Any = None,
) -> dict[str, Any]:
    """AUROC(a) - AUROC(b) on the same generations, resampling both with the same indices.

    Pairing matters: the two RMs see identical generations, so most of the resampling noise is
    shared and cancels in the difference; two independent intervals would overlap far more.

    Returns ``delta`` (the difference on the full data), ``ci_low``/``ci_high`` (percentile
    interval of the resampled differences), ``p_value_two_sided`` (bootstrap p-value for
    "no difference": ``2 * min(P(delta* <= 0), P(delta* >= 0))``, capped at 1, resolution
    ``1 / n_boot``), both AUROCs, the counts, and ``undefined_reason`` (NaNs when the labels
    have a single class).
    """
    check_alpha(alpha)
    _check_n_boot(n_boot)
    y = _binary_labels(labels)
    a = _scores(scores_a, y.size, "scores_a")
    b = _scores(scores_b, y.size, "scores_b")
    n, n_pos = int(y.size), int(y.sum())
    out: dict[str, Any] = {
        "delta": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "p_value_two_sided": math.nan,
        "auroc_a": math.nan,
        "auroc_b": math.nan,
        "n": n,
        "n_positive": n_pos,
        "n_boot_used": 0,
        "n_boot_skipped": 0,
        "undefined_reason": _single_class_reason(n, n_pos),
    }
    if out["undefined_reason"] is not None:
        return out
    sorted_a, sorted_b = _SortedScores(a), _SortedScores(b)
    ones = np.ones((1, n), dtype=np.int64)
    out["auroc_a"] = float(_weighted_auroc(ones, y, sorted_a)[0])
    out["auroc_b"] = float(_weighted_auroc(ones, y, sorted_b)[0])
    out["delta"] = out["auroc_a"] - out["auroc_b"]
    rng = np.random.default_rng(seed)
    deltas = [
        _weighted_auroc(w, y, sorted_a) - _weighted_auroc(w, y, sorted_b)
        for w in _resample_weights(rng, n_boot, n, clusters)
    ]
    d = np.concatenate(deltas) if deltas else np.empty(0)
    d = d[np.isfinite(d)]
    out["n_boot_used"], out["n_boot_skipped"] = int(d.size), int(n_boot - d.size)
    out["ci_low"], out["ci_high"] = percentile_interval(d, alpha)
    if d.size:
        out["p_value_two_sided"] = float(min(1.0, 2 * min(np.mean(d <= 0), np.mean(d >= 0))))
    return out


# --------------------------------------------------------------------------------------------
# Partial generations
# --------------------------------------------------------------------------------------------


def prefix_index(num_tokens: int, pct: float) -> int:
    """Index of the last token of the prefix that holds the first ``pct`` of a response.

    Defined as ``max(0, ceil(pct * num_tokens) - 1)``: pct 0 is the first token, pct 1 the last,
    and pct 0.5 of 10 tokens is index 4 (the prefix of tokens 0..4). ``pct * num_tokens`` is
    rounded to 9 decimals before the ceiling so that float noise (0.3 * 10 = 3.0000000000000004)
    does not push the index one token further.
    """
    if int(num_tokens) != num_tokens or num_tokens < 1:
        raise ValueError(f"num_tokens must be a positive integer, got {num_tokens}")
    if not 0 <= pct <= 1:
        raise ValueError(f"pct must lie in [0, 1], got {pct}")
    return max(0, math.ceil(round(pct * int(num_tokens), 9)) - 1)


def per_token_arrays(per_token: Sequence[Any], name: str) -> list[np.ndarray]:
    arrays = []
    for i, values in enumerate(per_token):
        arr = np.asarray(values, dtype=np.float64).ravel()
        if arr.size == 0:
            raise ValueError(f"{name}[{i}] is empty: a generation needs at least one per-token value")
        arrays.append(arr)
    return arrays


def values_at(arrays: list[np.ndarray], pct: float) -> np.ndarray:
    return np.array([arr[prefix_index(arr.size, pct)] for arr in arrays], dtype=np.float64)


def partial_auroc(
    per_token_scores: Sequence[Any],
    labels: Any,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    clusters: Any = None,
) -> pd.DataFrame:
    """AUROC of partial generations: each generation is scored by its per-token value at
    ``prefix_index(len, pct)`` (a partial reward or a Q-value), for every ``pct``.

    This asks how early an RM can tell a correct solution from an incorrect one. One row per
    percentile with columns ``percentile, auroc, ci_low, ci_high, n, n_positive,
    undefined_reason``; every percentile uses the same seed, so the rows are comparable.
    """
    arrays = per_token_arrays(per_token_scores, "per_token_scores")
    y = _binary_labels(labels)
    if len(arrays) != y.size:
        raise ValueError(f"{len(arrays)} per-token score arrays but {y.size} labels")
    rows = []
    for pct in percentiles:
        res = bootstrap_auroc(values_at(arrays, pct), y, n_boot=n_boot, seed=seed, alpha=alpha, clusters=clusters)
        rows.append(
            {
                "percentile": float(pct),
                "auroc": res.auroc,
                "ci_low": res.ci_low,
                "ci_high": res.ci_high,
                "n": res.n,
                "n_positive": res.n_positive,
                "undefined_reason": res.undefined_reason,
            }
        )
    columns = ["percentile", "auroc", "ci_low", "ci_high", "n", "n_positive", "undefined_reason"]
    import pandas as pd  # here: a command that only declares its flags loads no pandas

    return pd.DataFrame(rows, columns=columns)
