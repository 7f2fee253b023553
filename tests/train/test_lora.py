"""LoRA in ``train-rm`` (``--lora_rank``, ``--lora_alpha``, ``--target_modules``), on a tiny local Llama on CPU.

A LoRA run trains the adapters and the value head only; the saved RM has the adapters merged into the
backbone, an ordinary checkpoint that ``load_reward_model``, ``eval-rm`` and ``get-representation`` read.
One run goes in-process (ZeRO-2, to look at the engine's weights), one through ``examples/train_rm.py``
(ZeRO-3, the official entry point, a subprocess).
"""

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import LlamaModel

from goalrm_core.cli.eval_rm import main as eval_rm_main
from goalrm_core.cli.get_representation import main as get_representation_main
from goalrm_core.cli.train_rm import UNSUPPORTED_OFFICIAL_FLAGS, parse_args
from goalrm_core.cli.train_rm import main as train_rm_main
from goalrm_core.data.io import read_jsonl, write_jsonl
from goalrm_core.flags import run_command
from goalrm_core.model.reward_model import RewardModel, load_reward_model
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.distributed import free_port, teardown
from goalrm_core.train.lora import linear_layer_names, target_names

pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["1 + 2\naaaa #1", "3 + 4\nbbb #2", "5 + 6\naaaaaaa #1"]


def write_pairs(path, n=24, seed=0):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        k = rng.randint(2, 8)
        rows.append(
            {
                "question": f"{rng.randint(1, 9)} + {rng.randint(1, 9)}",
                "correct": "a" * k + " #1",
                "incorrect": "b" * k + " #2",
            }
        )
    write_jsonl(path, rows)
    return path


def rewards(model, tokenizer):
    model.eval()
    with torch.no_grad():
        out = []
        for text in TEXTS:
            ids = torch.tensor([tokenizer(text)["input_ids"]])
            out.append(model(ids, torch.ones_like(ids)).reward)
    return torch.cat(out)


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    return write_pairs(tmp_path_factory.mktemp("lora_pairs") / "pairs.jsonl")


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory, tiny_policy_dir, pairs_file):
    """A ZeRO-2 LoRA run in this process (``Trainer(cfg).fit()``, what ``train-rm`` runs): the parameters
    before and after training, the trainable names, the saved folder, and the trained model with its
    adapters merged by peft itself (``merge_and_unload``)."""
    from goalrm_core.train.trainer import Trainer, preflight

    out = tmp_path_factory.mktemp("lora_run")
    cfg = parse_args(
        [
            "--pretrain",
            str(tiny_policy_dir),
            "--dataset",
            str(pairs_file),
            "--save_path",
            str(out / "rm"),
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
            "--lora_rank",
            "4",
            "--lora_alpha",
            "8",
        ]
    )
    launcher = {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "OMP_NUM_THREADS": "1",
    }
    saved_env = {k: os.environ.get(k) for k in launcher}
    os.environ.update(launcher)
    try:
        preflight(cfg)
        trainer = Trainer(cfg)
        module = trainer.engine.module
        before = {n: p.detach().clone() for n, p in module.named_parameters()}
        trainable = {n for n, p in module.named_parameters() if p.requires_grad}
        head = {
            f"{'score' if cfg.value_head_strategy == 'linear' else 'value_head'}.{n}"
            for n, _ in module.head.named_parameters()
        }
        trainer.fit()
        after = {n: p.detach().clone() for n, p in module.named_parameters()}
        module.add_module(module.prefix, module.backbone.merge_and_unload())  # peft's own merge, in memory
    finally:
        teardown()
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {
        "cfg": cfg,
        "before": before,
        "after": after,
        "trainable": trainable,
        "head": head,
        "merged": module.eval(),
        "path": out / "rm",
    }


