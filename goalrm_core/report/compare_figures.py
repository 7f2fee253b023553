"""The figures ``goalrm compare`` sets side by side: collecting every figure of one run (its ``metrics.json``
read by :func:`goalrm_core.report.metrics_view.load_metrics`) with its interval (across seeds, seed 0's bootstrap, or a
mean over seeds), and the
95% interval of one figure's difference B − A (Welch's t, or a normal approximation from each run's
interval). The module docstring of :mod:`goalrm_core.report.compare` says which method applies when.
"""

from __future__ import annotations

import math
from typing import Any, Iterator, Mapping

from goalrm_core.evaluation.auroc import delta_of
from goalrm_core.evaluation.numeric import num
from goalrm_core.report.metrics_view import section

Z95 = 1.959963984540054  # the normal 97.5% quantile
ALPHA = 0.05

# Top-level sections that are not stages.
NOT_STAGES = ("provenance", "timings", "schema_version")
# Keys of the evaluation section that are not scorers (``evaluation.<scorer>.<bench>.auroc``).
NOT_SCORERS = ("delta_auroc", "first_error", "gate", "seeds", "primary", "exploratory", "headline", "threads")

# Figure groups, in the order the report shows them.
GROUPS = {
    "across_seeds": "Primary figures (across RM seeds)",
    "seed0": "Seed-0 detail figures (bootstrap 95% CIs)",
    "over_seeds": "Figures over seeds (mean and t-interval)",
}
METHODS = {
    "welch_values": "Welch t (per-seed values)",
    "welch_summary": "Welch t (from each run's t-interval over seeds)",
    "normal": "normal approx. (from each run's 95% CI)",
}


def is_across(x: Any) -> bool:
    return isinstance(x, Mapping) and "per_seed" in x and "mean" in x


def _summary(kind: str, value, low=None, high=None, *, per_seed=None, n=None) -> dict:
    """One run's figure: ``kind`` is ``per_seed`` (values per seed), ``t_interval`` (mean and its
    t-interval over ``n`` seeds) or ``interval`` (point estimate and 95% CI)."""
    out = {"kind": kind, "value": num(value), "ci_low": num(low), "ci_high": num(high)}
    if kind == "per_seed":
        out["per_seed"] = [num(v) for v in per_seed] if isinstance(per_seed, (list, tuple)) else []
        out["n"] = sum(v is not None for v in out["per_seed"])
    elif kind == "t_interval":
        out["n"] = int(n) if num(n) is not None else None
    return out


def _across_summary(a: Mapping) -> dict:
    return _summary("per_seed", a.get("mean"), a.get("ci_low"), a.get("ci_high"), per_seed=a.get("per_seed"))


# ------------------------------------------------------------------------------------- figures


def _across_seed_figures(m: Mapping) -> dict[str, dict]:
    """Every across-seed figure of the run's stages, wherever it sits, by its dotted path."""
    out: dict[str, dict] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if is_across(node):
            out[".".join(path)] = {**_across_summary(node), "group": "across_seeds"}
            return
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, path + (str(k),))

    for stage, node in m.items():
        if stage not in NOT_STAGES:
            walk(node, (str(stage),))
    return out


def _scorer_figures(ev: Mapping) -> Iterator[tuple[str, dict]]:
    """Seed 0's figures of each scorer on each benchmark: its AUROC and its filter's validated saving."""
    for scorer, benches in ev.items():
        if scorer in NOT_SCORERS:
            continue
        for bench, fig in section(benches).items():
            fig = section(fig)
            if "auroc" in fig and not is_across(fig):
                yield (
                    f"evaluation.{scorer}.{bench}.auroc",
                    _summary("interval", fig["auroc"], fig.get("auroc_ci_low"), fig.get("auroc_ci_high")),
                )
            fv = section(fig, "filter_validation")
            if "tokens_saved_pct" in fv and "tokens_saved_ci_low" in fv:
                yield (
                    f"evaluation.{scorer}.{bench}.filter_validation.tokens_saved_pct",
                    _summary(
                        "interval",
                        fv["tokens_saved_pct"],
                        fv.get("tokens_saved_ci_low"),
                        fv.get("tokens_saved_ci_high"),
                    ),
                )


def _seed0_figures(m: Mapping, ev: Mapping) -> Iterator[tuple[str, dict]]:
    """Seed 0's bootstrap figures, path and summary: the scorers', ΔAUROC, Q at the first error, the
    representations' separation."""
    yield from _scorer_figures(ev)
    for bench, d in section(ev, "delta_auroc").items():
        if isinstance(d, Mapping) and not is_across(d) and delta_of(d) is not None:
            yield (
                f"evaluation.delta_auroc.{bench}",
                _summary("interval", delta_of(d), d.get("ci_low"), d.get("ci_high")),
            )
    for rm, fe in section(ev, "first_error").items():
        fe = section(fe)
        if "mean_delta" in fe:
            yield (
                f"evaluation.first_error.{rm}.mean_delta",
                _summary("interval", fe["mean_delta"], fe.get("delta_ci_low"), fe.get("delta_ci_high")),
            )
        if "prefix_error_auroc" in fe:
            yield (
                f"evaluation.first_error.{rm}.prefix_error_auroc",
                _summary(
                    "interval",
                    fe["prefix_error_auroc"],
                    fe.get("prefix_error_auroc_ci_low"),
                    fe.get("prefix_error_auroc_ci_high"),
                ),
            )
    for rm, rep in section(m, "representations").items():
        rep = section(rep)
        if "separation_auroc" in rep:
            yield (
                f"representations.{rm}.separation_auroc",
                _summary(
                    "interval",
                    rep["separation_auroc"],
                    rep.get("separation_auroc_ci_low"),
                    rep.get("separation_auroc_ci_high"),
                ),
            )


