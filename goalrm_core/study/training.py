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
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from goalrm_core.data.io import read_jsonl
from goalrm_core.data.rundir import RunDir, rm_metrics_path, train_summary_path
from goalrm_core.evaluation.stats import mean_ci
from goalrm_core.study.rms import STRATEGY as RM_STRATEGIES
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.study.live import tail_view
from goalrm_core.train.launch import run_streaming, train_command
from goalrm_core.train.store import from_store, link_stored

if TYPE_CHECKING:
    import pandas as pd

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
    rm_dense_loss_coef: float = _sets("dense_loss_coef")
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
    group_by_length: bool = _sets("group_by_length")
    value_head_strategy: str = _sets("value_head_strategy")
    contrastive_strategy: str = _sets("contrastive_strategy")
    source_state_percentile: float = _sets("source_state_percentile")
    goal_state_percentile: float = _sets("goal_state_percentile")

    @classmethod
    def aliases(cls) -> dict[str, str]:
        """The one alias table from profile to trainer: ``{profile key: trainer flag}`` for every
        key a profile names differently from ``train-rm`` (the README lists it; a test keeps them equal).

        >>> RMRecipe.aliases()["contrastive_beta"]
        'contrastive_loss_beta'
        """
        return {f.name: f.metadata["flag"] for f in dataclasses.fields(cls) if f.name != f.metadata["flag"]}

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


def notebook_recipe(params: Mapping[str, Any]) -> RMRecipe:
    """The recipe notebook 02 trains the embedded task's RMs with: the training keys among
    ``params`` (the notebook's parameters, :meth:`RMRecipe.from_profile`), the token budget of
    ``max_new_tokens`` (:func:`rm_max_len`), a step budget no epoch limit cuts short, and a
    metrics row every 5 steps."""
    return dataclasses.replace(RMRecipe.from_profile(params), max_len=rm_max_len(params["max_new_tokens"]),
                               max_epochs=1000, logging_steps=5)


def rm_config(recipe: RMRecipe, run_dir, rm: str, seed: int, out_root=None, **overrides: Any) -> TrainRMConfig:
    """The config of one RM of the embedded task and one seed: initialised from the base policy,
    trained on the run's preference pairs; saved to the run's model folder or, given ``out_root``,
    to ``out_root/<rm>-seed<k>``. ``overrides`` are trainer flags that win over the recipe."""
    from goalrm_core.tasks.toymath.pipeline import TEMPLATE  # the embedded task (its data stage loads transformers)

    run = RunDir(run_dir)
    out = run.model(rm, seed) if out_root is None else Path(out_root) / RunDir.model_name(rm, seed)
    return recipe.config(**{
        "pretrain": str(run.policy), "dataset": str(run.preference_pairs("train")), "eval_dataset": str(run.preference_pairs("eval")),
        "save_path": str(out), "metrics_path": str(rm_metrics_path(out)), "template": TEMPLATE,
        "reward_model_strategy": RM_STRATEGIES[rm], "seed": seed, **overrides,
    })


def train_rms(run_dir, rms: Sequence[str], seeds: Sequence[int], recipe: RMRecipe, num_processes: int = 1, parallel: int = 1,
              out_root=None, store=None, threads: int | None = None, **overrides: Any) -> pd.DataFrame:
    """Train every RM for every seed in a subprocess (DeepSpeed never runs in the kernel); returns
    one row per run from its train_summary.json.

    ``threads`` is the stage's pinned thread count (default: this machine's cores); each training
    process gets ``threads // (parallel * num_processes)`` of them (at least 1), set explicitly, so
    that the floats depend on the profile and not on how many cores the machine has.

    ``parallel`` > 1 runs that many trainings at once, each with its share of the threads: tiny
    models use one core poorly at a time, so independent runs side by side finish sooner. Their
    live output is then one line per finished run; the full logs are in ``logs/``.

    ``store`` (a folder, e.g. ``RunDir.rm_store``) keeps every RM by :func:`~goalrm_core.train.store.rm_key`: an RM whose
    training config and inputs are already there is not trained again. The run's model folder, its
    metrics and its log then link to the stored ones, and the row says ``reused``."""
    if parallel < 1:
        raise ValueError(f"parallel must be >= 1, got {parallel}")
    jobs = [(rm, seed) for rm in rms for seed in seeds]
    per_process = max(1, (threads or os.cpu_count() or 1) // (parallel * num_processes))

    def run_training(cfg: TrainRMConfig, log: Path, desc: str) -> None:
        show = (lambda *_: None) if parallel > 1 else tail_view(5, desc)
        env = {"OMP_NUM_THREADS": str(per_process)}
        run_streaming(train_command(cfg, num_processes=num_processes), log, desc=desc, env=env, show=show)

    def train(job):
        rm, seed = job
        cfg = rm_config(recipe, run_dir, rm, seed, out_root, **overrides)
        log = Path(cfg.save_path + ".log") if out_root is not None else RunDir(run_dir).training_log(rm, seed)
        reused = False
        if store is None:
            run_training(cfg, log, f"{rm} seed {seed}")
        else:
            stored, reused = from_store(cfg, Path(store), lambda c, lg: run_training(c, lg, f"{rm} seed {seed}"))
            link_stored(cfg, stored, log)
        summary = json.loads(train_summary_path(cfg.save_path).read_text())
        if parallel > 1 or reused:
            done = "reused from the store" if reused else f"{summary.get('steps')} steps"
            print(f"{rm} seed {seed}: {done}, held-out accuracy {summary.get('eval_accuracy', float('nan')):.3f}", flush=True)
        return {"rm": rm, "seed": seed, **summary, **({"reused": reused} if store is not None else {})}

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        rows = list(pool.map(train, jobs))
    import pandas as pd

    return pd.DataFrame(rows)


def training_curves(run_dir, rms: Sequence[str], seeds: Sequence[int]) -> pd.DataFrame:
    """Every run's metrics rows (train and eval), with its ``rm`` and ``seed``."""
    import pandas as pd

    run = RunDir(run_dir)
    frames = [pd.DataFrame(read_jsonl(rm_metrics_path(run.model(rm, seed)))).assign(rm=rm, seed=seed)
              for rm in rms for seed in seeds]
    return pd.concat(frames, ignore_index=True)


def seed_summary(runs: pd.DataFrame, value: str = "eval_accuracy") -> pd.DataFrame:
    """Mean and 95% t-interval over seeds, per RM."""
    import pandas as pd

    out = {}
    for rm, g in runs.groupby("rm", sort=False):
        mean, low, high = mean_ci(g[value].to_numpy())
        out[rm] = {f"{value}": mean, f"{value}_ci_low": low, f"{value}_ci_high": high, "n_seeds": len(g)}
    return pd.DataFrame.from_dict(out, orient="index")


def training_metrics(summary: pd.DataFrame, runs: pd.DataFrame, steps: int) -> tuple[dict, dict]:
    """(the ``training`` section of metrics.json, its timings): per RM the held-out accuracy over
    seeds (``seed_summary``) and the step budget; apart from them, the mean throughput and wall time."""
    recorded = {rm: {"eval_accuracy": row["eval_accuracy"], "eval_accuracy_ci": [row["eval_accuracy_ci_low"], row["eval_accuracy_ci_high"]],
                     "steps": steps, "n_seeds": int(row["n_seeds"])}
                for rm, row in summary.iterrows()}
    timings = {rm: {"tokens_per_s": float(g["tokens_per_s"].mean()), "wall_s": float(g["wall_s"].mean())} for rm, g in runs.groupby("rm")}
    return recorded, timings
