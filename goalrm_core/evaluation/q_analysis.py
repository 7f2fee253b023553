"""What Q-values say before the end of a generation: their correlation with the final reward, and
whether they fall at a solution's first error (paired means, and AUROC of prefixes)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from goalrm_core.evaluation.auroc import AurocResult, clustered_bootstrap_auroc, per_token_arrays, values_at
from goalrm_core.evaluation.stats import mean_ci, paired_t_pvalue

# --------------------------------------------------------------------------------------------
# Q-values against the final reward
# --------------------------------------------------------------------------------------------


def q_reward_correlation(
    rewards: Any,
    per_token_q: Sequence[Any],
    percentiles: Sequence[float] = (0.2, 0.4, 0.6, 0.8),
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Pearson and Spearman correlation between each generation's Q-value at a percentile of the
    response and its final reward.

    A goal-conditioned RM whose Q-values already track the final reward early on can be used to
    stop or steer generation; this table shows how early. Columns: ``percentile, n, pearson_r,
    pearson_ci_low, pearson_ci_high`` (Fisher-z interval), ``pearson_p, spearman_rho,
    spearman_p, undefined_reason`` (NaNs with a reason for constant inputs or n < 3).
    """
    arrays = per_token_arrays(per_token_q, "per_token_q")
    r = np.asarray(rewards, dtype=np.float64).ravel()
    if r.size != len(arrays):
        raise ValueError(f"{r.size} rewards but {len(arrays)} per-token Q arrays")
    columns = [
        "percentile", "n", "pearson_r", "pearson_ci_low", "pearson_ci_high",
        "pearson_p", "spearman_rho", "spearman_p", "undefined_reason",
    ]  # fmt: skip
    rows = []
    for pct in percentiles:
        q = values_at(arrays, pct)
        row = dict.fromkeys(columns, math.nan)
        row.update(percentile=float(pct), n=int(r.size), undefined_reason=None)
        if r.size < 3:
            row["undefined_reason"] = f"only {r.size} generations: correlation needs at least 3"
        elif np.ptp(q) == 0 or np.ptp(r) == 0:
            row["undefined_reason"] = "Q-values or rewards are constant: correlation undefined"
        else:
            pearson = stats.pearsonr(q, r)
            ci = pearson.confidence_interval(confidence_level=1 - alpha)
            spearman = stats.spearmanr(q, r)
            row.update(
                pearson_r=float(pearson.statistic),
                pearson_ci_low=float(ci.low),
                pearson_ci_high=float(ci.high),
                pearson_p=float(pearson.pvalue),
                spearman_rho=float(spearman.statistic),
                spearman_p=float(spearman.pvalue),
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------------------------
# Do Q-values fall at the first error?
# --------------------------------------------------------------------------------------------
#
# ``first_error_token[i]`` is the index of the response token at which generation i makes its
# first mistake, or None when it has none (a correct generation) or it is unknown.


def first_error_q_stats(
    per_token_q: Sequence[Any],
    first_error_token: Sequence[int | None],
    skip_first: int = 0,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Mean Q before vs at/after the first error, paired within each erroneous generation.

    For every generation with a known first-error index ``e``: ``before = mean(q[skip_first:e])``
    and ``after = mean(q[e:])``. Generations with ``e <= skip_first`` have no prefix to compare
    with and are counted in ``n_excluded``. Returns the means with t intervals, the mean paired
    difference ``after - before`` with its interval, the paired t-test p-value
    (``scipy.stats.ttest_rel``; NaN with ``undefined_reason`` if undefined), and
    ``fraction_lower_after`` (share of generations whose Q is lower after the error).
    A goal-conditioned RM should show a negative difference: the error moves the state away
    from the goal.
    """
    if len(per_token_q) != len(first_error_token):
        raise ValueError(f"{len(per_token_q)} Q arrays but {len(first_error_token)} first-error entries")
    arrays = per_token_arrays(per_token_q, "per_token_q")
    before, after = [], []
    n_excluded = 0
    for i, (q, e) in enumerate(zip(arrays, first_error_token)):
        if e is None:
            continue
        e = int(e)
        if not 0 <= e < q.size:
            raise ValueError(f"first_error_token[{i}] = {e} is outside the {q.size} tokens of that generation")
        if e <= skip_first:
            n_excluded += 1
            continue
        before.append(q[skip_first:e].mean())
        after.append(q[e:].mean())
    b, a = np.asarray(before), np.asarray(after)
    mb, mb_lo, mb_hi = mean_ci(b, alpha)
    ma, ma_lo, ma_hi = mean_ci(a, alpha)
    md, md_lo, md_hi = mean_ci(a - b, alpha)
    p, reason = paired_t_pvalue(a, b, "generations with a known first error")
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        t_stat = float(stats.ttest_rel(a, b).statistic) if reason is None else math.nan
    return {
        "n": int(b.size),
        "n_excluded": n_excluded,
        "mean_q_before": mb,
        "mean_q_before_ci_low": mb_lo,
        "mean_q_before_ci_high": mb_hi,
        "mean_q_after": ma,
        "mean_q_after_ci_low": ma_lo,
        "mean_q_after_ci_high": ma_hi,
        "mean_delta": md,
        "delta_ci_low": md_lo,
        "delta_ci_high": md_hi,
        "t_statistic": t_stat,
        "p_value": p,
        "fraction_lower_after": float(np.mean(a < b)) if b.size else math.nan,
        "undefined_reason": reason,
    }


def prefix_error_auroc(
    per_token_q: Sequence[Any],
    first_error_token: Sequence[int | None],
    is_correct: Sequence[bool],
    stride: int = 1,
    skip_first: int = 0,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> AurocResult:
    """How well ``-Q`` at a prefix detects that the prefix already contains an error.

    Definition: every generation contributes one example per prefix ending at token
    ``t = skip_first, skip_first + stride, ...`` (< its length). The label is 1 when the prefix
    contains the error (``t >= first_error_token``) and 0 otherwise; correct generations
    contribute only 0-labelled prefixes; incorrect generations whose first error is unknown are
    left out. The score is ``-q[t]`` (a low Q-value should signal an error), so the returned
    AUROC's positive class is "contains an error". Prefixes of one generation are strongly
    correlated, so the bootstrap resamples whole generations.
    """
    if not len(per_token_q) == len(first_error_token) == len(is_correct):
        raise ValueError("per_token_q, first_error_token and is_correct must have the same length")
    if int(stride) != stride or stride < 1:
        raise ValueError(f"stride must be a positive integer, got {stride}")
    arrays = per_token_arrays(per_token_q, "per_token_q")
    scores, labels, generation = [], [], []
    for i, (q, e, ok) in enumerate(zip(arrays, first_error_token, is_correct)):
        if ok and e is not None:
            raise ValueError(f"generation {i} is marked correct but has a first error at token {e}")
        if not ok and e is None:
            continue
        t = np.arange(int(skip_first), q.size, int(stride))
        scores.append(-q[t])
        labels.append(np.zeros(t.size) if ok else (t >= int(e)).astype(np.float64))
        generation.append(np.full(t.size, i))

    def cat(parts):
        return np.concatenate(parts) if parts else np.empty(0)

    return clustered_bootstrap_auroc(
        cat(scores),
        cat(labels),
        n_boot,
        seed,
        alpha,
        cat(generation) if generation else None,
        ("prefixes", "after an error", "error-free"),
    )


# --------------------------------------------------------------------------------------------
# What moves Q: the token, its position, or the correctness of the prefix
# --------------------------------------------------------------------------------------------


def q_token_frame(
    per_token_q: Sequence[Any],
    token_types: Sequence[Sequence[str]],
    first_error_token: Sequence[int | None],
    correct: Sequence[bool],
    skip_first: int = 0,
) -> pd.DataFrame:
    """One row per response token of every generation: ``generation``, ``position``, ``token_type``
    (the caller's classes, e.g. digit / operator / newline), ``q``, ``correct`` (the whole
    generation) and ``prefix_wrong`` (the token is at or after the generation's first error). The
    first ``skip_first`` tokens are left out, as the filters leave them out."""
    if not len(per_token_q) == len(token_types) == len(first_error_token) == len(correct):
        raise ValueError("per_token_q, token_types, first_error_token and correct must have one entry per generation")
    arrays = per_token_arrays(per_token_q, "per_token_q")
    parts = []
    for g, (q, types, err, ok) in enumerate(zip(arrays, token_types, first_error_token, correct)):
        if len(types) != len(q):
            raise ValueError(f"generation {g}: {len(types)} token types for {len(q)} Q-values")
        pos = np.arange(skip_first, len(q))
        wrong = np.zeros(len(pos), dtype=bool) if err is None else pos >= err
        parts.append(
            pd.DataFrame(
                {
                    "generation": g,
                    "position": pos,
                    "token_type": np.asarray(types, dtype=object)[pos],
                    "q": q[pos],
                    "correct": bool(ok),
                    "prefix_wrong": wrong,
                }
            )
        )
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["generation", "position", "token_type", "q", "correct", "prefix_wrong"])
    )


def _r2(y: np.ndarray, design: np.ndarray) -> float:
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    total = float(((y - y.mean()) ** 2).sum())
    return math.nan if total == 0 else 1.0 - float((resid**2).sum()) / total


def q_variance_shares(frame: pd.DataFrame, max_position: int = 64) -> pd.DataFrame:
    """How much of Q's variance over tokens each factor explains (least squares, one-hot factors):
    each factor alone (R²), and what it adds to the other two (the drop in R² when it is left out).
    Positions beyond ``max_position`` share one level. A Q that tracks progress toward a correct
    answer is explained by ``prefix_wrong``; one that tracks the kind of character, by ``token_type``."""
    if len(frame) < 3:
        return pd.DataFrame(columns=["factor", "r2_alone", "r2_added_last"])
    y = frame["q"].to_numpy(dtype=float)
    blocks = {
        "token_type": pd.get_dummies(frame["token_type"].astype(str), drop_first=True).to_numpy(dtype=float),
        "position": pd.get_dummies(frame["position"].clip(upper=max_position), drop_first=True).to_numpy(dtype=float),
        "prefix_wrong": frame[["prefix_wrong"]].to_numpy(dtype=float),
    }
    ones = np.ones((len(y), 1))
    full = _r2(y, np.hstack([ones, *blocks.values()]))
    rows = []
    for name, block in blocks.items():
        others = [b for k, b in blocks.items() if k != name]
        rows.append(
            {
                "factor": name,
                "r2_alone": _r2(y, np.hstack([ones, block])),
                "r2_added_last": full - _r2(y, np.hstack([ones, *others])),
            }
        )
    rows.append({"factor": "all three", "r2_alone": full, "r2_added_last": math.nan})
    return pd.DataFrame(rows)


def lowest_q_tokens(frame: pd.DataFrame) -> pd.DataFrame:
    """Where *correct* generations reach their lowest Q: the count and share per token type (a Q
    filter with an absolute threshold drops a correct generation at exactly that token)."""
    ok = frame[frame["correct"]]
    if ok.empty:
        return pd.DataFrame(columns=["token_type", "n", "share"])
    lows = ok.loc[ok.groupby("generation")["q"].idxmin(), "token_type"].value_counts()
    return pd.DataFrame({"token_type": lows.index, "n": lows.to_numpy(), "share": lows.to_numpy() / lows.sum()})
