"""Checkpoints cross both ways between goalrm and the official code, without importing the official
code: ``tests/official_layout.py`` is its reward model built by hand from its source."""

import json

import pytest
import torch
from official_layout import BF16_REWARD_TOL, OfficialRM, official_head
from safetensors.torch import load_file, save_file
from transformers import LlamaModel

from goalrm_core.data.io import ArtifactError
from goalrm_core.model.reward_model import (
    RewardModel,
    build_value_head,
    checkpoint_format,
    load_reward_model,
    save_reward_model,
)

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
    ours = RewardModel(
        LlamaModel(tiny_config.__class__.from_dict(tiny_config.to_dict())), strategy, mlp_head="official"
    ).eval()
    ours.set_reward_normalization(0.25, 1.5, enabled=True)
    path = save_reward_model(
        ours, tmp_path / f"rm-vhs-{strategy}", tokenizer, save_format="official"
    )  # eval_rm.py's rule

    fields = json.loads((path / "config.json").read_text())
    assert (fields["_value_head_strategy"], fields["mean"], fields["std"], fields["normalize_reward"]) == (
        strategy,
        0.25,
        1.5,
        True,
    )
    assert "reward_mean" not in fields and "value_head_strategy" not in fields
    names = {k for f in path.glob("*.safetensors") for k in load_file(str(f))}
    assert ("value_head.weight" if strategy == "linear" else "value_head.6.weight") in names
    assert not any(k.startswith("score.") for k in names) and "value_head.6.bias" not in names
    assert checkpoint_format(path) == "official"

    ids, mask = right_pad(SEQS)
    theirs = OfficialRM.from_folder(path)
    torch.testing.assert_close(
        official_rewards(theirs, ids, mask), goalrm_rewards(ours, ids, mask), atol=1e-6, rtol=1e-6
    )
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
    save_file(
        {k: v.contiguous() for k, v in theirs.state_dict().items()},
        str(folder / "model.safetensors"),
        metadata={"format": "pt"},
    )

    ours = load_reward_model(folder)
    assert "official code's format" in capsys.readouterr().err
    assert ours.value_head_strategy == strategy
    ids, mask = right_pad(SEQS)
    torch.testing.assert_close(
        goalrm_rewards(ours, ids, mask), official_rewards(theirs, ids, mask), atol=1e-6, rtol=1e-6
    )


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
    (folder / "config.json").write_text(
        json.dumps({**tiny_config.to_dict(), "_value_head_strategy": "linear", "normalize_reward": False})
    )
    save_file(
        {k: v.contiguous() for k, v in theirs.state_dict().items()},
        str(folder / "model.safetensors"),
        metadata={"format": "pt"},
    )
    tokenizer.save_pretrained(folder)  # the official save_model writes the tokenizer beside the weights
    write_jsonl(tmp_path / "pairs.jsonl", [{"question": "1 +2", "correct": "1+2=3\n#3", "incorrect": "1+2=4\n#4"}])
    write_jsonl(
        tmp_path / "gens" / "toy" / "greedy.jsonl",
        [{"question": "1 +2", "generated_solution": "1+2=3\n#3", "is_correct": True}],
    )
    assert (
        get_representation_main(
            [
                "--dataset-path",
                str(tmp_path / "pairs.jsonl"),
                "--reward-model-path",
                str(folder),
                "--save-dir",
                str(tmp_path / "rep"),
                "--template",
                "toymath",
            ]
        )
        == 0
    )
    goal = next((tmp_path / "rep").glob("*.npy"))
    assert (
        eval_rm_main(
            [
                "--completions_data_path",
                str(tmp_path / "gens"),
                "--reward_model_path",
                str(folder),
                "--benchmarks",
                "toy",
                "--template",
                "toymath",
                "--save_dir",
                str(tmp_path / "eval"),
                "--goal_state_path",
                str(goal),
            ]
        )
        == 0
    )
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


def official_names(state_dict):
    """goalrm's weights under the official names (its linear head is ``score``, the official one ``value_head``)."""
    return {("value_head.weight" if k == "score.weight" else k): v for k, v in state_dict.items()}


def test_the_official_eval_reads_the_head_from_the_path_and_goalrm_says_so(tmp_path, tiny_config, capsys):
    torch.manual_seed(0)
    mlp = RewardModel(LlamaModel(tiny_config), "mlp", mlp_head="official")
    plain = save_reward_model(mlp, tmp_path / "rm", save_format="official")
    assert "builds a linear head unless the folder's path holds 'vhs-mlp'" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="value_head"):  # eval_rm.py would give this folder a linear head
        OfficialRM.from_folder(plain)
    OfficialRM.from_folder(plain, value_head_strategy="mlp")  # what train_rm.py's --value_head_strategy mlp loads
    save_reward_model(mlp, tmp_path / "rm-vhs-mlp", save_format="official")
    assert capsys.readouterr().err == ""
    linear = RewardModel(LlamaModel(tiny_config), "linear")
    save_reward_model(linear, tmp_path / "vhs-mlp-sweep" / "rm", save_format="official")
    assert "builds an MLP head for any path holding 'vhs-mlp'" in capsys.readouterr().err


