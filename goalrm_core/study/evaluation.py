"""Notebook 04's steps: dense scoring of every benchmark by each RM and seed, then AUROC (with the
paired difference of the two RMs), its spread over seeds, partial AUROC, Q-filtered voting, the
first-error check, the length gate and a plain-words reading generated from the numbers."""

from __future__ import annotations

import pandas as pd

from goalrm_core.data.io import require_artifact
from goalrm_core.data.rundir import RunDir
from goalrm_core.evaluation import metrics, tables
from goalrm_core.inference.scoring import eval_rm
from goalrm_core.study.artifacts import benchmarks, headline_rows
from goalrm_core.study.rms import BASELINE, GOAL_CONDITIONED, RMS
from goalrm_core.tasks.toymath.pipeline import TEMPLATE


def score_all(run_dir, rms, rm_seeds=(0,), batch_size: int = 64, max_len: int = 512, progress: bool = True,
              goal_method: str = "mean_last") -> dict:
    """Dense scoring of every benchmark's generations by each RM and seed, with its own goal state
    (the one formed by ``goal_method``; the paper's is ``mean_last``)."""
    run = RunDir(run_dir)
    counts = {}
    for rm in rms:
        for seed in rm_seeds:
            goal = require_artifact(run.goal_state(rm, seed, goal_method), "notebooks/03_representations.ipynb")
            counts[run.model_name(rm, seed)] = eval_rm(  # writes run.eval(rm, seed): eval_root/<model folder name>
                run.generations, run.model(rm, seed), run.eval_root,
                benchmarks(run_dir), goal, template=TEMPLATE, batch_size=batch_size, max_len=max_len, progress=progress)
    return counts


