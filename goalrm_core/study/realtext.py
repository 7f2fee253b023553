"""The ``real-lm`` notebooks' steps (``notebooks/real-lm/``): the paper's GSM8K and HH designs on real text with a
pretrained LM as every RM's backbone, each step a call of :mod:`goalrm_core.recipes.real_lm` or of the evaluation
core, with its parameters visible in the notebook.

Each notebook passes its parameters cell to :func:`changes` and the profile's name to every call, so that a run with
``goalrm report --set`` computes what its cells show. The RMs are the recipe's: per data set (``gsm8k``, ``hh``),
arm and seed, one ``goalrm train-rm`` command line; the GSM8K ones get a goal state and score one held-out split
(``report_split``: ``reported`` in the report, ``validation`` while sizes and levers are chosen).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from goalrm_core.data.io import read_jsonl
from goalrm_core.data.rundir import train_summary_path
from goalrm_core.evaluation import tables
from goalrm_core.recipes import real_lm
from goalrm_core.recipes.profile_keys import COMMAND_LINE_KEYS, SHARED_NOTEBOOK_KEYS, command_line_profile
from goalrm_core.study import formatting as fmt
from goalrm_core.study.live import tail_view
from goalrm_core.study.recipe import TRAINER_KEYS
from goalrm_core.study.rms import GOAL_CONDITIONED, RMS
from goalrm_core.train.launch import run_streaming
from goalrm_core.train.progress_file import PROGRESS_FILE_VAR, PROGRESS_LABEL_VAR, progress_path

DATA_SETS = ("gsm8k", "hh")
#: the notebook keys that are not the recipe's (the runner's and the notebooks' own)
NOT_RECIPE = ("profile", "reports_dir")


def changes(params: Mapping[str, Any]) -> dict:
    """The recipe's keys among a notebook's parameters (``globals()``), as changes on top of its profile's file."""
    known = {*TRAINER_KEYS, *COMMAND_LINE_KEYS, *SHARED_NOTEBOOK_KEYS}
    return {k: v for k, v in params.items() if k in known and k not in NOT_RECIPE and not k.startswith("_")}


def profile_settings(profile: str, params: Mapping[str, Any]) -> dict:
    """The profile as the recipe reads it, with the notebook's parameters on top (checked in one line)."""
    return command_line_profile(profile, **changes(params))


# ---- 01 · data ----------------------------------------------------------------------------------------------


def convert_backbone(pretrain: str) -> dict:
    """The packaged model converted once into an ordinary checkpoint folder (a rerun reads it): the folder, the
    seconds this call took (about 0 when the conversion was kept), the seconds the conversion took when it ran
    (its manifest's; None for a folder that is no packaged model's) and the folder's size on disk."""
    from goalrm_core.model.pretrained import MANIFEST, resolve_model

    t0 = time.perf_counter()
    folder = Path(resolve_model(pretrain))
    seconds = round(time.perf_counter() - t0, 1)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    try:
        converted = json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("converted_seconds")
    except (OSError, ValueError, AttributeError):
        converted = None
    return {"folder": str(folder), "seconds": seconds, "converted_s": converted, "disk_mb": round(size / 2**20, 1)}


def split_table(manifest: Mapping[str, Any]) -> pd.DataFrame:
    """Per data set and split: questions or dialogues, and the pairs or solutions written."""
    g, h = manifest["gsm8k"], manifest["hh"]
    rows = [
        {"data": "gsm8k", "split": "train", "questions": g["questions"]["train"], "pairs": g["train_pairs"]},
        *(
            {"data": "gsm8k", "split": s, "questions": g["questions"][s], "solutions": g[f"{s}_solutions"]}
            for s in real_lm.HELD_OUT
        ),
        *({"data": "hh", "split": s, "pairs": n} for s, n in h["pairs"].items()),
    ]
    return pd.DataFrame(rows).set_index(["data", "split"])


def length_table(manifest: Mapping[str, Any]) -> pd.DataFrame:
    """Token lengths under the backbone's tokenizer, per data set and split, with the texts ``max_len`` cuts."""
    rows = [
        {"data": data, "split": split, **lengths}
        for data in DATA_SETS
        for split, lengths in manifest[data]["lengths"].items()
    ]
    return pd.DataFrame(rows).set_index(["data", "split"])