@pytest.mark.parametrize("strategy", ["linear", "mlp"])
def test_a_bf16_goalrm_checkpoint_reads_in_the_official_loader(tmp_path, tiny_config, tokenizer, strategy):
    """What a --bf16 run saves: bf16 tensors and ``dtype: bfloat16`` in config.json. The official loader
    (``torch_dtype="auto"``) runs it in bf16, goalrm upcasts it to float32: the weights agree bit for bit,
    the rewards to the same weights' float32 rewards at 1e-6, and to bf16 computation at BF16_REWARD_TOL."""
    torch.manual_seed(5)
    ours = RewardModel(
        LlamaModel(tiny_config.__class__.from_dict(tiny_config.to_dict())), strategy, mlp_head="official"
    )
    with torch.no_grad():
        for p in ours.head.parameters():  # a trained head, far from any fresh init
            p.normal_(std=0.3)
    ours = ours.to(torch.bfloat16).eval()
    ours.config.dtype = torch.bfloat16  # what from_pretrained(dtype=torch.bfloat16) records
    ours.set_reward_normalization(3.0, 2.0, enabled=True)  # no reward in range equals its normalised self
    path = save_reward_model(ours, tmp_path / f"rm-vhs-{strategy}", tokenizer, save_format="official")
    assert {t.dtype for t in load_file(str(path / "model.safetensors")).values()} == {torch.bfloat16}

    theirs = OfficialRM.from_folder(path)
    back = load_reward_model(path)
    assert {t.dtype for t in theirs.state_dict().values()} == {torch.bfloat16}
    assert {t.dtype for t in back.state_dict().values()} == {torch.float32}
    saved = official_names(ours.state_dict())
    assert theirs.state_dict().keys() == saved.keys() == official_names(back.state_dict()).keys()
    for name, tensor in official_names(back.state_dict()).items():
        assert torch.equal(theirs.state_dict()[name], saved[name]) and torch.equal(tensor, saved[name].float()), name

    ids, mask = right_pad(SEQS)
    in_bf16 = official_rewards(theirs, ids, mask)
    assert in_bf16.dtype == torch.bfloat16
    in_fp32 = goalrm_rewards(back, ids, mask)
    torch.testing.assert_close(in_bf16.float(), in_fp32, atol=BF16_REWARD_TOL, rtol=BF16_REWARD_TOL)
    torch.testing.assert_close(official_rewards(theirs.float(), ids, mask), in_fp32, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("strategy", ["linear", "mlp"])
def test_goalrm_reads_a_bf16_folder_the_official_code_wrote(tmp_path, tiny_config, strategy, capsys):
    """The official save_model after bf16 training: bf16 tensors, ``torch_dtype: bfloat16`` in config.json.
    goalrm reads it in float32 by default (the backbone's config says bf16, the head must follow the same
    dtype) and in bf16 when asked."""
    config = tiny_config.__class__.from_dict(tiny_config.to_dict())
    config.normalize_reward, config.mean, config.std = True, 3.0, 2.0
    torch.manual_seed(6)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # how from_pretrained builds a model in bf16
    try:
        theirs = OfficialRM(config, strategy).eval()
    finally:
        torch.set_default_dtype(previous)
    with torch.no_grad():
        for p in theirs.value_head.parameters():
            p.normal_(std=0.3)
    folder = tmp_path / "official_rm"
    folder.mkdir()
    fields = {
        **config.to_dict(),
        "torch_dtype": "bfloat16",
        "architectures": ["LLMForSequenceRegression"],
        "_value_head_strategy": strategy,
        "normalize_reward": True,
        "mean": 3.0,
        "std": 2.0,
    }
    fields.pop("dtype", None)  # the official code's transformers names it torch_dtype
    (folder / "config.json").write_text(json.dumps(fields))
    save_file(
        {k: v.contiguous() for k, v in theirs.state_dict().items()},
        str(folder / "model.safetensors"),
        metadata={"format": "pt"},
    )

    ours = load_reward_model(folder)
    assert "official code's format" in capsys.readouterr().err
    assert {t.dtype for t in ours.state_dict().values()} == {torch.float32}
    ids, mask = right_pad(SEQS)
    in_fp32 = goalrm_rewards(ours, ids, mask)
    torch.testing.assert_close(
        in_fp32, official_rewards(theirs, ids, mask).float(), atol=BF16_REWARD_TOL, rtol=BF16_REWARD_TOL
    )
    in_bf16 = goalrm_rewards(load_reward_model(folder, torch.bfloat16), ids, mask)
    assert in_bf16.dtype == torch.bfloat16
    torch.testing.assert_close(in_bf16.float(), in_fp32, atol=BF16_REWARD_TOL, rtol=BF16_REWARD_TOL)
    torch.testing.assert_close(in_fp32, official_rewards(theirs.float(), ids, mask), atol=1e-6, rtol=1e-6)
