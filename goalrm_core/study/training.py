"""Notebook 02: train the baseline and the goal-conditioned RM of the embedded task, every seed.

:class:`RMRecipe` is the one place a profile's training keys become the trainer's flags: each field
is a profile key (``rm_learning_rate`` …) and names the :class:`~goalrm_core.train.config.TrainRMConfig`
field it sets, whose default and help text it takes. Notebook 02, ``scripts/calibrate_rm.py`` and
the paper recipes (:mod:`goalrm_core.recipes.paper`) build their training configs through it.

>>> recipe = RMRecipe(rm_steps=200, rm_learning_rate=5e-4, max_len=rm_max_len(96))
>>> cfg = recipe.config(pretrain="policy", reward_model_strategy="contrastive")
>>> cfg.max_steps, cfg.learning_rate, cfg.max_len, cfg.contrastive
(200, 0.0005, 256, True)
"""

from __future__ import annotations

import dataclasses
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from goalrm_core.data.io import read_jsonl
from goalrm_core.data.rundir import RunDir
from goalrm_core.evaluation import metrics
from goalrm_core.study.rms import STRATEGY as RM_STRATEGIES
from goalrm_core.tasks.toymath.pipeline import TEMPLATE
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.launch import run_streaming, train_command

_TRAINER_FIELDS = {f.name: f for f in dataclasses.fields(TrainRMConfig)}


def rm_max_len(max_new_tokens: int) -> int:
    """Token budget of one RM input of the embedded task (question + a generation of up to
    ``max_new_tokens``, with room to spare), the same in training (02), goal states (03) and scoring (04).

    >>> rm_max_len(48)
    160
    """
    return 2 * max_new_tokens + 64


def _sets(flag: str) -> Any:
    """A recipe field that sets the trainer's ``--<flag>``, with that flag's default and help text."""
    trainer_field = _TRAINER_FIELDS[flag]
    return dataclasses.field(default=trainer_field.default, metadata={"flag": flag, "help": trainer_field.metadata["help"]})


@dataclass
class RMRecipe:
    """How an RM is trained, in a profile's words: each field is a profile key, and sets the trainer
    flag named in its metadata (``RMRecipe.flag_of("rm_steps") == "max_steps"``). Defaults are the
    trainer's, so a profile that leaves a key out trains with the trainer's default."""

    # keys the profiles and notebook 02 name after the study
    rm_steps: int = _sets("max_steps")
    rm_batch_size: int = _sets("train_batch_size")
    rm_micro_batch_size: int = _sets("micro_train_batch_size")
    rm_learning_rate: float = _sets("learning_rate")
    rm_head_learning_rate: float = _sets("head_learning_rate")
    rm_warmup_ratio: float = _sets("lr_warmup_ratio")
    rm_eval_steps: int = _sets("eval_steps")
    rm_zero_stage: int = _sets("zero_stage")
    contrastive_beta: float = _sets("contrastive_loss_beta")
    sim_samples: int = _sets("sim_samples")
    unsim_samples: int = _sets("unsim_samples")
    contrastive_window: str = _sets("contrastive_window")
    contrastive_pairs: str = _sets("contrastive_pairs")
    encoding: str = _sets("encoding")
    seed: int = _sets("seed")
    # keys a profile names as the trainer does
    pretrain: str = _sets("pretrain")
    dataset: str = _sets("dataset")
    dataset_probs: str = _sets("dataset_probs")
    eval_dataset: str = _sets("eval_dataset")
    eval_source: str = _sets("eval_source")
    eval_split: float = _sets("eval_split")
    hh_format: str = _sets("hh_format")
    template: str = _sets("template")
    max_len: int = _sets("max_len")
    max_epochs: int = _sets("max_epochs")
    logging_steps: int = _sets("logging_steps")
    save_steps: int = _sets("save_steps")
    bf16: bool = _sets("bf16")
    flash_attn: bool = _sets("flash_attn")
    gradient_checkpointing: bool = _sets("gradient_checkpointing")
    value_head_strategy: str = _sets("value_head_strategy")
    contrastive_strategy: str = _sets("contrastive_strategy")
    source_state_percentile: float = _sets("source_state_percentile")
    goal_state_percentile: float = _sets("goal_state_percentile")

    @classmethod
    def flag_of(cls, key: str) -> str:
        """The trainer flag a profile key sets."""
        return next(f.metadata["flag"] for f in dataclasses.fields(cls) if f.name == key)

    @classmethod
    def from_profile(cls, profile: Mapping[str, Any]) -> "RMRecipe":
        """The recipe of a profile: every key that is a recipe field, under its own name; the other
        keys (the task's, the report's) are not training keys and are left alone."""
        keys = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in profile.items() if k in keys})

    def flags(self) -> dict[str, Any]:
        """``{trainer flag: value}`` of every field."""
        return {f.metadata["flag"]: getattr(self, f.name) for f in dataclasses.fields(self)}

    def config(self, **flags: Any) -> TrainRMConfig:
        """The trainer's config of this recipe; ``flags`` (trainer flag names: paths, strategy, the
        run's seed) win over the recipe's."""
        return TrainRMConfig.from_dict({**self.flags(), **flags})


