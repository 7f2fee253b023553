"""Numbers as a reader meets them: one helper for every table in the notebooks and on the index.

``metrics.json`` keeps full precision; these functions only decide how a value is *shown*:

* a value with a confidence interval prints as ``0.47 [0.39, 0.55]``;
* fractions that are rates (accuracy, shares) print as percentages, ``*_pct`` columns already are;
* column names are words (``eval_accuracy`` -> "held-out pair accuracy"), not keys;
* an undefined value (``None``, NaN, ±inf, a missing key) prints as ``undefined``, with its reason
  when one is known: undefined is a state, never "nan" and never a crash;
* a number that rounds to zero prints without a sign (never ``-0.00``).

>>> ci(0.4712, 0.391, 0.5533)
'0.47 [0.39, 0.55]'
>>> pct(0.6791)
'67.9%'
>>> signed_ci(-0.001, -0.02, 0.03)
'0.00 [-0.02, +0.03]'
>>> ci(float("nan"), None, None, reason="one class only")
'undefined (one class only)'
>>> across({"mean": -0.21, "ci_low": -0.3, "ci_high": -0.12})
'-0.21 [-0.30, -0.12]'
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from goalrm_core.evaluation.numeric import UNDEFINED, fixed, interval, is_undefined, undefined  # noqa: F401 (the pages read them here)
from goalrm_core.tasks.toymath.problems import BENCHMARKS, CHAIN_BENCHMARKS

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: `goalrm compare` reads metrics without it

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
    "eval_loss": "held-out loss (all terms)",
    "eval_preference_loss": "held-out pairwise loss",
    "correct_len_mean": "mean length, correct",
    "incorrect_len_mean": "mean length, incorrect",
    "length_difference": "incorrect − correct (characters)",
    "n_correct": "correct samples",
    "n_incorrect": "incorrect samples",
    "pairs_per_question": "pairs per question",
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
    "pearson_r": "Pearson r",
    "pearson_p": "Pearson p-value",
    "spearman_rho": "Spearman ρ",
    "spearman_p": "Spearman p-value",
    "undefined_reason": "why undefined",
    "meets_target": "meets the target",
    "share_of_oracle": "share of the oracle's saving",
    "token_type": "token type",
    "prefix_wrong": "prefix already wrong",
    "r2_alone": "R² alone",
    "r2_added_last": "R² added last",
    "signal": "signal",
    "setting": "setting",
    "steps": "steps",
}

# Columns whose values are fractions in [0, 1] shown as percentages.
RATE_COLUMNS = {
    "greedy_accuracy",
    "sample_accuracy",
    "accuracy",
    "accuracy_unfiltered",
    "accuracy_unpruned",
    "accuracy_unguided",
    "proportion_correct_before",
    "proportion_correct_after",
    "fraction_lower_after",
    "attribute_rate",
    "attribute_rate_unguided",
    "eval_accuracy",
}


# Report order of the benchmarks: the task's tables (toy-id first), then any other in the order given.
BENCHMARK_ORDER: tuple[str, ...] = tuple(dict.fromkeys([*CHAIN_BENCHMARKS, *BENCHMARKS]))


def count(x: Any) -> int | None:
    """A count (seeds, questions, threads) as an ``int``, or ``None`` when it is undefined.

    >>> count(5), count(5.0), count(float("nan")), count(None), count(True)
    (5, 5, None, None, None)
    """
    return None if is_undefined(x) else int(x)


def reason_of(tree: Any, key: str | None = None) -> str | None:
    """The recorded reason a value of ``tree`` is undefined: ``<key>_reason``, ``<key>_undefined_reason``,
    then ``undefined_reason`` and ``reason`` (the names the metrics use); ``None`` when none is recorded.

    >>> reason_of({"p_value": None, "p_value_reason": "no question changed"}, "p_value")
    'no question changed'
    """
    if not isinstance(tree, Mapping):
        return None
    keys = [f"{key}_reason", f"{key}_undefined_reason"] if key else []
    for k in [*keys, "undefined_reason", "reason"]:
        value = tree.get(k)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


num = fixed  # the pages' name: ``fmt.num(x, digits, reason, signed)``
ci = interval  # ``0.47 [0.39, 0.55]``; the interval is left out when it is undefined (one seed, one class)
signed_ci = functools.partial(interval, signed=True)  # a difference: ``+0.03 [-0.02, +0.08]`` (zero unsigned)


def across(
    summary: Any,
    signed: bool = True,
    scale: float = 1.0,
    *,
    digits: int = 2,
    suffix: str = "",
    minus: str = "-",
    each_bound: bool = False,
    no_interval: str | None = None,
    no_seed: str | None = None,
) -> str:
    """An across-seeds figure (``evaluation.stats.across_seeds``: ``mean``, ``ci_low``, ``ci_high``,
    ``reason``) as ``mean [low, high]``, or ``undefined (reason)``, as :func:`interval` writes it. The
    README says more (:mod:`goalrm_core.report.formats`): ``no_seed`` is the reason of an undefined mean
    that records none, and ``no_interval`` (``"no interval: {}"``, given the reason) stands in brackets
    for an interval without its low bound (``across_seeds`` leaves both bounds out together).

    >>> across({"mean": 0.2, "ci_low": None, "reason": "one seed"}), across({"mean": None}, no_seed="no seed defined")
    ('+0.20', 'undefined (no seed defined)')
    """
    if not isinstance(summary, Mapping):
        return undefined()
    mean, low, reason = summary.get("mean"), summary.get("ci_low"), summary.get("reason")
    gap = ""
    if no_interval is not None and is_undefined(low):
        gap, each_bound = f" ({no_interval.format(reason or UNDEFINED)})", False
    return interval(
        mean,
        low,
        summary.get("ci_high"),
        digits,
        signed=signed,
        scale=scale,
        suffix=suffix,
        reason=reason or no_seed,
        minus=minus,
        each_bound=each_bound,
        no_interval=gap,
    )


def pct(x: Any, digits: int = 1, already_percent: bool = False, reason: Any = None, signed: bool = False) -> str:
    """A rate as a percentage: ``pct(0.679)`` and ``pct(67.9, already_percent=True)`` both give 67.9%."""
    if is_undefined(x):
        return undefined(reason)
    return fixed(x, digits, signed=signed, scale=1.0 if already_percent else 100.0) + "%"


def p_value(p: Any, reason: Any = None) -> str:
    if is_undefined(p):
        return undefined(reason)
    return "< 0.001" if p < 0.001 else fixed(p, 3)


def words(key: str) -> str:
    return WORDS.get(key, key.replace("_", " "))


def order_benchmarks(names: Iterable[str]) -> list[str]:
    """Benchmarks in report order: toy-id, toy-zero, toy-times, toy-unseen (and the multi-digit ones),
    then any other in the order given.

    >>> order_benchmarks(["toy-zero", "gsm8k", "toy-unseen", "toy-id", "toy-times"])
    ['toy-id', 'toy-zero', 'toy-times', 'toy-unseen', 'gsm8k']
    """
    names = list(dict.fromkeys(names))
    rank = {b: i for i, b in enumerate(BENCHMARK_ORDER)}
    return sorted(names, key=lambda b: (b not in rank, rank.get(b, 0), names.index(b)))


# Columns whose string values are keys (a factor's name): shown in words too.
KEY_VALUED = {"factor"}


def yes_no(v: Any) -> str:
    """A truth value as a reader says it: ``yes`` or ``no`` (``undefined`` when it is not known).

    >>> yes_no(True), yes_no(False), yes_no(None)
    ('yes', 'no', 'undefined')
    """
    return UNDEFINED if v is None or (isinstance(v, float) and math.isnan(v)) else ("yes" if bool(v) else "no")


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool) or type(v).__name__ == "bool_"  # numpy's bool as well


def _cell(v: Any, digits: int, reason: Any = None) -> Any:
    if _is_bool(v):
        return yes_no(v)
    if isinstance(v, str):
        return v
    if v is None or isinstance(v, (float, int)):
        return num(v, digits, reason)
    return v


def table(df: pd.DataFrame, digits: int = 2, index_words: bool = True) -> pd.DataFrame:
    """A copy of ``df`` for reading: ``X``/``X_ci_low``/``X_ci_high`` (or ``ci_low``/``ci_high`` after
    ``X``) merged into one ``X [low, high]`` column, rates and ``*_pct`` as percentages, p-values
    readable, truth values ``yes``/``no``, other floats rounded, and column names in words. Values become
    strings; an undefined one reads ``undefined``, with the reason of an ``X_reason`` column when the
    table has one, else the row's ``undefined_reason``."""
    import pandas as pd

    out = pd.DataFrame(index=df.index)
    # bare ci_low/ci_high columns belong to the first of these that the table has
    owner = next(
        (c for c in ("auroc", "mean", "auroc_mean", "separation_auroc", "delta", "mean_delta") if c in df), None
    )
    used: set[str] = {f"{c}_reason" for c in df.columns if f"{c}_reason" in df} | {"undefined_reason"}

    def reasons(col):  # a row's undefined_reason stands for every value of the row without its own
        key = f"{col}_reason" if f"{col}_reason" in df else "undefined_reason"
        return list(df[key]) if key in df else [None] * len(df)

    for col in df.columns:
        if col in used:
            continue
        low, high = f"{col}_ci_low", f"{col}_ci_high"
        if col == owner and low not in df:
            low, high = "ci_low", "ci_high"
        stem = col.rsplit("_", 1)[0]  # pearson_r with pearson_ci_low / pearson_ci_high
        if low not in df and "_" in col and f"{stem}_ci_low" in df and f"{stem}_ci_high" in df:
            low, high = f"{stem}_ci_low", f"{stem}_ci_high"
        if low in df and high in df:
            used |= {low, high}
            if col in RATE_COLUMNS:
                shown = [
                    pct(v, reason=r) if is_undefined(v, lo, hi) else f"{pct(v)} [{pct(lo)}, {pct(hi)}]"
                    for v, lo, hi, r in zip(df[col], df[low], df[high], reasons(col))
                ]
            else:
                fmt = signed_ci if col in ("mean", "delta", "mean_delta") else ci
                shown = [
                    fmt(v, lo, hi, digits, reason=r) for v, lo, hi, r in zip(df[col], df[low], df[high], reasons(col))
                ]
            out[words(col) + " [95% CI]"] = shown
            continue
        values, why = df[col].tolist(), reasons(col)
        if col.endswith("reason"):
            shown = [v if isinstance(v, str) else "" for v in values]
            if not any(shown):
                continue  # nothing is undefined: no empty column
        elif any(_is_bool(v) for v in values) and all(_is_bool(v) or v is None for v in values):
            shown = [yes_no(v) for v in values]
        elif col in KEY_VALUED:
            shown = [words(v) if isinstance(v, str) else v for v in values]
        elif col.endswith("_pct"):
            shown = [pct(v, already_percent=True, reason=r) for v, r in zip(values, why)]
        elif col in RATE_COLUMNS:
            shown = [pct(v, reason=r) for v, r in zip(values, why)]
        elif col.startswith("p_value"):
            shown = [p_value(v, reason=r) for v, r in zip(values, why)]
        elif col == "n" or col.startswith("n_"):
            shown = [undefined(r) if is_undefined(v) else f"{int(v):,}" for v, r in zip(values, why)]
        else:
            shown = [_cell(v, digits, r) if isinstance(v, float) or v is None else v for v, r in zip(values, why)]
        out[words(col)] = shown
    if index_words and out.index.name:
        out.index.name = words(out.index.name)
    return out


