"""Reward-model losses. Imports torch only: usable without DeepSpeed or flash-attn.

Conventions: hidden states are (batch, seq, hidden) and left-padded, so every response ends at the
last position; ``num_actions`` is each response's length in tokens (including its EOS).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from goalrm_core.choices import PAIR_FORMS, PERCENTILE_WINDOWS  # noqa: F401  (re-exported: the forms this loss takes)
from goalrm_core.model.settings import ContrastiveSettings
from goalrm_core.model.strategies import CONTRASTIVE_STRATEGIES

DEFAULT_CONTRASTIVE_SETTINGS = ContrastiveSettings()  # the default of contrastive_goal_loss


def pairwise_loss(
    chosen_reward: torch.Tensor, rejected_reward: torch.Tensor, margin: torch.Tensor | float | None = None
) -> torch.Tensor:
    """Bradley–Terry loss ``-log σ(r_chosen − r_rejected − margin)``, averaged over the batch."""
    diff = chosen_reward - rejected_reward
    if margin is not None:
        diff = diff - margin
    return -F.logsigmoid(diff).mean()


def log_exp_loss(chosen_reward: torch.Tensor, rejected_reward: torch.Tensor) -> torch.Tensor:
    """``log(1 + exp(r_rejected − r_chosen))``; equal to the pairwise loss, kept for the official code's flag."""
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
    """Positions drawn uniformly over the **last** part of each (left-padded) response (the
    ``latest`` window).

    ``percentile`` p restricts draws to the last ``ceil(n·(1−p))`` tokens (at least one), counted back
    from the end; p = 0 means the whole response. Returns (batch, num_samples) absolute positions.
    """
    _check_percentile(percentile)
    span = torch.ceil(num_actions.double() * (1.0 - percentile)).long().clamp(min=1)
    u = torch.rand((num_actions.shape[0], num_samples), generator=generator, dtype=torch.float64)
    back = (u * span.unsqueeze(1)).long().clamp(max=(span - 1).unsqueeze(1))  # 0 = last token
    return (seq_len - 1 - back).to(num_actions.device)


def earliest_window_positions(
    num_actions: torch.Tensor, seq_len: int, u: torch.Tensor, percentile: float
) -> torch.Tensor:
    """The official code's positions for uniform draws ``u`` (batch, k) in [0, 1) (the ``earliest`` window).

    A draw becomes the fraction ``f = (p − 1)·u + 1`` in (p, 1] of the response, counted back from
    its end: the token ``floor(f·n + 1)`` places before the end of the sequence (clamped to it). With
    p > 0 the positions fall in the **earliest** (1−p) of the response; a larger ``u`` gives a later
    position. p = 0 covers the whole response.
    """
    _check_percentile(percentile)
    fraction = (percentile - 1.0) * u.double() + 1.0
    back = torch.floor(fraction * num_actions.double().unsqueeze(1) + 1).long().clamp(0, seq_len - 1)
    return ((-back) % seq_len).to(num_actions.device)  # Python's negative indexing, as the official code indexes


def _check_percentile(percentile: float) -> None:
    if not 0.0 <= percentile < 1.0:
        raise ValueError(f"percentile must be in [0, 1), got {percentile}")


