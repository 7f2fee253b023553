"""Run-directory orchestration for notebooks 02-05: which RM lives where, and one call per step.

    models/<rm>-seed<k>/                        RM (HF layout + goalrm.json), train_summary.json
    representations/<rm>-seed<k>/goal_state.npy (1, hidden), plus goal_state_<method>.npy ablations
    eval/<rm>-seed<k>/<bench>/{greedy,all}/scored.jsonl

Every seed's RM gets its own goal state and scores; seed 0 is the one the detailed tables and the
decoding notebook use. The headline set of generations is either the greedy one per question or one
fixed sampled one (``headline``): greedy outputs of a well-trained policy can be all correct, and
AUROC needs both classes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from transformers import AutoTokenizer

from goalrm_core.evaluation import metrics
from goalrm_core.data.io import load_npy, read_jsonl, require_artifact, save_npy
from goalrm_core.model.reward_model import load_reward_model
from goalrm_core.inference.goal_state import goal_state_from_pairs, q_values
from goalrm_core.inference.scoring import eval_rm

RM_STRATEGIES = {"baseline": "vanilla", "goal-conditioned": "contrastive"}
TEMPLATE = "toymath"
# Which generations the headline tables read: "greedy", or "sample0" (sample_index 0 of the sampled ones).
HEADLINE_SETS = ("greedy", "sample0")


def benchmarks(run_dir) -> list[str]:
    from goalrm_core.tasks.toymath.pipeline import benchmark_names

    return benchmark_names(run_dir)


def model_dir(run_dir, rm: str, seed: int = 0) -> Path:
    return Path(run_dir) / "models" / f"{rm}-seed{seed}"


def load_rm(run_dir, rm: str, seed: int = 0):
    path = require_artifact(model_dir(run_dir, rm, seed) / "goalrm.json", "notebooks/02_training.ipynb").parent
    return load_reward_model(path), AutoTokenizer.from_pretrained(path)


def goal_state_path(run_dir, rm: str, method: str = "mean_last", seed: int = 0) -> Path:
    name = "goal_state.npy" if method == "mean_last" else f"goal_state_{method}.npy"
    return Path(run_dir) / "representations" / f"{rm}-seed{seed}" / name


def preference_pairs(run_dir, split: str) -> list[dict]:
    path = require_artifact(Path(run_dir) / "data" / "preference" / f"{split}.jsonl", "notebooks/01_data.ipynb")
    return read_jsonl(path, required=("question", "correct", "incorrect"))


def save_goal_states(run_dir, rm: str, methods, seed: int = 0, rm_seed: int = 0, max_len: int = 512) -> dict[str, np.ndarray]:
    """Goal states of one RM from the training pairs' preferred responses, one file per method."""
    model, tokenizer = load_rm(run_dir, rm, rm_seed)
    pairs = preference_pairs(run_dir, "train")
    goals = {}
    for method in methods:
        goals[method] = goal_state_from_pairs(model, tokenizer, pairs, TEMPLATE, method, seed=seed, max_len=max_len, batch_size=64)
        save_npy(goal_state_path(run_dir, rm, method, rm_seed), goals[method])
    return goals


def load_goal_state(run_dir, rm: str, method: str = "mean_last", seed: int = 0) -> np.ndarray:
    return load_npy(require_artifact(goal_state_path(run_dir, rm, method, seed), "notebooks/03_representations.ipynb"))


def score_all(run_dir, rms, rm_seeds=(0,), batch_size: int = 64, max_len: int = 512, progress: bool = True) -> dict:
    """Dense scoring of every benchmark's generations by each RM and seed, with its own goal state."""
    counts = {}
    for rm in rms:
        for seed in rm_seeds:
            goal = require_artifact(goal_state_path(run_dir, rm, seed=seed), "notebooks/03_representations.ipynb")
            counts[f"{rm}-seed{seed}"] = eval_rm(
                Path(run_dir) / "data" / "generations", model_dir(run_dir, rm, seed), eval_dir(run_dir, rm, seed),
                benchmarks(run_dir), goal, template=TEMPLATE, batch_size=batch_size, max_len=max_len, progress=progress)
    return counts


def eval_dir(run_dir, rm: str, seed: int = 0) -> Path:
    return Path(run_dir) / "eval" / f"{rm}-seed{seed}"


def headline_rows(run_dir, rm: str, bench: str, headline: str = "greedy", seed: int = 0) -> list[dict]:
    """The scored generations the headline tables read (see HEADLINE_SETS), in file order."""
    from goalrm_core.evaluation import tables as evaluation
    if headline not in HEADLINE_SETS:
        raise ValueError(f"headline must be one of {HEADLINE_SETS}, got {headline!r}")
    if headline == "greedy":
        return evaluation.read_scored(eval_dir(run_dir, rm, seed), bench, "greedy")
    return first_samples(evaluation.read_scored(eval_dir(run_dir, rm, seed), bench, "all"))


