"""The training objective of one batch: the preference loss plus, optionally, the contrastive term
and an auxiliary per-token value loss (``dense_loss_coef``; not in the paper).

Shared by the DeepSpeed trainer and by plain-PyTorch loops (tests, benchmarks), so both optimise
exactly the same thing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from goalrm_core.model.diagnostics import hidden_state_stats
from goalrm_core.model.losses import contrastive_goal_loss, dense_value_loss, log_exp_loss, pairwise_loss
from goalrm_core.model.reward_model import RewardModel

if TYPE_CHECKING:  # the config is built above the model; the objective only reads it
    from goalrm_core.train.config import TrainRMConfig


@dataclass
class BatchLoss:
    """One batch's objective (``loss``), its terms and how well it ranks the pairs."""

    #: the objective and its parts, as a metrics row averages them over batches
    LOSS_TERMS: ClassVar[tuple[str, ...]] = ("loss", "preference_loss", "contrastive_loss", "dense_loss")
    #: everything a metrics row reports of a batch, train and eval alike, in the row's order
    TERMS: ClassVar[tuple[str, ...]] = LOSS_TERMS + ("accuracy", "chosen_reward", "rejected_reward")
    #: the terms whose non-finite value stops a run, in the order its error names them
    CHECKED_TERMS: ClassVar[tuple[str, ...]] = ("preference_loss", "contrastive_loss", "loss")

    loss: torch.Tensor
    preference_loss: torch.Tensor
    contrastive_loss: torch.Tensor
    accuracy: torch.Tensor
    chosen_reward: torch.Tensor
    rejected_reward: torch.Tensor
    dense_loss: torch.Tensor | None = None  # the auxiliary per-token term, weighted; None when off
    aux_loss: torch.Tensor | None = (
        None  # a mixture-of-experts backbone's load-balancing term, weighted (in ``loss``); None when off
    )
    #: the chosen responses' state diagnostics (``model.diagnostics.HIDDEN_STATS``), when asked for; else None
    hidden_stats: dict[str, torch.Tensor] | None = None

    def terms(self) -> dict[str, torch.Tensor]:
        """:data:`TERMS` as detached 0-d tensors: ``dense_loss`` 0 when off, the rewards as batch means."""
        derived = {
            "loss": self.loss.detach(),
            "dense_loss": torch.zeros((), device=self.loss.device) if self.dense_loss is None else self.dense_loss,
            "chosen_reward": self.chosen_reward.float().mean(),
            "rejected_reward": self.rejected_reward.float().mean(),
        }
        return {name: derived[name] if name in derived else getattr(self, name) for name in self.TERMS}

    def scalars(self) -> dict[str, float]:
        return {name: value.item() for name, value in self.terms().items()}


def moe_balancing_loss(router_logits, config, attention_mask: torch.Tensor) -> torch.Tensor:
    """The load-balancing loss of a mixture-of-experts backbone (Mixtral's auxiliary loss, what the official
    ``--aux_loss_coef`` weighs) over the tokens ``attention_mask`` keeps, from its per-layer router logits."""
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func  # the MoE models' shared form

    experts = getattr(config, "num_local_experts", None) or getattr(config, "num_experts", None)
    top_k = getattr(config, "num_experts_per_tok", 2)
    return load_balancing_loss_func(tuple(router_logits), experts, top_k, attention_mask)


def reward_model_loss(
    model: RewardModel,
    batch: dict[str, torch.Tensor],
    cfg: TrainRMConfig,
    generator: torch.Generator | None = None,
    steps_taken: int | None = None,
    hidden_stats: bool = False,
) -> BatchLoss:
    """``batch`` comes from :class:`PreferenceCollator`: chosen rows first, then rejected rows; ``cfg`` is the
    run's typed config, read field by field (the contrastive term through :meth:`TrainRMConfig.contrastive_settings`).

    ``steps_taken``: the optimiser steps a training batch comes after, which sets the contrastive weight under
    ``--contrastive_warmup_steps`` (:meth:`TrainRMConfig.contrastive_beta_at`); None (evaluation) is the full β.
    ``hidden_stats``: also return the chosen responses' state diagnostics (``model.diagnostics``, no gradients).

    As the official code's flags: ``margin_loss`` subtracts each pair's ``batch["margin"]`` in the sigmoid
    loss (in place of the constant ``margin``), ``compute_fp32_loss`` computes the preference loss on fp32
    rewards, and ``aux_loss_coef`` adds that weight times a mixture-of-experts backbone's load-balancing
    loss (nothing for a backbone without router logits)."""
    # a batch with cached frozen-layer states (--train_top_layers: goalrm_core.model.top_layers) runs the top layers
    # only
    extra = {"features": batch["features"]} if "features" in batch else {}
    out = model(batch["input_ids"], batch["attention_mask"], batch["num_actions"], **extra)
    half = batch["input_ids"].shape[0] // 2
    chosen, rejected = out.reward[:half], out.reward[half:]
    if cfg.compute_fp32_loss:
        chosen, rejected = chosen.float(), rejected.float()
    if cfg.loss == "logexp":
        preference = log_exp_loss(chosen, rejected)
    elif cfg.margin_loss:
        preference = pairwise_loss(chosen, rejected, batch["margin"].to(chosen.device))
    else:
        preference = pairwise_loss(chosen, rejected, cfg.margin or None)
    contrastive = torch.zeros((), device=preference.device)
    if cfg.reward_model_strategy == "contrastive":
        settings = cfg.contrastive_settings()
        if cfg.contrastive_warmup_steps and steps_taken is not None:
            settings = dataclasses.replace(settings, contrastive_loss_beta=cfg.contrastive_beta_at(steps_taken))
        contrastive = contrastive_goal_loss(
            out.hidden[:half],
            out.hidden[half:],
            batch["num_actions"][:half],
            batch["num_actions"][half:],
            settings,
            generator,
        )
    dense = None
    if cfg.dense_loss_coef > 0:
        dense = cfg.dense_loss_coef * dense_value_loss(out.values, batch["num_actions"], batch["error_action"])
    aux = None
    if cfg.aux_loss_coef > 0 and out.router_logits is not None:
        aux = cfg.aux_loss_coef * moe_balancing_loss(
            out.router_logits, getattr(model, "config", None), batch["attention_mask"]
        )
    return BatchLoss(
        loss=(
            cfg.preference_loss_coef * preference
            + contrastive
            + (dense if dense is not None else 0.0)
            + (aux if aux is not None else 0.0)
        ),
        aux_loss=None if aux is None else aux.detach(),
        dense_loss=None if dense is None else dense.detach(),
        preference_loss=preference.detach(),
        contrastive_loss=contrastive.detach(),
        accuracy=(chosen > rejected).float().mean().detach(),
        chosen_reward=chosen.detach(),
        rejected_reward=rejected.detach(),
        hidden_stats=hidden_state_stats(out.hidden[:half], batch["num_actions"][:half]) if hidden_stats else None,
    )
