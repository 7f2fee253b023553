"""What the study reads from a run directory, by RM name and seed (the layout is `RunDir`'s).

Every seed's RM gets its own goal state and scores; seed 0 is the one the detailed tables and the
decoding notebook use. The headline set of generations is either the greedy one per question or one
fixed sampled one (``headline``): greedy outputs of a well-trained policy can be all correct, and
AUROC needs both classes.
"""

from __future__ import annotations

import numpy as np
from transformers import AutoTokenizer

from goalrm_core.data.io import load_npy, read_jsonl, require_artifact
from goalrm_core.data.rundir import RunDir
from goalrm_core.evaluation.tables import read_scored
from goalrm_core.model.reward_model import load_reward_model
from goalrm_core.study.rms import HEADLINE_SETS
from goalrm_core.tasks.toymath.problems import is_well_formed


def load_rm(run_dir, rm: str, seed: int = 0):
    """(reward model, tokenizer) of one trained RM."""
    path = require_artifact(RunDir(run_dir).model(rm, seed) / "goalrm.json", "notebooks/02_training.ipynb").parent
    return load_reward_model(path), AutoTokenizer.from_pretrained(path)


def preference_pairs(run_dir, split: str) -> list[dict]:
    path = require_artifact(RunDir(run_dir).preference_pairs(split), "notebooks/01_data.ipynb")
    return read_jsonl(path, required=("question", "correct", "incorrect"))


def read_goal_state(run_dir, rm: str, method: str = "mean_last", seed: int = 0) -> np.ndarray:
    """One RM's saved goal state, as saved: a (1, hidden) array."""
    return load_npy(
        require_artifact(RunDir(run_dir).goal_state(rm, seed, method), "notebooks/03_representations.ipynb")
    )


def headline_rows(run_dir, rm: str, bench: str, headline: str = "greedy", seed: int = 0) -> list[dict]:
    """The scored generations the headline tables read (see HEADLINE_SETS), in file order."""
    if headline not in HEADLINE_SETS:
        raise ValueError(f"headline must be one of {tuple(HEADLINE_SETS)}, got {headline!r}")
    if headline == "greedy":
        return read_scored(RunDir(run_dir).eval(rm, seed), bench, "greedy")
    return first_samples(read_scored(RunDir(run_dir).eval(rm, seed), bench, "all"))


def first_samples(rows: list[dict]) -> list[dict]:
    """The ``sample0`` headline set: each question's sample index 0, in file order."""
    return [r for r in rows if r.get("sample_index") == 0]


# The two sets every ranking figure is read on: all generations, and the correct ones against the
# *well-formed* incorrect ones only (every line ``a op b = c``, then ``#answer``), where a scorer must
# check the arithmetic: a malformed solution can be told by its shape alone.
SUBSETS = ("all", "well_formed")


def well_formed_only(rows: list[dict]) -> list[dict]:
    """The correct generations and the well-formed incorrect ones, in file order."""
    return [r for r in rows if r["is_correct"] or is_well_formed(r["generated_solution"])]


def malformed_share(rows: list[dict]) -> float:
    """The share of the incorrect generations that are malformed (NaN when none is incorrect): what
    the gate's second condition can say about malformed output depends on it."""
    wrong = [r for r in rows if not r["is_correct"]]
    return sum(not is_well_formed(r["generated_solution"]) for r in wrong) / len(wrong) if wrong else float("nan")


def subset_rows(rows: list[dict], subset: str) -> list[dict]:
    """``rows`` restricted to one of SUBSETS."""
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {SUBSETS}, got {subset!r}")
    return well_formed_only(rows) if subset == "well_formed" else list(rows)