def test_lora_trains_only_the_adapters_and_the_head(lora_run, tiny_policy_dir, tiny_config):
    before, after, trainable, head = lora_run["before"], lora_run["after"], lora_run["trainable"], lora_run["head"]
    adapters = {n for n in before if ".lora_A." in n or ".lora_B." in n}
    assert adapters and trainable == adapters | head
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed <= trainable  # base weights frozen
    assert head <= changed and {n for n in adapters if ".lora_B." in n} <= changed  # B starts at 0: it moved
    # the frozen base weights are still the policy's own
    policy = load_file(tiny_policy_dir / "model.safetensors")
    base = {n: t for n, t in after.items() if n not in trainable}
    assert base
    for name, tensor in base.items():
        key = name.replace("model.base_model.model.", "model.").replace(".base_layer.", ".")
        assert torch.equal(tensor, policy[key]), name
    # every linear layer of the backbone carries an adapter by default (the official default)
    wrapped = {re.sub(r"\.lora_[AB]\..*", "", n).rsplit(".", 1)[-1] for n in adapters}
    assert wrapped == set(linear_layer_names(LlamaModel(tiny_config)))


def test_the_saved_rm_is_ordinary_and_scores_as_the_merged_model(lora_run, tokenizer, tiny_config, tiny_policy_dir):
    path = lora_run["path"]
    saved = load_file(path / "model.safetensors")
    plain = RewardModel(LlamaModel(tiny_config)).state_dict()
    assert set(saved) == set(plain) and all(
        saved[k].shape == plain[k].shape for k in plain
    )  # the keys of an RM without LoRA
    model = load_reward_model(path)
    merged = lora_run["merged"]
    for name, tensor in merged.state_dict().items():
        assert torch.allclose(model.state_dict()[name], tensor, atol=1e-6), name
    assert torch.allclose(rewards(model, tokenizer), rewards(merged, tokenizer), atol=1e-5)
    # the merge changed the wrapped weights (the adapters trained), and left the rest the policy's
    policy = load_file(tiny_policy_dir / "model.safetensors")
    assert not torch.equal(
        saved["model.layers.0.self_attn.q_proj.weight"], policy["model.layers.0.self_attn.q_proj.weight"]
    )
    assert torch.equal(saved["model.embed_tokens.weight"], policy["model.embed_tokens.weight"])
    meta = json.loads((path / "goalrm.json").read_text())
    assert (
        meta["training_args"]["lora_rank"] == 4
        and json.loads((path / "train_summary.json").read_text())["lora_rank"] == 4
    )


def test_eval_rm_and_get_representation_read_the_lora_rm(lora_run, tmp_path):
    path = lora_run["path"]
    rows = [
        {"question": "1 + 2", "generated_solution": "aaaa #1", "is_correct": True},
        {"question": "3 + 4", "generated_solution": "bbb #2", "is_correct": False},
    ]
    write_jsonl(tmp_path / "gens" / "toy" / "greedy.jsonl", rows)
    write_jsonl(
        tmp_path / "pairs.jsonl",
        [{"question": r["question"], "correct": r["generated_solution"], "incorrect": "x"} for r in rows],
    )
    assert (
        get_representation_main(
            [
                "--dataset-path",
                str(tmp_path / "pairs.jsonl"),
                "--reward-model-path",
                str(path),
                "--save-dir",
                str(tmp_path / "rep"),
                "--template",
                "toymath",
            ]
        )
        == 0
    )
    assert (
        eval_rm_main(
            [
                "--completions_data_path",
                str(tmp_path / "gens"),
                "--reward_model_path",
                str(path),
                "--benchmarks",
                "toy",
                "--template",
                "toymath",
                "--save_dir",
                str(tmp_path / "eval"),
                "--goal_state_path",
                str(tmp_path / "rep" / "goal_state.npy"),
            ]
        )
        == 0
    )
    scored = read_jsonl(tmp_path / "eval" / path.name / "toy" / "greedy" / "output-metrics-dense.jsonl")
    assert len(scored) == 2 and all("reward" in r and "cosine_sim" in r for r in scored)