def example_pairs(profile: str, params: Mapping[str, Any], width: int = 300) -> pd.DataFrame:
    """The first training pair of each data set, cut to ``width`` characters."""
    p = real_lm.real_lm_paths(profile_settings(profile, params)["run_dir"])

    def cut(text: str) -> str:
        return text if len(text) <= width else text[:width] + " …"

    rows = []
    for data in DATA_SETS:
        pair = read_jsonl(p[f"{data}_train"])[0]
        rows.append({"data": data, **{k: cut(pair[k]) for k in ("question", "correct", "incorrect")}})
    return pd.DataFrame(rows).set_index("data")


# ---- 02 · training -------------------------------------------------------------------------------------------


def shown_command(command: Sequence[str], run_root: str | Path, pretrain: str) -> str:
    """A training command as notebook 02 shows it (:func:`study.training.shown_command`), the packaged backbone's
    converted folder written as its name, which ``--pretrain`` takes as well: no machine path in the page."""
    from goalrm_core.model.pretrained import resolve_model
    from goalrm_core.study.training import shown_command as shown

    text = shown(command, run_root)
    folder = resolve_model(pretrain)
    return text.replace(folder, pretrain) if folder != pretrain else text


def commands(profile: str, params: Mapping[str, Any], kind: str, split: str = "reported") -> dict[str, list[str]]:
    """The recipe's command lines of one kind (``train``, ``get-representation`` or ``eval-rm``), by name."""
    everything = real_lm.real_lm_commands(profile, split, **changes(params))
    return {name: cmd for name, cmd in everything.items() if name.startswith(kind + "-")}


def run_commands(profile: str, params: Mapping[str, Any], cmds: Mapping[str, Sequence[str]]) -> None:
    """Run each command line in order, its output in ``<run_dir>/logs/<name>.log`` and its last lines live; an
    RM whose training finished before (its ``train_summary.json``) is not trained again."""
    p = real_lm.real_lm_paths(profile_settings(profile, params)["run_dir"])
    for name, cmd in cmds.items():
        if name.startswith("train-") and train_summary_path(p["models"] / name.removeprefix("train-")).is_file():
            continue
        log = p["logs"] / f"{name}.log"
        # a trainer writes its step s of S there: the report's stage line and the notebook's bars read it
        env = {PROGRESS_FILE_VAR: str(progress_path(log)), PROGRESS_LABEL_VAR: name.removeprefix("train-")}
        run_streaming(cmd, log, desc=name, show=tail_view(5, name), env=env if name.startswith("train-") else None)


def training_table(profile: str, params: Mapping[str, Any]) -> pd.DataFrame:
    """One row per RM from its ``train_summary.json``: held-out pairwise accuracy, steps, speed and wall time."""
    settings = profile_settings(profile, params)
    p = real_lm.real_lm_paths(settings["run_dir"])
    rows = []
    for data in DATA_SETS:
        for rm in RMS:
            for seed in settings["rm_seeds"]:
                path = train_summary_path(real_lm.model_dir(p, data, rm, int(seed)))
                s = json.loads(path.read_text(encoding="utf-8"))
                rows.append(
                    {
                        "data": data,
                        "rm": rm,
                        "seed": int(seed),
                        "steps": s.get("steps"),
                        "eval_accuracy": s.get("eval_accuracy"),
                        "tokens_per_s": s.get("tokens_per_s"),
                        "feature_cache_s": s.get("feature_cache_s"),
                        "wall_s": s.get("wall_s"),
                    }
                )
    return pd.DataFrame(rows)


def training_metrics(table: pd.DataFrame) -> dict:
    """What notebook 02 records: per data set and RM, held-out pairwise accuracy per seed and its mean."""
    out: dict[str, Any] = {}
    for (data, rm), g in table.groupby(["data", "rm"], sort=False):
        acc = [None if pd.isna(v) else float(v) for v in g["eval_accuracy"]]
        defined = [v for v in acc if v is not None]
        out.setdefault(data, {})[rm] = {
            "rm_seeds": [int(s) for s in g["seed"]],
            "eval_accuracy_per_seed": acc,
            "eval_accuracy_mean": float(np.mean(defined)) if defined else None,
            "wall_s": float(g["wall_s"].sum()),
        }
    return out


