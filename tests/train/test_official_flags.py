"""The official ``train_rm.py`` flags goalrm runs (data keys, ``--input_template``, ``--apply_chat_template``,
``--margin_loss``, ``--compute_fp32_loss``, ``--aux_loss_coef``, checkpoint rotation, the DeepSpeed settings, the
special-token overrides, ``--wandb_run_name``), on tiny local models on CPU, and ``--load_in_4bit``'s refusal without
CUDA."""

import copy
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import LlamaModel, MixtralConfig, MixtralForCausalLM, MixtralModel

from goalrm_core.cli.train_rm import UNSUPPORTED_OFFICIAL_FLAGS, parse_args
from goalrm_core.data.preferences import PreferenceDataError, chat_splitter, normalise_row
from goalrm_core.model.encoding import PreferenceCollator, encode_preference_rows, encode_prompt_response
from goalrm_core.model.losses import log_exp_loss, pairwise_loss
from goalrm_core.model.objective import moe_balancing_loss, reward_model_loss
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.model.templates import apply_template
from goalrm_core.train.batching import load_items, load_tokenizer
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.distributed import build_model, deepspeed_config, gradient_checkpointing_kwargs
from goalrm_core.train.launch import run_streaming, train_command
from goalrm_core.train.lora import four_bit_unavailable
from goalrm_core.train.sinks import MetricSinks
from goalrm_core.train.trainer import rotate_checkpoints

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
# a Mistral-style chat template: the official code cuts the rendering after its last "[/INST]"
INST_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
    "{% else %}{{ m['content'] }}</s>{% endif %}{% endfor %}"
)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def custom_rows(n=16):
    """Rows under keys of their own, each with a margin (0, 0.5 or 1)."""
    return [
        {"q": f"{i} + 1", "good": "a" * (2 + i % 5), "bad": "b" * (2 + i % 5), "margin": [0, 0.5, 1.0][i % 3]}
        for i in range(n)
    ]


# ---------------------------------------------------------------------------------------------
# the data path: keys, --input_template, --apply_chat_template
# ---------------------------------------------------------------------------------------------


def test_custom_keys_read_rows_as_the_official_code_does(tokenizer):
    row = custom_rows(1)[0]
    with_prompt = normalise_row(row, "d.jsonl:1", keys=("q", "good", "bad"))
    assert (with_prompt["question"], with_prompt["correct"], with_prompt["incorrect"]) == (
        row["q"],
        row["good"],
        row["bad"],
    )
    without = normalise_row(row, "d.jsonl:1", keys=("", "good", "bad"))
    assert without["question"] == ""
    # a prompt key takes the template; without one the prompt stays empty and untemplated (the official rule)
    items, _ = encode_preference_rows(tokenizer, [with_prompt, without], "nemo", 512, "split")
    assert (
        items[0]["chosen_ids"]
        == encode_prompt_response(tokenizer, apply_template("nemo", row["q"]), row["good"], 512).input_ids
    )
    assert items[1]["chosen_ids"] == encode_prompt_response(tokenizer, "", row["good"], 512).input_ids
    with pytest.raises(PreferenceDataError, match=r"d\.jsonl:1: missing key\(s\) \['answer'\]"):
        normalise_row(row, "d.jsonl:1", keys=("q", "answer", "bad"))


def test_key_flags_go_together():
    with pytest.raises(ValueError, match="--chosen_key and --rejected_key go together"):
        TrainRMConfig(pretrain="p", chosen_key="good")
    with pytest.raises(ValueError, match="--chosen_key and --rejected_key go together"):
        TrainRMConfig(pretrain="p", prompt_key="q")


