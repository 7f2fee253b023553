"""``--load_in_4bit``: the backbone in 4-bit NF4 (bitsandbytes) under LoRA adapters.

Here (no CUDA GPU) the command refuses it in one line (exit 2); the settings' checks and the quantisation
config need neither a GPU nor bitsandbytes. The dequantise-and-merge of the save runs wherever bitsandbytes
is installed (its 4-bit layers also run on CPU); the training run needs a CUDA GPU and is skipped without one.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, LlamaModel

from goalrm_core.cli.train_rm import main as train_rm_main
from goalrm_core.cli.train_rm import parse_args
from goalrm_core.flags import run_command
from goalrm_core.model.reward_model import RewardModel, load_reward_model
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.lora import (
    add_lora,
    four_bit_dtypes,
    four_bit_layers,
    four_bit_unavailable,
    merged_state_dict,
    nf4_config,
)

ROOT = Path(__file__).resolve().parents[2]
FOUR_BIT = ["--load_in_4bit", "--bf16", "--lora_rank", "4"]


def test_load_in_4bit_needs_bf16_lora_and_zero_0_to_2():
    ok = TrainRMConfig(pretrain="p", load_in_4bit=True, bf16=True, lora_rank=4)
    assert ok.load_in_4bit and TrainRMConfig.from_argv(ok.to_argv()) == ok and "--load_in_4bit" in ok.to_argv()
    assert not TrainRMConfig(pretrain="p").load_in_4bit  # off by default, as the official code's
    for changes, expected in (
        ({"bf16": False}, r"--load_in_4bit computes in bf16 .*: add --bf16"),
        ({"lora_rank": 0}, r"--load_in_4bit needs --lora_rank > 0: a 4-bit backbone cannot train whole"),
        ({"zero_stage": 3}, r"--load_in_4bit needs --zero_stage 0, 1 or 2"),
    ):
        with pytest.raises(ValueError, match=expected):
            TrainRMConfig(pretrain="p", **{"load_in_4bit": True, "bf16": True, "lora_rank": 4, **changes})


def test_the_quantisation_config_has_the_official_settings():
    config = nf4_config()  # transformers' BitsAndBytesConfig: built without a GPU or bitsandbytes
    assert config.load_in_4bit and not config.load_in_8bit
    assert (config.bnb_4bit_quant_type, config.bnb_4bit_use_double_quant, config.bnb_4bit_compute_dtype) == (
        "nf4",
        True,
        torch.bfloat16,
    )


@pytest.mark.parametrize(
    "cuda, bitsandbytes, why",
    [
        (False, True, "needs a CUDA GPU, and torch sees none here"),
        (True, False, "needs bitsandbytes, which is not installed here"),
    ],
)
def test_without_cuda_or_bitsandbytes_it_is_one_line_and_exit_2(monkeypatch, capsys, cuda, bitsandbytes, why):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    if not bitsandbytes:
        monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # what an environment without it finds
    assert four_bit_unavailable() != ""
    assert run_command(train_rm_main, ["--pretrain", "p", *FOUR_BIT], "goalrm train-rm") == 2
    err = capsys.readouterr().err
    assert (
        err.strip().count("\n") == 0
        and "--load_in_4bit (an official train_rm.py flag) cannot run here" in err
        and why in err
    ), err
    assert (
        parse_args(["--pretrain", "p", "--bf16", "--lora_rank", "4"]).lora_rank == 4
    )  # without the flag nothing needs them


def test_this_machine_refuses_it_through_the_command_line(tmp_path):
    if not four_bit_unavailable():
        pytest.skip("this machine has a CUDA GPU and bitsandbytes: --load_in_4bit runs here")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "goalrm_core.cli.train_rm",
            "--pretrain",
            "p",
            "--dataset",
            "d.jsonl",
            "--save_path",
            str(tmp_path / "rm"),
            *FOUR_BIT,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "--load_in_4bit (an official train_rm.py flag) cannot run here" in done.stderr
    assert not (tmp_path / "rm").exists()


def _rewards(model, ids):
    with torch.no_grad():
        return model.eval()(ids, torch.ones_like(ids)).reward.float()


def test_the_save_dequantises_the_4bit_weights_and_merges_the_adapters(tiny_policy_dir, tiny_config):
    """A 4-bit backbone (bitsandbytes' layers, on CPU here) with LoRA on q_proj only: the saved weights are those
    of an RM without LoRA or quantisation, every layer dequantised (wrapped or not), and score as the 4-bit model."""
    pytest.importorskip("bitsandbytes")
    backbone = AutoModel.from_pretrained(
        tiny_policy_dir,
        dtype=torch.bfloat16,
        quantization_config=nf4_config(),
        device_map={"": "cuda:0" if torch.cuda.is_available() else "cpu"},
    )
    backbone = add_lora(backbone, 4, 8, "q_proj")
    four_bit_dtypes(backbone)
    torch.manual_seed(1)
    model = RewardModel(backbone)
    for p in model.parameters():  # what DeepSpeed's bf16 engine does to every float parameter
        if p.is_floating_point():
            p.data = p.data.to(torch.bfloat16)
        if p.requires_grad:  # trained adapters (B starts at zero)
            torch.nn.init.normal_(p, std=0.05)
    model.to(next(backbone.parameters()).device)
    assert len(four_bit_layers(model)) == 7 * tiny_config.num_hidden_layers  # every linear layer is 4-bit
    saved = merged_state_dict(model, {k: v.detach().cpu().clone() for k, v in model.state_dict().items()})
    plain = RewardModel(LlamaModel(tiny_config)).state_dict()
    assert set(saved) == set(plain) and all(saved[k].shape == plain[k].shape for k in plain)
    assert {v.dtype for v in saved.values()} == {torch.bfloat16}
    reloaded = RewardModel(LlamaModel(tiny_config)).to(torch.bfloat16)
    reloaded.load_state_dict(saved)
    ids = torch.tensor([[1, 5, 7, 9, 3, 4], [1, 8, 8, 2, 6, 4]])
    # the 4-bit layers compute with exactly these dequantised weights; only bf16 rounding (the merge's order) differs
    assert torch.allclose(_rewards(reloaded, ids), _rewards(model, ids.to(model.head.weight.device)).cpu(), atol=2e-2)


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU: --load_in_4bit trains only on one (bitsandbytes)"
)
def test_a_4bit_lora_run_trains_and_saves_an_ordinary_rm(tiny_policy_dir, tiny_config, tmp_path):
    pytest.importorskip("bitsandbytes")
    from goalrm_core.data.io import write_jsonl
    from goalrm_core.train.distributed import free_port, teardown
    from goalrm_core.train.trainer import Trainer, preflight

    write_jsonl(
        tmp_path / "pairs.jsonl",
        [
            {"question": f"{i} + 1", "correct": "a" * (2 + i % 5) + " #1", "incorrect": "b" * (2 + i % 5) + " #2"}
            for i in range(24)
        ],
    )
    cfg = parse_args(
        [
            "--pretrain",
            str(tiny_policy_dir),
            "--dataset",
            str(tmp_path / "pairs.jsonl"),
            "--save_path",
            str(tmp_path / "rm"),
            "--template",
            "toymath",
            "--max_len",
            "64",
            "--eval_split",
            "0.2",
            "--train_batch_size",
            "4",
            "--micro_train_batch_size",
            "2",
            "--max_steps",
            "3",
            "--learning_rate",
            "1e-2",
            "--zero_stage",
            "2",
            *FOUR_BIT,
        ]
    )
    launcher = {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    saved_env = {k: os.environ.get(k) for k in launcher}
    os.environ.update(launcher)
    try:
        preflight(cfg)
        trainer = Trainer(cfg)
        assert four_bit_layers(trainer.engine.module)
        trainer.fit()
    finally:
        teardown()
        for k, v in saved_env.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    model = load_reward_model(tmp_path / "rm")
    plain = RewardModel(LlamaModel(tiny_config)).state_dict()
    assert set(model.state_dict()) == set(plain)
    assert torch.isfinite(_rewards(model, torch.tensor([[1, 5, 7, 9, 3]]))).all()