def first_samples(rows: list[dict]) -> list[dict]:
    """The ``sample0`` headline set: each question's sample index 0, in file order."""
    return [r for r in rows if r.get("sample_index") == 0]


def separation_summary(frames: dict[str, pd.DataFrame], rows, seed: int = 0) -> pd.DataFrame:
    """Per RM: mean cosine to the goal of correct and incorrect generations, and the separation AUROC."""
    from goalrm_core.evaluation.tables import question_ids

    out = {}
    for rm, f in frames.items():
        res = metrics.bootstrap_auroc(f["cosine_to_goal"].to_numpy(), f["is_correct"].to_numpy(), seed=seed, clusters=question_ids(rows))
        out[rm] = {"cos_correct_mean": f.loc[f.is_correct, "cosine_to_goal"].mean(),
                   "cos_incorrect_mean": f.loc[~f.is_correct, "cosine_to_goal"].mean(),
                   "separation_auroc": res.auroc, "separation_auroc_ci_low": res.ci_low, "separation_auroc_ci_high": res.ci_high}
    return pd.DataFrame.from_dict(out, orient="index")


def goal_ablation_table(states: dict[str, np.ndarray], goals: dict[str, dict[str, np.ndarray]], rows, seed: int = 0) -> pd.DataFrame:
    """Separation AUROC of the last-token cosine for each RM and goal-forming method."""
    from goalrm_core.evaluation.tables import question_ids

    labels, clusters = np.array([bool(r["is_correct"]) for r in rows]), question_ids(rows)
    records = []
    for rm, by_method in goals.items():
        for method, goal in by_method.items():
            res = metrics.bootstrap_auroc(q_values(states[rm], goal).numpy(), labels, seed=seed, clusters=clusters)
            records.append({"rm": rm, "goal": method, "separation_auroc": res.auroc, "ci_low": res.ci_low, "ci_high": res.ci_high})
    return pd.DataFrame(records)