def test_input_template_formats_the_rows_the_official_code_formats(tokenizer):
    template = "Q: {}\nA: "
    openmath = {"question": "1 + 1", "correct": "#2", "incorrect": "#3"}
    pairs = normalise_row({"prompt": "1 + 1", "chosen": "#2", "rejected": "#3"}, "p.jsonl:1")
    keyed = normalise_row({"q": "1 + 1", "good": "#2", "bad": "#3"}, "k.jsonl:1", keys=("q", "good", "bad"))
    items, _ = encode_preference_rows(
        tokenizer, [openmath, pairs, keyed], "nemo", 512, "split", input_template=template
    )
    formatted = encode_prompt_response(tokenizer, "Q: 1 + 1\nA: ", "#2", 512).input_ids
    assert items[0]["chosen_ids"] == formatted and items[2]["chosen_ids"] == formatted
    assert (
        items[1]["chosen_ids"] == encode_prompt_response(tokenizer, "1 + 1", "#2", 512).input_ids
    )  # prompt/chosen/rejected: as is
    for bad in ("no field", "{} and {}", "{name}", "{"):
        with pytest.raises(ValueError, match="--input_template"):
            TrainRMConfig(pretrain="p", input_template=bad)


def test_chat_template_cuts_the_conversation_where_the_official_code_does(tokenizer):
    tok = copy.deepcopy(tokenizer)  # the session's tokenizer stays without a chat template
    tok.chat_template = INST_TEMPLATE
    conversation = [{"role": "user", "content": "1 + 1"}, {"role": "assistant", "content": "#2"}]
    row = {"chosen": conversation, "rejected": [conversation[0], {"role": "assistant", "content": "#3"}]}
    out = normalise_row(row, "c.jsonl:1", chat=chat_splitter(tok))
    for key, messages in (("correct", row["chosen"]), ("incorrect", row["rejected"])):
        full = tok.apply_chat_template(messages, tokenize=False)
        cut = full.rfind("[/INST]") + len("[/INST]")  # the official code's cut
        assert out[key] == full[cut:]
    assert out["question"] == tok.apply_chat_template(row["chosen"], tokenize=False)[:cut]
    items, _ = encode_preference_rows(tok, [out], "nemo", 512, "split", input_template="T {}")
    assert (
        items[0]["chosen_ids"] == encode_prompt_response(tok, out["question"], out["correct"], 512).input_ids
    )  # no template
    with pytest.raises(PreferenceDataError, match="must be a list of"):
        normalise_row({"chosen": "text", "rejected": "text 2"}, "c.jsonl:2", chat=chat_splitter(tok))
    with pytest.raises(ValueError, match="has no chat template"):
        chat_splitter(tokenizer)


def test_apply_chat_template_without_one_is_one_line_and_exit_2(tiny_policy_dir, tmp_path):
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"chosen": [{"role": "assistant", "content": "a"}], "rejected": [{"role": "assistant", "content": "b"}]}] * 4,
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "goalrm_core.cli.train_rm",
            "--pretrain",
            str(tiny_policy_dir),
            "--dataset",
            str(data),
            "--save_path",
            str(tmp_path / "rm"),
            "--apply_chat_template",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    lines = [line for line in done.stderr.splitlines() if "error" in line]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "--apply_chat_template" in lines[0] and "has no chat template" in lines[0]


