"""How a profile names the trainer's settings: by :class:`~goalrm_core.train.config.TrainRMConfig`'s own field
names, in the profile's ``rm:`` block.

A profile gives the reward model's settings in one block, each under the trainer's name::

    rm:
      max_steps: 400
      learning_rate: 0.0005
      contrastive_loss_beta: 0.5

:func:`~goalrm_core.pipeline.profile_files.load_profile` lifts the block's keys into the resolved profile under the
same names (no other profile key may share one), papermill hands them to notebook 02 as flat parameters
(``max_steps = 400``), and :func:`notebook_recipe` builds the trainer's config from them by name: no key is
renamed on the way. Every field of the trainer is an ``rm`` key (:data:`RM_KEYS`) except what a run decides
per RM (:data:`PER_RUN`) and ``seed``, the profile's own seed (a top-level key, which the command-line
profiles' trainer reads too). A setting's type, default, range, choices and help are its field's, so a new
trainer flag is a profile key with nothing else to edit.

The keys profiles used before the block (``rm_steps``, ``contrastive_beta`` …, :data:`OLD_KEYS`) are refused
in one line naming the new name (:func:`old_key_message`); the same rule reads an old sweep's folders
(:func:`renamed`).

>>> cfg = notebook_recipe({"max_new_tokens": 96, "max_steps": 200, "learning_rate": 5e-4})
>>> cfg.max_steps, cfg.learning_rate, cfg.max_len
(200, 0.0005, 256)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from goalrm_core.flags import did_you_mean
from goalrm_core.train.config import OUTPUT_FIELDS, TrainRMConfig

#: the profile's block of trainer settings
RM_BLOCK = "rm"
#: trainer flags a profile does not set: where an RM goes and who watches it (``OUTPUT_FIELDS``), and
#: what a run decides per RM (which RM it is, a resume, a simulated preemption), and official_defaults (how a
#: command line is read: a profile names each setting itself)
PER_RUN = (
    *OUTPUT_FIELDS,
    "reward_model_strategy",
    "contrastive_loss",
    "load_checkpoint",
    "stop_after_steps",
    "official_defaults",
)
#: the profile's seed: a top-level key (the data's, the benchmarks' and, in a command-line profile, the trainer's)
PROFILE_SEED = "seed"

_FLAGS = {f.name: f for f in dataclasses.fields(TrainRMConfig)}
#: every key of a profile's ``rm:`` block, in the trainer's field order
RM_KEYS: tuple[str, ...] = tuple(name for name in _FLAGS if name not in PER_RUN and name != PROFILE_SEED)
#: the trainer's settings a resolved profile may give: the ``rm`` block's and the profile's seed
TRAINER_KEYS: tuple[str, ...] = (PROFILE_SEED, *RM_KEYS)

#: keys profiles used before the ``rm:`` block, named after the study -> the trainer field that replaced
#: each (docs/migration.md). Never read as a setting: a profile, ``--set`` or a sweep that gives one is
#: refused in one line naming the new name; an old sweep's folders and records are read through it.
OLD_KEYS: dict[str, str] = {
    "rm_steps": "max_steps",
    "rm_batch_size": "train_batch_size",
    "rm_micro_batch_size": "micro_train_batch_size",
    "rm_learning_rate": "learning_rate",
    "rm_head_learning_rate": "head_learning_rate",
    "rm_warmup_ratio": "lr_warmup_ratio",
    "rm_dense_loss_coef": "dense_loss_coef",
    "rm_eval_steps": "eval_steps",
    "rm_zero_stage": "zero_stage",
    "contrastive_beta": "contrastive_loss_beta",
}


def renamed(key: str) -> str:
    """``key`` under its name now: an old key's field (:data:`OLD_KEYS`), any other key as it is.

    >>> renamed("contrastive_beta"), renamed("sim_samples"), renamed("goal_method")
    ('contrastive_loss_beta', 'sim_samples', 'goal_method')
    """
    return OLD_KEYS.get(key, key)


def old_key_message(key: str, where: str, in_block: bool = False) -> str | None:
    """The one line refusing ``key`` of a profile (``in_block``: inside its ``rm:`` block) when it is an old
    key or a trainer setting outside the block: ``"<where>: key 'contrastive_beta' is now rm.contrastive_loss_beta"``;
    ``None`` for a key in its place."""
    if key in OLD_KEYS:
        return f"{where}: key {(RM_BLOCK + '.' if in_block else '') + key!r} is now {RM_BLOCK}.{OLD_KEYS[key]}"
    if not in_block and key in RM_KEYS:
        return (
            f"{where}: key {key!r} is now {RM_BLOCK}.{key} (the trainer's settings sit in the profile's "
            f"{RM_BLOCK}: block)"
        )
    return None


def setting_key(key: str, where: str) -> str:
    """A key typed outside a profile file (``--set``, ``--grid``, a sweep spec) under the name the resolved
    profile holds it by: ``rm.max_steps`` (as a profile writes it) and ``max_steps`` are ``max_steps``; an old
    key is refused in one line naming its new name.

    >>> setting_key("rm.contrastive_loss_beta", "--set"), setting_key("goal_method", "--set")
    ('contrastive_loss_beta', 'goal_method')
    >>> setting_key("contrastive_beta", "--set")
    Traceback (most recent call last):
    ...
    ValueError: --set: key 'contrastive_beta' is now rm.contrastive_loss_beta
    """
    block, dot, name = key.partition(".")
    if dot and block == RM_BLOCK:
        if name in OLD_KEYS:
            raise ValueError(old_key_message(name, where, in_block=True))
        if name not in RM_KEYS:
            raise ValueError(
                f"{where}: key {key!r} is no setting of the trainer (goalrm train-rm --help)"
                f"{did_you_mean(name, RM_KEYS)}"
            )
        return name
    if key in OLD_KEYS:
        raise ValueError(old_key_message(key, where))
    return key


def rm_rules() -> dict[str, Any]:
    """``{trainer key: the trainer's range (a Range) or choices (a tuple), else None}`` (:data:`TRAINER_KEYS`)."""
    return {key: _FLAGS[key].metadata.get("range", _FLAGS[key].metadata.get("choices")) for key in TRAINER_KEYS}


def rm_help(key: str) -> str:
    """The help of trainer setting ``key``.

    >>> rm_help("contrastive_loss_beta")
    'Weight β of the contrastive term.'
    """
    return _FLAGS[key].metadata["help"]


def trainer_settings(profile: Mapping[str, Any]) -> dict[str, Any]:
    """The trainer's settings among a resolved profile's (or a notebook's parameters): its ``rm`` keys and its
    seed, by name; the other keys (the task's, the report's) are not the trainer's and are left alone."""
    return {key: value for key, value in profile.items() if key in TRAINER_KEYS}


def rm_max_len(max_new_tokens: int) -> int:
    """Token budget of one RM input of the embedded task (question + a generation of up to
    ``max_new_tokens``, with room to spare), the same in training (02), goal states (03) and scoring (04).

    >>> rm_max_len(48)
    160
    """
    return 2 * max_new_tokens + 64


def notebook_recipe(params: Mapping[str, Any]) -> TrainRMConfig:
    """The config notebook 02 trains the embedded task's RMs from (:func:`~goalrm_core.study.training.rm_config`
    adds one RM's paths, strategy and seed): the trainer's settings among ``params`` (the notebook's
    parameters, :func:`trainer_settings`), the token budget of ``max_new_tokens`` (:func:`rm_max_len`), a step
    budget no epoch limit cuts short, and a metrics row every 5 steps."""
    return TrainRMConfig.from_dict(
        {
            **trainer_settings(params),
            "max_len": rm_max_len(params["max_new_tokens"]),
            "max_epochs": 1000,
            "logging_steps": 5,
        }
    )


def old_keys_table() -> str:
    """docs/migration.md's table of the profile keys the ``rm:`` block replaced: :data:`OLD_KEYS`."""
    return "\n".join(
        [
            "| old profile key | now | `train-rm` flag |",
            "|---|---|---|",
            *(f"| `{key}` | `{RM_BLOCK}.{flag}` | `--{flag}` |" for key, flag in OLD_KEYS.items()),
        ]
    )
