"""The contrastive term's scoring strategies (``--contrastive_strategy``), each registered once, here.

A strategy says how alike two states are, nothing more: ``similarity(source, goal, **options)`` takes a
row's source states (batch, S, hidden) and goal states (batch, G, hidden), both float32, and returns the
similarity of **every** source with **every** goal of the same row, (batch, S, G), as a logit (any real
number: the loss takes σ of it). Which (source, goal) pairs count is the loss's business
(:func:`~goalrm_core.model.losses.mean_pair_score`, ``--contrastive_pairs``: ``all`` averages the whole
matrix; ``matched`` hands over each k-th (source, goal) pair as a row of its own, so the strategy scores
the matched pairs only), as are σ and the means, so a strategy cannot get the pairing wrong; the loss
refuses a result of any other shape.

A strategy that compares each source with its row's *mean* goal state (``cosine_avg``) registers with
``average_goals=True``: the loss averages the goal states (in their own dtype) before the similarity,
so the strategy sees G = 1, and every source is paired with that one goal under either pair form.

``options`` names the :class:`~goalrm_core.train.config.TrainRMConfig` fields a strategy reads (its
hyperparameters): they reach it by those names, through
:class:`~goalrm_core.model.settings.ContrastiveSettings`' ``options``. The registry is the one list of
strategies: the trainer's choices and help, the profile checks and ``goalrm sweep`` read it.

This module loads torch only when a strategy scores, so the command line and the profile checks can
read the registry without it. Adding a strategy is a decorated function here and, for a
hyperparameter, its field in ``train/config.py``:

    @contrastive_strategy("cosine_tempered", "sigma(cos / T)", options=("contrastive_temperature",))
    def _cosine_tempered(source, goal, contrastive_temperature):
        return cosine_matrix(source, goal) / contrastive_temperature
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class ContrastiveStrategy:
    """One strategy: its similarity function, the config fields it reads, a few words for ``--help``, and
    whether the loss averages each row's goal states into one before comparing (``average_goals``)."""

    similarity: Callable[..., "torch.Tensor"]
    options: tuple[str, ...] = ()
    help: str = ""
    average_goals: bool = False


#: ``--contrastive_strategy``'s choices, in the order ``--help`` lists them
CONTRASTIVE_STRATEGIES: dict[str, ContrastiveStrategy] = {}


def contrastive_strategy(name: str, help: str, options: tuple[str, ...] = (), average_goals: bool = False) -> Callable:
    """Register the decorated similarity function as strategy ``name``; a name given twice is an error."""

    def register(similarity: Callable) -> Callable:
        if name in CONTRASTIVE_STRATEGIES:
            raise ValueError(f"contrastive strategy {name!r} is registered twice")
        CONTRASTIVE_STRATEGIES[name] = ContrastiveStrategy(similarity, tuple(options), help, average_goals)
        return similarity

    return register


def strategies_help() -> str:
    """``"cosine: pairwise cosines; cosine_avg: ..."``: each strategy with its help."""
    return "; ".join(f"{name}: {s.help}" for name, s in CONTRASTIVE_STRATEGIES.items()) + "."


def strategy_options() -> tuple[str, ...]:
    """Every config field some strategy reads, each once, in registry order."""
    return tuple(dict.fromkeys(name for s in CONTRASTIVE_STRATEGIES.values() for name in s.options))


def strategies_table() -> str:
    """docs/profiles.md's table of the strategies (``python scripts/docs_tables.py --write``): one row each, in
    registry order, with its help, the config fields it reads and whether it averages the goal states first."""
    rows = ["| `contrastive_strategy` | what it is | its hyperparameters | goal states |", "|---|---|---|---|"]
    for name, s in CONTRASTIVE_STRATEGIES.items():
        options = ", ".join(f"`{option}`" for option in s.options) or "none"
        rows.append(f"| `{name}` | {s.help} | {options} | {'averaged first' if s.average_goals else 'each one'} |")
    return "\n".join(rows)


def cosine_matrix(source: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    """cos(source_i, goal_j) of every source i with every goal j of a row: (batch, S, G)."""
    import torch.nn.functional as F

    return F.cosine_similarity(source.unsqueeze(2), goal.unsqueeze(1), dim=-1)


@contrastive_strategy("cosine", "pairwise cosines")
def _cosine(source: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    return cosine_matrix(source, goal)


@contrastive_strategy("cosine_avg", "average the goal states first", average_goals=True)
def _cosine_avg(source: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    return cosine_matrix(source, goal)
