"""Step verification against exact labels: ProcessBench's first-error F1, for any per-line score.

A *step verifier* gives each line (step) of a solution a score; a low score says "this step is wrong".
ProcessBench (Zheng et al., 2024) asks it for one thing: the index of the solution's first wrong step,
or "no error". Here a verifier predicts the first line whose score falls below a threshold ``t``
(:func:`predicted_first_error`); a solution with no such line is predicted error-free. Two accuracies:

- on the **erroneous** solutions, the share whose predicted line *is* the true first error (too early and
  too late both count as wrong);
- on the **correct** solutions (no wrong line), the share predicted error-free;

and their harmonic mean, the **first-error F1** (:func:`first_error_f1`).

**Thresholds in closed form.** With the running minimum ``m_k = min(s_0 … s_k)`` of a solution's line
scores, the prediction at ``t`` is the first ``k`` with ``m_k < t``. So a solution whose first error is
line ``e`` is right exactly for ``m_e < t ≤ m_{e−1}`` (``m_{−1} = +∞``), and an error-free solution exactly
for ``t ≤ m_last``. Every solution is right on one half-open interval of ``t``, and the best threshold
is one of the intervals' upper ends: :func:`choose_f1_threshold` scores them all at once. Choose it on
validation questions and report on others (a threshold tuned on the reported questions flatters F1).

Scores may be anything where lower means worse: the goal-conditioned RM's Q at each line's last token,
a baseline RM's partial reward there, a PRM's per-step score, the policy's log-prob of the line. The
module is task-agnostic: the caller supplies line scores and true first-error lines (``None``: no error).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: One solution's per-line scores (lower = more likely wrong).
LineScores = Sequence[float]


def _as_lines(scores: LineScores, where: str) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64).ravel()
    if s.size == 0:
        raise ValueError(f"{where}: a solution needs at least one scored line")
    if np.isnan(s).any():
        raise ValueError(f"{where}: line scores contain NaN")
    return s


def _check(line_scores: Sequence[LineScores], first_error: Sequence[int | None]) -> list[np.ndarray]:
    if len(line_scores) != len(first_error):
        raise ValueError(f"{len(line_scores)} solutions' line scores but {len(first_error)} first-error entries")
    arrays = [_as_lines(s, f"solution {i}") for i, s in enumerate(line_scores)]
    for i, (s, e) in enumerate(zip(arrays, first_error)):
        if e is not None and not 0 <= int(e) < s.size:
            raise ValueError(f"solution {i}: first error line {e} is outside its {s.size} scored lines")
    return arrays


def predicted_first_error(scores: LineScores, threshold: float) -> int | None:
    """The first line whose score is below ``threshold``; ``None`` (no error) when none is.

    >>> predicted_first_error([0.9, 0.8, 0.2, 0.1], 0.5)
    2
    >>> predicted_first_error([0.9, 0.8], 0.5) is None
    True
    """
    s = _as_lines(scores, "predicted_first_error")
    below = np.flatnonzero(s < threshold)
    return int(below[0]) if below.size else None


def right_intervals(
    line_scores: Sequence[LineScores], first_error: Sequence[int | None]
) -> tuple[np.ndarray, np.ndarray]:
    """Per solution, the thresholds ``t`` at which its prediction is right: ``low < t ≤ high`` (the
    module's docstring). An erroneous solution whose first-error line does not score below every
    earlier line can never be right: its interval is empty (``low == high``)."""
    arrays = _check(line_scores, first_error)
    low, high = np.empty(len(arrays)), np.empty(len(arrays))
    for i, (s, e) in enumerate(zip(arrays, first_error)):
        running = np.minimum.accumulate(s)
        if e is None:
            low[i], high[i] = -math.inf, running[-1]
        else:
            e = int(e)
            before = running[e - 1] if e > 0 else math.inf
            low[i], high[i] = running[e], max(before, running[e])
    return low, high


def first_error_f1(
    predicted: Sequence[int | None], first_error: Sequence[int | None], weights: Sequence[float] | None = None
) -> dict[str, Any]:
    """ProcessBench's figures for predictions against truth: ``acc_erroneous``, ``acc_correct``, their
    harmonic mean ``f1`` (NaN where either group is empty; 0 when either accuracy is 0), and the group
    sizes. ``weights`` (e.g. question multiplicities) weight the solutions."""
    if len(predicted) != len(first_error):
        raise ValueError(f"{len(predicted)} predictions but {len(first_error)} first-error entries")
    w = np.ones(len(predicted)) if weights is None else np.asarray(weights, dtype=np.float64)
    erroneous = np.array([e is not None for e in first_error], dtype=bool)
    right = np.array(
        [(p is None) if e is None else (p is not None and int(p) == int(e)) for p, e in zip(predicted, first_error)],
        dtype=bool,
    )
    return _figures(right[None, :], erroneous, w[None, :], counts=(int(erroneous.sum()), int((~erroneous).sum())))


def _figures(right: np.ndarray, erroneous: np.ndarray, w: np.ndarray, counts: tuple[int, int]) -> dict[str, Any]:
    acc_err, acc_ok, f1 = _f1_rows(right, erroneous, w)
    return {
        "acc_erroneous": float(acc_err[0]),
        "acc_correct": float(acc_ok[0]),
        "f1": float(f1[0]),
        "n_erroneous": counts[0],
        "n_correct": counts[1],
    }


def _f1_rows(right: np.ndarray, erroneous: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``right`` (candidates or bootstrap draws × solutions) with item weights ``w`` (broadcast):
    the two accuracies and F1 per row, NaN where a group has no weight."""
    with np.errstate(invalid="ignore", divide="ignore"):
        w_err, w_ok = (w * erroneous).sum(axis=1), (w * ~erroneous).sum(axis=1)
        acc_err = np.where(w_err > 0, (w * (right & erroneous)).sum(axis=1) / np.where(w_err > 0, w_err, 1), math.nan)
        acc_ok = np.where(w_ok > 0, (w * (right & ~erroneous)).sum(axis=1) / np.where(w_ok > 0, w_ok, 1), math.nan)
        total = acc_err + acc_ok
        f1 = np.where(total > 0, 2 * acc_err * acc_ok / np.where(total > 0, total, 1), 0.0)
        f1 = np.where(np.isnan(total), math.nan, f1)
    return acc_err, acc_ok, f1


def choose_f1_threshold(
    line_scores: Sequence[LineScores], first_error: Sequence[int | None]
) -> tuple[float, dict[str, Any]]:
    """The threshold with the highest first-error F1 on these solutions (ties: the lower threshold, the
    less eager verifier), and its figures. Candidates are the upper ends of the solutions' right
    intervals (:func:`right_intervals`), where F1 can peak; a candidate ``t`` means "below ``t``"."""
    low, high = right_intervals(line_scores, first_error)
    erroneous = np.array([e is not None for e in first_error], dtype=bool)
    if not erroneous.any() or erroneous.all():
        raise ValueError("choosing a first-error threshold needs both erroneous and correct solutions")
    candidates = np.unique(high[np.isfinite(high) & (high > low)])
    if candidates.size == 0:
        candidates = np.unique(high[np.isfinite(high)])
    right = (low[None, :] < candidates[:, None]) & (candidates[:, None] <= high[None, :])
    _, _, f1 = _f1_rows(right, erroneous, np.ones((1, erroneous.size)))
    best = int(np.flatnonzero(f1 == np.nanmax(f1))[0])  # candidates ascend: the first best is the lowest
    threshold = float(candidates[best])
    counts = (int(erroneous.sum()), int((~erroneous).sum()))
    return threshold, _figures(right[best][None, :], erroneous, np.ones((1, erroneous.size)), counts)


def evaluate_at(
    line_scores: Sequence[LineScores], first_error: Sequence[int | None], threshold: float
) -> dict[str, Any]:
    """First-error F1 of the verifier at a threshold chosen elsewhere (on validation questions)."""
    arrays = _check(line_scores, first_error)
    return first_error_f1([predicted_first_error(s, threshold) for s in arrays], first_error)


def f1_statistic(
    line_scores: Sequence[LineScores], first_error: Sequence[int | None], threshold: float, cluster_of_item: Any
) -> Any:
    """First-error F1 at ``threshold`` as a statistic of question multiplicities, for
    :func:`goalrm_core.evaluation.hierarchical.hierarchical_bootstrap` (items are solutions;
    ``cluster_of_item[i]`` is solution ``i``'s question)."""
    low, high = right_intervals(line_scores, first_error)
    right = (low < threshold) & (threshold <= high)
    erroneous = np.array([e is not None for e in first_error], dtype=bool)
    c = np.asarray(cluster_of_item, dtype=np.int64)
    if c.shape != erroneous.shape:
        raise ValueError(f"clusters must have one entry per solution ({erroneous.size}), got {c.shape}")
    return lambda w: _f1_rows(right[None, :], erroneous, np.asarray(w, dtype=np.float64)[:, c])[2]


def _intervals_sorted(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ol, oh = np.argsort(low, kind="stable"), np.argsort(high, kind="stable")
    return ol, low[ol], oh, high[oh]


def _right_weight(w: np.ndarray, low: np.ndarray, high: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``Σ_i w[b, i] · [low_i < t_j ≤ high_i]`` for every row ``b`` of ``w`` and candidate ``t_j``: the weight of
    the solutions right at ``t_j``, from cumulative weights in sorted order (``[t ≤ high] − [t ≤ low]``)."""
    ol, low_s, oh, high_s = _intervals_sorted(low, high)
    zero = np.zeros((w.shape[0], 1))
    cum_low = np.hstack([zero, np.cumsum(w[:, ol], axis=1)])
    cum_high = np.hstack([zero, np.cumsum(w[:, oh], axis=1)])
    below_low = cum_low[:, np.searchsorted(low_s, t, side="left")]  # Σ w [low < t]
    below_high = cum_high[:, np.searchsorted(high_s, t, side="left")]  # Σ w [high < t]
    return below_low - below_high


def reselected_f1_statistic(
    validation: tuple[Sequence[LineScores], Sequence[int | None], Any],
    reported: tuple[Sequence[LineScores], Sequence[int | None], Any],
) -> Any:
    """First-error F1 on the ``reported`` solutions at the threshold chosen on the ``validation`` ones, both
    weighted by the same question multiplicities, so that the bootstrap re-chooses the threshold in every
    replicate (its selection noise is then in the interval). Each half is ``(line scores, first-error lines,
    question index of each solution)``. The chosen threshold maximises the weighted F1 over the candidates of
    :func:`choose_f1_threshold` (ties: the lowest); the statistic is NaN where a half has one class drawn."""
    v_low, v_high = right_intervals(validation[0], validation[1])
    r_low, r_high = right_intervals(reported[0], reported[1])
    v_err = np.array([e is not None for e in validation[1]], dtype=bool)
    r_err = np.array([e is not None for e in reported[1]], dtype=bool)
    v_c, r_c = np.asarray(validation[2], dtype=np.int64), np.asarray(reported[2], dtype=np.int64)
    candidates = np.unique(v_high[np.isfinite(v_high) & (v_high > v_low)])
    if candidates.size == 0:
        candidates = np.unique(v_high[np.isfinite(v_high)])

    def stat(w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, dtype=np.float64)
        wv, wr = w[:, v_c], w[:, r_c]
        out = np.full(w.shape[0], math.nan)
        if candidates.size == 0:
            return out
        with np.errstate(invalid="ignore", divide="ignore"):
            right_err = _right_weight(wv * v_err, v_low, v_high, candidates)
            right_ok = _right_weight(wv * ~v_err, v_low, v_high, candidates)
            acc_err = right_err / (wv * v_err).sum(axis=1, keepdims=True)
            acc_ok = right_ok / (wv * ~v_err).sum(axis=1, keepdims=True)
            f1 = np.where(acc_err + acc_ok > 0, 2 * acc_err * acc_ok / (acc_err + acc_ok), 0.0)
        f1 = np.where(np.isnan(acc_err) | np.isnan(acc_ok), -np.inf, f1)
        t = candidates[np.argmax(f1, axis=1)]  # argmax: the first best, candidates ascending
        right = (r_low[None, :] < t[:, None]) & (t[:, None] <= r_high[None, :])
        f1_rep = _f1_rows(right, r_err, wr)[2]
        defined = np.isfinite(f1).any(axis=1) & (f1.max(axis=1) > -np.inf)
        return np.where(defined, f1_rep, math.nan)

    return stat


#: the content-blind rules a first-error F1 is measured from: flag line 0, or the most common first-error line of
#: solutions with as many lines; each with a probability fitted on validation (F1 of the expected accuracies)
BLIND_RULES = ("first line", "position prior")
_PI = np.linspace(0.0, 1.0, 201)


def _blind_f1(hit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per hit rate ``h`` (the erroneous solutions' share whose first error is the line the rule names): the best
    probability π of naming it, and F1 there (accuracy on erroneous ``π·h``, on correct ``1 − π``)."""
    h = np.asarray(hit, dtype=np.float64)[..., None]
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(h * _PI + 1 - _PI > 0, 2 * h * _PI * (1 - _PI) / (h * _PI + 1 - _PI), 0.0)
    best = np.argmax(f1, axis=-1)
    return _PI[best], np.take_along_axis(f1, best[..., None], axis=-1)[..., 0]


def blind_floor_statistic(
    rule: str,
    validation: tuple[Sequence[int], Sequence[int | None], Any],
    reported: tuple[Sequence[int], Sequence[int | None], Any],
) -> Any:
    """A content-blind rule's first-error F1 on the ``reported`` solutions, its probability π fitted on the
    ``validation`` ones in every replicate (:data:`BLIND_RULES`). Each half is ``(number of lines, first-error
    lines, question index)``. "position prior" names, for a solution of ``n`` lines, the validation's most common
    first-error line among erroneous solutions of ``n`` lines (any length where none has ``n``), fitted once."""
    if rule not in BLIND_RULES:
        raise ValueError(f"unknown content-blind rule {rule!r}; valid: {', '.join(BLIND_RULES)}")
    v_n, v_e, v_c = (np.asarray(validation[0]), list(validation[1]), np.asarray(validation[2], dtype=np.int64))
    r_n, r_e, r_c = (np.asarray(reported[0]), list(reported[1]), np.asarray(reported[2], dtype=np.int64))
    if rule == "first line":
        named = {}
        overall = 0
    else:
        lines = [(int(n), int(e)) for n, e in zip(v_n, v_e) if e is not None]
        counts: dict[int, dict[int, int]] = {}
        for n, e in lines:
            counts.setdefault(n, {}).setdefault(e, 0)
            counts[n][e] += 1
        named = {n: max(sorted(c), key=c.get) for n, c in counts.items()}
        every: dict[int, int] = {}
        for _, e in lines:
            every[e] = every.get(e, 0) + 1
        overall = max(sorted(every), key=every.get) if every else 0

    def hits(ns, es):
        err = np.array([e is not None for e in es], dtype=bool)
        hit = np.array([e is not None and int(e) == named.get(int(n), overall) for n, e in zip(ns, es)], dtype=bool)
        return err, hit

    v_err, v_hit = hits(v_n, v_e)
    r_err, r_hit = hits(r_n, r_e)

    def stat(w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, dtype=np.float64)
        wv, wr = w[:, v_c], w[:, r_c]
        with np.errstate(invalid="ignore", divide="ignore"):
            pi, _ = _blind_f1((wv * v_hit).sum(axis=1) / (wv * v_err).sum(axis=1))
            acc_err = pi * (wr * r_hit).sum(axis=1) / (wr * r_err).sum(axis=1)
            acc_ok = np.where((wr * ~r_err).sum(axis=1) > 0, 1 - pi, math.nan)
            return np.where(acc_err + acc_ok > 0, 2 * acc_err * acc_ok / (acc_err + acc_ok), 0.0)

    return stat