def test_load_items_reads_keys_and_keeps_margins(tiny_policy_dir, tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", custom_rows())
    cfg = TrainRMConfig(
        pretrain=str(tiny_policy_dir),
        dataset=str(data),
        prompt_key="q",
        chosen_key="good",
        rejected_key="bad",
        input_template="Q {} A ",
        eval_split=0.25,
        max_len=64,
    )
    train, held, stats = load_items(cfg, load_tokenizer(cfg), lambda msg: None)
    assert stats["train_pairs"] + stats["eval_pairs"] == 16
    assert sorted({it["margin"] for it in train + held}) == [0.0, 0.5, 1.0]


# ---------------------------------------------------------------------------------------------
# the loss: --margin_loss, --compute_fp32_loss, --aux_loss_coef
# ---------------------------------------------------------------------------------------------


def _batch(tokenizer, margins):
    rows = [
        {"question": f"{i}+1", "correct": "a" * (i + 2), "incorrect": "b" * (i + 2), "margin": m}
        for i, m in enumerate(margins)
    ]
    items, _ = encode_preference_rows(tokenizer, rows, "toymath", 64)
    return PreferenceCollator(tokenizer.pad_token_id)(items)


def test_margin_loss_subtracts_each_pairs_own_margin(tiny_rm, tokenizer):
    batch = _batch(tokenizer, [0.5, 1.0, 2.0])
    with torch.no_grad():
        out = tiny_rm(batch["input_ids"], batch["attention_mask"])
        chosen, rejected = out.reward[:3], out.reward[3:]
        with_margin = reward_model_loss(tiny_rm, batch, TrainRMConfig(pretrain="p", margin_loss=True))
        without = reward_model_loss(tiny_rm, batch, TrainRMConfig(pretrain="p"))
        logexp = reward_model_loss(tiny_rm, batch, TrainRMConfig(pretrain="p", margin_loss=True, loss="logexp"))
    assert torch.equal(with_margin.preference_loss, pairwise_loss(chosen, rejected, batch["margin"]))
    assert with_margin.preference_loss > without.preference_loss  # every margin > 0 lowers each pair's logit
    assert torch.equal(logexp.preference_loss, log_exp_loss(chosen, rejected))  # the official logexp ignores margins
    assert batch["margin"].tolist() == [0.5, 1.0, 2.0]
    with pytest.raises(PreferenceDataError, match="field 'margin' must be a finite number"):
        normalise_row({"question": "q", "correct": "a", "incorrect": "b", "margin": "big"}, "m.jsonl:3")
    with pytest.raises(ValueError, match="--margin_loss takes each pair's margin from the data"):
        TrainRMConfig(pretrain="p", margin_loss=True, margin=0.5)


def test_compute_fp32_loss_casts_the_rewards(tiny_config, tokenizer):
    torch.manual_seed(3)
    model = RewardModel(LlamaModel(tiny_config)).to(torch.bfloat16).eval()
    batch = _batch(tokenizer, [0.0, 0.0])
    with torch.no_grad():
        plain = reward_model_loss(model, batch, TrainRMConfig(pretrain="p"))
        fp32 = reward_model_loss(model, batch, TrainRMConfig(pretrain="p", compute_fp32_loss=True))
    assert plain.preference_loss.dtype == torch.bfloat16 and fp32.preference_loss.dtype == torch.float32


def tiny_mixtral_config(vocab_size):
    return MixtralConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=128,
    )


def test_aux_loss_coef_adds_the_moe_balancing_loss_and_nothing_without_router_logits(tiny_rm, tokenizer, tmp_path):
    config = tiny_mixtral_config(len(tokenizer))
    config.output_router_logits = True
    torch.manual_seed(4)
    moe = RewardModel(MixtralModel(config)).eval()
    batch = _batch(tokenizer, [0.0, 0.0])
    with torch.no_grad():
        on = reward_model_loss(moe, batch, TrainRMConfig(pretrain="p", aux_loss_coef=0.25))
        off = reward_model_loss(moe, batch, TrainRMConfig(pretrain="p"))
        router = moe(batch["input_ids"], batch["attention_mask"]).router_logits
        llama = reward_model_loss(tiny_rm, batch, TrainRMConfig(pretrain="p", aux_loss_coef=0.25))
    assert off.aux_loss is None and on.aux_loss > 0
    assert torch.allclose(on.aux_loss, 0.25 * moe_balancing_loss(router, config, batch["attention_mask"]))
    assert torch.allclose(on.loss, on.preference_loss + on.aux_loss) and torch.equal(off.loss, off.preference_loss)
    assert llama.aux_loss is None and torch.equal(llama.loss, llama.preference_loss)
    # the trainer's model asks a mixture of experts for its router logits only when the coefficient is on
    torch.manual_seed(5)
    MixtralForCausalLM(tiny_mixtral_config(len(tokenizer))).save_pretrained(tmp_path / "moe")
    for coef, expected in ((0.25, True), (0.0, False)):
        cfg = TrainRMConfig(pretrain=str(tmp_path / "moe"), aux_loss_coef=coef, zero_stage=2)
        assert build_model(cfg, {}).backbone.config.output_router_logits is expected


# ---------------------------------------------------------------------------------------------
# checkpoint rotation, the DeepSpeed config, tokens, wandb
# ---------------------------------------------------------------------------------------------