class Shown:
    """A reading table as a notebook displays it: no pandas index, an undefined cell spelled
    ``undefined``. :func:`show` makes one."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame

    def _repr_html_(self) -> str:
        return self.frame.to_html(index=False, border=0, escape=True, na_rep=UNDEFINED)

    def __repr__(self) -> str:
        return self.frame.to_string(index=False, na_rep=UNDEFINED)


def show(df: pd.DataFrame, digits: int = 2, *, formatted: bool = False) -> Shown:
    """``df`` for display: :func:`table` (unless ``formatted``), then a named or labelled index becomes
    the first column, so no pandas index is printed."""
    import pandas as pd

    out = df.copy() if formatted else table(df, digits)
    if out.index.name or not isinstance(out.index, pd.RangeIndex):
        out = out.reset_index()
    out.columns = [str(c) for c in out.columns]
    return Shown(out)


def wide(df: pd.DataFrame, row: str, col: str, value: str) -> pd.DataFrame:
    """``df`` with one row per ``row`` value (in the order met, as the first column) and one column per
    ``col`` value (benchmarks in report order, :data:`BENCHMARK_ORDER`), cells from ``value``."""
    grid = df.pivot(index=row, columns=col, values=value)
    grid = grid.reindex(index=list(dict.fromkeys(df[row])), columns=order_benchmarks(list(dict.fromkeys(df[col]))))
    grid.columns.name = None
    return grid.reset_index()


def rate_ci(rate: Any, n: Any, digits: int = 1) -> str:
    """A rate over ``n`` trials as a percentage with its 95% Wilson interval, ``75.0% [57.9, 86.7]``;
    the interval is left out when ``n`` is unknown."""
    if is_undefined(rate):
        return undefined()
    shown = pct(rate, digits)
    trials = count(n)
    if trials:
        from goalrm_core.evaluation.stats import wilson_interval  # scipy: only where a page is drawn

        low, high = wilson_interval(int(round(float(rate) * trials)), trials)
        shown += f" [{fixed(low, digits, scale=100)}, {fixed(high, digits, scale=100)}]"
    return shown


def accuracy_cell(accuracy: Any, n_questions: Any, tokens: Any, n: Any) -> str:
    """One decoding method on one benchmark: ``75.0% [57.9, 86.7] (207 tok, N=8)``, accuracy with its
    95% Wilson interval over ``n_questions`` questions, generated tokens per question, samples per question."""
    samples = count(n)
    return f"{rate_ci(accuracy, n_questions)} ({num(tokens, 0)} tok, N={undefined() if samples is None else samples})"
