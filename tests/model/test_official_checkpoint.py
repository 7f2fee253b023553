"""Checkpoints cross both ways between goalrm and the official code, without importing the official
code: ``tests/official_layout.py`` is its reward model built by hand from its source."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaModel

from goalrm_core.data.io import ArtifactError
from goalrm_core.model.reward_model import (
    RewardModel, build_value_head, checkpoint_format, load_reward_model, save_reward_model,
)
from official_layout import OfficialRM, official_head

SEQS = [[5, 6, 7, 8, 2], [9, 10, 2], [11, 2, 12, 13, 14, 15, 2]]


def right_pad(sequences, pad_id=0):
    width = max(map(len, sequences))
    ids = torch.tensor([s + [pad_id] * (width - len(s)) for s in sequences])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences])
    return ids, mask


def goalrm_rewards(model, ids, mask):
    with torch.no_grad():
        return model(ids, mask).reward


def official_rewards(model, ids, mask):
    with torch.no_grad():
        return model(ids, mask)


@pytest.mark.parametrize("strategy", ["linear", "mlp"])
def test_goalrm_saves_what_the_official_loader_reads(tmp_path, tiny_config, tokenizer, strategy):
    torch.manual_seed(0)
    ours = RewardModel(LlamaModel(tiny_config.__class__.from_dict(tiny_config.to_dict())), strategy, mlp_head="official").eval()
    ours.set_reward_normalization(0.25, 1.5, enabled=True)
    path = save_reward_model(ours, tmp_path / "rm-vhs-mlp", tokenizer, save_format="official")

    fields = json.loads((path / "config.json").read_text())
    assert (fields["_value_head_strategy"], fields["mean"], fields["std"], fields["normalize_reward"]) == (strategy, 0.25, 1.5, True)
    assert "reward_mean" not in fields and "value_head_strategy" not in fields
    names = {k for f in path.glob("*.safetensors") for k in load_file(str(f))}
    assert ("value_head.weight" if strategy == "linear" else "value_head.6.weight") in names
    assert not any(k.startswith("score.") for k in names) and "value_head.6.bias" not in names
    assert checkpoint_format(path) == "official"

    ids, mask = right_pad(SEQS)
    theirs = OfficialRM.from_folder(path)
    torch.testing.assert_close(official_rewards(theirs, ids, mask), goalrm_rewards(ours, ids, mask), atol=1e-6, rtol=1e-6)
    back = load_reward_model(path)  # and goalrm reads its own export back
    torch.testing.assert_close(goalrm_rewards(back, ids, mask), goalrm_rewards(ours, ids, mask), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("strategy", ["linear", "mlp"])
def test_goalrm_reads_a_folder_the_official_code_wrote(tmp_path, tiny_config, strategy, capsys):
    config = tiny_config.__class__.from_dict(tiny_config.to_dict())
    config.normalize_reward, config.mean, config.std = True, -0.5, 2.0
    torch.manual_seed(1)
    theirs = OfficialRM(config, strategy).eval()
    with torch.no_grad():
        for p in theirs.value_head.parameters():  # a trained head, far from any fresh init
            p.normal_(std=0.3)
    folder = tmp_path / "official_rm"
    folder.mkdir()
    fields = {**config.to_dict(), "_value_head_strategy": strategy, "normalize_reward": True, "mean": -0.5, "std": 2.0}
    (folder / "config.json").write_text(json.dumps(fields))
    save_file({k: v.contiguous() for k, v in theirs.state_dict().items()}, str(folder / "model.safetensors"), metadata={"format": "pt"})

    ours = load_reward_model(folder)
    assert "official code's format" in capsys.readouterr().err
    assert ours.value_head_strategy == strategy
    ids, mask = right_pad(SEQS)
    torch.testing.assert_close(goalrm_rewards(ours, ids, mask), official_rewards(theirs, ids, mask), atol=1e-6, rtol=1e-6)


def test_a_folder_in_neither_format_is_one_line(tiny_policy_dir):
    with pytest.raises(ArtifactError) as err:
        load_reward_model(tiny_policy_dir)
    message = str(err.value)
    assert "neither a goalrm reward model" in message and str(tiny_policy_dir) in message and "\n" not in message


def test_a_head_that_contradicts_its_config_is_refused(tmp_path, tiny_config):
    torch.manual_seed(0)
    path = save_reward_model(RewardModel(LlamaModel(tiny_config), "linear"), tmp_path / "rm", save_format="official")
    (path / "goalrm.json").unlink()
    fields = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**fields, "_value_head_strategy": "mlp"}))
    with pytest.raises(ArtifactError, match="_value_head_strategy is 'mlp' but the weights hold a linear head"):
        load_reward_model(path)


def test_goalrm_mlp_head_has_no_official_form(tmp_path, tiny_config):
    model = RewardModel(LlamaModel(tiny_config), "mlp")  # mlp_head goalrm: a bias on the last layer
    with pytest.raises(ValueError, match="--mlp_head official"):
        save_reward_model(model, tmp_path / "rm", save_format="official")
    assert not (tmp_path / "rm").exists()


def test_official_mlp_head_draws_as_the_official_init(tiny_config):
    hidden = 24
    torch.manual_seed(3)
    expected = official_head(hidden, "mlp")  # then init_value_head's draws, in its order
    expected[0].weight.data.normal_(mean=0.0, std=1 / (hidden + 1))
    expected[2].weight.data.normal_(mean=0.0, std=1 / (hidden // 2 + 1))
    expected[4].weight.data.normal_(mean=0.0, std=1 / (hidden // 2 + 1))
    expected[6].weight.data.normal_(mean=0.0, std=1 / (hidden + 1))
    torch.manual_seed(3)
    head = build_value_head(hidden, "mlp", mlp_head="official")
    assert head[6].bias is None
    assert head.state_dict().keys() == expected.state_dict().keys()
    for name, tensor in expected.state_dict().items():
        assert torch.equal(head.state_dict()[name], tensor), name
    assert build_value_head(hidden, "mlp")[6].bias is not None  # the default is unchanged


def test_eval_rm_and_get_representation_read_an_official_folder(tmp_path, tiny_config, tokenizer):
    from goalrm_core.cli.eval_rm import main as eval_rm_main
    from goalrm_core.cli.get_representation import main as get_representation_main
    from goalrm_core.data.io import read_jsonl, write_jsonl

    torch.manual_seed(4)
    theirs = OfficialRM(tiny_config, "linear").eval()
    folder = tmp_path / "official_rm"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**tiny_config.to_dict(), "_value_head_strategy": "linear", "normalize_reward": False}))
    save_file({k: v.contiguous() for k, v in theirs.state_dict().items()}, str(folder / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save_pretrained(folder)  # the official save_model writes the tokenizer beside the weights
    write_jsonl(tmp_path / "pairs.jsonl", [{"question": "1 +2", "correct": "1+2=3\n#3", "incorrect": "1+2=4\n#4"}])
    write_jsonl(tmp_path / "gens" / "toy" / "greedy.jsonl", [{"question": "1 +2", "generated_solution": "1+2=3\n#3", "is_correct": True}])
    assert get_representation_main(["--dataset-path", str(tmp_path / "pairs.jsonl"), "--reward-model-path", str(folder),
                                    "--save-dir", str(tmp_path / "rep"), "--template", "toymath"]) == 0
    goal = next((tmp_path / "rep").glob("*.npy"))
    assert eval_rm_main(["--completions_data_path", str(tmp_path / "gens"), "--reward_model_path", str(folder), "--benchmarks", "toy",
                         "--template", "toymath", "--save_dir", str(tmp_path / "eval"), "--goal_state_path", str(goal)]) == 0
    scored = read_jsonl(tmp_path / "eval" / "official_rm" / "toy" / "greedy" / "output-metrics-dense.jsonl")
    ids = torch.tensor([tokenizer("1 +2\n1+2=3\n#3")["input_ids"]])
    assert scored[0]["reward"] == pytest.approx(official_rewards(theirs, ids, torch.ones_like(ids))[0].item(), abs=1e-5)


def test_an_official_folder_with_pickled_weights_only_is_named_so(tmp_path, tiny_config):
    folder = tmp_path / "official_rm"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**tiny_config.to_dict(), "_value_head_strategy": "linear"}))
    (folder / "pytorch_model.bin").write_bytes(b"never unpickled")
    with pytest.raises(ArtifactError, match=r"only pickled \(pytorch_model\.bin\)"):
        load_reward_model(folder)