def _over_seed_figures(m: Mapping, ev: Mapping) -> Iterator[tuple[str, dict]]:
    """The means over seeds with their t-intervals, path and summary: training accuracy and each AUROC."""
    for rm, tr in section(m, "training").items():
        tr = section(tr)
        if "eval_accuracy" in tr:
            ci = tr.get("eval_accuracy_ci")
            low, high = (
                (ci[0], ci[1])
                if isinstance(ci, (list, tuple)) and len(ci) == 2
                else (tr.get("eval_accuracy_ci_low"), tr.get("eval_accuracy_ci_high"))
            )
            yield (
                f"training.{rm}.eval_accuracy",
                _summary("t_interval", tr["eval_accuracy"], low, high, n=tr.get("n_seeds")),
            )
    for rm, benches in section(ev, "seeds").items():
        for bench, s in section(benches).items():
            s = section(s)
            if "auroc_mean" in s:
                yield (
                    f"evaluation.seeds.{rm}.{bench}.auroc_mean",
                    _summary("t_interval", s["auroc_mean"], s.get("ci_low"), s.get("ci_high"), n=s.get("n_seeds")),
                )


def collect_figures(m: Mapping) -> dict[str, dict]:
    """Every comparable figure of one run, ``{dotted path: summary + group}``, in report order:
    the across-seed figures (any ``across_seeds`` dict), then the seed-0 bootstrap figures, then the
    means over seeds."""
    out = _across_seed_figures(m)
    ev = section(m, "evaluation")
    for group, figures in (("seed0", _seed0_figures(m, ev)), ("over_seeds", _over_seed_figures(m, ev))):
        for path, summary in figures:
            out.setdefault(path, {**summary, "group": group})  # a path already collected keeps its first figure
    return out


def _t_quantile(df: float) -> float:
    from scipy import stats  # lazily: the module stays light to import

    return float(stats.t.ppf(1 - ALPHA / 2, df))


def _welch(mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float, n_b: int) -> tuple[float, float, float]:
    """Welch's 95% t interval of mean_b − mean_a, from each side's sample variance and size."""
    d = mean_b - mean_a
    va, vb = var_a / n_a, var_b / n_b
    se2 = va + vb
    if se2 <= 0:
        return d, d, d  # no spread on either side: the difference is exact
    df = se2**2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    half = _t_quantile(df) * math.sqrt(se2)
    return d, d - half, d + half


def _sample(s: dict) -> tuple[float, float, int] | None:
    """(mean, sample variance, n) of a per-seed or t-interval summary, or None when it has no spread."""
    if s["kind"] == "per_seed":
        values = [v for v in s["per_seed"] if v is not None]
        if len(values) < 2:
            return None
        mean = sum(values) / len(values)
        return mean, sum((v - mean) ** 2 for v in values) / (len(values) - 1), len(values)
    if s["kind"] == "t_interval":
        n, low, high = s.get("n"), s["ci_low"], s["ci_high"]
        if s["value"] is None or low is None or high is None or not n or n < 2:
            return None
        sem = (high - low) / (2 * _t_quantile(n - 1))
        return s["value"], sem * sem * n, n
    return None


def compare_figure(a: dict, b: dict) -> dict:
    """The difference B − A of one figure with its 95% interval, the method, and whether they agree
    (``agree``: True/False, or None with ``reason`` when either side is undefined)."""
    out = {"difference": None, "ci_low": None, "ci_high": None, "method": None, "agree": None, "reason": None}
    undefined = [side for side, s in (("A", a), ("B", b)) if s["value"] is None]
    if undefined:
        out["reason"] = f"undefined in run {' and '.join(undefined)}"
        return out
    sa, sb = _sample(a), _sample(b)
    if a["kind"] in ("per_seed", "t_interval") and b["kind"] in ("per_seed", "t_interval") and sa and sb:
        both_values = a["kind"] == b["kind"] == "per_seed"
        d, low, high = _welch(*sa, *sb)
        out["method"] = "welch_values" if both_values else "welch_summary"
    else:
        no_ci = [side for side, s in (("A", a), ("B", b)) if s["ci_low"] is None or s["ci_high"] is None]
        if no_ci:
            few = all(s["kind"] == "per_seed" and s["n"] < 2 for side, s in (("A", a), ("B", b)) if side in no_ci)
            out["reason"] = (
                f"fewer than 2 seeds defined in run {' and '.join(no_ci)}"
                if few
                else f"no interval in run {' and '.join(no_ci)}"
            )
            return out
        se_a, se_b = ((s["ci_high"] - s["ci_low"]) / (2 * Z95) for s in (a, b))
        d = b["value"] - a["value"]
        half = Z95 * math.hypot(se_a, se_b)
        low, high = d - half, d + half
        out["method"] = "normal"
    out.update(difference=d, ci_low=low, ci_high=high, agree=bool(low <= 0 <= high))
    return out
