"""Numbers as a reader meets them: one helper for every table in the notebooks and on the index.

``metrics.json`` keeps full precision; these functions only decide how a value is *shown*:

* a value with a confidence interval prints as ``0.47 [0.39, 0.55]``;
* fractions that are rates (accuracy, shares) print as percentages, ``*_pct`` columns already are;
* column names are words (``eval_accuracy`` -> "held-out pair accuracy"), not keys.

>>> ci(0.4712, 0.391, 0.5533)
'0.47 [0.39, 0.55]'
>>> pct(0.6791)
'67.9%'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

# Column keys -> words. Unknown keys fall back to their words with underscores as spaces.
WORDS: Mapping[str, str] = {
    "auroc": "AUROC",
    "auroc_mean": "mean AUROC",
    "auroc_min": "lowest seed",
    "auroc_max": "highest seed",
    "delta": "Δ AUROC",
    "mean": "Δ AUROC",
    "p_value": "p-value",
    "p_value_two_sided": "p-value (two-sided)",
    "n": "n",
    "n_seeds": "seeds",
    "n_questions": "questions",
    "n_samples": "samples",
    "n_pairs": "pairs",
    "n_train": "training pairs",
    "n_eval": "held-out pairs",
    "rm": "reward model",
    "rm_seed": "RM seed",
    "scorer": "scorer",
    "benchmark": "benchmark",
    "eval_accuracy": "held-out pair accuracy",
    "eval_loss": "held-out loss",
    "greedy_accuracy": "greedy accuracy",
    "sample_accuracy": "sampled accuracy",
    "accuracy": "accuracy",
    "accuracy_unfiltered": "accuracy, all samples",
    "accuracy_unpruned": "accuracy, unpruned",
    "accuracy_unguided": "accuracy, unguided",
    "generations_filtered_pct": "samples dropped",
    "tokens_saved_pct": "tokens saved",
    "samples_stopped_pct": "samples stopped",
    "tokens_generated": "tokens generated",
    "tokens_generated_unpruned": "tokens, unpruned",
    "tokens_per_s": "tokens/s",
    "wall_s": "wall time (s)",
    "wall_s_unpruned": "wall time unpruned (s)",
    "threshold": "Q threshold",
    "cos_correct_mean": "mean cosine, correct",
    "cos_incorrect_mean": "mean cosine, incorrect",
    "separation_auroc": "separation AUROC",
    "mean_q_before": "mean Q before the error",
    "mean_q_after": "mean Q after the error",
    "mean_delta": "mean Q change",
    "fraction_lower_after": "share with lower Q after",
    "prefix_error_auroc": "prefix error AUROC",
    "proportion_correct_before": "share correct before",
    "proportion_correct_after": "share correct after",
    "percentile": "fraction of the response",
    "signal": "signal",
    "setting": "setting",
    "steps": "steps",
}

# Columns whose values are fractions in [0, 1] shown as percentages.
RATE_COLUMNS = {"greedy_accuracy", "sample_accuracy", "accuracy", "accuracy_unfiltered", "accuracy_unpruned",
                "accuracy_unguided", "proportion_correct_before", "proportion_correct_after", "fraction_lower_after",
                "attribute_rate", "attribute_rate_unguided", "eval_accuracy"}


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x: Any, digits: int = 2) -> str:
    """A number with ``digits`` decimals; "–" when undefined."""
    return "–" if _missing(x) else f"{x:.{digits}f}"


def ci(value: Any, low: Any, high: Any, digits: int = 2) -> str:
    """``0.47 [0.39, 0.55]``; the interval is left out when it is undefined (one seed, one class)."""
    if _missing(value):
        return "–"
    if _missing(low) or _missing(high):
        return num(value, digits)
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def signed_ci(value: Any, low: Any, high: Any, digits: int = 2) -> str:
    """A difference with its interval, signs shown: ``+0.03 [-0.02, +0.08]``."""
    if _missing(value):
        return "–"
    if _missing(low) or _missing(high):
        return f"{value:+.{digits}f}"
    return f"{value:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def pct(x: Any, digits: int = 1, already_percent: bool = False) -> str:
    """A rate as a percentage: ``pct(0.679)`` and ``pct(67.9, already_percent=True)`` both give 67.9%."""
    if _missing(x):
        return "–"
    return f"{x if already_percent else 100 * x:.{digits}f}%"


def p_value(p: Any) -> str:
    if _missing(p):
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def words(key: str) -> str:
    return WORDS.get(key, key.replace("_", " "))


def table(df: pd.DataFrame, digits: int = 2, index_words: bool = True) -> pd.DataFrame:
    """A copy of ``df`` for reading: ``X``/``X_ci_low``/``X_ci_high`` (or ``ci_low``/``ci_high`` after
    ``X``) merged into one ``X [low, high]`` column, rates and ``*_pct`` as percentages, p-values
    readable, other floats rounded, and column names in words. Values become strings."""
    out = pd.DataFrame(index=df.index)
    # bare ci_low/ci_high columns belong to the first of these that the table has
    owner = next((c for c in ("auroc", "mean", "auroc_mean", "separation_auroc", "delta", "mean_delta") if c in df), None)
    used: set[str] = set()
    for col in df.columns:
        if col in used:
            continue
        low, high = f"{col}_ci_low", f"{col}_ci_high"
        if col == owner and low not in df:
            low, high = "ci_low", "ci_high"
        if low in df and high in df:
            used |= {low, high}
            if col in RATE_COLUMNS:
                shown = [pct(v) if _missing(lo) or _missing(hi) else f"{pct(v)} [{pct(lo)}, {pct(hi)}]"
                         for v, lo, hi in zip(df[col], df[low], df[high])]
            else:
                fmt = signed_ci if col in ("mean", "delta", "mean_delta") else ci
                shown = [fmt(v, lo, hi, digits) for v, lo, hi in zip(df[col], df[low], df[high])]
            out[words(col) + " [95% CI]"] = shown
            continue
        values = df[col]
        if col.endswith("_pct"):
            shown = [pct(v, already_percent=True) for v in values]
        elif col in RATE_COLUMNS:
            shown = [pct(v) for v in values]
        elif col.startswith("p_value"):
            shown = [p_value(v) for v in values]
        elif col == "n" or col.startswith("n_"):
            shown = ["–" if _missing(v) else f"{int(v):,}" for v in values]
        else:
            shown = [num(v, digits) if isinstance(v, float) else v for v in values.tolist()]
        out[words(col)] = shown
    if index_words and out.index.name:
        out.index.name = words(out.index.name)
    return out
