"""Damaged or foreign artifact files are named for what they are, and shared artifacts get ordinary
file modes."""

import os

import numpy as np
import pytest
from transformers import LlamaModel

from goalrm_core.data.io import UMASK, ArtifactError, load_npy
from goalrm_core.model.reward_model import RewardModel, load_reward_model, save_reward_model


@pytest.fixture
def saved_rm(tmp_path, tiny_config, tokenizer):
    return save_reward_model(RewardModel(LlamaModel(tiny_config)), tmp_path / "rm", tokenizer)


def test_saved_rm_follows_the_umask_like_any_other_file(saved_rm):
    assert os.stat(saved_rm).st_mode & 0o777 == 0o777 & ~UMASK
    for f in saved_rm.iterdir():
        assert os.stat(f).st_mode & 0o777 == 0o666 & ~UMASK, f.name


def test_truncated_weights_are_called_damaged_never_loaded_unsafely(saved_rm):
    weights = saved_rm / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ArtifactError, match="the weights file is damaged") as info:
        load_reward_model(saved_rm)
    assert "safe=False" not in str(info.value) and "pickle" not in str(info.value)


def test_a_text_file_as_goal_state_is_not_called_pickled_data(tmp_path):
    text = tmp_path / "goal_state.npy"
    text.write_text("0.1 0.2 0.3\n")
    with pytest.raises(ArtifactError, match="not a .npy file") as info:
        load_npy(text)
    assert "pickle" not in str(info.value)
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ArtifactError, match="does not load pickled data") as info:
        load_npy(objects)
    assert "allow_pickle" not in str(info.value)


@pytest.mark.parametrize("command", ["train-rm", "get-representation", "eval-rm"])
def test_an_unusable_output_folder_fails_before_any_work(tmp_path, command):
    """The output folder is checked first: the other inputs here do not even exist, and the error is
    still about the output, so no training or scoring could have run before it."""
    from goalrm_core.cli import eval_rm as scoring
    from goalrm_core.cli import get_representation as representations
    from goalrm_core.cli import train_rm

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = blocker / "out"
    missing = str(tmp_path / "missing")
    argv = {
        "train-rm": (train_rm.main, ["--pretrain", missing, "--dataset", missing + ".jsonl", "--save_path", str(out)]),
        "get-representation": (
            representations.main,
            ["--dataset-path", missing, "--reward-model-path", missing, "--save-dir", str(out)],
        ),
        "eval-rm": (
            scoring.main,
            [
                "--completions_data_path",
                missing,
                "--reward_model_path",
                missing,
                "--save_dir",
                str(out),
                "--vanilla",
                "--benchmarks",
                "gsm8k",
            ],
        ),
    }[command]
    with pytest.raises(ArtifactError, match=r"lies under the file .*a-file: give a folder path"):
        argv[0](argv[1])
    assert not out.exists()
    flag = {"train-rm": "--save_path", "get-representation": "--save-dir", "eval-rm": "--save_dir"}[command]
    with pytest.raises(ArtifactError, match=f"{flag} .* is a file"):
        argv[0]([str(blocker) if a == str(out) else a for a in argv[1]])
