import copy

import pytest
import torch
from transformers import AutoModel, AutoModelForSequenceClassification

from goalrm_core.data.io import ArtifactError
from goalrm_core.model.encoding import left_pad
from goalrm_core.model.reward_model import RewardModel, build_value_head, load_reward_model, save_reward_model


@pytest.fixture
def rm(tiny_config):
    torch.manual_seed(0)
    # a private config copy: normalisation settings must not leak between tests
    return RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear").eval()


def right_pad(sequences, pad_id):
    width = max(map(len, sequences))
    ids = torch.tensor([s + [pad_id] * (width - len(s)) for s in sequences])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences])
    return ids, mask


SEQS = [[5, 6, 7, 8, 2], [9, 10, 2], [11, 2, 12, 13, 14, 15, 2]]


def single_rewards(rm, seqs):
    with torch.no_grad():
        return torch.stack([rm(torch.tensor([s]), torch.ones(1, len(s), dtype=torch.long)).reward[0] for s in seqs])


@pytest.mark.parametrize("pad_id", [0, 2], ids=["pad!=eos", "pad==eos"])
def test_pooling_is_right_for_both_padding_sides(rm, pad_id):
    expected = single_rewards(rm, SEQS)
    with torch.no_grad():
        left = rm(*left_pad(SEQS, pad_id)).reward
        right = rm(*right_pad(SEQS, pad_id)).reward
    torch.testing.assert_close(left, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(right, expected, atol=1e-5, rtol=1e-5)


def test_forward_returns_reward_values_and_hidden(rm, tiny_config):
    ids, mask = left_pad(SEQS, 0)
    out = rm(ids, mask)
    assert out.reward.shape == (3,)
    assert out.values.shape == ids.shape
    assert out.hidden.shape == (*ids.shape, tiny_config.hidden_size)
    torch.testing.assert_close(out.values[:, -1], out.reward)  # left padding: the last token is the EOS


def test_value_heads():
    linear = build_value_head(63, "linear")
    assert linear.bias is None
    assert linear.weight.std().item() == pytest.approx(1 / 64, rel=0.35)
    mlp = build_value_head(64, "mlp")
    shapes = [tuple(m.weight.shape) for m in mlp if isinstance(m, torch.nn.Linear)]
    assert shapes == [(32, 64), (32, 32), (64, 32), (1, 64)]
    assert sum(isinstance(m, torch.nn.ReLU) for m in mlp) == 3
    with pytest.raises(ValueError, match="linear, mlp"):
        build_value_head(8, "conv")


@pytest.mark.parametrize("strategy", ["linear", "mlp"])
def test_gradients_reach_backbone_and_head(tiny_config, strategy):
    model = RewardModel(AutoModel.from_config(tiny_config), strategy).train()
    ids, mask = left_pad(SEQS, 0)
    model(ids, mask).reward.sum().backward()
    head_grads = [p.grad for p in model.head.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in head_grads)
    layer_grad = model.backbone.layers[0].self_attn.q_proj.weight.grad
    assert layer_grad is not None and layer_grad.abs().sum() > 0


def test_reward_normalisation_applies_at_inference(rm):
    ids, mask = left_pad(SEQS, 0)
    with torch.no_grad():
        raw = rm(ids, mask).reward
        rm.set_reward_normalization(mean=0.5, std=2.0)
        normed = rm(ids, mask).reward
    torch.testing.assert_close(normed, (raw - 0.5) / 2.0)


@pytest.mark.parametrize("strategy", ["linear", "mlp"])
def test_save_load_roundtrip(tmp_path, rm, tiny_config, tokenizer, strategy):
    model = rm if strategy == "linear" else RewardModel(AutoModel.from_config(tiny_config), "mlp").eval()
    ids, mask = left_pad(SEQS, tokenizer.pad_token_id)
    with torch.no_grad():
        expected = model(ids, mask).reward
    path = save_reward_model(model, tmp_path / "rm", tokenizer, training_args={"seed": 1})
    loaded = load_reward_model(path)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids, mask).reward, expected)
    assert (path / "goalrm.json").exists() and not list(tmp_path.glob(".rm.*"))


def test_linear_rm_loads_as_sequence_classifier(tmp_path, rm, tokenizer):
    path = save_reward_model(rm, tmp_path / "rm", tokenizer)
    hf = AutoModelForSequenceClassification.from_pretrained(path).eval()
    ids, mask = left_pad(SEQS, tokenizer.pad_token_id)
    with torch.no_grad():
        ours = single_rewards(rm, SEQS)
        theirs = torch.stack([hf(torch.tensor([s])).logits[0, 0] for s in SEQS])
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=1e-5)


def test_incomplete_checkpoint_is_reported(tmp_path, rm):
    path = save_reward_model(rm, tmp_path / "rm")
    for f in path.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(ArtifactError, match="incomplete"):
        load_reward_model(path)
    with pytest.raises(ArtifactError, match="goalrm.json missing"):
        load_reward_model(tmp_path)


def test_a_mean_pooled_reward_is_the_response_mean_of_the_values_and_survives_a_save(tmp_path, tiny_config, tokenizer):
    torch.manual_seed(0)
    model = RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear", reward_pool="mean").eval()
    ids, mask = left_pad(SEQS, tokenizer.pad_token_id)
    n = torch.tensor([3, 1, 4])
    with torch.no_grad():
        out = model(ids, mask, n)
    by_hand = torch.stack([out.values[row, -k:].mean() for row, k in enumerate(n.tolist())])
    torch.testing.assert_close(out.reward, by_hand)
    with pytest.raises(ValueError, match="must pass num_actions"):
        model(ids, mask)
    with pytest.raises(ValueError, match="1 to 7 response tokens"):
        model(ids, mask, torch.tensor([3, 0, 4]))
    loaded = load_reward_model(save_reward_model(model, tmp_path / "rm", tokenizer))
    assert loaded.reward_pool == "mean"
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids, mask, n).reward, out.reward)
    with pytest.raises(ValueError, match="no official layout"):
        save_reward_model(model, tmp_path / "official", tokenizer, save_format="official")
    assert not (tmp_path / "official").exists()


def test_a_last_token_reward_ignores_num_actions(rm):
    ids, mask = left_pad(SEQS, 0)
    with torch.no_grad():
        torch.testing.assert_close(rm(ids, mask, torch.tensor([1, 1, 1])).reward, rm(ids, mask).reward)
