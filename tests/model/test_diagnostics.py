"""The train rows' state diagnostics (``model.diagnostics``): the effective rank against a plain SVD, the response
tokens they read, and that asking for them changes no float of the objective or of its gradients."""

import copy

import pytest
import torch
from transformers import AutoModel

from goalrm_core.model.diagnostics import HIDDEN_STATS, effective_rank, hidden_state_stats, response_states
from goalrm_core.model.encoding import PreferenceCollator, encode_preference_rows
from goalrm_core.model.objective import reward_model_loss
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.tasks.toymath.tiny_run import tiny_pairs
from goalrm_core.train.config import TrainRMConfig


def svd_effective_rank(states: torch.Tensor) -> float:
    """The definition, written out: exp of the entropy of the centred states' normalised singular values."""
    x = states.double() - states.double().mean(dim=0)
    s = torch.linalg.svdvals(x)
    p = s[s > 0] / s.sum()
    return torch.exp(-(p * p.log()).sum()).item()


@pytest.mark.parametrize("shape", [(200, 16), (5, 16), (64, 64)])
def test_the_effective_rank_is_the_svd_definition(shape):
    states = torch.randn(*shape, generator=torch.Generator().manual_seed(0)) * torch.linspace(0.1, 3, shape[1])
    assert effective_rank(states).item() == pytest.approx(svd_effective_rank(states), rel=1e-6)
    assert 1.0 <= effective_rank(states).item() <= min(shape[0] - 1, shape[1])


def test_collapsed_states_have_rank_one_and_equal_states_rank_zero():
    direction = torch.tensor([1.0, -2.0, 0.5])
    on_a_line = torch.arange(6.0)[:, None] * direction + 7.0
    assert effective_rank(on_a_line).item() == pytest.approx(1.0, abs=1e-6)
    assert effective_rank(torch.ones(4, 3)).item() == 0.0
    assert effective_rank(torch.randn(1, 3)).item() == 0.0


def test_the_stats_read_the_response_tokens_only():
    hidden = torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(1))
    num_actions = torch.tensor([2, 3])
    states = response_states(hidden, num_actions)
    assert torch.equal(states, torch.cat([hidden[0, 3:], hidden[1, 2:]]))
    stats = hidden_state_stats(hidden, num_actions)
    assert tuple(stats) == HIDDEN_STATS
    assert stats["hidden_norm"].item() == pytest.approx(states.double().norm(dim=-1).mean().item(), rel=1e-12)
    changed = hidden.clone()
    changed[0, :3] = 100.0  # the prompt and padding of row 0, and of row 1 below
    changed[1, :2] = -50.0
    assert {k: v.item() for k, v in hidden_state_stats(changed, num_actions).items()} == {
        k: v.item() for k, v in stats.items()
    }


@pytest.mark.parametrize("strategy", ["vanilla", "contrastive"])
def test_asking_for_the_stats_changes_no_float_of_the_objective_or_its_gradients(tokenizer, tiny_config, strategy):
    torch.manual_seed(0)
    model = RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear").train()
    items, _ = encode_preference_rows(tokenizer, tiny_pairs(6, seed=2), "toymath", 64)
    batch = PreferenceCollator(tokenizer.pad_token_id)(items)
    cfg = TrainRMConfig(pretrain="local", reward_model_strategy=strategy, sim_samples=4, unsim_samples=4)

    def run(hidden_stats: bool):
        model.zero_grad()
        generator = torch.Generator().manual_seed(3)
        out = reward_model_loss(model, batch, cfg, generator, steps_taken=2, hidden_stats=hidden_stats)
        out.loss.backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        return out, grads, generator.get_state()

    plain, plain_grads, plain_rng = run(False)
    watched, watched_grads, watched_rng = run(True)
    assert plain.hidden_stats is None
    assert all(torch.equal(plain.terms()[k], watched.terms()[k]) for k in plain.terms())
    assert plain_grads.keys() == watched_grads.keys()
    assert all(torch.equal(plain_grads[k], watched_grads[k]) for k in plain_grads)
    assert torch.equal(plain_rng, watched_rng)  # no random draw either
    stats = {k: v.item() for k, v in watched.hidden_stats.items()}
    assert set(stats) == set(HIDDEN_STATS) and all(v > 0 and v == v for v in stats.values())