def _gather(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """hidden (B, S, H), positions (B, K) -> (B, K, H)."""
    index = positions.to(hidden.device).unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
    return hidden.gather(1, index)


def mean_pair_score(source: torch.Tensor, goal: torch.Tensor, settings: ContrastiveSettings) -> torch.Tensor:
    """Mean σ(similarity) over the (source, goal) pairs of ``settings.contrastive_pairs``, for a row's sampled
    ``source`` and ``goal`` states (batch, k, hidden), as the strategy ``settings.contrastive_strategy`` scores them.

    The loss does the pairing, never the strategy: ``all`` hands the strategy every row's states and averages
    its whole (batch, S, G) matrix (every source with every goal); ``matched`` hands it each k-th
    (source, goal) pair as a row of its own, so its (batch·k, 1, 1) matrix holds the matched pairs only. A
    strategy with ``average_goals`` gets each row's mean goal state (G = 1), paired with every source either way.

    >>> source, goal = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]), torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]])
    >>> [
    ...     round(mean_pair_score(source, goal, ContrastiveSettings(contrastive_pairs=p)).item(), 4)
    ...     for p in ("matched", "all")
    ... ]
    [0.6155, 0.5]
    """
    strategy = CONTRASTIVE_STRATEGIES[settings.contrastive_strategy]
    if strategy.average_goals:
        goal = goal.mean(dim=1, keepdim=True)  # in the states' own dtype, before the float32 the strategy gets
    if settings.contrastive_pairs == "matched" and goal.shape[1] > 1:
        if source.shape != goal.shape:
            raise ValueError(
                f"matched pairs need as many sources as goals per row: got {tuple(source.shape)} and "
                f"{tuple(goal.shape)}"
            )
        source, goal = source.reshape(-1, 1, source.shape[-1]), goal.reshape(-1, 1, goal.shape[-1])
    similarity = strategy.similarity(source.float(), goal.float(), **settings.options)
    expected = (source.shape[0], source.shape[1], goal.shape[1])
    if tuple(similarity.shape) != expected:
        raise ValueError(
            f"contrastive strategy {settings.contrastive_strategy!r} returned shape {tuple(similarity.shape)}, "
            f"expected {expected}: a strategy scores every source with every goal of its row "
            "(rows, sources, goals), and the loss pairs them"
        )
    return torch.sigmoid(similarity).mean()


def contrastive_goal_loss(
    chosen_hidden: torch.Tensor,
    rejected_hidden: torch.Tensor,
    chosen_num_actions: torch.Tensor,
    rejected_num_actions: torch.Tensor,
    settings: ContrastiveSettings = DEFAULT_CONTRASTIVE_SETTINGS,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The goal-conditioned contrastive term, as ``settings`` (a :class:`ContrastiveSettings`) sets it.

    Positive pairs: a source state and a later goal state, both in the preferred response (the two
    draws are ordered so the source never comes after the goal). Negative pairs: a source state in
    the preferred response and a goal state in the dispreferred one. The strategy
    (``contrastive_strategy``, registered in ``model.strategies``, with its ``options``) gives the
    similarity of a source with a goal; the loss chooses which pairs it scores (``contrastive_pairs``,
    see `mean_pair_score`) and is
    ``β·[−log mean σ(sim_pos) − log(1 − mean σ(sim_neg))]``, β = ``contrastive_loss_beta``.

    Two choices the official code makes, each with the project's earlier form as an option:

    * ``contrastive_window``: where a percentile p > 0 draws from: ``earliest`` (official; see
      `earliest_window_positions`) or ``latest`` (the last (1−p) of the response; see
      `sample_response_positions`). With p = 0 both draw from the whole response.
    * ``contrastive_pairs``: ``all`` (official) averages over every (source, goal) combination of the
      draws, S×S for positives and U×U for negatives; ``matched`` pairs the k-th source with the k-th goal.

    A stabiliser, not in the paper: ``contrastive_stop_gradient`` ``goal`` detaches every goal state (the
    positives' later states and the negatives' dispreferred ones), so the term's value is the same and its
    gradient reaches the states through the sources only.
    """
    if chosen_hidden.dim() != 3 or chosen_hidden.shape != rejected_hidden.shape:
        raise ValueError(
            "chosen_hidden and rejected_hidden must both be (batch, seq, hidden) with equal shapes; "
            f"got {tuple(chosen_hidden.shape)} and {tuple(rejected_hidden.shape)}"
        )
    batch, seq_len, _ = chosen_hidden.shape
    chosen_n = _check_num_actions("chosen_num_actions", chosen_num_actions, seq_len, batch).cpu()
    rejected_n = _check_num_actions("rejected_num_actions", rejected_num_actions, seq_len, batch).cpu()
    sim_samples, unsim_samples = settings.sim_samples, settings.unsim_samples
    source_p, goal_p = settings.source_state_percentile, settings.goal_state_percentile

    if settings.contrastive_window == "latest":
        a = sample_response_positions(chosen_n, seq_len, sim_samples, source_p, generator)
        b = sample_response_positions(chosen_n, seq_len, sim_samples, goal_p, generator)
        pos_source, pos_goal = torch.minimum(a, b), torch.maximum(a, b)
        neg_source = sample_response_positions(chosen_n, seq_len, unsim_samples, source_p, generator)
        neg_goal = sample_response_positions(rejected_n, seq_len, unsim_samples, goal_p, generator)
    else:
        # one sorted pair of draws per sample: the smaller is the source's, which lies earlier
        u = torch.rand((batch, 2, sim_samples), generator=generator, dtype=torch.float64).sort(dim=1).values
        pos_source = earliest_window_positions(chosen_n, seq_len, u[:, 0], source_p)
        pos_goal = earliest_window_positions(chosen_n, seq_len, u[:, 1], goal_p)
        u_source = torch.rand((batch, unsim_samples), generator=generator, dtype=torch.float64)
        u_goal = torch.rand((batch, unsim_samples), generator=generator, dtype=torch.float64)
        neg_source = earliest_window_positions(chosen_n, seq_len, u_source, source_p)
        neg_goal = earliest_window_positions(rejected_n, seq_len, u_goal, goal_p)

    chosen_goals, rejected_goals = chosen_hidden, rejected_hidden
    if settings.contrastive_stop_gradient == "goal":  # the same values, no gradient through the goal states
        chosen_goals, rejected_goals = chosen_hidden.detach(), rejected_hidden.detach()
    pos = mean_pair_score(_gather(chosen_hidden, pos_source), _gather(chosen_goals, pos_goal), settings)
    neg = mean_pair_score(_gather(chosen_hidden, neg_source), _gather(rejected_goals, neg_goal), settings)
    return settings.contrastive_loss_beta * (-torch.log(pos) - torch.log1p(-neg))


def dense_value_loss(values: torch.Tensor, num_actions: torch.Tensor, error_action: torch.Tensor) -> torch.Tensor:
    """Per-token labels for the value head (an auxiliary loss, not the paper's): the value at each
    response token is a logit of "this prefix is still on track", labelled 1 before the response's
    first error and 0 from it on (a chosen response has none: ``error_action == num_actions``).

    Response tokens are the last ``num_actions`` of each left-padded row, as in the contrastive term.
    Rows whose error position is unknown (``error_action < 0``) are left out; the mean is over every
    labelled token of the batch.

    >>> values = torch.tensor([[0.0, 9.0, 9.0], [0.0, 9.0, -9.0]])
    >>> round(dense_value_loss(values, torch.tensor([2, 2]), torch.tensor([2, 1])).item(), 4)
    0.0001
    """
    batch, seq_len = values.shape
    num_actions = _check_num_actions("num_actions", num_actions, seq_len, batch).to(values.device)
    error_action = torch.as_tensor(error_action).long().to(values.device)
    index = (
        torch.arange(seq_len, device=values.device)[None, :] - (seq_len - num_actions)[:, None]
    )  # < 0: prompt or pad
    labelled = (index >= 0) & (error_action >= 0)[:, None]
    if not labelled.any():
        return values.new_zeros(())
    on_track = (index < error_action[:, None]).to(values.dtype)
    return F.binary_cross_entropy_with_logits(values.float()[labelled], on_track.float()[labelled])