def auroc_tables(run_dir, rms, n_boot: int = 1000, seed: int = 0, headline: str = "greedy",
                 rm_seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """AUROC of every RM and reference scorer per benchmark (on the headline generations), and the
    paired difference goal-conditioned minus baseline."""
    from goalrm_core.evaluation import tables as evaluation
    tables, deltas = [], []
    for bench in benchmarks(run_dir):
        scored = {rm: headline_rows(run_dir, rm, bench, headline, rm_seed) for rm in rms}
        tables.append(evaluation.auroc_table(scored, bench, n_boot, seed))
        if {"baseline", "goal-conditioned"} <= set(rms):
            d = evaluation.delta_auroc(scored["goal-conditioned"], scored["baseline"], n_boot, seed)
            deltas.append({"benchmark": bench, **{k: d[k] for k in ("mean", "ci_low", "ci_high", "p_value_two_sided")}})
    return pd.concat(tables, ignore_index=True), pd.DataFrame(deltas)


def seed_auroc_table(run_dir, rms, rm_seeds, n_boot: int = 1000, seed: int = 0, headline: str = "greedy") -> pd.DataFrame:
    """AUROC of every RM seed per benchmark on the same headline generations, with its bootstrap CI."""
    from goalrm_core.evaluation import tables as evaluation
    records = []
    for bench in benchmarks(run_dir):
        for rm in rms:
            for rm_seed in rm_seeds:
                rows = headline_rows(run_dir, rm, bench, headline, rm_seed)
                records.append({**evaluation.auroc_row(rm, bench, [r["reward"] for r in rows], rows, n_boot, seed), "rm_seed": rm_seed})
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
    from goalrm_core.evaluation import tables as evaluation
    frames = [evaluation.partial_auroc_table(headline_rows(run_dir, rm, bench, headline), n_boot=n_boot, seed=seed).assign(rm=rm, benchmark=bench)
              for rm in rms]
    return pd.concat(frames, ignore_index=True)


def filter_tables(run_dir, rms, threshold: float = 0.0, skip_first: int = 5, val_fraction: float = 0.3, seed: int = 0) -> pd.DataFrame:
    from goalrm_core.evaluation import tables as evaluation
    frames = [evaluation.filter_summary(evaluation.read_scored(eval_dir(run_dir, rm), bench, "all"), threshold, skip_first, val_fraction, seed)
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
    paper = filters[filters["setting"].str.startswith("paper")]
    for _, r in paper.iterrows():
        out[r["rm"]][r["benchmark"]]["filter"] = {k: r[k] for k in ("threshold", "accuracy", "accuracy_unfiltered", "generations_filtered_pct", "tokens_saved_pct", "p_value")}
    return out


def reading(aurocs: pd.DataFrame, deltas: pd.DataFrame, bench: str = "toy-id") -> str:
    """A plain-words reading of the AUROC results, generated from the numbers so it cannot drift."""
    t = aurocs[aurocs["benchmark"] == bench].set_index("scorer")
    d = deltas.set_index("benchmark").loc[bench] if len(deltas) else None

    def ci(name):
        r = t.loc[name]
        return f"{r['auroc']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"

    lines = [f"On {bench}, the baseline RM reaches AUROC {ci('baseline')} and the goal-conditioned RM {ci('goal-conditioned')}."]
    if d is not None:
        verdict = "excludes 0: a real difference at this sample size" if d["ci_low"] > 0 or d["ci_high"] < 0 else "includes 0: no detectable difference"
        lines.append(f"The paired difference (goal-conditioned − baseline) is {d['mean']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}], whose 95% CI {verdict}.")
    refs = [s for s in ("policy mean logprob", "length only") if s in t.index]
    best_rm = max(t.loc["baseline", "auroc"], t.loc["goal-conditioned", "auroc"])
    for ref in refs:
        rel = "above" if best_rm > t.loc[ref, "ci_high"] else "below" if best_rm < t.loc[ref, "ci_low"] else "within the CI of"
        lines.append(f"The better RM is {rel} the free reference scorer '{ref}' ({ci(ref)}).")
    return " ".join(lines)


def length_gate(aurocs: pd.DataFrame, bench: str = "toy-id", rms=tuple(RM_STRATEGIES)) -> dict:
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


def rm_train_args(run_dir, rm: str, seed: int, out_root=None, **overrides) -> dict:
    """The seed's train_rm flags for one RM of the embedded task (initialised from the base policy);
    the RM goes to ``model_dir`` or, given ``out_root``, to ``out_root/<rm>-seed<k>``."""
    out = model_dir(run_dir, rm, seed) if out_root is None else Path(out_root) / f"{rm}-seed{seed}"
    args = {
        "pretrain": str(Path(run_dir) / "data" / "policy"),
        "dataset": str(Path(run_dir) / "data" / "preference" / "train.jsonl"),
        "eval_dataset": str(Path(run_dir) / "data" / "preference" / "eval.jsonl"),
        "save_path": str(out),
        "metrics_path": str(out) + ".metrics.jsonl",
        "template": TEMPLATE,
        "reward_model_strategy": RM_STRATEGIES[rm],
        "seed": seed,
        "zero_stage": 0,
        "logging_steps": 5,
    }
    args.update(overrides)
    return args


def train_rms(run_dir, rms, seeds, num_processes: int = 1, parallel: int = 1, out_root=None, **overrides) -> pd.DataFrame:
    """Train every RM for every seed in a subprocess (DeepSpeed never runs in the kernel); returns
    one row per run from its train_summary.json.

    ``parallel`` > 1 runs that many trainings at once, each with cores // parallel threads: tiny
    models use one core poorly at a time, so independent runs side by side finish sooner. Their
    live output is then one line per finished run; the full logs are in ``logs/``."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from goalrm_core.train.launch import run_streaming, train_command

    if parallel < 1:
        raise ValueError(f"parallel must be >= 1, got {parallel}")
    jobs = [(rm, seed) for rm in rms for seed in seeds]
    threads = max(1, (os.cpu_count() or 1) // (parallel * num_processes))

    def train(job):
        rm, seed = job
        args = rm_train_args(run_dir, rm, seed, out_root, **overrides)
        log = Path(args["save_path"] + ".log") if out_root is not None else Path(run_dir) / "logs" / f"train-{rm}-seed{seed}.log"
        quiet = {"show": (lambda *_: None)} if parallel > 1 else {}
        env = {"OMP_NUM_THREADS": str(threads)} if parallel > 1 else None
        run_streaming(train_command(args, num_processes=num_processes), log, desc=f"{rm} seed {seed}", env=env, **quiet)
        summary = json.loads((Path(args["save_path"]) / "train_summary.json").read_text())
        if parallel > 1:
            print(f"{rm} seed {seed}: {summary.get('steps')} steps, held-out accuracy {summary.get('eval_accuracy', float('nan')):.3f}", flush=True)
        return {"rm": rm, "seed": seed, **summary}

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        rows = list(pool.map(train, jobs))
    return pd.DataFrame(rows)


def training_curves(run_dir, rms, seeds) -> pd.DataFrame:
    frames = []
    for rm in rms:
        for seed in seeds:
            path = Path(str(model_dir(run_dir, rm, seed)) + ".metrics.jsonl")
            frames.append(pd.DataFrame(read_jsonl(path)).assign(rm=rm, seed=seed))
    return pd.concat(frames, ignore_index=True)


def seed_summary(runs: pd.DataFrame, value: str = "eval_accuracy") -> pd.DataFrame:
    """Mean and 95% t-interval over seeds, per RM."""
    out = {}
    for rm, g in runs.groupby("rm", sort=False):
        mean, low, high = metrics.mean_ci(g[value].to_numpy())
        out[rm] = {f"{value}": mean, f"{value}_ci_low": low, f"{value}_ci_high": high, "n_seeds": len(g)}
    return pd.DataFrame.from_dict(out, orient="index")