def rm_config(recipe: RMRecipe, run_dir, rm: str, seed: int, out_root=None, **overrides: Any) -> TrainRMConfig:
    """The config of one RM of the embedded task and one seed: initialised from the base policy,
    trained on the run's preference pairs; saved to the run's model folder or, given ``out_root``,
    to ``out_root/<rm>-seed<k>``. ``overrides`` are trainer flags that win over the recipe."""
    run = RunDir(run_dir)
    out = run.model(rm, seed) if out_root is None else Path(out_root) / RunDir.model_name(rm, seed)
    return recipe.config(
        pretrain=str(run.policy), dataset=str(run.preference_pairs("train")), eval_dataset=str(run.preference_pairs("eval")),
        save_path=str(out), metrics_path=str(out) + ".metrics.jsonl", template=TEMPLATE,
        reward_model_strategy=RM_STRATEGIES[rm], seed=seed, **overrides,
    )


def train_rms(run_dir, rms: Sequence[str], seeds: Sequence[int], recipe: RMRecipe, num_processes: int = 1, parallel: int = 1,
              out_root=None, **overrides: Any) -> pd.DataFrame:
    """Train every RM for every seed in a subprocess (DeepSpeed never runs in the kernel); returns
    one row per run from its train_summary.json.

    ``parallel`` > 1 runs that many trainings at once, each with cores // parallel threads: tiny
    models use one core poorly at a time, so independent runs side by side finish sooner. Their
    live output is then one line per finished run; the full logs are in ``logs/``."""
    if parallel < 1:
        raise ValueError(f"parallel must be >= 1, got {parallel}")
    jobs = [(rm, seed) for rm in rms for seed in seeds]
    threads = max(1, (os.cpu_count() or 1) // (parallel * num_processes))

    def train(job):
        rm, seed = job
        cfg = rm_config(recipe, run_dir, rm, seed, out_root, **overrides)
        log = Path(cfg.save_path + ".log") if out_root is not None else RunDir(run_dir).training_log(rm, seed)
        quiet = {"show": (lambda *_: None)} if parallel > 1 else {}
        env = {"OMP_NUM_THREADS": str(threads)} if parallel > 1 else None
        run_streaming(train_command(cfg, num_processes=num_processes), log, desc=f"{rm} seed {seed}", env=env, **quiet)
        summary = json.loads((Path(cfg.save_path) / "train_summary.json").read_text())
        if parallel > 1:
            print(f"{rm} seed {seed}: {summary.get('steps')} steps, held-out accuracy {summary.get('eval_accuracy', float('nan')):.3f}", flush=True)
        return {"rm": rm, "seed": seed, **summary}

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        rows = list(pool.map(train, jobs))
    return pd.DataFrame(rows)


def training_curves(run_dir, rms: Sequence[str], seeds: Sequence[int]) -> pd.DataFrame:
    """Every run's metrics rows (train and eval), with its ``rm`` and ``seed``."""
    run = RunDir(run_dir)
    frames = [pd.DataFrame(read_jsonl(Path(str(run.model(rm, seed)) + ".metrics.jsonl"))).assign(rm=rm, seed=seed)
              for rm in rms for seed in seeds]
    return pd.concat(frames, ignore_index=True)


def seed_summary(runs: pd.DataFrame, value: str = "eval_accuracy") -> pd.DataFrame:
    """Mean and 95% t-interval over seeds, per RM."""
    out = {}
    for rm, g in runs.groupby("rm", sort=False):
        mean, low, high = metrics.mean_ci(g[value].to_numpy())
        out[rm] = {f"{value}": mean, f"{value}_ci_low": low, f"{value}_ci_high": high, "n_seeds": len(g)}
    return pd.DataFrame.from_dict(out, orient="index")
