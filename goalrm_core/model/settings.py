"""The contrastive term's settings, typed and frozen: what :func:`~goalrm_core.model.losses.contrastive_goal_loss`
takes in place of one argument per setting.

Each field is defined here once, with its help, default and valid values, under the name it has everywhere:
:class:`~goalrm_core.train.config.TrainRMConfig` declares its contrastive flags from these fields (same name,
same help), and :meth:`TrainRMConfig.contrastive_settings` builds the object by those names, so a setting
keeps one name from the command line and the profiles down to the loss. A strategy's own hyperparameters
are :class:`TrainRMConfig` fields too (a strategy names them, ``model.strategies``); they travel in
``options`` under the same names.

Imports no torch: the trainer's command line reads these fields without it.

>>> ContrastiveSettings(contrastive_pairs="matched").sim_samples
16
>>> ContrastiveSettings(sim_samples=0)
Traceback (most recent call last):
ValueError: sim_samples must be an integer >= 1, got 0
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from goalrm_core.choices import PAIR_FORMS, PERCENTILE_WINDOWS, STOP_GRADIENTS
from goalrm_core.flags import Range, check_choice
from goalrm_core.model.strategies import CONTRASTIVE_STRATEGIES, strategies_help


def _setting(text: str, default: Any, **meta: Any) -> Any:
    """A field with its help text and its valid ``choices`` or ``range`` (the metadata the trainer's flags read)."""
    return field(default=default, metadata={"help": text, **meta})


@dataclass(frozen=True)
class ContrastiveSettings:
    """Everything the goal-conditioned contrastive term needs besides the states: the strategy and its
    hyperparameters, the weight, how many pairs are drawn, where and how they are paired."""

    contrastive_strategy: str = _setting(strategies_help(), "cosine", choices=tuple(CONTRASTIVE_STRATEGIES))
    contrastive_loss_beta: float = _setting("Weight β of the contrastive term.", 0.5, range=Range(float, ">= 0"))
    sim_samples: int = _setting(
        "Positive (source, later goal) pairs drawn per preferred response.", 16, range=Range(int, ">= 1")
    )
    unsim_samples: int = _setting(
        "Negative (preferred source, dispreferred goal) pairs per row.", 16, range=Range(int, ">= 1")
    )
    source_state_percentile: float = _setting(
        "Draw source states from a (1-p) window of the response, see --contrastive_window (0 = anywhere).",
        0.0,
        range=Range(float, "[0, 1)"),
    )
    goal_state_percentile: float = _setting(
        "Draw goal states from a (1-p) window of the response, see --contrastive_window (0 = anywhere).",
        0.0,
        range=Range(float, "[0, 1)"),
    )
    contrastive_window: str = _setting(
        "Where a percentile p > 0 draws positions: earliest (the official code: the first (1-p) "
        "of the response) or latest (the last (1-p)).",
        "earliest",
        choices=PERCENTILE_WINDOWS,
    )
    contrastive_pairs: str = _setting(
        "Pairs the contrastive term averages over: all (the official code: every source with every "
        "goal) or matched (the k-th source with the k-th goal).",
        "all",
        choices=PAIR_FORMS,
    )
    contrastive_stop_gradient: str = _setting(
        "States the contrastive term passes no gradient through: none (the paper's) or goal (every goal state, "
        "the preferred response's later states and the dispreferred response's, is detached, so the term moves "
        "only the source states; a stabiliser, not in the paper).",
        "none",
        choices=STOP_GRADIENTS,
    )
    #: the strategy's hyperparameters, by their config names: exactly the ones its registry entry names
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.name == "contrastive_strategy":  # the registry as it is now: a strategy registered later counts
                check_choice(f.name, self.contrastive_strategy, tuple(CONTRASTIVE_STRATEGIES))
            elif "choices" in f.metadata:
                check_choice(f.name, getattr(self, f.name), f.metadata["choices"])
            if "range" in f.metadata:
                f.metadata["range"].check(getattr(self, f.name), f.name)
        wanted = CONTRASTIVE_STRATEGIES[self.contrastive_strategy].options
        if set(self.options) != set(wanted):
            raise ValueError(
                f"contrastive strategy {self.contrastive_strategy!r} takes the options {sorted(wanted)}, "
                f"got {sorted(self.options)}"
            )
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))  # read-only, as the rest

    @classmethod
    def setting_names(cls) -> tuple[str, ...]:
        """The fields a config shares with this object by name: every field but ``options``."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name != "options")
