"""A two-level bootstrap over RM seeds and questions, and the primary conclusions' interval built from it.

**What a rerun resamples.** A primary figure (ΔAUROC, a gate margin, the fall of Q at the first error,
a filter's saving) is computed once per RM seed ``s`` on the same ``C`` questions (all samples of a
question form one cluster). A rerun draws new RM seeds *and*, were the benchmark drawn again, new
questions; an interval over seeds alone (a t-interval of the ``S`` per-seed values) holds the questions
fixed and leaves their variance out.

**The bootstrap** (:func:`hierarchical_bootstrap`). Replicate ``b`` draws

1. question multiplicities ``w_b`` (``C`` questions with replacement; every sample of a question
   inherits its question's multiplicity), and
2. ``S`` seeds ``j_1 … j_S`` with replacement,

and is ``T*_b = (1/S) Σ_k θ_{j_k}(w_b)``, where ``θ_s(w)`` is seed ``s``'s statistic on the questions
weighted by ``w``. The seeds are *crossed* with the questions (every seed scored the same questions),
so by default one question draw serves every seed of the replicate: a question that is hard for every
seed stays hard in all of them, and its variance does not shrink with ``S``. ``shared_questions=False``
draws the questions anew for each drawn seed (a nested design, where each seed had its own questions).
``resample_seeds=False`` gives the question bootstrap of the mean over seeds; ``resample_questions=False``
the seed bootstrap with the questions fixed. With one seed it *is* the cluster bootstrap over questions:
the question draws come first from the same generator, so the replicates equal
``auroc.bootstrap_auroc(..., clusters=questions)``'s for an AUROC statistic.

**The verdict's interval** (:func:`across_seeds_and_questions`). A percentile interval of a bootstrap
over five seeds treats those five as the whole population: it is too narrow by about
``√((S−1)/S) · z/t_{S−1}`` (0.63 at ``S = 5``). The interval the verdict reads therefore combines the
two levels' variances, estimated apart from the same replicates:

    SE² = s²/S + V_q,

where ``s²`` is the unbiased variance of the ``S`` per-seed values (the seed level, as the t-interval
has it) and ``V_q`` the variance over the shared question draws of the mean over seeds,
``(1/S) Σ_s θ_s(w_b)`` (the question level, ``se_questions = √V_q``). The interval is
``mean ± t_{ν, 1−α/2} · SE`` with Welch–Satterthwaite degrees of freedom
``ν = SE⁴ / ((s²/S)² / (S−1))`` (``V_q`` is estimated from hundreds of questions, ``ν = ∞`` for it):
the seeds-only t-interval when the questions do not vary, a normal question interval when the seeds
do not (an interval of zero width over seeds, because every seed gives the same value, widens to the
question variance it hid). The two-sided p-value is the t-test's with ``ν`` degrees of freedom.

**Minimum detectable effect.** ``mde = (t_{ν, 1−α/2} + t_{ν, 0.8}) · SE``: the true effect a run of this
size and spread would find significant (in the expected direction) with 80% power; with ``ν = ∞`` it is
the textbook ``(z_{1−α/2} + z_{0.8}) · SE`` (2.80·SE at α = 0.05). A "not shown" comes with it, so a
null says how large an effect it rules out.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from goalrm_core.evaluation import verdicts
from goalrm_core.evaluation.auroc import _binary_labels, _resample_weights, _SortedScores, _weighted_auroc
from goalrm_core.evaluation.stats import across_seeds, check_alpha, percentile_interval

#: One seed's statistic: question multiplicities ``(rows, C)`` -> one value per row (NaN where undefined).
Statistic = Callable[[np.ndarray], np.ndarray]


@dataclass
class HierarchicalResult:
    """A two-level bootstrap of the mean over seeds of a per-seed statistic.

    ``estimate``: the mean over seeds of each seed's value on all questions (``per_seed``);
    ``ci_low``/``ci_high``: the ``1 − alpha`` percentile interval of the replicates that are defined
    (``n_boot_used``; a replicate with an undefined seed statistic, e.g. an AUROC on a one-class
    resample, is skipped and counted in ``n_boot_skipped``); ``se``: their standard deviation.
    ``question_replicates``: per replicate, the mean over *all* seeds of their statistic on that
    replicate's question draw (the question level alone; empty with ``shared_questions=False``)."""

    estimate: float
    per_seed: list[float]
    ci_low: float
    ci_high: float
    se: float
    n_seeds: int
    n_questions: int
    n_boot_used: int
    n_boot_skipped: int
    replicates: np.ndarray = field(repr=False)
    question_replicates: np.ndarray = field(repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            k: getattr(self, k)
            for k in (
                "estimate",
                "per_seed",
                "ci_low",
                "ci_high",
                "se",
                "n_seeds",
                "n_questions",
                "n_boot_used",
                "n_boot_skipped",
            )
        }