def _step_folder(ckpt, step, size):
    (ckpt / f"global_step{step}").mkdir(parents=True)
    (ckpt / f"global_step{step}" / "state.pt").write_bytes(b"x" * size)


def test_rotation_keeps_max_ckpt_num_and_max_ckpt_mem_as_the_official_code(tmp_path):
    ckpt = tmp_path / "ckpt"
    for step in (2, 10, 11, 12):
        _step_folder(ckpt, step, 1000)
    (ckpt / "notes").mkdir()  # not a step folder: never touched
    removed = rotate_checkpoints(ckpt, "global_step12", max_num=2, max_mem_gb=1000)
    assert [p.name for p in removed] == ["global_step2", "global_step10"]  # the lowest steps first, not name order
    assert sorted(p.name for p in ckpt.iterdir()) == ["global_step11", "global_step12", "notes"]
    assert rotate_checkpoints(ckpt, "global_step12", max_num=2, max_mem_gb=1000) == []
    # by size: the older folders may hold at most max_mem GB; the newest stays whatever its size
    assert [p.name for p in rotate_checkpoints(ckpt, "global_step12", max_num=10, max_mem_gb=0)] == ["global_step11"]
    assert (
        rotate_checkpoints(ckpt, "global_step12", max_num=1, max_mem_gb=0) == [] and (ckpt / "global_step12").is_dir()
    )


def test_deepspeed_settings_reach_the_config():
    base = TrainRMConfig(pretrain="p", zero_stage=3, train_batch_size=8, micro_train_batch_size=2)
    plain = deepspeed_config(base, 1)
    assert (
        "offload_optimizer" not in plain["zero_optimization"]
        and "zero_hpz_partition_size" not in plain["zero_optimization"]
    )
    assert "data_types" not in plain and plain["zero_optimization"]["stage3_prefetch_bucket_size"] > 0
    ds = deepspeed_config(
        TrainRMConfig(
            pretrain="p",
            zero_stage=3,
            train_batch_size=8,
            micro_train_batch_size=2,
            adam_offload=True,
            zpg=8,
            grad_accum_dtype="bf16",
            disable_trace_cache=True,
        ),
        1,
    )
    zero = ds["zero_optimization"]
    assert zero["offload_optimizer"]["device"] == "cpu" and zero["zero_hpz_partition_size"] == 8
    assert ds["data_types"] == {"grad_accum_dtype": "bf16"}
    assert (
        zero["stage3_prefetch_bucket_size"]
        == zero["stage3_max_live_parameters"]
        == zero["stage3_max_reuse_distance"]
        == 0
    )
    # the default stays what it was: fp32 accumulation under ZeRO 1-3 with bf16
    assert deepspeed_config(TrainRMConfig(pretrain="p", bf16=True, train_batch_size=8), 1)["data_types"] == {
        "grad_accum_dtype": "fp32"
    }
    assert gradient_checkpointing_kwargs(base) == {"use_reentrant": False}
    assert gradient_checkpointing_kwargs(TrainRMConfig(pretrain="p", gradient_checkpointing_use_reentrant=True)) == {
        "use_reentrant": True
    }
    with pytest.raises(ValueError, match="--adam_offload needs --zero_stage 1, 2 or 3"):
        TrainRMConfig(pretrain="p", adam_offload=True, zero_stage=0)


def test_special_token_overrides_must_be_tokens_the_backbone_embeds(tiny_policy_dir):
    tok = load_tokenizer(TrainRMConfig(pretrain=str(tiny_policy_dir), pad_token="#", eos_token="!"))
    assert (tok.pad_token, tok.eos_token) == ("#", "!") and tok.pad_token_id == tok.convert_tokens_to_ids("#")
    with pytest.raises(ValueError, match=r"--unk_token '<nope>' is not a token of the tokenizer"):
        load_tokenizer(TrainRMConfig(pretrain=str(tiny_policy_dir), unk_token="<nope>"))