# ---- 03 · representations --------------------------------------------------------------------------------


def solutions(profile: str, params: Mapping[str, Any], split: str) -> list[dict]:
    """The held-out split's GSM8K model solutions (question, generated_solution, is_correct)."""
    p = real_lm.real_lm_paths(profile_settings(profile, params)["run_dir"])
    return read_jsonl(p["generations"] / real_lm.bench_name(split) / "greedy.jsonl")


def goal_state_frame(profile: str, params: Mapping[str, Any], split: str, rm_seed: int) -> pd.DataFrame:
    """The seed's goal-conditioned RM's last-token states of every held-out GSM8K solution: their cosine to its
    goal state (Q at the end) and a 2-D PCA, per solution (:func:`study.representations.last_token_frame`)."""
    from goalrm_core.inference.goal_state import last_token_states, load_goal_state, q_values
    from goalrm_core.model.reward_model import load_reward_model, load_rm_tokenizer
    from goalrm_core.study.representations import last_token_frame

    settings = profile_settings(profile, params)
    p = real_lm.real_lm_paths(settings["run_dir"])
    path = real_lm.model_dir(p, "gsm8k", GOAL_CONDITIONED, rm_seed)
    model = load_reward_model(path).eval()
    tokenizer = load_rm_tokenizer(path, model)
    rows = solutions(profile, params, split)
    states = last_token_states(
        model, tokenizer, rows, "math", max_len=int(settings["max_len"]), batch_size=8, encoding="split", readout="eos"
    )
    goal = load_goal_state(p["representations"] / path.name / "goal_state.npy", model.config.hidden_size)
    return last_token_frame(states, rows, q_values(states, goal).numpy())


# ---- 04 · evaluation -------------------------------------------------------------------------------------


def summaries(profile: str, params: Mapping[str, Any], split: str) -> dict:
    """The split's GSM8K and HH figures over RM seeds and questions (or dialogues): each RM's, their paired
    difference, and the reference scorers (:func:`recipes.real_lm.real_lm_summary`)."""
    return real_lm.real_lm_summary(profile, split, **changes(params))


def verdict_frame(summary: Mapping[str, Any]) -> pd.DataFrame:
    """One row per data set and measure: the mean over RM seeds with its 95% interval over seeds and questions (or
    dialogues), the MDE at 80% power, the per-seed values and the verdict against the null (0.5 for one RM, 0 for
    the paired difference). Formatted (``fmt.show(..., formatted=True)``)."""
    rows = []
    for data, key in (("gsm8k", "AUROC"), ("hh", "accuracy")):
        part = summary[data]
        named = [(f"{rm} {key}", part[rm][key.lower()], False) for rm in RMS]
        named.append((f"Δ {key}, goal-conditioned − baseline", part[f"delta_{key.lower()}"], True))
        for name, s, signed in named:
            rows.append(
                {
                    "data": data,
                    "measure": name,
                    "mean [95% CI]": fmt.interval(s.get("mean"), s.get("ci_low"), s.get("ci_high"), 3, signed=signed),
                    "MDE": fmt.fixed(s.get("mde"), 3),
                    "per seed": ", ".join(fmt.fixed(v, 3, signed=signed) for v in s.get("per_seed", [])),
                    "null": "0" if signed else "0.5",
                    "verdict": s.get("verdict"),
                }
            )
    return pd.DataFrame(rows)


def reference_frame(summary: Mapping[str, Any]) -> pd.DataFrame:
    """The scorers that need no training, on the same items: length alone and the base LM's mean log-prob."""
    rows = [
        {
            "data": data,
            "scorer": name,
            "value": r.get("estimate"),
            "ci_low": r.get("ci_low"),
            "ci_high": r.get("ci_high"),
        }
        for data in DATA_SETS
        for name, r in summary[data]["reference"].items()
    ]
    return pd.DataFrame(rows).set_index(["data", "scorer"])


def scored(profile: str, params: Mapping[str, Any], rm: str, rm_seed: int, split: str) -> list[dict]:
    """One GSM8K RM's scored held-out solutions (reward, partial rewards and, for the goal-conditioned RM, Q)."""
    p = real_lm.real_lm_paths(profile_settings(profile, params)["run_dir"])
    name = real_lm.model_dir(p, "gsm8k", rm, rm_seed).name
    return tables.read_scored(p["eval"] / name, real_lm.bench_name(split), "greedy")