def _question_draws(rng: np.random.Generator, n_boot: int, n_questions: int) -> np.ndarray:
    chunks = list(_resample_weights(rng, n_boot, n_questions))
    return np.concatenate(chunks) if chunks else np.zeros((0, n_questions), dtype=np.int64)


def hierarchical_bootstrap(
    statistics: Sequence[Statistic],
    n_questions: int,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    *,
    resample_seeds: bool = True,
    resample_questions: bool = True,
    shared_questions: bool = True,
) -> HierarchicalResult:
    """The two-level bootstrap of the module's docstring. ``statistics[s]`` is seed ``s``'s statistic
    as a function of question multiplicities (see the ``*_statistic`` builders below); every seed is
    indexed over the same ``n_questions`` questions. Draws come from ``numpy.random.default_rng(seed)``:
    the same seed gives the same replicates."""
    check_alpha(alpha)
    if not statistics:
        raise ValueError("hierarchical_bootstrap needs at least one seed's statistic")
    if n_questions < 1:
        raise ValueError(f"hierarchical_bootstrap needs at least one question, got {n_questions}")
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot}")
    S, C = len(statistics), int(n_questions)
    ones = np.ones((1, C), dtype=np.int64)
    per_seed = [float(np.asarray(f(ones), dtype=np.float64)[0]) for f in statistics]
    rng = np.random.default_rng(seed)
    fixed = np.ones((n_boot, C), dtype=np.int64)
    if shared_questions or not resample_questions:
        w = _question_draws(rng, n_boot, C) if resample_questions else fixed
        values = np.stack([np.asarray(f(w), dtype=np.float64) for f in statistics])  # (S, B)
        question_reps = values.mean(axis=0)
        if resample_seeds and S > 1:
            picks = rng.integers(0, S, size=(n_boot, S))
            reps = values[picks, np.arange(n_boot)[:, None]].mean(axis=1)
        else:
            reps = question_reps
    else:  # nested: each drawn seed gets its own question draw
        draws = [_question_draws(rng, n_boot, C) for _ in range(S)]
        picks = rng.integers(0, S, size=(n_boot, S)) if resample_seeds and S > 1 else np.tile(np.arange(S), (n_boot, 1))
        total = np.zeros(n_boot)
        for k, w in enumerate(draws):
            values = np.stack([np.asarray(f(w), dtype=np.float64) for f in statistics])
            total += values[picks[:, k], np.arange(n_boot)]
        reps, question_reps = total / S, np.empty(0)
    valid = reps[np.isfinite(reps)]
    low, high = percentile_interval(valid, alpha)
    se = float(valid.std(ddof=1)) if valid.size > 1 else math.nan
    estimate = float(np.mean(per_seed))
    return HierarchicalResult(
        estimate, per_seed, low, high, se, S, C, int(valid.size), int(n_boot - valid.size), reps, question_reps
    )


# ------------------------------------------------------------------------------ per-seed statistics


def _item_weights(weights: np.ndarray, cluster_of_item: np.ndarray) -> np.ndarray:
    return weights[:, cluster_of_item]


def auroc_statistic(scores: Any, labels: Any, cluster_of_item: Any) -> Statistic:
    """AUROC of ``scores`` against ``labels`` (items are samples; ``cluster_of_item[i]`` the index of
    sample ``i``'s question): NaN for a draw with one class."""
    y = _binary_labels(labels)
    s = np.asarray(scores, dtype=np.float64)
    c = np.asarray(cluster_of_item, dtype=np.int64)
    if s.shape != y.shape or c.shape != y.shape:
        raise ValueError(
            f"scores, labels and clusters must have one entry per sample ({y.size}); got {s.shape}, {c.shape}"
        )
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    if y.size == 0:
        return lambda w: np.full(w.shape[0], math.nan)
    sorted_scores = _SortedScores(s)
    return lambda w: _weighted_auroc(_item_weights(w, c), y, sorted_scores)


def mean_statistic(values: Any, cluster_of_item: Any) -> Statistic:
    """The mean of per-item ``values`` (a question's items weighted by its multiplicity); NaN where a
    draw holds no item."""
    v = np.asarray(values, dtype=np.float64)
    c = np.asarray(cluster_of_item, dtype=np.int64)
    if v.shape != c.shape:
        raise ValueError(f"values and clusters must have the same length, got {v.shape} and {c.shape}")
    return ratio_statistic(v, np.ones_like(v), c)


