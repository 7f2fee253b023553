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


def right_intervals(line_scores: Sequence[LineScores], first_error: Sequence[int | None]) -> tuple[np.ndarray, np.ndarray]:
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


def first_error_f1(predicted: Sequence[int | None], first_error: Sequence[int | None],
                   weights: Sequence[float] | None = None) -> dict[str, Any]:
    """ProcessBench's figures for predictions against truth: ``acc_erroneous``, ``acc_correct``, their
    harmonic mean ``f1`` (NaN where either group is empty; 0 when either accuracy is 0), and the group
    sizes. ``weights`` (e.g. question multiplicities) weight the solutions."""
    if len(predicted) != len(first_error):
        raise ValueError(f"{len(predicted)} predictions but {len(first_error)} first-error entries")
    w = np.ones(len(predicted)) if weights is None else np.asarray(weights, dtype=np.float64)
    erroneous = np.array([e is not None for e in first_error], dtype=bool)
    right = np.array([(p is None) if e is None else (p is not None and int(p) == int(e))
                      for p, e in zip(predicted, first_error)], dtype=bool)
    return _figures(right[None, :], erroneous, w[None, :], counts=(int(erroneous.sum()), int((~erroneous).sum())))


def _figures(right: np.ndarray, erroneous: np.ndarray, w: np.ndarray, counts: tuple[int, int]) -> dict[str, Any]:
    acc_err, acc_ok, f1 = _f1_rows(right, erroneous, w)
    return {"acc_erroneous": float(acc_err[0]), "acc_correct": float(acc_ok[0]), "f1": float(f1[0]),
            "n_erroneous": counts[0], "n_correct": counts[1]}


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


def choose_f1_threshold(line_scores: Sequence[LineScores], first_error: Sequence[int | None]) -> tuple[float, dict[str, Any]]:
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


def evaluate_at(line_scores: Sequence[LineScores], first_error: Sequence[int | None], threshold: float) -> dict[str, Any]:
    """First-error F1 of the verifier at a threshold chosen elsewhere (on validation questions)."""
    arrays = _check(line_scores, first_error)
    return first_error_f1([predicted_first_error(s, threshold) for s in arrays], first_error)


def f1_statistic(line_scores: Sequence[LineScores], first_error: Sequence[int | None], threshold: float,
                 cluster_of_item: Any) -> Any:
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
