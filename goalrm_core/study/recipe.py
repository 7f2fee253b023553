"""How a profile names the trainer's settings: :class:`RMRecipe`, derived from
:class:`~goalrm_core.train.config.TrainRMConfig`.

Every trainer setting is a profile key under its own name, except the few a run sets per RM
(:data:`PER_RUN`) and the keys of :data:`PROFILE_ALIASES`, the one table of profile keys named after
the study (``rm_steps`` sets ``--max_steps``). A setting's type, default, range, choices and help are
its field's in ``TrainRMConfig``: the recipe's fields, the profiles' rules (:func:`profile_rules`) and
notebook 02's training keys are read from there, so a new trainer flag is a profile key with nothing
else to edit.

>>> recipe = RMRecipe(rm_steps=200, rm_learning_rate=5e-4, max_len=rm_max_len(96))
>>> cfg = recipe.config(pretrain="policy", reward_model_strategy="contrastive")
>>> cfg.max_steps, cfg.learning_rate, cfg.max_len, cfg.contrastive
(200, 0.0005, 256, True)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from goalrm_core.train.config import OUTPUT_FIELDS, TrainRMConfig

#: profile key -> trainer flag, for the keys a profile names after the study (docs/migration.md lists them)
PROFILE_ALIASES: dict[str, str] = {
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
#: trainer flags a profile does not set: where an RM goes and who watches it (``OUTPUT_FIELDS``), and
#: what a run decides per RM (which RM it is, a resume, a simulated preemption), and official_defaults (how a
#: command line is read: a profile names each setting itself)
PER_RUN = (*OUTPUT_FIELDS, "reward_model_strategy", "contrastive_loss", "load_checkpoint", "stop_after_steps", "official_defaults")

_FLAGS = {f.name: f for f in dataclasses.fields(TrainRMConfig)}
_KEY_OF = {flag: key for key, flag in PROFILE_ALIASES.items()}


def profile_flags() -> dict[str, str]:
    """``{profile key: trainer flag}`` for every setting a profile may give, in the trainer's field order."""
    return {_KEY_OF.get(name, name): name for name in _FLAGS if name not in PER_RUN}


def profile_rules() -> dict[str, Any]:
    """``{profile key: the trainer's range (a Range) or choices (a tuple), else None}``."""
    return {key: _FLAGS[flag].metadata.get("range", _FLAGS[flag].metadata.get("choices")) for key, flag in profile_flags().items()}


def recipe_help(key: str) -> str:
    """The help of the trainer flag profile key ``key`` sets.

    >>> recipe_help("contrastive_beta")
    'Weight β of the contrastive term.'
    """
    return _FLAGS[profile_flags()[key]].metadata["help"]


class _Recipe:
    """The methods of :class:`RMRecipe` (its fields are generated from the trainer's)."""

    @classmethod
    def aliases(cls) -> dict[str, str]:
        """The one alias table from profile to trainer (:data:`PROFILE_ALIASES`).

        >>> RMRecipe.aliases()["contrastive_beta"]
        'contrastive_loss_beta'
        """
        return dict(PROFILE_ALIASES)

    @classmethod
    def flag_of(cls, key: str) -> str:
        """The trainer flag a profile key sets."""
        return profile_flags()[key]

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


def _recipe_field(flag: str) -> tuple[str, Any, dataclasses.Field]:
    trainer = _FLAGS[flag]
    return _KEY_OF.get(flag, flag), trainer.type, dataclasses.field(default=trainer.default,
                                                                    metadata={"flag": flag, "help": trainer.metadata["help"]})


RMRecipe = dataclasses.make_dataclass("RMRecipe", [_recipe_field(flag) for flag in profile_flags().values()], bases=(_Recipe,))
RMRecipe.__module__ = __name__
RMRecipe.__doc__ = """How an RM is trained, in a profile's words: one field per profile key (:func:`profile_flags`), each
setting the trainer flag named in its metadata (``RMRecipe.flag_of("rm_steps") == "max_steps"``), with that
flag's default and help: a profile that leaves a key out trains with the trainer's default."""


def alias_table() -> str:
    """docs/migration.md's table of the profile keys named after the study: :data:`PROFILE_ALIASES`."""
    return "\n".join(["| profile key | `train-rm` flag |", "|---|---|",
                      *(f"| `{key}` | `--{flag}` |" for key, flag in PROFILE_ALIASES.items())])


def rm_max_len(max_new_tokens: int) -> int:
    """Token budget of one RM input of the embedded task (question + a generation of up to
    ``max_new_tokens``, with room to spare), the same in training (02), goal states (03) and scoring (04).

    >>> rm_max_len(48)
    160
    """
    return 2 * max_new_tokens + 64


def notebook_recipe(params: Mapping[str, Any]) -> RMRecipe:
    """The recipe notebook 02 trains the embedded task's RMs with: the training keys among
    ``params`` (the notebook's parameters, :meth:`RMRecipe.from_profile`), the token budget of
    ``max_new_tokens`` (:func:`rm_max_len`), a step budget no epoch limit cuts short, and a
    metrics row every 5 steps."""
    return dataclasses.replace(RMRecipe.from_profile(params), max_len=rm_max_len(params["max_new_tokens"]),
                               max_epochs=1000, logging_steps=5)
