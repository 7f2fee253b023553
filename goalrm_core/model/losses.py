"""Reward-model losses. Imports torch only: usable without DeepSpeed or flash-attn.

Conventions: hidden states are (batch, seq, hidden) and left-padded, so every response ends at the
last position; ``num_actions`` is each response's length in tokens (including its EOS).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CONTRASTIVE_STRATEGIES = ("cosine", "cosine_avg")


def pairwise_loss(chosen_reward: torch.Tensor, rejected_reward: torch.Tensor, margin: torch.Tensor | float | None = None) -> torch.Tensor:
    """Bradley–Terry loss ``-log σ(r_chosen − r_rejected − margin)``, averaged over the batch."""
    diff = chosen_reward - rejected_reward
    if margin is not None:
        diff = diff - margin
    return -F.logsigmoid(diff).mean()


def log_exp_loss(chosen_reward: torch.Tensor, rejected_reward: torch.Tensor) -> torch.Tensor:
    """``log(1 + exp(r_rejected − r_chosen))``; equal to the pairwise loss, kept for the seed's flag."""
    return F.softplus(rejected_reward - chosen_reward).mean()


def _check_num_actions(name: str, num_actions: torch.Tensor, seq_len: int, batch: int) -> torch.Tensor:
    num_actions = torch.as_tensor(num_actions).long()
    if num_actions.shape != (batch,):
        raise ValueError(f"{name} must have shape ({batch},), got {tuple(num_actions.shape)}")
    for row, n in enumerate(num_actions.tolist()):
        if n < 1:
            raise ValueError(f"{name}[{row}] = {n}: row {row} has an empty response; every response needs >= 1 token")
        if n > seq_len:
            raise ValueError(f"{name}[{row}] = {n} exceeds the sequence length {seq_len}")
    return num_actions


def sample_response_positions(
    num_actions: torch.Tensor,
    seq_len: int,
    num_samples: int,
    percentile: float,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Positions drawn uniformly over the last part of each (left-padded) response.

    ``percentile`` p restricts draws to the last ``ceil(n·(1−p))`` tokens (at least one), counted back
    from the end; p = 0 means the whole response. Returns (batch, num_samples) absolute positions.
    """
    if not 0.0 <= percentile < 1.0:
        raise ValueError(f"percentile must be in [0, 1), got {percentile}")
    span = torch.ceil(num_actions.double() * (1.0 - percentile)).long().clamp(min=1)
    u = torch.rand((num_actions.shape[0], num_samples), generator=generator, dtype=torch.float64)
    back = (u * span.unsqueeze(1)).long().clamp(max=(span - 1).unsqueeze(1))  # 0 = last token
    return (seq_len - 1 - back).to(num_actions.device)


def _gather(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """hidden (B, S, H), positions (B, K) -> (B, K, H)."""
    index = positions.to(hidden.device).unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
    return hidden.gather(1, index)


def contrastive_goal_loss(
    chosen_hidden: torch.Tensor,
    rejected_hidden: torch.Tensor,
    chosen_num_actions: torch.Tensor,
    rejected_num_actions: torch.Tensor,
    *,
    beta: float = 0.5,
    sim_samples: int = 16,
    unsim_samples: int = 16,
    strategy: str = "cosine",
    source_state_percentile: float = 0.0,
    goal_state_percentile: float = 0.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The goal-conditioned contrastive term.

    Positive pairs: a source state and a later goal state, both in the preferred response (the two
    draws are ordered so the source never comes after the goal). Negative pairs: a source state in
    the preferred response and a goal state in the dispreferred one. Each pair scores ``σ(cos)``;
    the loss is ``β·[−log mean σ(cos_pos) − log(1 − mean σ(cos_neg))]``. With ``cosine_avg`` the
    sampled goal states of each row are averaged into one goal before comparing.
    """
    if strategy not in CONTRASTIVE_STRATEGIES:
        raise ValueError(f"unknown contrastive_strategy {strategy!r}; valid: {', '.join(CONTRASTIVE_STRATEGIES)}")
    if chosen_hidden.dim() != 3 or chosen_hidden.shape != rejected_hidden.shape:
        raise ValueError(
            "chosen_hidden and rejected_hidden must both be (batch, seq, hidden) with equal shapes; "
            f"got {tuple(chosen_hidden.shape)} and {tuple(rejected_hidden.shape)}"
        )
    batch, seq_len, _ = chosen_hidden.shape
    chosen_n = _check_num_actions("chosen_num_actions", chosen_num_actions, seq_len, batch).cpu()
    rejected_n = _check_num_actions("rejected_num_actions", rejected_num_actions, seq_len, batch).cpu()

    a = sample_response_positions(chosen_n, seq_len, sim_samples, source_state_percentile, generator)
    b = sample_response_positions(chosen_n, seq_len, sim_samples, goal_state_percentile, generator)
    pos_source, pos_goal = torch.minimum(a, b), torch.maximum(a, b)
    neg_source = sample_response_positions(chosen_n, seq_len, unsim_samples, source_state_percentile, generator)
    neg_goal = sample_response_positions(rejected_n, seq_len, unsim_samples, goal_state_percentile, generator)

    source_pos = _gather(chosen_hidden, pos_source)
    goal_pos = _gather(chosen_hidden, pos_goal)
    source_neg = _gather(chosen_hidden, neg_source)
    goal_neg = _gather(rejected_hidden, neg_goal)
    if strategy == "cosine_avg":
        goal_pos = goal_pos.mean(dim=1, keepdim=True)
        goal_neg = goal_neg.mean(dim=1, keepdim=True)

    sim_pos = torch.sigmoid(F.cosine_similarity(source_pos.float(), goal_pos.float(), dim=-1)).mean()
    sim_neg = torch.sigmoid(F.cosine_similarity(source_neg.float(), goal_neg.float(), dim=-1)).mean()
    return beta * (-torch.log(sim_pos) - torch.log1p(-sim_neg))