def test_official_entry_point_trains_lora_under_zero3_on_the_named_modules(tiny_policy_dir, pairs_file, tmp_path):
    """examples/train_rm.py (the official defaults), ZeRO-3, LoRA on q_proj and v_proj given as two words."""
    cmd = [
        sys.executable,
        str(ROOT / "examples" / "train_rm.py"),
        "--pretrain",
        str(tiny_policy_dir),
        "--dataset",
        str(pairs_file),
        "--save_path",
        str(tmp_path / "rm"),
        "--ckpt_path",
        str(tmp_path / "ckpt"),
        "--template",
        "toymath",
        "--max_len",
        "64",
        "--train_batch_size",
        "4",
        "--micro_train_batch_size",
        "2",
        "--max_steps",
        "3",
        "--learning_rate",
        "1e-2",
        "--zero_stage",
        "3",
        "--value_head_strategy",
        "mlp",
        "--lora_rank",
        "4",
        "--target_modules",
        "q_proj",
        "v_proj",
    ]
    done = subprocess.run(
        cmd,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LoRA rank 4, alpha 16 on q_proj v_proj" in done.stdout
    saved, policy = load_file(tmp_path / "rm" / "model.safetensors"), load_file(tiny_policy_dir / "model.safetensors")
    backbone = {k for k in saved if k.startswith("model.")}
    assert backbone == {k for k in policy if k.startswith("model.")}
    moved = {k for k in backbone if not torch.equal(saved[k], policy[k])}
    assert moved == {f"model.layers.{i}.self_attn.{m}.weight" for i in range(2) for m in ("q_proj", "v_proj")}
    model = load_reward_model(tmp_path / "rm")
    assert model.value_head_strategy == "mlp" and torch.isfinite(model.head[0].weight).all()
    cfg = json.loads((tmp_path / "rm" / "goalrm.json").read_text())["training_args"]
    assert (cfg["lora_rank"], cfg["lora_alpha"], target_names(cfg["target_modules"])) == (4, 16, ["q_proj", "v_proj"])


# ---------------------------------------------------------------------------------------------
# the settings: ranges, names, a missing peft
# ---------------------------------------------------------------------------------------------


def test_lora_flags_parse_round_trip_and_are_no_refusal():
    assert "lora_rank" not in UNSUPPORTED_OFFICIAL_FLAGS
    cfg = parse_args(
        ["--pretrain", "p", "--lora_rank", "8", "--lora_alpha", "32", "--target_modules", "q_proj", "v_proj"]
    )
    assert (cfg.lora_rank, cfg.lora_alpha, cfg.target_modules) == (8, 32, "q_proj v_proj")
    assert parse_args(cfg.to_argv()) == cfg
    assert target_names("q_proj,v_proj") == target_names("q_proj v_proj") == ["q_proj", "v_proj"]
    assert target_names("") == target_names("all-linear") == []
    assert TrainRMConfig(pretrain="p").lora_rank == 0  # off by default, as the official code's


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        ("--lora_rank", "-1", "argument --lora_rank: must be an integer >= 0 (0 = off), got -1"),
        ("--lora_alpha", "0", "argument --lora_alpha: must be an integer > 0, got 0"),
        ("--lora_alpha", "1.5", "argument --lora_alpha: must be an integer, got '1.5'"),
    ],
)
def test_a_lora_number_out_of_range_is_one_line(capsys, flag, value, expected):
    with pytest.raises(SystemExit) as info:
        parse_args(["--pretrain", "p", flag, value])
    err = capsys.readouterr().err
    assert info.value.code == 2 and expected in err


def test_a_bad_target_module_name_is_one_line(tiny_policy_dir, pairs_file, tmp_path, capsys):
    with pytest.raises(ValueError, match=r"--target_modules 'q_proj,v-proj': 'v-proj' is no module name"):
        TrainRMConfig(pretrain="p", target_modules="q_proj,v-proj")
    base = [
        "--pretrain",
        str(tiny_policy_dir),
        "--dataset",
        str(pairs_file),
        "--save_path",
        str(tmp_path / "rm"),
        "--lora_rank",
        "4",
    ]
    for name, expected in (
        ("qkv_proj", r"has no module 'qkv_proj'; its linear layers: down_proj, gate_proj, k_proj"),
        ("self_attn", r"'self_attn' names a LlamaAttention, not a linear layer"),
    ):
        assert run_command(train_rm_main, base + ["--target_modules", name], "goalrm train-rm") == 2
        err = capsys.readouterr().err
        assert err.strip().count("\n") == 0 and "error: --target_modules" in err, err
        assert re.search(expected, err), err
    assert not (tmp_path / "rm").exists()  # refused before anything ran


def test_lora_without_peft_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "peft", None)  # what an environment without peft imports
    assert run_command(train_rm_main, ["--pretrain", "p", "--lora_rank", "4"], "goalrm train-rm") == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "--lora_rank 4 needs peft, which is not installed here" in err
    assert parse_args(["--pretrain", "p"]).lora_rank == 0  # without LoRA nothing needs it
