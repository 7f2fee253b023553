"""The auxiliary per-token value loss: labels from the rejected response's first error, by hand."""

import copy
import math

import pytest
import torch
from transformers import AutoModel

from goalrm_core.data.preferences import normalise_row
from goalrm_core.model.encoding import PreferenceCollator, encode_preference_rows, error_action
from goalrm_core.model.losses import dense_value_loss
from goalrm_core.model.objective import reward_model_loss
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.train.config import TrainRMConfig


def bce(logit: float, label: float) -> float:
    p = 1 / (1 + math.exp(-logit))
    return -(label * math.log(p) + (1 - label) * math.log(1 - p))


def test_dense_value_loss_by_hand():
    # row 0: a chosen response of 2 tokens (all on track); row 1: a rejected one of 3 tokens whose
    # first error is its token 1; row 2: a rejected one with no known error (left out)
    values = torch.tensor([[5.0, 0.3, -0.2, 0.0], [9.0, 0.5, 1.0, -2.0], [1.0, 1.0, 1.0, 1.0]])
    loss = dense_value_loss(values, torch.tensor([2, 3, 4]), torch.tensor([2, 1, -1]))
    expected = [bce(-0.2, 1), bce(0.0, 1), bce(0.5, 1), bce(1.0, 0), bce(-2.0, 0)]
    assert loss.item() == pytest.approx(sum(expected) / len(expected), rel=1e-6)


def test_dense_value_loss_without_labels_is_zero_and_checks_shapes():
    values = torch.zeros(2, 3)
    assert dense_value_loss(values, torch.tensor([1, 2]), torch.tensor([-1, -1])).item() == 0.0
    with pytest.raises(ValueError, match="exceeds the sequence length"):
        dense_value_loss(values, torch.tensor([1, 4]), torch.tensor([1, 1]))


def test_error_action_counts_the_tokens_before_the_error(tokenizer):
    assert error_action(tokenizer, "3+5=9\n#9", 4, num_actions=10) == 4
    assert error_action(tokenizer, "3+5=9\n#9", 0, num_actions=10) == 0
    assert error_action(tokenizer, "3+5=9\n#9", 8, num_actions=5) == -1  # beyond the tokens kept


def test_pairs_carry_the_error_to_the_collated_batch(tokenizer):
    rows = [
        {"question": "3 +5", "correct": "3+5=8\n#8", "incorrect": "3+5=9\n#9", "first_error_char": 4},
        {"question": "3 +5", "correct": "3+5=8\n#8", "incorrect": "3+5>#9"},
    ]
    items, _ = encode_preference_rows(tokenizer, rows, "toymath", 64)
    assert items[0]["rejected_error_action"] == 4 and "rejected_error_action" not in items[1]
    batch = PreferenceCollator(tokenizer.pad_token_id)(items)
    # chosen rows: every response token is on track; rejected: the error's index, -1 when unknown
    assert batch["error_action"].tolist() == [10, 10, 4, -1]


@pytest.mark.parametrize("bad", [-1, 99, 2.5, True, "4"])
def test_a_bad_error_offset_names_the_row(bad):
    row = {"question": "q", "correct": "a", "incorrect": "bcd", "first_error_char": bad}
    with pytest.raises(ValueError, match="first_error_char"):
        normalise_row(row, "pairs.jsonl:7")
    assert normalise_row({**row, "first_error_char": 3}, "pairs.jsonl:7")["first_error_char"] == 3


def test_the_objective_adds_the_weighted_term_only_when_asked(tokenizer, tiny_config):
    torch.manual_seed(0)
    model = RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear").eval()
    rows = [{"question": "3 +5", "correct": "3+5=8\n#8", "incorrect": "3+5=9\n#9", "first_error_char": 4}] * 2
    batch = PreferenceCollator(tokenizer.pad_token_id)(encode_preference_rows(tokenizer, rows, "toymath", 64)[0])
    off = reward_model_loss(model, batch, TrainRMConfig(pretrain="local"))
    on = reward_model_loss(model, batch, TrainRMConfig(pretrain="local", dense_loss_coef=2.0))
    assert off.dense_loss is None and off.scalars()["dense_loss"] == 0.0
    out = model(batch["input_ids"], batch["attention_mask"])
    expected = 2.0 * dense_value_loss(out.values, batch["num_actions"], batch["error_action"])
    assert on.dense_loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert on.loss.item() == pytest.approx(off.loss.item() + expected.item(), rel=1e-5)


def test_a_process_reward_model_trains_on_the_per_token_labels_alone(tokenizer, tiny_config):
    """--preference_loss_coef 0 with --dense_loss_coef: the objective is the dense term alone (the preference
    loss still reported); both off is one line, since the head would learn nothing."""
    torch.manual_seed(0)
    model = RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear").eval()
    rows = [{"question": "3 +5", "correct": "3+5=8\n#8", "incorrect": "3+5=9\n#9", "first_error_char": 4}] * 2
    batch = PreferenceCollator(tokenizer.pad_token_id)(encode_preference_rows(tokenizer, rows, "toymath", 64)[0])
    prm = reward_model_loss(
        model, batch, TrainRMConfig(pretrain="local", preference_loss_coef=0.0, dense_loss_coef=1.0)
    )
    assert prm.loss.item() == pytest.approx(prm.dense_loss.item(), rel=1e-6) and prm.preference_loss.item() > 0
    half = reward_model_loss(
        model, batch, TrainRMConfig(pretrain="local", preference_loss_coef=0.5, dense_loss_coef=1.0)
    )
    assert half.loss.item() == pytest.approx(0.5 * half.preference_loss.item() + half.dense_loss.item(), rel=1e-5)
    with pytest.raises(ValueError, match="--preference_loss_coef 0 leaves the reward head no signal"):
        TrainRMConfig(pretrain="local", preference_loss_coef=0.0)


def test_the_objective_ranks_pairs_by_the_response_mean_when_the_rm_pools(tokenizer, tiny_config):
    """--reward_pool mean: the preference loss compares each side's mean value over its own response tokens."""
    torch.manual_seed(0)
    model = RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear", reward_pool="mean").eval()
    rows = [
        {"question": "3 +5", "correct": "3+5=8\n#8", "incorrect": "3+5=9\n#9"},
        {"question": "2 *2 +1", "correct": "2*2=4\n4+1=5\n#5", "incorrect": "#4"},
    ]
    batch = PreferenceCollator(tokenizer.pad_token_id)(encode_preference_rows(tokenizer, rows, "toymath", 64)[0])
    out = reward_model_loss(model, batch, TrainRMConfig(pretrain="local", reward_pool="mean"))
    with torch.no_grad():
        values = model(batch["input_ids"], batch["attention_mask"], batch["num_actions"]).values
    means = torch.stack([values[r, -n:].mean() for r, n in enumerate(batch["num_actions"].tolist())])
    torch.testing.assert_close(out.chosen_reward, means[:2])
    torch.testing.assert_close(out.rejected_reward, means[2:])
    assert out.preference_loss.item() == pytest.approx(
        -torch.nn.functional.logsigmoid(means[:2] - means[2:]).mean().item(), rel=1e-5
    )
    with pytest.raises(ValueError, match="--save_format official reads the reward at the last token"):
        TrainRMConfig(pretrain="local", reward_pool="mean", save_format="official")
