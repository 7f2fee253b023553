"""The contrastive term's scoring strategies (``--contrastive_strategy``), each registered once, here.

A strategy scores sampled states: ``score(source, goal, pairs, **options)`` takes (batch, k, hidden)
source and goal states and the pair form (``all``: every source with every goal, ``matched``: the k-th
with the k-th) and returns the mean similarity in (0, 1) over the (source, goal) pairs. ``options``
names the :class:`~goalrm_core.train.config.TrainRMConfig` fields it reads (its hyperparameters): the
objective passes them by name. The registry is the one list of strategies: the trainer's choices and
help, the profile checks and ``goalrm sweep`` read it.

This module loads torch only when a strategy scores, so the command line and the profile checks can
read the registry without it. Adding a strategy is a decorated function here and, for a
hyperparameter, its field in ``train/config.py``:

    @contrastive_strategy("cosine_tempered", "sigma(cos / T)", options=("contrastive_temperature",))
    def _cosine_tempered(source, goal, pairs, contrastive_temperature): ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class ContrastiveStrategy:
    """One strategy: its scoring function, the config fields it reads, and a few words for ``--help``."""

    score: Callable[..., "torch.Tensor"]
    options: tuple[str, ...] = ()
    help: str = ""


#: ``--contrastive_strategy``'s choices, in the order ``--help`` lists them
CONTRASTIVE_STRATEGIES: dict[str, ContrastiveStrategy] = {}


def contrastive_strategy(name: str, help: str, options: tuple[str, ...] = ()) -> Callable:
    """Register the decorated scoring function as strategy ``name``; a name given twice is an error."""

    def register(score: Callable) -> Callable:
        if name in CONTRASTIVE_STRATEGIES:
            raise ValueError(f"contrastive strategy {name!r} is registered twice")
        CONTRASTIVE_STRATEGIES[name] = ContrastiveStrategy(score, tuple(options), help)
        return score

    return register


def strategies_help() -> str:
    """``"cosine: pairwise cosines; cosine_avg: ..."``: each strategy with its help."""
    return "; ".join(f"{name}: {s.help}" for name, s in CONTRASTIVE_STRATEGIES.items()) + "."


def strategy_options() -> tuple[str, ...]:
    """Every config field some strategy reads, each once, in registry order."""
    return tuple(dict.fromkeys(name for s in CONTRASTIVE_STRATEGIES.values() for name in s.options))


def _mean_sigmoid_cosine(source: torch.Tensor, goal: torch.Tensor, pairs: str) -> torch.Tensor:
    """Mean σ(cos) over (source, goal) pairs: the k-th with the k-th (``matched``), or every source
    with every goal (``all``). A single (averaged) goal is compared with every source either way."""
    import torch
    import torch.nn.functional as F

    source, goal = source.float(), goal.float()
    if pairs == "all" or goal.shape[1] == 1:
        return torch.sigmoid(F.cosine_similarity(source.unsqueeze(2), goal.unsqueeze(1), dim=-1)).mean()
    return torch.sigmoid(F.cosine_similarity(source, goal, dim=-1)).mean()


@contrastive_strategy("cosine", "pairwise cosines")
def _cosine(source: torch.Tensor, goal: torch.Tensor, pairs: str) -> torch.Tensor:
    return _mean_sigmoid_cosine(source, goal, pairs)


@contrastive_strategy("cosine_avg", "average the goal states first")
def _cosine_avg(source: torch.Tensor, goal: torch.Tensor, pairs: str) -> torch.Tensor:
    return _mean_sigmoid_cosine(source, goal.mean(dim=1, keepdim=True), pairs)
