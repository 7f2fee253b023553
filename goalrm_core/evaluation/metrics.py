"""Metrics that evaluate reward models on model generations, each with its uncertainty.

The paper judges a reward model (RM) by what it says about the policy's own generations:

* AUROC of the final reward against correctness (``bootstrap_auroc``), and the paired
  difference between two RMs on the same generations (``paired_bootstrap_delta``);
* AUROC of *partial* generations: the per-token reward or Q-value at the end of the first
  ``pct`` of each response (``prefix_index``, ``partial_auroc``);
* majority voting that drops a generation as soon as its Q-value falls below a threshold, which
  saves the tokens it would still have produced (``q_filtered_majority_vote``,
  ``choose_filter_threshold``);
* how Q-values relate to the final reward (``q_reward_correlation``) and whether they fall once
  a solution has made its first error (``first_error_q_stats``, ``prefix_error_auroc``);
* plain majority voting and best-of-n selection, for decoding comparisons.

A number without its uncertainty invites over-reading a 0.01 AUROC gap, so every estimate comes
with a bootstrap or t interval, or a p-value. Quantities that are undefined on the data at hand
(AUROC when all generations share one label, a t-test when nothing changed) come back as NaN
with a sentence saying why, never as an exception and never as a made-up 0.5.

Everything here is plain numpy/scipy: it runs on the CPU in a notebook or test in milliseconds.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from goalrm_core.data.io import parse_label

__all__ = [
    "AccuracyResult",
    "AurocResult",
    "DEFAULT_FILTER_THRESHOLDS",
    "DEFAULT_PERCENTILES",
    "FilterResult",
    "best_of_n_accuracy",
    "bootstrap_auroc",
    "choose_filter_threshold",
    "first_error_q_stats",
    "majority_vote_accuracy",
    "mean_ci",
    "paired_bootstrap_delta",
    "partial_auroc",
    "prefix_error_auroc",
    "prefix_index",
    "q_filtered_majority_vote",
    "q_reward_correlation",
    "wilson_interval",
]

#: Percentiles of a response at which partial AUROC is reported (0 = first token, 1 = last).
DEFAULT_PERCENTILES: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))

#: Q-value thresholds tried when choosing the filter threshold on a validation split.
DEFAULT_FILTER_THRESHOLDS: np.ndarray = np.round(np.linspace(-0.5, 0.9, 29), 2) + 0.0  # + 0.0: no "-0.0"

# The bootstrap builds a (resamples x items) weight matrix; it is processed in chunks of at most
# this many cells (~32 MB of float64) so memory stays bounded for large evaluation sets.
_MAX_BOOTSTRAP_CELLS = 4_000_000


# --------------------------------------------------------------------------------------------
# Small uncertainty helpers
# --------------------------------------------------------------------------------------------


def mean_ci(values: Sequence[float] | np.ndarray, alpha: float = 0.05) -> tuple[float, float, float]:
    """Mean and two-sided Student-t confidence interval, e.g. of a metric over training seeds.

    With one value there is no spread to estimate, so the bounds are NaN (not the value itself,
    which would pretend to certainty); with none, everything is NaN. NaN inputs propagate:
    filter them out first if a seed's metric was undefined and that is what you want.
    """
    _check_alpha(alpha)
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
    _check_alpha(alpha)
    if n <= 0:
        return math.nan, math.nan
    z = stats.norm.ppf(1 - alpha / 2)
    p = n_success / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")


def _percentile_interval(values: np.ndarray, alpha: float) -> tuple[float, float]:
    if values.size == 0:
        return math.nan, math.nan
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


# --------------------------------------------------------------------------------------------
# 1. AUROC with a vectorised bootstrap
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
    return _bootstrap_auroc(scores, labels, n_boot, seed, alpha, clusters, ("generations", "correct", "incorrect"))


def _bootstrap_auroc(
    scores: Any, labels: Any, n_boot: int, seed: int, alpha: float, clusters: Any, wording: tuple[str, str, str]
) -> AurocResult:
    """``bootstrap_auroc`` with the words its undefined_reason uses: (items, positive, negative)."""
    _check_alpha(alpha)
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
    low, high = _percentile_interval(valid, alpha)
    return AurocResult(point, low, high, n, n_pos, None, int(valid.size), int(n_boot - valid.size))


# --------------------------------------------------------------------------------------------
# 2. Paired difference of two scorers on the same generations
# --------------------------------------------------------------------------------------------


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

    Returns ``mean`` (the difference on the full data), ``ci_low``/``ci_high`` (percentile
    interval of the resampled differences), ``p_value_two_sided`` (bootstrap p-value for
    "no difference": ``2 * min(P(delta* <= 0), P(delta* >= 0))``, capped at 1, resolution
    ``1 / n_boot``), both AUROCs, the counts, and ``undefined_reason`` (NaNs when the labels
    have a single class).
    """
    _check_alpha(alpha)
    _check_n_boot(n_boot)
    y = _binary_labels(labels)
    a = _scores(scores_a, y.size, "scores_a")
    b = _scores(scores_b, y.size, "scores_b")
    n, n_pos = int(y.size), int(y.sum())
    out: dict[str, Any] = {
        "mean": math.nan,
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
    out["mean"] = out["auroc_a"] - out["auroc_b"]
    rng = np.random.default_rng(seed)
    deltas = [
        _weighted_auroc(w, y, sorted_a) - _weighted_auroc(w, y, sorted_b)
        for w in _resample_weights(rng, n_boot, n, clusters)
    ]
    d = np.concatenate(deltas) if deltas else np.empty(0)
    d = d[np.isfinite(d)]
    out["n_boot_used"], out["n_boot_skipped"] = int(d.size), int(n_boot - d.size)
    out["ci_low"], out["ci_high"] = _percentile_interval(d, alpha)
    if d.size:
        out["p_value_two_sided"] = float(min(1.0, 2 * min(np.mean(d <= 0), np.mean(d >= 0))))
    return out


# --------------------------------------------------------------------------------------------
# 3. Partial generations
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


def _per_token_arrays(per_token: Sequence[Any], name: str) -> list[np.ndarray]:
    arrays = []
    for i, values in enumerate(per_token):
        arr = np.asarray(values, dtype=np.float64).ravel()
        if arr.size == 0:
            raise ValueError(f"{name}[{i}] is empty: a generation needs at least one per-token value")
        arrays.append(arr)
    return arrays


def _values_at(arrays: list[np.ndarray], pct: float) -> np.ndarray:
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
    arrays = _per_token_arrays(per_token_scores, "per_token_scores")
    y = _binary_labels(labels)
    if len(arrays) != y.size:
        raise ValueError(f"{len(arrays)} per-token score arrays but {y.size} labels")
    rows = []
    for pct in percentiles:
        res = bootstrap_auroc(_values_at(arrays, pct), y, n_boot=n_boot, seed=seed, alpha=alpha, clusters=clusters)
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
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------------------------
# 4. Majority voting, Q-filtered majority voting, best-of-n
# --------------------------------------------------------------------------------------------
#
# A question is a list of generations; a generation is a mapping (a scored.jsonl row) or an
# object with the attributes ``predicted_answer`` (None = no answer), ``is_correct``,
# ``cosine_sim`` (per-token Q-values of the response) and ``num_actions`` (response tokens).
#
# Voting rule (the paper's): a question is answered correctly when the votes for the correct
# answer are at least the votes for the most-voted wrong answer. A generation without an answer
# votes for nothing. The correct answer is identified by ``is_correct`` (not by comparing
# strings), so all generations marked correct vote together even if they spell the answer
# differently; wrong answers are grouped by ``str(predicted_answer)``. If the correct answer gets
# no vote the question is incorrect, even when there is no wrong vote either (nothing was
# answered, so nothing was answered correctly).


@dataclass
class AccuracyResult:
    """An accuracy over questions with its Wilson interval. ``float(result)`` is the accuracy."""

    accuracy: float
    ci_low: float
    ci_high: float
    n_correct: int
    n: int

    def __float__(self) -> float:
        return float(self.accuracy)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _accuracy_result(correct: np.ndarray, alpha: float = 0.05) -> AccuracyResult:
    n, k = int(correct.size), int(np.sum(correct))
    low, high = wilson_interval(k, n, alpha)
    return AccuracyResult(k / n if n else math.nan, low, high, k, n)


_MISSING = object()


def _field(gen: Any, key: str, default: Any = _MISSING) -> Any:
    """Read ``key`` from a generation given as a mapping or as an object."""
    if isinstance(gen, Mapping):
        if key in gen:
            return gen[key]
    elif hasattr(gen, key):
        return getattr(gen, key)
    if default is _MISSING:
        raise KeyError(f"generation has no field {key!r}")
    return default


def _record_lows(q: np.ndarray, skip_first: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (>= ``skip_first``) and values where ``q`` reaches a new running minimum.

    For any threshold t, the first token at index >= skip_first with Q < t is one of these
    records, and records have strictly decreasing values, so it is simply the first record
    below t. Precomputing them once lets a sweep over many thresholds run without a Python loop
    per generation. NaN Q-values never trigger a drop.
    """
    tail = q[skip_first:]
    if tail.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0)
    tail = np.where(np.isnan(tail), np.inf, tail)
    running_min = np.minimum.accumulate(tail)
    where = np.flatnonzero(np.r_[True, running_min[1:] < running_min[:-1]])
    return where + skip_first, tail[where]


@dataclass
class _VoteTable:
    """All generations of all questions flattened into arrays, built once per question set."""

    n_questions: int
    question_of: np.ndarray  # (G,) question index of each generation
    correct: np.ndarray  # (G,) is_correct
    answered: np.ndarray  # (G,) predicted_answer is not None
    wrong_key: np.ndarray  # (G,) id of the (question, wrong answer) it votes for; -1 if none
    wrong_key_question: np.ndarray  # (K,) question of each wrong-answer id
    n_tokens: np.ndarray  # (G,) response tokens
    rec_gen: np.ndarray  # running-minimum records of Q (see _record_lows), flattened:
    rec_pos: np.ndarray  # generation, token index and value of each record, ordered by
    rec_val: np.ndarray  # generation and then by token index


def _vote_table(questions: Sequence[Sequence[Any]], skip_first: int = 0, with_q: bool = True) -> _VoteTable:
    if len(questions) == 0:
        raise ValueError("no questions to vote on")
    if int(skip_first) != skip_first or skip_first < 0:
        raise ValueError(f"skip_first must be a non-negative integer, got {skip_first}")
    question_of, correct, answered, wrong_key, n_tokens = [], [], [], [], []
    wrong_key_question: list[int] = []
    rec_gen, rec_pos, rec_val = [], [], []
    g = 0
    for qi, generations in enumerate(questions):
        if len(generations) == 0:
            raise ValueError(f"question {qi} has no generations")
        wrong_ids: dict[str, int] = {}
        for gi, gen in enumerate(generations):
            answer = _field(gen, "predicted_answer", None)
            ok = parse_label(_field(gen, "is_correct"), where=f"question {qi}, generation {gi}")
            key = -1
            if answer is not None and not ok:
                key = wrong_ids.setdefault(str(answer), len(wrong_key_question))
                if key == len(wrong_key_question):
                    wrong_key_question.append(qi)
            question_of.append(qi)
            correct.append(ok)
            answered.append(answer is not None)
            wrong_key.append(key)
            if with_q:
                q = np.asarray(_field(gen, "cosine_sim"), dtype=np.float64).ravel()
                n = int(_field(gen, "num_actions", q.size))
                if n != q.size:
                    raise ValueError(
                        f"question {qi}: a generation has num_actions={n} but {q.size} Q-values; "
                        "cosine_sim must hold one Q-value per response token"
                    )
                pos, val = _record_lows(q, int(skip_first))
                rec_gen.append(np.full(pos.size, g, dtype=np.int64))
                rec_pos.append(pos)
                rec_val.append(val)
                n_tokens.append(n)
            else:
                n_tokens.append(0)
            g += 1
    return _VoteTable(
        n_questions=len(questions),
        question_of=np.asarray(question_of, dtype=np.int64),
        correct=np.asarray(correct, dtype=bool),
        answered=np.asarray(answered, dtype=bool),
        wrong_key=np.asarray(wrong_key, dtype=np.int64),
        wrong_key_question=np.asarray(wrong_key_question, dtype=np.int64),
        n_tokens=np.asarray(n_tokens, dtype=np.int64),
        rec_gen=np.concatenate(rec_gen) if rec_gen else np.empty(0, dtype=np.int64),
        rec_pos=np.concatenate(rec_pos) if rec_pos else np.empty(0, dtype=np.int64),
        rec_val=np.concatenate(rec_val) if rec_val else np.empty(0),
    )


def _vote_outcome(t: _VoteTable, kept: np.ndarray) -> np.ndarray:
    """Per question: does the correct answer win (or tie) the vote among ``kept`` generations?"""
    votes = kept & t.answered
    correct_votes = np.bincount(t.question_of, weights=votes & t.correct, minlength=t.n_questions)
    wrong_counts = np.bincount(t.wrong_key[votes & (t.wrong_key >= 0)], minlength=t.wrong_key_question.size)
    top_wrong = np.zeros(t.n_questions)
    np.maximum.at(top_wrong, t.wrong_key_question, wrong_counts)
    return (correct_votes > 0) & (correct_votes >= top_wrong)


def _drop_points(t: _VoteTable, threshold: float) -> np.ndarray:
    """Token index at which each generation is dropped (first Q < threshold), -1 if never."""
    drop = np.full(t.question_of.size, -1, dtype=np.int64)
    below = np.flatnonzero(t.rec_val < threshold)
    if below.size:
        gens, first = np.unique(t.rec_gen[below], return_index=True)  # earliest record per generation
        drop[gens] = t.rec_pos[below[first]]
    return drop


@dataclass
class FilterResult:
    """Outcome of Q-filtered majority voting (see ``q_filtered_majority_vote``).

    Percentages are in 0..100, accuracies and proportions in 0..1. ``as_dict()`` returns the
    scalar summary; the ``question_*``/``generation_*`` arrays hold per-item detail.
    """

    threshold: float
    skip_first: int
    accuracy: float
    accuracy_ci_low: float
    accuracy_ci_high: float
    accuracy_unfiltered: float
    accuracy_unfiltered_ci_low: float
    accuracy_unfiltered_ci_high: float
    generations_filtered_pct: float
    tokens_saved_pct: float
    proportion_correct_before: float
    proportion_correct_after: float
    p_value: float
    p_value_reason: str | None
    n_questions: int
    n_fallback: int
    n_correct: int
    n_correct_unfiltered: int
    n_generations: int
    n_generations_kept: int
    tokens_saved: int
    tokens_total: int
    question_correct: np.ndarray = field(repr=False)
    question_correct_unfiltered: np.ndarray = field(repr=False)
    question_fallback: np.ndarray = field(repr=False)
    question_filtered_pct: np.ndarray = field(repr=False)
    generation_kept: np.ndarray = field(repr=False)
    generation_drop_token: np.ndarray = field(repr=False)

    def as_dict(self, details: bool = False) -> dict[str, Any]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                if details:
                    out[f.name] = value.tolist()
            else:
                out[f.name] = value
        return out


def _paired_t_pvalue(after: np.ndarray, before: np.ndarray, what: str) -> tuple[float, str | None]:
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


def _filter_with_table(t: _VoteTable, threshold: float, skip_first: int) -> FilterResult:
    drop = _drop_points(t, threshold)
    dropped = drop >= 0
    n_gen_q = np.bincount(t.question_of, minlength=t.n_questions)
    fallback_q = np.bincount(t.question_of, weights=dropped, minlength=t.n_questions) == n_gen_q
    # A fallback question votes with all its generations and saves nothing, so its drops undo.
    effective = dropped & ~fallback_q[t.question_of]
    kept = ~effective
    saved = np.where(effective, t.n_tokens - drop - 1, 0)
    filtered_pct_q = 100.0 * np.bincount(t.question_of, weights=effective, minlength=t.n_questions) / n_gen_q

    correct_f = _vote_outcome(t, kept)
    correct_u = _vote_outcome(t, np.ones_like(kept))
    acc_f, acc_u = _accuracy_result(correct_f), _accuracy_result(correct_u)
    p, reason = _paired_t_pvalue(correct_f.astype(float), correct_u.astype(float), "questions")
    tokens_total = int(t.n_tokens.sum())
    return FilterResult(
        threshold=float(threshold),
        skip_first=int(skip_first),
        accuracy=acc_f.accuracy,
        accuracy_ci_low=acc_f.ci_low,
        accuracy_ci_high=acc_f.ci_high,
        accuracy_unfiltered=acc_u.accuracy,
        accuracy_unfiltered_ci_low=acc_u.ci_low,
        accuracy_unfiltered_ci_high=acc_u.ci_high,
        generations_filtered_pct=float(filtered_pct_q.mean()),
        tokens_saved_pct=100.0 * float(saved.sum()) / tokens_total if tokens_total else math.nan,
        proportion_correct_before=float(t.correct.mean()),
        proportion_correct_after=float(t.correct[kept].mean()),
        p_value=p,
        p_value_reason=reason,
        n_questions=t.n_questions,
        n_fallback=int(fallback_q.sum()),
        n_correct=acc_f.n_correct,
        n_correct_unfiltered=acc_u.n_correct,
        n_generations=int(kept.size),
        n_generations_kept=int(kept.sum()),
        tokens_saved=int(saved.sum()),
        tokens_total=tokens_total,
        question_correct=correct_f,
        question_correct_unfiltered=correct_u,
        question_fallback=fallback_q,
        question_filtered_pct=filtered_pct_q,
        generation_kept=kept,
        generation_drop_token=np.where(effective, drop, -1),
    )


def q_filtered_majority_vote(
    questions: Sequence[Sequence[Any]], threshold: float = 0.0, skip_first: int = 5
) -> FilterResult:
    """Majority voting that stops a generation as soon as its Q-value drops below ``threshold``.

    The paper's rule, per generation of ``n = num_actions`` tokens with Q-values ``q``:

    * it is dropped at the first token index ``k >= skip_first`` with ``q[k] < threshold``, and
      the ``n - k - 1`` tokens after that point count as saved (they need not be generated);
      the first ``skip_first`` tokens are ignored because Q-values of very short prefixes are
      noisy; a generation that never falls below the threshold is kept whole;
    * if every generation of a question is dropped, the question falls back to plain majority
      voting over all of them, saves nothing and counts 0 % filtered (``n_fallback`` counts it);
    * the kept generations vote with the rule described above this section.

    Reported: ``accuracy`` vs ``accuracy_unfiltered`` (plain voting, Wilson intervals),
    ``generations_filtered_pct`` (mean over questions of the % of generations dropped),
    ``tokens_saved_pct`` (saved / all response tokens x 100), ``proportion_correct_before`` /
    ``_after`` (fraction of correct generations among all vs among kept ones, pooled over
    generations), and ``p_value`` of a paired t-test (``scipy.stats.ttest_rel``) of per-question
    correctness filtered vs unfiltered (NaN with ``p_value_reason`` when nothing changed).
    """
    if not math.isfinite(threshold):
        raise ValueError(f"filter threshold must be a finite number, got {threshold}")
    table = _vote_table(questions, skip_first)
    return _filter_with_table(table, threshold, skip_first)


def choose_filter_threshold(
    val_questions: Sequence[Sequence[Any]],
    candidates: Sequence[float] | np.ndarray = DEFAULT_FILTER_THRESHOLDS,
    skip_first: int = 5,
) -> tuple[float, pd.DataFrame]:
    """Pick the filter threshold on a validation split: highest filtered accuracy, ties broken
    by more tokens saved, then by the lower (less aggressive) threshold.

    Choose it on held-out questions and report on the test split, otherwise the reported
    accuracy is optimistically tuned. Returns the threshold and one table row per candidate
    (``chosen`` marks the winner).
    """
    cands = np.asarray(candidates, dtype=np.float64).ravel()
    if cands.size == 0:
        raise ValueError("no candidate thresholds")
    table = _vote_table(val_questions, skip_first)
    rows = []
    for thr in cands:
        res = _filter_with_table(table, float(thr), skip_first)
        rows.append(
            {
                "threshold": float(thr),
                "accuracy": res.accuracy,
                "n_correct": res.n_correct,
                "accuracy_unfiltered": res.accuracy_unfiltered,
                "tokens_saved_pct": res.tokens_saved_pct,
                "tokens_saved": res.tokens_saved,
                "generations_filtered_pct": res.generations_filtered_pct,
                "n_fallback": res.n_fallback,
            }
        )
    df = pd.DataFrame(rows)
    # Integer counts make the comparison exact; lexsort's last key is the primary one.
    best = np.lexsort((df["threshold"].to_numpy(), -df["tokens_saved"].to_numpy(), -df["n_correct"].to_numpy()))[0]
    df["chosen"] = np.arange(len(df)) == best
    return float(df["threshold"].iloc[best]), df


def majority_vote_accuracy(questions: Sequence[Sequence[Any]], alpha: float = 0.05) -> AccuracyResult:
    """Plain majority voting over all generations of each question (rule above this section)."""
    table = _vote_table(questions, with_q=False)
    return _accuracy_result(_vote_outcome(table, np.ones(table.question_of.size, dtype=bool)), alpha)


def best_of_n_accuracy(
    questions: Sequence[Sequence[Any]], score_key: str | Callable[[Any], float], alpha: float = 0.05
) -> AccuracyResult:
    """Pick each question's generation with the highest score; the question is correct if that
    generation ``is_correct``.

    ``score_key`` names a field (e.g. ``"reward"``) or is a function of a generation. Ties go to
    the earliest generation (deterministic); NaN scores never win unless all are NaN.
    """
    if len(questions) == 0:
        raise ValueError("no questions to select from")
    get = score_key if callable(score_key) else (lambda gen: _field(gen, score_key))
    correct = np.zeros(len(questions), dtype=bool)
    for qi, generations in enumerate(questions):
        if len(generations) == 0:
            raise ValueError(f"question {qi} has no generations")
        scores = np.array([get(gen) for gen in generations], dtype=np.float64)
        scores = np.where(np.isnan(scores), -np.inf, scores)
        best = int(np.argmax(scores))
        correct[qi] = parse_label(_field(generations[best], "is_correct"), where=f"question {qi}, generation {best}")
    return _accuracy_result(correct, alpha)


# --------------------------------------------------------------------------------------------
# 5. Q-values against the final reward
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
    arrays = _per_token_arrays(per_token_q, "per_token_q")
    r = np.asarray(rewards, dtype=np.float64).ravel()
    if r.size != len(arrays):
        raise ValueError(f"{r.size} rewards but {len(arrays)} per-token Q arrays")
    columns = [
        "percentile", "n", "pearson_r", "pearson_ci_low", "pearson_ci_high",
        "pearson_p", "spearman_rho", "spearman_p", "undefined_reason",
    ]  # fmt: skip
    rows = []
    for pct in percentiles:
        q = _values_at(arrays, pct)
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
# 6. Do Q-values fall at the first error?
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
    arrays = _per_token_arrays(per_token_q, "per_token_q")
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
    p, reason = _paired_t_pvalue(a, b, "generations with a known first error")
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
    arrays = _per_token_arrays(per_token_q, "per_token_q")
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
    cat = (lambda parts: np.concatenate(parts) if parts else np.empty(0))
    return _bootstrap_auroc(
        cat(scores),
        cat(labels),
        n_boot,
        seed,
        alpha,
        cat(generation) if generation else None,
        ("prefixes", "after an error", "error-free"),
    )
