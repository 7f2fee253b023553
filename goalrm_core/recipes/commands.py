"""What the command-line recipes (:mod:`goalrm_core.recipes.paper`, :mod:`goalrm_core.recipes.real_lm`) share: one
RM's train-rm config from a profile, the ``goalrm <command>`` line, the shared data files, and an RM's pairwise
verdicts on held-out pairs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from transformers import AutoTokenizer

from goalrm_core.data.io import ArtifactError
from goalrm_core.flags import check_choice
from goalrm_core.inference.forward import iter_scored, keep_feature_cache, open_feature_cache
from goalrm_core.model.reward_model import load_reward_model
from goalrm_core.model.templates import apply_template
from goalrm_core.paths import resolve_path
from goalrm_core.study.recipe import trainer_settings
from goalrm_core.study.rms import STRATEGY as RM_STRATEGY
from goalrm_core.train.config import TrainRMConfig

#: an RM's study name or trainer strategy -> the trainer strategy (baseline/vanilla, goal-conditioned/contrastive)
STRATEGIES = {name: strategy for rm, strategy in RM_STRATEGY.items() for name in (rm, strategy)}
#: the official code's checkpoint names: ./ckpt/baseline_reward_model, ./ckpt/contrastive_reward_model
CKPT_NAMES = {"vanilla": "baseline_reward_model", "contrastive": "contrastive_reward_model"}


def strategy_name(strategy: str) -> str:
    """``baseline``/``vanilla`` -> ``vanilla``; ``goal-conditioned``/``contrastive`` -> ``contrastive``."""
    return STRATEGIES[check_choice("strategy", strategy, tuple(STRATEGIES))]


def train_config_from_profile(
    profile: Mapping[str, Any], strategy: str, save_path: str | None = None, **overrides: Any
) -> TrainRMConfig:
    """The train-rm config of one RM from a profile's ``rm:`` block and seed, by name (:func:`trainer_settings`).

    ``save_path`` defaults to ``<ckpt_dir>/{baseline,contrastive}_reward_model`` (the official code's names).
    ``overrides`` are train-rm flags and win over the profile.
    """
    strategy = strategy_name(strategy)
    if save_path is None:
        save_path = f"{str(profile.get('ckpt_dir', './ckpt')).rstrip('/')}/{CKPT_NAMES[strategy]}"
    return TrainRMConfig.from_dict(
        {**trainer_settings(profile), "save_path": save_path, "reward_model_strategy": strategy, **overrides}
    )


def cli_command(command: str, *flags: Any) -> list[str]:
    """``python -m goalrm_core.cli <command> <flags>``: the same as ``goalrm <command> ...``."""
    return [sys.executable, "-m", "goalrm_core.cli", command, *(str(f) for f in flags)]


def data_file(profile: Mapping[str, Any], key: str, data_dir: str | Path | None) -> Path:
    """The shared data file a profile's ``key`` names, in ``data_dir`` (default: the profile's); one line if absent."""
    path = (resolve_path(data_dir if data_dir is not None else profile["data_dir"]) / profile[key]).resolve()
    if not path.is_file():
        raise ArtifactError(
            f"{path}: not found; the recipe reads the shared data files ({key}); pass data_dir=... to point elsewhere"
        )
    return path


def pair_correct(
    model_dir: Path, pairs: Sequence[dict], template: str, max_len: int, feature_cache_dir: Path | None = None
) -> np.ndarray:
    """Per held-out pair: does the RM score the preferred response above the other one? With ``feature_cache_dir``
    an RM trained with ``--train_top_layers`` reads through the feature cache kept there (as ``eval-rm
    --feature_cache_dir`` does: the same rewards to float rounding, the frozen layers run once per text for every
    RM of that backbone)."""
    model = load_reward_model(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompts = [apply_template(template, r["question"]) for r in pairs]
    responses = [r["correct"] for r in pairs] + [r["incorrect"] for r in pairs]
    desc = f"reward model {model_dir}"
    cache = open_feature_cache(model, feature_cache_dir, desc)
    rewards = np.zeros(2 * len(pairs))
    for i, s in iter_scored(model, tokenizer, prompts * 2, responses, max_len, feature_cache=cache):
        rewards[i] = s.reward
    keep_feature_cache(cache, feature_cache_dir, desc)
    return rewards[: len(pairs)] > rewards[len(pairs) :]
