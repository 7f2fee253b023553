"""Diagnostics of the states the contrastive term reads, for the trainer's train rows: how large the last-layer
token states are and how many directions they spread over (a collapse of the representation shows as a falling
effective rank).

Everything here runs under ``torch.no_grad`` on detached states and draws no random numbers, so a run that
logs these trains exactly the floats of one that does not.

>>> states = torch.tensor([[3.0, 0.0], [-3.0, 0.0], [0.0, 4.0], [0.0, -4.0]])
>>> round(effective_rank(states).item(), 4)  # two directions, singular values 3·√2 and 4·√2
1.9796
>>> round(effective_rank(states[:2]).item(), 4)  # one line through their mean
1.0
"""

from __future__ import annotations

import torch

#: what :func:`hidden_state_stats` returns, in a train row's order
HIDDEN_STATS = ("hidden_norm", "hidden_effective_rank")


def response_states(hidden: torch.Tensor, num_actions: torch.Tensor) -> torch.Tensor:
    """The response tokens' states of left-padded rows: ``hidden`` (batch, seq, hidden), each row's response its
    last ``num_actions`` positions -> (tokens, hidden), row by row."""
    seq_len = hidden.shape[1]
    n = torch.as_tensor(num_actions, device=hidden.device).long()
    in_response = torch.arange(seq_len, device=hidden.device)[None, :] >= (seq_len - n)[:, None]
    return hidden[in_response]


def effective_rank(states: torch.Tensor) -> torch.Tensor:
    """exp of the entropy of the normalised singular values of ``states`` (tokens, hidden) centred on their mean
    (Roy and Vetterli's effective rank): 1 when every state lies on one line through the mean, the hidden size
    when they spread evenly in every direction, 0 when they are all equal. The singular values are the square
    roots of the eigenvalues of the smaller Gram matrix of the centred states, in float64 (a square root
    magnifies a float32 product's rounding near a zero eigenvalue): a few milliseconds for a batch's thousand
    states of a small model, cheaper than their SVD."""
    x = states.detach().double()
    x = x - x.mean(dim=0, keepdim=True)
    gram = x.T @ x if x.shape[0] >= x.shape[1] else x @ x.T
    singular = torch.linalg.eigvalsh(gram).clamp_min(0).sqrt()
    total = singular.sum()
    p = singular / total.clamp_min(torch.finfo(torch.float64).tiny)
    rank = torch.exp(torch.special.entr(p).sum())
    return torch.where(total > 0, rank, torch.zeros_like(rank))


@torch.no_grad()
def hidden_state_stats(hidden: torch.Tensor, num_actions: torch.Tensor) -> dict[str, torch.Tensor]:
    """:data:`HIDDEN_STATS` of the response tokens' states of ``hidden`` (batch, seq, hidden; left-padded): their
    mean L2 norm and their :func:`effective_rank`, as 0-d float64 tensors."""
    states = response_states(hidden.detach(), num_actions)
    return {"hidden_norm": states.double().norm(dim=-1).mean(), "hidden_effective_rank": effective_rank(states)}
