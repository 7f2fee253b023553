"""A tiny RM learns a trivially separable preference set with both strategies (plain PyTorch loop
over the same objective the DeepSpeed trainer uses)."""

import copy

import pytest
import torch
from transformers import AutoModel

from goalrm_core.model.encoding import PreferenceCollator, encode_preference_rows
from goalrm_core.model.objective import reward_model_loss
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.train.config import TrainRMConfig


def separable_pairs(n, seed=0):
    """Preferred responses end in '#' lines of 'a's, dispreferred ones in 'b's: trivially separable."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        q = "".join(str(d) for d in torch.randint(0, 10, (4,), generator=g).tolist())
        k = int(torch.randint(2, 6, (1,), generator=g))
        rows.append({"question": q, "correct": "a" * k, "incorrect": "b" * k})
    return rows


@pytest.mark.parametrize("strategy", ["vanilla", "contrastive"])
def test_tiny_rm_learns_separable_preferences(tokenizer, tiny_config, strategy):
    torch.manual_seed(0)
    cfg = TrainRMConfig(pretrain="local", reward_model_strategy=strategy, sim_samples=4, unsim_samples=4)
    model = RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear").train()
    before = copy.deepcopy(model.state_dict())
    collate = PreferenceCollator(tokenizer.pad_token_id)
    train_items, _ = encode_preference_rows(tokenizer, separable_pairs(256, seed=1), "toymath", 64)
    test_items, _ = encode_preference_rows(tokenizer, separable_pairs(64, seed=2), "toymath", 64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    for step in range(50):
        batch = collate([train_items[(step * 8 + i) % len(train_items)] for i in range(8)])
        loss = reward_model_loss(model, batch, cfg, generator).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    model.eval()
    with torch.no_grad():
        accuracy = reward_model_loss(model, collate(test_items), cfg, generator).accuracy.item()
    assert accuracy > 0.9
    after = model.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert "score.weight" in changed
    assert any(k.startswith("model.layers.") for k in changed)