def partial_frame(profile: str, params: Mapping[str, Any], rm_seed: int, split: str, n_boot: int, seed: int):
    """AUROC of partial solutions (each cut at a fraction of its tokens) for both RMs of one seed: the value
    head's partial reward, and the goal-conditioned RM's Q."""
    frames = [
        tables.partial_auroc_table(scored(profile, params, rm, rm_seed, split), n_boot=n_boot, seed=seed).assign(rm=rm)
        for rm in RMS
    ]
    return pd.concat(frames, ignore_index=True)


def filter_frame(
    profile: str,
    params: Mapping[str, Any],
    rm_seeds: Sequence[int],
    split: str,
    threshold: float,
    skip_first: int,
    seed: int,
) -> pd.DataFrame:
    """Q-filtered majority voting over each question's solutions, per goal-conditioned RM seed: the paper's
    threshold on every question, and a threshold chosen on some questions and reported on the rest
    (:func:`evaluation.tables.filter_summary`)."""
    frames = [
        tables.filter_summary(
            scored(profile, params, GOAL_CONDITIONED, int(s), split), threshold, skip_first, 0.3, seed
        ).assign(rm_seed=int(s))
        for s in rm_seeds
    ]
    return pd.concat(frames, ignore_index=True)


def evaluation_metrics(summary: Mapping[str, Any], filters: pd.DataFrame, rm_seeds: Sequence[int]) -> dict:
    """What notebook 04 records: ``primary`` in the other reports' shape (``rm_seeds``, each conclusion with its
    interval, MDE and verdict), one section per data set, and the filter per seed."""
    primary: dict[str, Any] = {"rm_seeds": [int(s) for s in rm_seeds], "split": summary["gsm8k"]["split"]}
    for data, key in (("gsm8k", "auroc"), ("hh", "accuracy")):
        part = summary[data]
        primary[data] = {
            **{rm: {key: part[rm][key]} for rm in RMS},
            f"delta_{key}": part[f"delta_{key}"],
            "reference": part["reference"],
            **{k: part[k] for k in ("questions", "solutions", "correct", "pairs", "dialogues") if k in part},
        }
    filt = {
        str(setting): {
            "tokens_saved_pct_per_seed": g["tokens_saved_pct"].tolist(),
            "accuracy_per_seed": g["accuracy"].tolist(),
            "accuracy_unfiltered_per_seed": g["accuracy_unfiltered"].tolist(),
        }
        for setting, g in filters.assign(kind=filters["setting"].str.split(" ").str[0]).groupby("kind", sort=False)
    }
    return {"primary": primary, "filter": filt}


# ---- 05 · Q along real solutions -------------------------------------------------------------------------


def q_along(rows: Sequence[dict], fractions: Sequence[float] = tuple(np.linspace(0.1, 1.0, 10))) -> pd.DataFrame:
    """Mean Q (cosine to the goal state) at each fraction of the response, for correct and incorrect solutions,
    with a 95% interval over solutions."""
    tables.require_q_values(rows, "Q along the solutions")
    out = []
    for f in fractions:
        for correct in (True, False):
            values = [
                r["cosine_sim"][max(0, min(len(r["cosine_sim"]) - 1, int(round(f * len(r["cosine_sim"]))) - 1))]
                for r in rows
                if bool(r["is_correct"]) == correct and r["cosine_sim"]
            ]
            if not values:
                continue
            v = np.asarray(values, dtype=np.float64)
            half = 1.96 * v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
            out.append(
                {
                    "fraction": float(f),
                    "outcome": "correct" if correct else "incorrect",
                    "mean_q": v.mean(),
                    "ci_low": v.mean() - half,
                    "ci_high": v.mean() + half,
                    "n": int(v.size),
                }
            )
    return pd.DataFrame(out)


def q_gap(frame: pd.DataFrame) -> pd.DataFrame:
    """Correct minus incorrect mean Q at each fraction of the response."""
    wide = frame.pivot(index="fraction", columns="outcome", values="mean_q")
    return (wide["correct"] - wide["incorrect"]).rename("correct − incorrect").to_frame()