def auroc_tables(run_dir, rms, n_boot: int = 1000, seed: int = 0, headline: str = "greedy",
                 rm_seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """AUROC of every RM and reference scorer per benchmark (on the headline generations), and the
    paired difference goal-conditioned minus baseline."""
    aurocs, deltas = [], []
    for bench in benchmarks(run_dir):
        scored = {rm: headline_rows(run_dir, rm, bench, headline, rm_seed) for rm in rms}
        aurocs.append(tables.auroc_table(scored, bench, n_boot, seed))
        if {BASELINE, GOAL_CONDITIONED} <= set(rms):
            d = tables.delta_auroc(scored[GOAL_CONDITIONED], scored[BASELINE], n_boot, seed)
            deltas.append({"benchmark": bench, **{k: d[k] for k in ("mean", "ci_low", "ci_high", "p_value_two_sided")}})
    return pd.concat(aurocs, ignore_index=True), pd.DataFrame(deltas)


def seed_auroc_table(run_dir, rms, rm_seeds, n_boot: int = 1000, seed: int = 0, headline: str = "greedy") -> pd.DataFrame:
    """AUROC of every RM seed per benchmark on the same headline generations, with its bootstrap CI."""
    records = []
    for bench in benchmarks(run_dir):
        for rm in rms:
            for rm_seed in rm_seeds:
                rows = headline_rows(run_dir, rm, bench, headline, rm_seed)
                records.append({**tables.auroc_row(rm, bench, [r["reward"] for r in rows], rows, n_boot, seed), "rm_seed": rm_seed})
    return pd.DataFrame(records)


def seed_spread(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per RM and benchmark: mean AUROC over seeds with its 95% t-interval, and min/max."""
    out = []
    for (bench, rm), g in per_seed.groupby(["benchmark", "scorer"], sort=False):
        mean, low, high = metrics.mean_ci(g["auroc"].to_numpy())
        out.append({"benchmark": bench, "rm": rm, "n_seeds": len(g), "auroc_mean": mean, "ci_low": low, "ci_high": high,
                    "auroc_min": g["auroc"].min(), "auroc_max": g["auroc"].max()})
    return pd.DataFrame(out)


def seed_metrics(spread: pd.DataFrame) -> dict:
    """``{rm: {bench: {auroc_mean, ci_low, ci_high, min, max, n_seeds}}}`` for metrics.json."""
    out: dict = {}
    for _, r in spread.iterrows():
        out.setdefault(r["rm"], {})[r["benchmark"]] = {
            "auroc_mean": r["auroc_mean"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
            "auroc_min": r["auroc_min"], "auroc_max": r["auroc_max"], "n_seeds": int(r["n_seeds"])}
    return out


def partial_auroc_tables(run_dir, rms, bench: str = "toy-id", headline: str = "greedy", n_boot: int = 500, seed: int = 0) -> pd.DataFrame:
    frames = [tables.partial_auroc_table(headline_rows(run_dir, rm, bench, headline), n_boot=n_boot, seed=seed).assign(rm=rm, benchmark=bench)
              for rm in rms]
    return pd.concat(frames, ignore_index=True)


def filter_tables(run_dir, rms, threshold: float = 0.0, skip_first: int = 5, val_fraction: float = 0.3, seed: int = 0) -> pd.DataFrame:
    frames = [tables.filter_summary(tables.read_scored(RunDir(run_dir).eval(rm), bench, "all"), threshold, skip_first, val_fraction, seed)
              .assign(rm=rm, benchmark=bench) for rm in rms for bench in benchmarks(run_dir)]
    return pd.concat(frames, ignore_index=True)


def evaluation_metrics(aurocs: pd.DataFrame, deltas: pd.DataFrame, partials: pd.DataFrame, filters: pd.DataFrame) -> dict:
    """The ``evaluation`` section of metrics.json, in the keys the issue tracker documents."""
    out: dict = {"delta_auroc": {r["benchmark"]: {"mean": r["mean"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                                                  "p_value": r["p_value_two_sided"]} for _, r in deltas.iterrows()}}
    for _, r in aurocs.iterrows():
        out.setdefault(r["scorer"], {})[r["benchmark"]] = {"auroc": r["auroc"], "auroc_ci_low": r["ci_low"], "auroc_ci_high": r["ci_high"]}
    for _, r in partials.iterrows():
        key = "partial_auroc" if r["signal"] == "partial reward" else "partial_auroc_q"
        out[r["rm"]][r["benchmark"]].setdefault(key, {})[f"{r['percentile']:.1f}"] = r["auroc"]
    keys = ("threshold", "accuracy", "accuracy_unfiltered", "generations_filtered_pct", "tokens_saved_pct", "p_value")
    for prefix, name, extra in (("paper", "filter", ()), ("validation", "filter_validation", ("tokens_saved_ci_low", "tokens_saved_ci_high"))):
        for _, r in filters[filters["setting"].str.startswith(prefix)].iterrows():
            out[r["rm"]][r["benchmark"]][name] = {k: r[k] for k in keys + extra}
    return out


def reading(aurocs: pd.DataFrame, deltas: pd.DataFrame, bench: str = "toy-id") -> str:
    """A plain-words reading of the AUROC results, generated from the numbers so it cannot drift."""
    t = aurocs[aurocs["benchmark"] == bench].set_index("scorer")
    d = deltas.set_index("benchmark").loc[bench] if len(deltas) else None

    def ci(name):
        r = t.loc[name]
        return f"{r['auroc']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"

    lines = [f"On {bench}, the baseline RM reaches AUROC {ci(BASELINE)} and the goal-conditioned RM {ci(GOAL_CONDITIONED)}."]
    if d is not None:
        verdict = "excludes 0: a real difference at this sample size" if d["ci_low"] > 0 or d["ci_high"] < 0 else "includes 0: no detectable difference"
        lines.append(f"The paired difference (goal-conditioned − baseline) is {d['mean']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}], whose 95% CI {verdict}.")
    refs = [s for s in ("policy mean logprob", "length only") if s in t.index]
    best_rm = max(t.loc[BASELINE, "auroc"], t.loc[GOAL_CONDITIONED, "auroc"])
    for ref in refs:
        rel = "above" if best_rm > t.loc[ref, "ci_high"] else "below" if best_rm < t.loc[ref, "ci_low"] else "within the CI of"
        lines.append(f"The better RM is {rel} the free reference scorer '{ref}' ({ci(ref)}).")
    return " ".join(lines)


def length_gate(aurocs: pd.DataFrame, bench: str = "toy-id", rms=RMS) -> dict:
    """Do **both** RMs beat the length-only scorer on ``bench`` (point estimates)? If not, the later
    tables compare RMs that have learned less than a character count, and measure noise."""
    t = aurocs[aurocs["benchmark"] == bench].set_index("scorer")

    def entry(name):
        r = t.loc[name]
        return {"auroc": float(r["auroc"]), "ci_low": float(r["ci_low"]), "ci_high": float(r["ci_high"])}

    length = entry("length only")
    scorers = {rm: entry(rm) for rm in rms}
    return {"benchmark": bench, "passed": all(v["auroc"] > length["auroc"] for v in scorers.values()),
            "length_only": length, **scorers}


FIRST_ERROR_KEYS = ("n", "mean_q_before", "mean_q_after", "mean_delta", "delta_ci_low", "delta_ci_high", "p_value", "fraction_lower_after",
                    "prefix_error_auroc", "prefix_error_auroc_ci_low", "prefix_error_auroc_ci_high")


def first_error_metrics(summary: dict) -> dict:
    return {k: summary.get(k) for k in FIRST_ERROR_KEYS if k in summary}


def first_error_frame(summaries: dict[str, dict]) -> pd.DataFrame:
    """Metrics as rows, RMs as columns (the delta's interval named after it, for the formatter)."""
    frame = pd.DataFrame({rm: first_error_metrics(s) for rm, s in summaries.items()})
    return frame.rename(index={"delta_ci_low": "mean_delta_ci_low", "delta_ci_high": "mean_delta_ci_high"})
