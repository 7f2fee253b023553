"""The contrastive term equals a plain reference of itself, bit for bit, for every strategy, pair form and
window: the loss and the gradients it sends back into the hidden states.

The reference is the term written out the way it was computed before strategies returned similarity
matrices (when each strategy paired its own states): draw the positions, gather the states, take σ(cos)
of each pair a pair form keeps, average. The values pinned at the end were computed by that earlier code
(84340f8) on fixed inputs, so the reference and the loss cannot drift together.
"""

import itertools

import pytest
import torch
import torch.nn.functional as F

from goalrm_core.model.losses import contrastive_goal_loss, earliest_window_positions, sample_response_positions
from goalrm_core.model.settings import ContrastiveSettings


def _gather(hidden, positions):
    return hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))


def _mean_sigmoid_cos(source, goal, strategy, pairs):
    if strategy == "cosine_avg":
        goal = goal.mean(dim=1, keepdim=True)
    source, goal = source.float(), goal.float()
    if pairs == "all" or goal.shape[1] == 1:  # every source with every goal (or with the one averaged goal)
        return torch.sigmoid(F.cosine_similarity(source.unsqueeze(2), goal.unsqueeze(1), dim=-1)).mean()
    return torch.sigmoid(F.cosine_similarity(source, goal, dim=-1)).mean()  # the k-th source with the k-th goal


def reference_loss(
    chosen, rejected, n_chosen, n_rejected, beta, sim, unsim, strategy, p_source, p_goal, window, pairs, generator
):
    batch, seq_len, _ = chosen.shape
    if window == "latest":
        a = sample_response_positions(n_chosen, seq_len, sim, p_source, generator)
        b = sample_response_positions(n_chosen, seq_len, sim, p_goal, generator)
        pos_source, pos_goal = torch.minimum(a, b), torch.maximum(a, b)
        neg_source = sample_response_positions(n_chosen, seq_len, unsim, p_source, generator)
        neg_goal = sample_response_positions(n_rejected, seq_len, unsim, p_goal, generator)
    else:
        u = torch.rand((batch, 2, sim), generator=generator, dtype=torch.float64).sort(dim=1).values
        pos_source = earliest_window_positions(n_chosen, seq_len, u[:, 0], p_source)
        pos_goal = earliest_window_positions(n_chosen, seq_len, u[:, 1], p_goal)
        u_source = torch.rand((batch, unsim), generator=generator, dtype=torch.float64)
        u_goal = torch.rand((batch, unsim), generator=generator, dtype=torch.float64)
        neg_source = earliest_window_positions(n_chosen, seq_len, u_source, p_source)
        neg_goal = earliest_window_positions(n_rejected, seq_len, u_goal, p_goal)
    pos = _mean_sigmoid_cos(_gather(chosen, pos_source), _gather(chosen, pos_goal), strategy, pairs)
    neg = _mean_sigmoid_cos(_gather(chosen, neg_source), _gather(rejected, neg_goal), strategy, pairs)
    return beta * (-torch.log(pos) - torch.log1p(-neg))


STRATEGIES, PAIRS, WINDOWS = ("cosine", "cosine_avg"), ("all", "matched"), ("earliest", "latest")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("strategy,pairs,window", list(itertools.product(STRATEGIES, PAIRS, WINDOWS)))
def test_the_loss_and_its_gradients_equal_the_reference_bit_for_bit(strategy, pairs, window, dtype):
    g = torch.Generator().manual_seed(11)
    chosen0, rejected0 = torch.randn(4, 23, 32, generator=g).to(dtype), torch.randn(4, 23, 32, generator=g).to(dtype)
    n_chosen, n_rejected = torch.tensor([1, 7, 15, 23]), torch.tensor([20, 2, 9, 11])
    for sim, unsim, p_source, p_goal in ((16, 16, 0.0, 0.0), (5, 7, 0.3, 0.6), (1, 3, 0.0, 0.9)):
        settings = ContrastiveSettings(
            contrastive_strategy=strategy,
            contrastive_loss_beta=0.7,
            sim_samples=sim,
            unsim_samples=unsim,
            source_state_percentile=p_source,
            goal_state_percentile=p_goal,
            contrastive_window=window,
            contrastive_pairs=pairs,
        )
        results = []
        for compute in (
            # called at once, in this iteration: the defaults bind this iteration's values, as the closures read them
            lambda c, r, settings=settings: contrastive_goal_loss(
                c, r, n_chosen, n_rejected, settings, torch.Generator().manual_seed(3)
            ),
            lambda c, r, sim=sim, unsim=unsim, p_source=p_source, p_goal=p_goal: reference_loss(
                c,
                r,
                n_chosen,
                n_rejected,
                0.7,
                sim,
                unsim,
                strategy,
                p_source,
                p_goal,
                window,
                pairs,
                torch.Generator().manual_seed(3),
            ),
        ):
            chosen, rejected = chosen0.clone().requires_grad_(), rejected0.clone().requires_grad_()
            loss = compute(chosen, rejected)
            loss.backward()
            results.append((loss.detach(), chosen.grad, rejected.grad))
        (loss, grad_c, grad_r), (ref, ref_c, ref_r) = results
        assert loss.dtype == ref.dtype and torch.equal(loss, ref), (sim, unsim, loss.item(), ref.item())
        assert torch.equal(grad_c, ref_c) and torch.equal(grad_r, ref_r), (sim, unsim)


# computed by the code before this contract (84340f8), on the inputs below
PINNED = {
    ("cosine", "all", "earliest"): 0.5603067874908447,
    ("cosine", "all", "latest"): 0.6376331448554993,
    ("cosine", "matched", "earliest"): 0.5749483704566956,
    ("cosine", "matched", "latest"): 0.6069153547286987,
    ("cosine_avg", "all", "earliest"): 0.5174678564071655,
    ("cosine_avg", "all", "latest"): 0.6386522054672241,
    ("cosine_avg", "matched", "earliest"): 0.5174678564071655,
    ("cosine_avg", "matched", "latest"): 0.6386522054672241,
}


@pytest.mark.parametrize("strategy,pairs,window", list(PINNED))
def test_the_loss_keeps_the_earlier_codes_values(strategy, pairs, window):
    g = torch.Generator().manual_seed(2024)
    chosen, rejected = torch.randn(3, 10, 8, generator=g), torch.randn(3, 10, 8, generator=g)
    settings = ContrastiveSettings(
        contrastive_strategy=strategy,
        sim_samples=6,
        unsim_samples=4,
        source_state_percentile=0.25,
        goal_state_percentile=0.5,
        contrastive_window=window,
        contrastive_pairs=pairs,
    )
    loss = contrastive_goal_loss(
        chosen, rejected, torch.tensor([4, 10, 1]), torch.tensor([7, 2, 10]), settings, torch.Generator().manual_seed(5)
    )
    assert loss.item() == pytest.approx(PINNED[strategy, pairs, window], abs=1e-6)