def ratio_statistic(numerator: Any, denominator: Any, cluster_of_item: Any, scale: float = 1.0) -> Statistic:
    """``scale · Σ numerator / Σ denominator`` over the drawn items (e.g. tokens saved over tokens
    generated, in %); NaN where the drawn denominator is 0."""
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    c = np.asarray(cluster_of_item, dtype=np.int64)
    if not (num.shape == den.shape == c.shape):
        raise ValueError(
            f"numerator, denominator and clusters must have the same length, got {num.shape}, {den.shape}, {c.shape}"
        )
    n_clusters = int(c.max()) + 1 if c.size else 0

    def per_cluster(x):
        return np.bincount(c, weights=x, minlength=n_clusters) if c.size else np.zeros(0)

    num_c, den_c = per_cluster(num), per_cluster(den)

    def stat(w: np.ndarray) -> np.ndarray:
        w = w[:, :n_clusters].astype(np.float64)
        top, bottom = w @ num_c, w @ den_c
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(bottom != 0, scale * top / np.where(bottom != 0, bottom, 1.0), math.nan)

    return stat


def difference(a: Statistic, b: Statistic) -> Statistic:
    """``a − b`` on the same draw (paired: both read the same questions)."""
    return lambda w: np.asarray(a(w), dtype=np.float64) - np.asarray(b(w), dtype=np.float64)


# --------------------------------------------------------------------------- the verdict's summary


def _t(q: float, df: float) -> float:
    from scipy import stats

    return float(stats.norm.ppf(q) if not math.isfinite(df) else stats.t.ppf(q, df))


def across_seeds_and_questions(
    values: Sequence[float | None],
    boot: HierarchicalResult | None,
    null: float = 0.0,
    expect: str = "greater",
    alpha: float = 0.05,
) -> dict:
    """``stats.across_seeds`` of the per-seed ``values``, its interval widened to RM-seed **and**
    question variance from ``boot`` (module docstring: ``SE² = s²/S + V_q``, Welch–Satterthwaite
    degrees of freedom), with the two-sided ``verdict`` (``evaluation.verdicts``), the standard
    errors of each level, and the minimum detectable effect at 80% power (``mde``).

    Without ``boot`` (or with no question level in it) the seeds-only interval stands, marked
    ``interval: "seeds"``; fewer than two defined seeds leave everything undefined, as before."""
    out = across_seeds(values, null=null, expect=expect, alpha=alpha)
    defined = np.array([v for v in out["per_seed"] if v is not None], dtype=np.float64)
    out["interval"] = "seeds"
    if out["holds"] is None:
        out["verdict"] = verdicts.UNDEFINED
        return out
    S = defined.size
    var_seeds = float(defined.var(ddof=1)) / S if np.ptp(defined) > 0 else 0.0  # identical seeds: exactly 0
    q = boot.question_replicates if boot is not None else np.empty(0)
    q = q[np.isfinite(q)] if q.size else q
    if q.size > 1 and boot.n_seeds == S:  # the bootstrap ran over the same (defined) seeds
        var_q = float(q.var(ddof=1))
        out["interval"] = "seeds and questions"
        out["se_questions"] = math.sqrt(var_q)
        out["n_questions"] = boot.n_questions
        out["n_boot"] = int(q.size)
    else:
        var_q = 0.0
    se = math.sqrt(var_seeds + var_q)
    df = math.inf if var_seeds == 0 else (S - 1) * (var_seeds + var_q) ** 2 / var_seeds**2
    out.update(se=se, se_seeds=math.sqrt(var_seeds), df=df)
    if se == 0:
        out.update(ci_low=out["mean"], ci_high=out["mean"], p_value=math.nan, mde=0.0)
        if out["interval"] == "seeds":  # zero width from seeds alone: says nothing about questions
            out.update(
                holds=None,
                verdict=verdicts.UNDEFINED,
                reason="every seed gave the same value and no question variance was measured",
            )
            return out
    else:
        crit = _t(1 - alpha / 2, df)
        half = crit * se
        out.update(ci_low=out["mean"] - half, ci_high=out["mean"] + half, mde=(crit + _t(verdicts.POWER, df)) * se)
        from scipy import stats

        t_stat = (out["mean"] - null) / se
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            out["p_value"] = float(
                2 * (stats.norm.sf(abs(t_stat)) if not math.isfinite(df) else stats.t.sf(abs(t_stat), df))
            )
    out["verdict"] = verdicts.judge_interval(out["ci_low"], out["ci_high"], null, expect)
    out["holds"] = out["verdict"] == verdicts.HOLDS
    return out


def not_tested(summary: dict, why: str) -> dict:
    """``summary`` marked ``not tested`` (the mechanism was off): no verdict, the reason kept."""
    return {**summary, "verdict": verdicts.NOT_TESTED, "holds": None, "reason": why}


def clipped(summary: dict, low: float = 0.0, high: float = 1.0) -> dict:
    """An interval kept inside the metric's range ``[low, high]`` (marked where it was cut)."""
    lo, hi = summary.get("ci_low"), summary.get("ci_high")
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return summary
    cut = lo < low or hi > high
    return {
        **summary,
        "ci_low": max(lo, low),
        "ci_high": min(hi, high),
        **({"interval_clipped_to": [low, high]} if cut else {}),
    }