def test_wandb_run_name_reaches_wandb_init(monkeypatch, tmp_path):
    seen = {}
    fake = types.SimpleNamespace(init=lambda **kw: seen.update(kw) or None, login=lambda **kw: None)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    MetricSinks(
        TrainRMConfig(pretrain="p", use_wandb="offline", wandb_run_name="contrastive-7b"),
        tmp_path / "m.jsonl",
        enabled=True,
        resume=False,
    )
    assert seen["name"] == "contrastive-7b" and seen["mode"] == "offline"
    MetricSinks(TrainRMConfig(pretrain="p", use_wandb="offline"), tmp_path / "m.jsonl", enabled=True, resume=False)
    assert seen["name"].startswith("rm_") and len(seen["name"]) == len("rm_0506T07:08")


# ---------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------


def test_former_refusals_parse_as_settings():
    cfg = parse_args(
        [
            "--pretrain",
            "p",
            "--max_ckpt_num",
            "2",
            "--max_ckpt_mem",
            "5",
            "--zpg",
            "2",
            "--adam_offload",
            "--compute_fp32_loss",
            "--margin_loss",
            "--aux_loss_coef",
            "0.01",
            "--grad_accum_dtype",
            "fp32",
            "--disable_trace_cache",
            "--input_template",
            "Q {} A",
            "--gradient_checkpointing_use_reentrant",
            "--bos_token",
            "<s>",
            "--eos_token",
            "</s>",
            "--pad_token",
            "<pad>",
            "--unk_token",
            "<unk>",
            "--prompt_key",
            "q",
            "--chosen_key",
            "c",
            "--rejected_key",
            "r",
            "--apply_chat_template",
            "--wandb_run_name",
            "run",
        ]
    )
    assert (cfg.max_ckpt_num, cfg.zpg, cfg.adam_offload, cfg.chosen_key, cfg.wandb_run_name) == (2, 2, True, "c", "run")
    # LoRA runs (tests/train/test_lora.py), --load_in_4bit where CUDA and bitsandbytes are
    # (tests/train/test_load_in_4bit.py)
    assert UNSUPPORTED_OFFICIAL_FLAGS == {}
    if four_bit_unavailable():  # this machine: one line naming why
        with pytest.raises(ValueError, match="--load_in_4bit .*cannot run here: 4-bit loading .*needs"):
            parse_args(["--pretrain", "p", "--load_in_4bit", "--bf16", "--lora_rank", "4"])


def test_a_run_with_the_official_flags_trains_rotates_and_saves(tiny_policy_dir, tmp_path):
    """One tiny run through the real command line (a subprocess), with the official data, loss, rotation,
    engine and token flags together."""
    data = write_jsonl(tmp_path / "d.jsonl", custom_rows())
    cfg = TrainRMConfig(
        pretrain=str(tiny_policy_dir),
        dataset=str(data),
        save_path=str(tmp_path / "rm"),
        max_len=64,
        eval_split=0.25,
        train_batch_size=4,
        micro_train_batch_size=2,
        max_steps=3,
        save_steps=1,
        max_ckpt_num=1,
        learning_rate=1e-3,
        prompt_key="q",
        chosen_key="good",
        rejected_key="bad",
        input_template="Q {} A ",
        margin_loss=True,
        compute_fp32_loss=True,
        aux_loss_coef=0.01,
        gradient_checkpointing=True,
        gradient_checkpointing_use_reentrant=True,
        grad_accum_dtype="fp32",
        adam_offload=True,
        pad_token="#",
    )
    log = tmp_path / "train.log"
    run_streaming(train_command(cfg), log, env={"OMP_NUM_THREADS": "1"}, timeout_s=400, show=lambda lines, final: None)
    text = log.read_text()
    assert "removed" in text and "global_step2" in text
    ckpt = tmp_path / "rm.checkpoints"
    assert sorted(p.name for p in ckpt.iterdir() if p.name.startswith("global_step")) == ["global_step3"]
    saved = json.loads((tmp_path / "rm" / "tokenizer_config.json").read_text())
    assert saved["pad_token"] == "#"
    weights = load_file(tmp_path / "rm" / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in weights.values())
    assert parse_args(cfg.to_argv()) == cfg
