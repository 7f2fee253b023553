"""Checkpoints the trainer saves, read by the official loader (``tests/official_layout.py``, its reward model
built by hand from its source): a bf16 run's, and a two-process ZeRO-3 run's, whose partitions the trainer
gathers into the full checkpoint. Runs go through the real entry points, as in ``test_trainer.py``."""

import json

import pytest
import torch
from official_layout import BF16_REWARD_TOL, OfficialRM
from safetensors.torch import load_file
from test_trainer import run, write_pairs

from goalrm_core.model.reward_model import load_reward_model

IDS = torch.tensor([[5, 6, 7, 8, 2, 0, 0], [9, 10, 2, 0, 0, 0, 0], [11, 2, 12, 13, 14, 15, 2]])
MASK = (torch.arange(7) < torch.tensor([[5], [3], [7]])).long()


@pytest.fixture(scope="module")
def run_args(tiny_policy_dir, tmp_path_factory):
    """Two optimiser steps of the vanilla objective with the official MLP head, saved in the official format
    under a path holding 'vhs-mlp' (the official eval_rm.py's rule for an MLP head)."""
    pairs = write_pairs(tmp_path_factory.mktemp("pairs") / "pairs.jsonl", 24)
    return {
        "pretrain": str(tiny_policy_dir),
        "dataset": str(pairs),
        "template": "toymath",
        "max_len": 64,
        "eval_split": 0.2,
        "train_batch_size": 4,
        "micro_train_batch_size": 1,
        "max_steps": 2,
        "save_steps": -1,
        "eval_steps": -1,
        "logging_steps": 1,
        "learning_rate": 1e-3,
        "reward_model_strategy": "vanilla",
        "seed": 7,
        "value_head_strategy": "mlp",
        "mlp_head": "official",
        "save_format": "official",
    }


def rewards(model, official):
    with torch.no_grad():
        return model(IDS, MASK) if official else model(IDS, MASK).reward


def test_a_bf16_run_saves_what_the_official_loader_reads(run_args, tmp_path):
    """The official loader runs a bf16 checkpoint in bf16 (torch_dtype="auto"), goalrm in float32: the same
    weights bit for bit, rewards within BF16_REWARD_TOL (see tests/official_layout.py), and at 1e-6 once
    both compute in float32."""
    folder = tmp_path / "rm-vhs-mlp"
    run({**run_args, "save_path": str(folder), "bf16": True, "zero_stage": 2}, tmp_path / "train.log")
    assert json.loads((folder / "train_summary.json").read_text())["bf16"] is True
    saved = load_file(str(folder / "model.safetensors"))
    assert {t.dtype for t in saved.values()} == {torch.bfloat16}

    theirs = OfficialRM.from_folder(folder)
    ours = load_reward_model(folder)
    assert {t.dtype for t in theirs.state_dict().values()} == {torch.bfloat16}
    assert {t.dtype for t in ours.state_dict().values()} == {torch.float32}
    assert theirs.state_dict().keys() == ours.state_dict().keys() == saved.keys()
    for name, tensor in saved.items():
        assert torch.equal(theirs.state_dict()[name], tensor) and torch.equal(
            ours.state_dict()[name], tensor.float()
        ), name
    in_bf16 = rewards(theirs, official=True)
    assert in_bf16.dtype == torch.bfloat16
    torch.testing.assert_close(
        in_bf16.float(), rewards(ours, official=False), atol=BF16_REWARD_TOL, rtol=BF16_REWARD_TOL
    )
    torch.testing.assert_close(
        rewards(theirs.float(), official=True), rewards(ours, official=False), atol=1e-6, rtol=1e-6
    )
    # goalrm asked for bf16 runs it in bf16 too (the head follows the backbone's dtype)
    in_goalrm_bf16 = rewards(load_reward_model(folder, torch.bfloat16), official=False)
    torch.testing.assert_close(
        in_goalrm_bf16.float(), rewards(ours, official=False), atol=BF16_REWARD_TOL, rtol=BF16_REWARD_TOL
    )


@pytest.mark.deepspeed
def test_a_two_process_zero3_checkpoint_is_what_the_official_loader_reads(run_args, tmp_path):
    """Two processes through the deepspeed launcher, ZeRO-3 (every parameter partitioned across them), float32.
    The trainer's saved RM holds the full weights: exactly what DeepSpeed's own gather of the step-2
    checkpoint's partitions gives, and the official loader's rewards on it are goalrm's."""
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    folder = tmp_path / "rm-vhs-mlp"
    run(
        {**run_args, "save_path": str(folder), "zero_stage": 3, "save_steps": 2},
        tmp_path / "train.log",
        num_processes=2,
    )
    summary = json.loads((folder / "train_summary.json").read_text())
    assert (summary["world_size"], summary["zero_stage"], summary["steps"]) == (2, 3, 2)

    saved = load_file(str(folder / "model.safetensors"))
    gathered = get_fp32_state_dict_from_zero_checkpoint(str(tmp_path / "rm-vhs-mlp.checkpoints"), tag="global_step2")
    assert saved.keys() == gathered.keys() and any(k.startswith("value_head.6.") for k in saved)
    for name, tensor in gathered.items():
        assert saved[name].shape == tensor.shape and torch.equal(saved[name], tensor), name

    theirs = OfficialRM.from_folder(folder)
    ours = load_reward_model(folder)
    torch.testing.assert_close(rewards(theirs, official=True), rewards(ours, official=False), atol=1e-6, rtol=1e-6)
