"""Notebook 03's steps: goal states of each RM, and how well the cosine to them separates correct
from incorrect generations."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from goalrm_core.data.io import parse_label, save_npy
from goalrm_core.data.rundir import RunDir
from goalrm_core.evaluation import metrics
from goalrm_core.evaluation.tables import question_ids
from goalrm_core.inference.goal_state import goal_states_from_pairs, q_values
from goalrm_core.study import formatting as fmt
from goalrm_core.study.artifacts import load_rm, preference_pairs
from goalrm_core.tasks.toymath.pipeline import TEMPLATE


def save_goal_states(
    run_dir, rm: str, methods, seed: int = 0, rm_seed: int = 0, max_len: int = 512, *, encoding: str, readout: str
) -> dict[str, np.ndarray]:
    """Goal states of one RM from the training pairs' preferred responses, one file per method, read
    the way the RM was trained (``encoding``, ``readout``: the profile's)."""
    model, tokenizer = load_rm(run_dir, rm, rm_seed)
    pairs = preference_pairs(run_dir, "train")
    goals = goal_states_from_pairs(
        model,
        tokenizer,
        pairs,
        TEMPLATE,
        methods,
        seed=seed,
        max_len=max_len,
        batch_size=64,
        encoding=encoding,
        readout=readout,
    )  # one pass of the RM for all methods
    for method, goal in goals.items():
        save_npy(RunDir(run_dir).goal_state(rm, rm_seed, method), goal)
    return goals


def last_token_frame(states: np.ndarray, rows: Sequence[dict], q) -> pd.DataFrame:
    """Per generation: correctness, the Q of its last-token state (``q``, from
    :func:`~goalrm_core.inference.goal_state.q_values`; the ``cosine_to_goal`` column), and a 2-D PCA
    of the states."""
    centred = states - states.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    pcs = centred @ vt[:2].T
    correct = [parse_label(r["is_correct"], where=f"row {i}") for i, r in enumerate(rows)]
    return pd.DataFrame(
        {"is_correct": correct, "cosine_to_goal": np.asarray(q, dtype=np.float32), "pc1": pcs[:, 0], "pc2": pcs[:, 1]}
    )


def separation_summary(frames: dict[str, pd.DataFrame], rows, seed: int = 0) -> pd.DataFrame:
    """Per RM: mean cosine to the goal of correct and incorrect generations, and the separation AUROC."""
    out = {}
    for rm, f in frames.items():
        res = metrics.bootstrap_auroc(
            f["cosine_to_goal"].to_numpy(), f["is_correct"].to_numpy(), seed=seed, clusters=question_ids(rows)
        )
        out[rm] = {
            "cos_correct_mean": f.loc[f.is_correct, "cosine_to_goal"].mean(),
            "cos_incorrect_mean": f.loc[~f.is_correct, "cosine_to_goal"].mean(),
            "separation_auroc": res.auroc,
            "separation_auroc_ci_low": res.ci_low,
            "separation_auroc_ci_high": res.ci_high,
        }
    return pd.DataFrame.from_dict(out, orient="index")


def goal_ablation_table(
    states: dict[str, np.ndarray], goals: dict[str, dict[str, np.ndarray]], rows, seed: int = 0
) -> pd.DataFrame:
    """Separation AUROC of the last-token cosine for each RM and goal-forming method."""
    labels, clusters = np.array([bool(r["is_correct"]) for r in rows]), question_ids(rows)
    records = []
    for rm, by_method in goals.items():
        for method, goal in by_method.items():
            res = metrics.bootstrap_auroc(q_values(states[rm], goal).numpy(), labels, seed=seed, clusters=clusters)
            records.append(
                {"rm": rm, "goal": method, "separation_auroc": res.auroc, "ci_low": res.ci_low, "ci_high": res.ci_high}
            )
    return pd.DataFrame(records)


def goal_ablation_reading(ablation: pd.DataFrame) -> str:
    """The goal ablation in words, from its numbers: which goal separates best for each RM, and what
    an AUROC below 0.5 means (the cosine ranks incorrect solutions closer to that goal: the same
    information with the sign flipped, 1 − AUROC)."""
    lines = []
    for rm, g in ablation.groupby("rm", sort=False):
        g = g[g["separation_auroc"].notna()]
        if g.empty:
            continue
        best = g.loc[g["separation_auroc"].idxmax()]
        lines.append(
            f"For the {rm} RM the `{best['goal']}` goal separates best "
            f"({fmt.ci(best['separation_auroc'], best['ci_low'], best['ci_high'])})."
        )
        flipped = g[g["ci_high"] < 0.5]
        if not flipped.empty:
            lines.append(
                f"Its {', '.join(f'`{m}`' for m in flipped['goal'])} goal"
                f"{'s' if len(flipped) > 1 else ''} score below 0.5 with the whole CI: the cosine to "
                "such a goal puts *incorrect* solutions closer, so it separates as well as 1 − AUROC "
                "with the sign flipped."
            )
    return " ".join(lines)
