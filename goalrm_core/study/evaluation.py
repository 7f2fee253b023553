"""Notebook 04's steps: dense scoring of every benchmark by each RM and seed, then AUROC (with the
paired difference of the two RMs), its spread over seeds, partial AUROC, Q-filtered voting, the
first-error check, the length gate and a plain-words reading generated from the numbers."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from goalrm_core.data.io import require_artifact
from goalrm_core.data.questions import group_by_question
from goalrm_core.data.rundir import RunDir
from goalrm_core.evaluation import hierarchical, metrics, q_analysis, stats, tables
from goalrm_core.evaluation import voting as metrics_voting
from goalrm_core.evaluation.localisation import REFERENCES, DidResult, first_error_did
from goalrm_core.inference.scoring import eval_rm
from goalrm_core.report import conclusions
from goalrm_core.study import formatting as fmt
from goalrm_core.study.artifacts import headline_rows, malformed_share, subset_rows, well_formed_only
from goalrm_core.study.rms import BASELINE, GOAL_CONDITIONED, RMS
from goalrm_core.tasks.toymath.pipeline import TEMPLATE, benchmark_names


def score_all(
    run_dir,
    rms,
    rm_seeds=(0,),
    batch_size: int = 64,
    max_len: int = 512,
    progress: bool = True,
    goal_method: str = "mean_last",
    *,
    encoding: str,
    readout: str,
    arms=(),
) -> dict:
    """Dense scoring of every benchmark's generations by each RM and seed, with its own goal state
    (the one formed by ``goal_method``; the paper's is ``mean_last``), read as the profile's
    ``encoding`` and ``readout`` say; the step-verifier ``arms`` (``rms.step_arms``) without a goal
    state (their reward and partial rewards only)."""
    run = RunDir(run_dir)
    counts = {}
    for rm in list(rms) + list(arms):
        for seed in rm_seeds:
            goal = (
                None
                if rm in arms
                else require_artifact(run.goal_state(rm, seed, goal_method), "notebooks/03_representations.ipynb")
            )
            counts[run.model_name(rm, seed)] = eval_rm(  # writes run.eval(rm, seed): eval_root/<model folder name>
                run.generations,
                run.model(rm, seed),
                run.eval_root,
                benchmark_names(run_dir),
                goal,
                vanilla=goal is None,
                template=TEMPLATE,
                batch_size=batch_size,
                max_len=max_len,
                progress=progress,
                encoding=encoding,
                readout=readout,
            )
    return counts


def auroc_tables(
    run_dir, rms, n_boot: int = 1000, seed: int = 0, headline: str = "greedy", rm_seed: int = 0, subset: str = "all"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """AUROC of every RM and reference scorer per benchmark (on the headline generations, or on
    their ``well_formed`` subset: correct against well-formed incorrect ones), and the paired
    difference goal-conditioned minus baseline."""
    aurocs, deltas = [], []
    for bench in benchmark_names(run_dir):
        scored = {rm: subset_rows(headline_rows(run_dir, rm, bench, headline, rm_seed), subset) for rm in rms}
        aurocs.append(tables.auroc_table(scored, bench, n_boot, seed))
        if {BASELINE, GOAL_CONDITIONED} <= set(rms):
            d = tables.delta_auroc(scored[GOAL_CONDITIONED], scored[BASELINE], n_boot, seed)
            deltas.append(
                {"benchmark": bench, **{k: d[k] for k in ("delta", "ci_low", "ci_high", "p_value_two_sided")}}
            )
    return pd.concat(aurocs, ignore_index=True), pd.DataFrame(deltas)


def seed_auroc_table(
    run_dir, rms, rm_seeds, n_boot: int = 1000, seed: int = 0, headline: str = "greedy"
) -> pd.DataFrame:
    """AUROC of every RM seed per benchmark on the same headline generations, with its bootstrap CI."""
    records = []
    for bench in benchmark_names(run_dir):
        for rm in rms:
            for rm_seed in rm_seeds:
                rows = headline_rows(run_dir, rm, bench, headline, rm_seed)
                records.append(
                    {**tables.auroc_row(rm, bench, [r["reward"] for r in rows], rows, n_boot, seed), "rm_seed": rm_seed}
                )
    return pd.DataFrame(records)


def seed_spread(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per RM and benchmark: mean AUROC over seeds with its 95% t-interval, and min/max."""
    out = []
    for (bench, rm), g in per_seed.groupby(["benchmark", "scorer"], sort=False):
        mean, low, high = metrics.mean_ci(g["auroc"].to_numpy())
        out.append(
            {
                "benchmark": bench,
                "rm": rm,
                "n_seeds": len(g),
                "auroc_mean": mean,
                "ci_low": low,
                "ci_high": high,
                "auroc_min": g["auroc"].min(),
                "auroc_max": g["auroc"].max(),
            }
        )
    return pd.DataFrame(out)


def seed_metrics(spread: pd.DataFrame) -> dict:
    """``{rm: {bench: {auroc_mean, ci_low, ci_high, min, max, n_seeds}}}`` for metrics.json."""
    out: dict = {}
    for _, r in spread.iterrows():
        out.setdefault(r["rm"], {})[r["benchmark"]] = {
            "auroc_mean": r["auroc_mean"],
            "ci_low": r["ci_low"],
            "ci_high": r["ci_high"],
            "auroc_min": r["auroc_min"],
            "auroc_max": r["auroc_max"],
            "n_seeds": int(r["n_seeds"]),
        }
    return out


def partial_auroc_tables(
    run_dir, rms, bench: str = "toy-id", headline: str = "greedy", n_boot: int = 500, seed: int = 0, rm_seed: int = 0
) -> pd.DataFrame:
    """Partial-generation AUROC of every RM (RM seed ``rm_seed``) on ``bench``'s headline generations."""
    frames = [
        tables.partial_auroc_table(
            headline_rows(run_dir, rm, bench, headline, rm_seed), n_boot=n_boot, seed=seed
        ).assign(rm=rm, benchmark=bench)
        for rm in rms
    ]
    return pd.concat(frames, ignore_index=True)


def filter_tables(
    run_dir,
    rms,
    threshold: float = 0.0,
    skip_first: int = metrics.SKIP_FIRST,
    val_fraction: float = 0.3,
    seed: int = 0,
    rm_seed: int = 0,
) -> pd.DataFrame:
    """Q-filtered majority voting of every RM (RM seed ``rm_seed``) on every benchmark's samples."""
    frames = [
        tables.filter_summary(
            tables.read_scored(RunDir(run_dir).eval(rm, rm_seed), bench, "all"),
            threshold,
            skip_first,
            val_fraction,
            seed,
        ).assign(rm=rm, benchmark=bench)
        for rm in rms
        for bench in benchmark_names(run_dir)
    ]
    return pd.concat(frames, ignore_index=True)


def evaluation_metrics(
    aurocs: pd.DataFrame, deltas: pd.DataFrame, partials: pd.DataFrame, filters: pd.DataFrame
) -> dict:
    """The ``evaluation`` section of metrics.json: per benchmark, the paired AUROC difference, each RM's
    AUROC, partial AUROCs and Q-filtered voting."""
    out: dict = {
        "delta_auroc": {
            r["benchmark"]: {
                "delta": r["delta"],
                "ci_low": r["ci_low"],
                "ci_high": r["ci_high"],
                "p_value": r["p_value_two_sided"],
            }
            for _, r in deltas.iterrows()
        }
    }
    for _, r in aurocs.iterrows():
        out.setdefault(r["scorer"], {})[r["benchmark"]] = {
            "auroc": r["auroc"],
            "auroc_ci_low": r["ci_low"],
            "auroc_ci_high": r["ci_high"],
        }
    for _, r in partials.iterrows():
        key = "partial_auroc" if r["signal"] == "partial reward" else "partial_auroc_q"
        out[r["rm"]][r["benchmark"]].setdefault(key, {})[f"{r['percentile']:.1f}"] = r["auroc"]
    keys = ("threshold", "accuracy", "accuracy_unfiltered", "generations_filtered_pct", "tokens_saved_pct", "p_value")
    for prefix, name, extra in (
        ("paper", "filter", ()),
        ("validation", "filter_validation", ("tokens_saved_ci_low", "tokens_saved_ci_high")),
    ):
        for _, r in filters[filters["setting"].str.startswith(prefix)].iterrows():
            out[r["rm"]][r["benchmark"]][name] = {k: r[k] for k in keys + extra}
    return out


def well_formed_metrics(aurocs_wf: pd.DataFrame) -> dict:
    """``{scorer: {bench: {auroc, auroc_ci_low, auroc_ci_high, n_incorrect}}}``: seed 0's AUROC on the
    correct against the well-formed incorrect generations (the ``auroc_well_formed`` section)."""
    out: dict = {}
    for _, r in aurocs_wf.iterrows():
        out.setdefault(r["scorer"], {})[r["benchmark"]] = {
            "auroc": r["auroc"],
            "auroc_ci_low": r["ci_low"],
            "auroc_ci_high": r["ci_high"],
            "n_incorrect": int(r["n"]) - int(r["n_positive"]),
        }
    return out


def well_formed_reading(aurocs: pd.DataFrame, aurocs_wf: pd.DataFrame, bench: str = "toy-id") -> str:
    """What the RMs detect, in words generated from seed 0's two AUROC tables: every incorrect
    solution, then only the well-formed ones (the errors that need the arithmetic checked)."""

    def auroc(t, name):
        r = t[(t["benchmark"] == bench) & (t["scorer"] == name)]
        return float(r["auroc"].iloc[0]) if len(r) and _defined(r["auroc"].iloc[0]) else math.nan

    parts = []
    for name in [*RMS, "policy mean logprob", "length only"]:
        a, w = auroc(aurocs, name), auroc(aurocs_wf, name)
        if _defined(a) or _defined(w):
            parts.append(f"{name} {fmt.num(a)} → {fmt.num(w)}")
    if not parts:
        return f"On {bench}, no AUROC is defined on either set."
    return (
        f"Seed 0 (detail), {bench}: AUROC on all incorrect solutions → on well-formed incorrect ones only: "
        + "; ".join(parts)
        + ". A scorer that falls to about 0.5 on the second set detects the shape of a wrong solution, not its "
        "arithmetic."
    )


def reading(aurocs: pd.DataFrame, deltas: pd.DataFrame, bench: str = "toy-id") -> str:
    """A plain-words reading of seed 0's AUROC results, generated from the numbers so it cannot
    drift; an undefined number is said to be undefined, with its reason, and carries no verdict."""
    t = aurocs[aurocs["benchmark"] == bench].set_index("scorer")
    d = deltas.set_index("benchmark").loc[bench] if len(deltas) else None

    def ci(name):
        r = t.loc[name]
        if not _defined(r["auroc"]):
            return f"undefined ({r.get('undefined_reason') or 'one class only'})"
        return f"{r['auroc']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"

    lines = [
        f"Seed 0 (detail): on {bench}, the baseline RM reaches AUROC {ci(BASELINE)} and the goal-conditioned RM "
        f"{ci(GOAL_CONDITIONED)}."
    ]
    if d is not None and _defined(d["delta"]) and _defined(d["ci_low"]):
        verdict = "excludes 0" if d["ci_low"] > 0 or d["ci_high"] < 0 else "includes 0"
        lines.append(
            f"The paired difference (goal-conditioned − baseline) is {d['delta']:+.3f} [{d['ci_low']:+.3f}, "
            f"{d['ci_high']:+.3f}], whose 95% CI over questions {verdict}; the conclusion over training seeds is in "
            "the next section."
        )
    elif d is not None:
        lines.append("The paired difference is undefined on this set.")
    refs = [s for s in ("policy mean logprob", "length only") if s in t.index]
    rm_aurocs = [t.loc[rm, "auroc"] for rm in (BASELINE, GOAL_CONDITIONED) if _defined(t.loc[rm, "auroc"])]
    for ref in refs:
        if not rm_aurocs or not _defined(t.loc[ref, "ci_low"]):
            continue
        best_rm = max(rm_aurocs)
        rel = (
            "above"
            if best_rm > t.loc[ref, "ci_high"]
            else "below"
            if best_rm < t.loc[ref, "ci_low"]
            else "within the CI of"
        )
        lines.append(f"The better RM is {rel} the free reference scorer '{ref}' ({ci(ref)}).")
    return " ".join(lines)


def length_gate(aurocs: pd.DataFrame, bench: str = "toy-id", rms=RMS) -> dict:
    """Seed 0's gate (detail): do **both** RMs beat the length-only scorer on ``bench`` (point
    estimates)? ``passed`` is None, with a ``reason``, when an AUROC is undefined."""
    t = aurocs[aurocs["benchmark"] == bench].set_index("scorer")

    def entry(name):
        r = t.loc[name]
        return {"auroc": float(r["auroc"]), "ci_low": float(r["ci_low"]), "ci_high": float(r["ci_high"])}

    length = entry("length only")
    scorers = {rm: entry(rm) for rm in rms}
    undefined = [name for name, v in {"length only": length, **scorers}.items() if not _defined(v["auroc"])]
    passed = None if undefined else all(v["auroc"] > length["auroc"] for v in scorers.values())
    reason = f"AUROC undefined for {', '.join(undefined)} (one class in the headline set)" if undefined else None
    return {"benchmark": bench, "passed": passed, "reason": reason, "length_only": length, **scorers}


FIRST_ERROR_KEYS = (
    "n",
    "mean_q_before",
    "mean_q_after",
    "mean_delta",
    "delta_ci_low",
    "delta_ci_high",
    "p_value",
    "fraction_lower_after",
    "prefix_error_auroc",
    "prefix_error_auroc_ci_low",
    "prefix_error_auroc_ci_high",
)


def token_types(row: dict) -> list[str]:
    """The type of each response token of a scored ToyMath generation, as the RMs read it (character
    tokens of the solution, then ``" "`` and EOS): digit, operator, ``=``, newline, ``#``, space, EOS."""
    kinds = {"=": "=", "\n": "newline", "#": "#", " ": "space", "+": "operator", "-": "operator", "*": "operator"}
    types = ["digit" if ch.isdigit() else kinds.get(ch, "other") for ch in row["generated_solution"]] + ["space", "EOS"]
    n = len(row["cosine_sim"])
    return types[:n] + ["other"] * (n - len(types))


def q_diagnosis(rows: list[dict], skip_first: int) -> dict:
    """What moves Q on these scored generations: the per-token frame (``q_analysis.q_token_frame``),
    the variance each factor explains, and where correct generations reach their lowest Q."""
    frame = q_analysis.q_token_frame(
        [r["cosine_sim"] for r in rows],
        [token_types(r) for r in rows],
        [tables.first_error_token(r) for r in rows],
        [bool(r["is_correct"]) for r in rows],
        skip_first,
    )
    return {"frame": frame, "shares": q_analysis.q_variance_shares(frame), "lowest": q_analysis.lowest_q_tokens(frame)}


def q_diagnosis_metrics(diagnosis: dict) -> dict:
    """The ``q_diagnosis`` section of metrics.json: variance shares and the lowest-Q token types."""
    return {
        "variance_shares": {
            r["factor"]: {"r2_alone": r["r2_alone"], "r2_added_last": r["r2_added_last"]}
            for _, r in diagnosis["shares"].iterrows()
        },
        "lowest_q_of_correct": {
            r["token_type"]: {"n": int(r["n"]), "share": r["share"]} for _, r in diagnosis["lowest"].iterrows()
        },
    }


def first_error_metrics(summary: dict) -> dict:
    return {k: summary.get(k) for k in FIRST_ERROR_KEYS if k in summary}


def first_error_frame(summaries: dict[str, dict]) -> pd.DataFrame:
    """Metrics as rows, RMs as columns (the delta's interval named after it, for the formatter)."""
    frame = pd.DataFrame({rm: first_error_metrics(s) for rm, s in summaries.items()})
    return frame.rename(index={"delta_ci_low": "mean_delta_ci_low", "delta_ci_high": "mean_delta_ci_high"})


# ------------------------------------------------------------------ conclusions over training seeds
#
# The primary conclusions: the length gate, toy-id's ΔAUROC, the first-error ΔQ and the threshold-0
# filter here, online pruning in notebook 05 (the well-formed rows were added after the first runs).
# Each is computed once per RM seed; its interval covers RM-seed and question variance
# (`hierarchical.across_seeds_and_questions`: a two-level bootstrap, seeds then questions with all the
# samples of a question together), and it is judged two-sided (holds / reversed / not shown with its
# minimum detectable effect / undefined). All of it is for the one policy the run trained. Every other
# comparison is exploratory, with Holm-corrected p-values.

PRIMARY_BENCH = "toy-id"
# The gate's second condition: on correct against well-formed incorrect generations, each RM's AUROC
# exceeds response length's by at least this much, over seeds (an RM that verifies, not one that
# spots garbled text).
WELL_FORMED_MARGIN = 0.15
#: why "mean Q after minus before the first error" is detail, not a conclusion
FIRST_ERROR_CONFOUND = (
    "superseded as a conclusion on 2026-12-07: the mean after the first error always holds the last "
    "tokens, whose state sits near the goal state right or wrong, and the mean before it the first ones; "
    "it measures position (the primary first_error_did compares the change at the error with correct "
    "solutions at the same line)"
)


def _auroc(rows: list[dict], scores) -> float:
    return float(metrics.bootstrap_auroc(scores, tables.labels(rows), n_boot=0).auroc)


def _scorer_aurocs(scored: dict[str, list[dict]]) -> dict[str, float]:
    """AUROC of each RM's reward and of the free reference scorers, on one set of rows."""
    out = {rm: _auroc(rows, [r["reward"] for r in rows]) for rm, rows in scored.items()}
    any_rows = next(iter(scored.values()))
    for name in ("length only", "policy mean logprob"):
        key, sign = tables.REFERENCE_SCORERS[name]
        if all(r.get(key) is not None for r in any_rows):
            out[name] = _auroc(any_rows, [sign * r[key] for r in any_rows])
    return out


def did_of_rows(rows: list[dict], references: Sequence[str] = REFERENCES) -> DidResult:
    """:func:`~goalrm_core.evaluation.localisation.first_error_did` of scored rows (every sample of a benchmark):
    line-end Q read at each line's last token, the exact first wrong line (``first_error_step``), the reference
    correct solutions tried in the order ``references``."""
    from goalrm_core.tasks.toymath.grading import line_end_tokens  # a step is a line: the task says where lines end

    def line_end_q(r: dict) -> list[float]:
        return [float(r["cosine_sim"][i]) for i in line_end_tokens(r["generated_solution"], int(r["num_actions"]))]

    return first_error_did(
        [line_end_q(r) for r in rows],
        [r.get("first_error_step") for r in rows],
        [bool(r["is_correct"]) for r in rows],
        [r["question"] for r in rows],
        references,
    )


def did_frame(did: dict[str, DidResult]) -> pd.DataFrame:
    """One row per RM: the DiD, the solutions it used, the mean changes at the error and in the references, and
    how many solutions each reference served (``none``: no reference; ``first line``: an error on line 0)."""
    return pd.DataFrame(
        [
            {
                "rm": rm,
                "DiD": d.did,
                "solutions used": int(d.contributions.size),
                "change at the error": d.mean_error_change,
                "change in references": d.mean_reference_change,
                **{f"ref: {k}": v for k, v in d.references.items()},
            }
            for rm, d in did.items()
        ]
    )


def _first_error_delta(rows: list[dict]) -> float:
    return float(tables.first_error_summary(rows, n_boot=0).get("mean_delta", float("nan")))


FIRST_ERROR_WINDOW = 8  # tokens either side of the first error in the Q profile


def first_error_profile(rows: list[dict], window: int = FIRST_ERROR_WINDOW) -> dict:
    """Mean Q of the incorrect solutions at each token offset from their first wrong token, ``-window``
    to ``+window``: ``{"offsets": [...], "mean_q": [...], "n": [...]}``, ``None`` at an offset no
    solution reaches."""
    sums, counts = [0.0] * (2 * window + 1), [0] * (2 * window + 1)
    for row in rows:
        if row["is_correct"]:
            continue
        e = tables.first_error_token(row)
        if e is None:
            continue
        q = row["cosine_sim"]
        for k in range(-window, window + 1):
            if 0 <= e + k < len(q) and math.isfinite(float(q[e + k])):
                sums[k + window] += float(q[e + k])
                counts[k + window] += 1
    return {
        "offsets": list(range(-window, window + 1)),
        "mean_q": [s / c if c else None for s, c in zip(sums, counts)],
        "n": counts,
    }


def first_error_profiles(run_dir, rms, rm_seeds, headline: str, window: int = FIRST_ERROR_WINDOW) -> dict:
    """``evaluation.first_error_profile``: :func:`first_error_profile` of every RM seed on the primary
    benchmark's headline set, ``{"benchmark", "window", rm: {str(seed): profile}}``."""
    out: dict = {"benchmark": PRIMARY_BENCH, "window": window}
    for rm in rms:
        out[rm] = {
            str(s): first_error_profile(headline_rows(run_dir, rm, PRIMARY_BENCH, headline, s), window)
            for s in rm_seeds
        }
    return out


def seed_figures(run_dir, rms, rm_seed: int, headline: str, filter_threshold: float, skip_first: int) -> dict:
    """One RM seed's primary and exploratory figures (point estimates; NaN where undefined), each
    ranking figure on all generations and on the well-formed subset (``*_well_formed``)."""
    run = RunDir(run_dir)
    out = {
        "auroc": {},
        "auroc_well_formed": {},
        "first_error_did": {},
        "first_error_delta_q": {},
        "first_error_delta_q_well_formed": {},
        "filter": {},
    }
    for bench in benchmark_names(run_dir):
        scored = {rm: headline_rows(run_dir, rm, bench, headline, rm_seed) for rm in rms}
        out["auroc"][bench] = _scorer_aurocs(scored)
        out["auroc_well_formed"][bench] = _scorer_aurocs({rm: well_formed_only(rows) for rm, rows in scored.items()})
        if bench == PRIMARY_BENCH:
            for rm, rows in scored.items():
                out["first_error_delta_q"][rm] = _first_error_delta(rows)
                out["first_error_delta_q_well_formed"][rm] = _first_error_delta(well_formed_only(rows))
            for rm in rms:
                out["first_error_did"][rm] = did_of_rows(tables.read_scored(run.eval(rm, rm_seed), bench, "all")).did
                vote = metrics.q_filtered_majority_vote(
                    list(group_by_question(tables.read_scored(run.eval(rm, rm_seed), bench, "all")).values()),
                    threshold=filter_threshold,
                    skip_first=skip_first,
                ).as_dict()
                out["filter"][rm] = {
                    "tokens_saved_pct": vote["tokens_saved_pct"],
                    "accuracy_change": vote["accuracy"] - vote["accuracy_unfiltered"],
                }
    return out


def _first_error_deltas(rows: list[dict]) -> tuple[list[float], list[str]]:
    """Per incorrect solution with a known first error ``e > 0``: mean Q after it minus mean Q before
    it (``first_error_q_stats``' pairs, skip_first 0), and the question of each."""
    deltas, questions = [], []
    for row in rows:
        if row["is_correct"] or row.get("first_error_char") is None:
            continue
        e = tables.first_error_token(row)
        q = [float(v) for v in row["cosine_sim"]]
        if e is None or e <= 0 or e >= len(q):
            continue
        deltas.append(sum(q[e:]) / len(q[e:]) - sum(q[:e]) / e)
        questions.append(row["question"])
    return deltas, questions


def seed_statistics(
    run_dir,
    rms,
    rm_seed: int,
    headline: str,
    filter_threshold: float,
    skip_first: int,
    index: dict[str, dict[str, int]],
) -> dict:
    """One RM seed's primary figures as functions of question multiplicities (the second level of the
    hierarchical bootstrap, `evaluation.hierarchical`), keyed as :func:`seed_figures` keys its values.
    ``index[bench]`` numbers the questions, shared by every seed (extended here as questions appear)."""
    run = RunDir(run_dir)
    out = {
        "auroc": {},
        "auroc_well_formed": {},
        "first_error_did": {},
        "first_error_delta_q": {},
        "first_error_delta_q_well_formed": {},
        "filter": {},
    }

    def ids(bench, questions):
        ix = index.setdefault(bench, {})
        return np.asarray([ix.setdefault(q, len(ix)) for q in questions], dtype=np.int64)

    def scorers(scored):
        any_rows = next(iter(scored.values()))
        c = ids(bench, [r["question"] for r in any_rows])
        y = tables.labels(any_rows)
        stat = {rm: hierarchical.auroc_statistic([r["reward"] for r in rows], y, c) for rm, rows in scored.items()}
        for name in ("length only", "policy mean logprob"):
            key, sign = tables.REFERENCE_SCORERS[name]
            if all(r.get(key) is not None for r in any_rows):
                stat[name] = hierarchical.auroc_statistic([sign * r[key] for r in any_rows], y, c)
        return stat

    for bench in benchmark_names(run_dir):
        scored = {rm: headline_rows(run_dir, rm, bench, headline, rm_seed) for rm in rms}
        out["auroc"][bench] = scorers(scored)
        out["auroc_well_formed"][bench] = scorers({rm: well_formed_only(rows) for rm, rows in scored.items()})
        if bench != PRIMARY_BENCH:
            continue
        for rm, rows in scored.items():
            for key, subset in (
                ("first_error_delta_q", rows),
                ("first_error_delta_q_well_formed", well_formed_only(rows)),
            ):
                deltas, questions = _first_error_deltas(subset)
                out[key][rm] = hierarchical.mean_statistic(deltas, ids(bench, questions))
        for rm in rms:
            every = tables.read_scored(run.eval(rm, rm_seed), bench, "all")
            did = did_of_rows(every)
            out["first_error_did"][rm] = hierarchical.mean_statistic(did.contributions, ids(bench, did.questions))
            groups = group_by_question(every)
            per_q = metrics_voting.filter_per_question(list(groups.values()), filter_threshold, skip_first)
            c = ids(bench, list(groups))
            change = per_q["correct"].astype(float) - per_q["correct_unfiltered"].astype(float)
            out["filter"][rm] = {
                "tokens_saved_pct": hierarchical.ratio_statistic(
                    per_q["tokens_saved"], per_q["tokens_total"], c, 100.0
                ),
                "accuracy_change": hierarchical.mean_statistic(change, c),
            }
    return out


def _gate(over, rms, bench: str, key: str, null: float) -> dict:
    """One condition of the gate: each RM's margin over response length on ``key`` at ``bench``, and its state."""

    def margin(name):
        return lambda st: hierarchical.difference(st[key][bench][name], st[key][bench]["length only"])

    margins = {
        rm: over(lambda f, rm=rm: f[key][bench][rm] - f[key][bench]["length only"], margin(rm), null=null) for rm in rms
    }
    undefined = [f"{rm}: {m['reason']}" for rm, m in margins.items() if m["holds"] is None]
    state = "undefined" if undefined else "passed" if all(m["holds"] for m in margins.values()) else "failed"
    return {"state": state, "reason": "; ".join(undefined) or None, "margin_over_length": margins}


def _filter_section(over, rms, filter_threshold: float) -> dict:
    """Each RM's filter at ``filter_threshold``: the tokens it saves and the accuracy it changes."""
    return {
        rm: {
            "threshold": filter_threshold,
            "tokens_saved_pct": over(
                lambda f, rm=rm: f["filter"][rm]["tokens_saved_pct"],
                lambda st, rm=rm: st["filter"][rm]["tokens_saved_pct"],
            ),
            "accuracy_change": over(
                lambda f, rm=rm: f["filter"][rm]["accuracy_change"],
                lambda st, rm=rm: st["filter"][rm]["accuracy_change"],
                expect="less",
            ),
        }
        for rm in rms
    }


def _delta_auroc(over, run_dir, bench: str) -> tuple[dict, dict]:
    """Goal-conditioned minus baseline AUROC: at the primary ``bench``, and at every other benchmark with its
    p-value Holm-corrected over those others."""
    deltas = {
        b: over(
            lambda f, b=b: f["auroc"][b][GOAL_CONDITIONED] - f["auroc"][b][BASELINE],
            lambda st, b=b: hierarchical.difference(st["auroc"][b][GOAL_CONDITIONED], st["auroc"][b][BASELINE]),
            stat_bench=b,
        )
        for b in benchmark_names(run_dir)
    }
    primary = deltas.pop(bench)
    others = list(deltas)
    for b, p in zip(others, stats.holm([deltas[b].get("p_value", float("nan")) for b in others])):
        deltas[b]["p_holm"] = p
    return primary, deltas


def _first_error_by_position(over, rms) -> dict:
    """The old first-error figures (mean Q after the first error minus before), kept as exploratory with the
    note on why they measure position."""
    return {
        "note": FIRST_ERROR_CONFOUND,
        **{
            key: {
                rm: over(lambda f, rm=rm, key=key: f[key][rm], lambda st, rm=rm, key=key: st[key][rm], expect="less")
                for rm in rms
            }
            for key in ("first_error_delta_q", "first_error_delta_q_well_formed")
        },
    }


def _auroc_well_formed(over, run_dir, rms) -> dict:
    """Each benchmark's AUROC on the well-formed generations only, per RM and per reference scorer."""
    return {
        b: {
            name: over(lambda f, b=b, name=name: f["auroc_well_formed"][b].get(name, float("nan")), null=0.5)
            for name in [*rms, "length only", "policy mean logprob"]
        }
        for b in benchmark_names(run_dir)
    }


def primary_metrics(
    run_dir,
    rms,
    rm_seeds,
    headline: str,
    filter_threshold: float,
    skip_first: int,
    n_boot: int = 1000,
    boot_seed: int = 0,
    policy_seeds=None,
) -> dict:
    """The ``evaluation.primary`` and ``evaluation.exploratory`` sections of metrics.json (schema 2):
    each figure per seed and across seeds, its interval over RM seeds and questions
    (`hierarchical.across_seeds_and_questions`, ``n_boot`` replicates; ``n_boot=0``: seeds only,
    `stats.across_seeds`) and its two-sided verdict. ``policy_seeds``: the policies the generations
    came from (one for a report: every conclusion is then for this policy)."""
    per_seed = [seed_figures(run_dir, rms, s, headline, filter_threshold, skip_first) for s in rm_seeds]
    index: dict[str, dict[str, int]] = {}
    per_seed_stats = (
        [seed_statistics(run_dir, rms, s, headline, filter_threshold, skip_first, index) for s in rm_seeds]
        if n_boot
        else []
    )
    bench = PRIMARY_BENCH

    def over(get, stat=None, stat_bench=bench, **kw):
        values = [get(f) for f in per_seed]
        boot = None
        if stat is not None and per_seed_stats:
            defined = [stat(st) for st, v in zip(per_seed_stats, values) if v is not None and math.isfinite(float(v))]
            if len(defined) >= 2 and index.get(stat_bench):
                boot = hierarchical.hierarchical_bootstrap(defined, len(index[stat_bench]), n_boot, seed=boot_seed)
        return hierarchical.across_seeds_and_questions(values, boot, **kw)

    primary = {
        "benchmark": bench,
        "rm_seeds": list(rm_seeds),
        "n_seeds": len(rm_seeds),
        "headline": headline,
        **({"policy_seeds": [int(x) for x in policy_seeds]} if policy_seeds is not None else {}),
        "interval": "RM seeds and questions (hierarchical bootstrap)" if n_boot else "RM seeds (t-interval)",
        # the gate's first condition: both RMs beat response length on all generations; its second:
        # both beat it by WELL_FORMED_MARGIN on correct vs well-formed incorrect ones (they verify)
        "gate": {
            **_gate(over, rms, bench, "auroc", 0.0),
            "well_formed": {
                **_gate(over, rms, bench, "auroc_well_formed", WELL_FORMED_MARGIN),
                "required_margin": WELL_FORMED_MARGIN,
                # the same generations for every RM and seed (the policy's): the first RM seed's rows
                "malformed_share": malformed_share(headline_rows(run_dir, rms[0], bench, headline, rm_seeds[0])),
            },
        },
        # Q's change at the first wrong line against correct solutions at the same line (every sample of the
        # benchmark): the first-error conclusion since 2026-12-07, replacing "mean Q after - before", which
        # measured position (exploratory below, labelled)
        "first_error_did": {
            rm: over(
                lambda f, rm=rm: f["first_error_did"][rm], lambda st, rm=rm: st["first_error_did"][rm], expect="less"
            )
            for rm in rms
        },
        # accuracy_change: expect "less", so `holds` means the filter costs accuracy
        "filter": _filter_section(over, rms, filter_threshold),
    }
    exploratory: dict = {"delta_auroc": {}}
    if {BASELINE, GOAL_CONDITIONED} <= set(rms):
        primary["delta_auroc"], exploratory["delta_auroc"] = _delta_auroc(over, run_dir, bench)
    exploratory["first_error_after_minus_before"] = _first_error_by_position(over, rms)
    exploratory["auroc_well_formed"] = _auroc_well_formed(over, run_dir, rms)
    exploratory["note"] = (
        f"comparisons other than the primary ones on {bench}: leads, not findings; p-values Holm-corrected "
        f"over the {len(exploratory['delta_auroc'])} benchmarks"
    )
    return {"primary": primary, "exploratory": exploratory}


def _defined(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def seed_interval(s: dict, scale: float = 1.0, signed: bool = True) -> str:
    """``mean [low, high]`` of an across-seeds figure; "undefined (reason)" when it is."""
    if not _defined(s.get("mean")):
        return f"undefined ({s.get('reason') or 'no seed defined'})"
    fmt = "{:+.2f}" if signed else "{:.2f}"

    def show(v):
        return (fmt.format(v * scale) if _defined(v) else "undefined").replace("-0.00", "0.00").replace("+0.00", "0.00")

    return f"{show(s['mean'])} [{show(s.get('ci_low'))}, {show(s.get('ci_high'))}]"


def primary_frame(primary: dict) -> pd.DataFrame:
    """The primary figures as one table, one row per conclusion record
    (:func:`goalrm_core.report.conclusions.conclusions`,
    the README's rows): figure, RM, mean over seeds [95% interval over RM seeds and questions], seeds pointing
    the expected way, and the two-sided verdict (a "not shown" with the effect the run would have seen with
    80% power, a "cannot be judged" with its reason)."""
    return pd.DataFrame(
        [
            {
                "figure": c.claim,
                "rm": c.rm,
                "mean over seeds [95% CI]": c.interval,
                "seeds the expected way": c.seeds,
                "conclusion": c.verdict_words,
            }
            for c in conclusions.conclusions({"evaluation": {"primary": primary}})
        ]
    )


def primary_reading(primary: dict, policy_seeds=None) -> str:
    """The primary conclusions in words, each two-sided (holds / reversed / not shown with its minimum
    detectable effect / cannot be judged), all of them for the one policy the run trained unless
    ``policy_seeds`` names two or more: the front page's sentences (:func:`goalrm_core.report.conclusions.reading`,
    where each conclusion is worded once)."""
    return conclusions.reading(primary, policy_seeds)


def exploratory_frame(exploratory: dict) -> pd.DataFrame:
    """The exploratory ΔAUROCs over seeds, with their Holm-corrected p-values."""
    rows = []
    for bench, s in exploratory["delta_auroc"].items():
        p = s.get("p_holm")
        rows.append(
            {
                "benchmark": bench,
                "ΔAUROC over seeds [95% CI]": seed_interval(s),
                "higher in": f"{s['k']} of {s['n_seeds']} seeds",
                "p (Holm)": f"{p:.3f}" if _defined(p) else "undefined",
            }
        )
    return pd.DataFrame(rows)
