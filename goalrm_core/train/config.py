"""Training configuration as a documented dataclass; the command line is generated from it.

Field names are the official code's flags (``--micro_train_batch_size`` …), so its scripts keep working.
A config travels to the training process as a command line (:meth:`TrainRMConfig.to_argv`, what
:func:`goalrm_core.train.launch.train_command` runs) and is parsed back there
(:meth:`TrainRMConfig.from_argv`) without loss:

>>> cfg = TrainRMConfig(pretrain="policy", learning_rate=5e-4, bf16=True, group_by_length=False)
>>> TrainRMConfig.from_argv(cfg.to_argv()) == cfg
True
"""

from __future__ import annotations

import argparse
import dataclasses
import string
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from goalrm_core.choices import CHECKPOINT_FORMATS, ENCODINGS, MLP_HEADS, REWARD_POOLS, VALUE_HEAD_STRATEGIES
from goalrm_core.data.preferences import HH_FORMATS
from goalrm_core.flags import Range, add_field_flag, check_choice
from goalrm_core.model.pretrained import packaged_names_help, resolve_model
from goalrm_core.model.settings import ContrastiveSettings
from goalrm_core.model.strategies import CONTRASTIVE_STRATEGIES, strategy_options
from goalrm_core.model.templates import TEMPLATES

EVAL_SOURCES = ("test_split", "holdout", "official")
STEP_UNITS = ("optimizer", "micro_batch")
REWARD_MODEL_STRATEGIES = ("vanilla", "contrastive")
LOSS_TYPES = ("sigmoid", "logexp")
GRAD_ACCUM_DTYPES = ("", "fp32", "fp16", "bf16")
FEATURE_CACHES = ("memory", "off")
SPECIAL_TOKENS = ("bos_token", "eos_token", "pad_token", "unk_token")
# The flags the official code's train scripts always write (``train_contrastive_rm.sh`` …):
# :meth:`TrainRMConfig.to_argv`
# writes them even at their defaults, so a generated command line reads like the official code's. Every
# other field is written only when it differs from its default.
OFFICIAL_FLAGS = (
    "pretrain",
    "dataset",
    "dataset_probs",
    "save_path",
    "save_steps",
    "logging_steps",
    "eval_steps",
    "train_batch_size",
    "micro_train_batch_size",
    "max_epochs",
    "max_len",
    "zero_stage",
    "learning_rate",
    "seed",
    "reward_model_strategy",
    "contrastive_strategy",
    "contrastive_loss_beta",
    "sim_samples",
    "unsim_samples",
    "value_head_strategy",
    "source_state_percentile",
    "goal_state_percentile",
)


# Fields that say where a run's files go or who watches it: two configs that differ only here train
# the same RM (see :meth:`TrainRMConfig.training_fields`).
OUTPUT_FIELDS = (
    "save_path",
    "overwrite",
    "feature_cache_dir",
    "ckpt_path",
    "max_ckpt_num",
    "max_ckpt_mem",
    "metrics_path",
    "use_wandb",
    "wandb_project",
    "wandb_group",
    "wandb_org",
    "wandb_run_name",
    "use_tensorboard",
    "s3_save_path",
    "local_rank",
    "log_hidden_stats",
)
# Fields only the contrastive term reads: a vanilla RM's weights do not depend on them (nor does its
# random state: the vanilla objective never draws from the contrastive sampler).
CONTRASTIVE_FIELDS = (
    "contrastive_loss",
    *ContrastiveSettings.setting_names(),
    *strategy_options(),
    "contrastive_warmup_steps",
)
# The contrastive term's stabilisers (not in the paper), added after RMs were stored: at its default each trains
# exactly as before it existed, so there it is left out of :meth:`TrainRMConfig.training_fields` and an RM stored
# earlier keeps its key.
STABILISER_FIELDS = ("contrastive_stop_gradient", "contrastive_warmup_steps")


def check_input_template(template: str) -> str:
    """``template`` if it is a format string with exactly one ``{}`` (where the prompt goes); else a one-line error.

    >>> check_input_template("Q: {}\\nA: ")
    'Q: {}\\nA: '
    """
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
        template.format("prompt")
    except (ValueError, IndexError, KeyError) as e:
        raise ValueError(
            f"--input_template {template!r} is no format string with one {{}} for the prompt ({e}); "
            f"double literal braces ({{{{ }}}})"
        ) from None
    if len(fields) != 1 or fields[0] not in ("", "0"):
        raise ValueError(
            f"--input_template {template!r} must hold exactly one {{}} (where the prompt goes), "
            f"found {len(fields)} fields; double literal braces ({{{{ }}}})"
        )
    return template


def _help(text: str, default: Any, **meta: Any) -> Any:
    """A setting: a dataclass field (its annotation is the type) with help text, and optional
    ``choices``/``required`` or, for a number, its valid ``range`` (a :class:`goalrm_core.flags.Range`).
    This metadata is the setting's one definition: the command line's flags, the checks of a config
    built in Python, and the profiles' keys and rules (``study.recipe``) all read it."""
    return field(default=default, metadata={"help": text, **meta})


def _contrastive(name: str) -> Any:
    """A setting of the contrastive term: the loss's :class:`ContrastiveSettings` field ``name`` (its one
    definition: help, default and valid values), declared here under the same name."""
    setting = ContrastiveSettings.__dataclass_fields__[name]
    return field(default=setting.default, metadata=setting.metadata)


@dataclass
class TrainRMConfig:
    """Everything one reward-model training run needs."""

    # data and model
    pretrain: str = _help(
        f"Backbone: local path or Hub name of a causal LM (the SFT policy). {packaged_names_help()}", "", required=True
    )
    dataset: str = _help(
        "Comma-separated datasets: jsonl/parquet files, save_to_disk dirs, or Hub names (online only).", ""
    )
    dataset_probs: str = _help("Comma-separated sampling weights for blending --dataset entries.", "1.0")
    eval_dataset: str = _help("Held-out pairs for --eval_steps; empty = see --eval_source.", "")
    eval_source: str = _help(
        "Without --eval_dataset: test_split (each source's own test/validation split when every source "
        "has one, else a held-out --eval_split, left out of training), holdout (always hold out --eval_split) "
        "or official (the official code's: per source its test/validation split, else its first 1% of rows, "
        "0.1% of a saved single Dataset, unshuffled and also trained on).",
        "test_split",
        choices=EVAL_SOURCES,
    )
    eval_split: float = _help(
        "Fraction of the training data held out for evaluation when no held-out split is used.",
        0.02,
        range=Range(float, "[0, 1)"),
    )
    hh_format: str = _help(
        "HH-RLHF dialogues: dialogue (the official code: empty prompt, the whole dialogue as the response) or "
        "split (the shared turns as the prompt, the last replies as the responses).",
        "dialogue",
        choices=HH_FORMATS,
    )
    template: str = _help(
        f"Prompt template: {', '.join(TEMPLATES)} (nemo: the official training data's literal).",
        "nemo",
        choices=tuple(TEMPLATES),
    )
    encoding: str = _help(
        "official: prompt + response + ' ' + EOS tokenised in one call with the tokenizer's special tokens, cut "
        "from the right; split: prompt and response tokenised apart, the prompt cut from the left.",
        "official",
        choices=ENCODINGS,
    )
    input_template: str = _help(
        "The official code's prompt format: a string with one {} where the prompt goes (empty = --template's; "
        "nemo is the official default). As the official code applies it: to question/correct/incorrect rows "
        "and --prompt_key rows; prompt/chosen/rejected and HH rows keep their prompt as it is.",
        "",
    )
    apply_chat_template: bool = _help(
        "chosen/rejected rows hold conversations (lists of {role, content} messages, the last one the "
        "reply): each is rendered with the tokenizer's chat template, everything before the last reply "
        "the prompt (the official code's cut at the last [/INST], for any template).",
        False,
    )
    prompt_key: str = _help(
        "The data's prompt key (with --chosen_key/--rejected_key; without it the prompt is empty and no template "
        "is applied, as in the official code).",
        "",
    )
    chosen_key: str = _help(
        "The data's preferred-response key (with --rejected_key: rows are read by these keys only).", ""
    )
    rejected_key: str = _help("The data's dispreferred-response key (with --chosen_key).", "")
    bos_token: str = _help("Override the tokenizer's BOS token (a token of its vocabulary; saved with the RM).", "")
    eos_token: str = _help("Override the tokenizer's EOS token (a token of its vocabulary; saved with the RM).", "")
    pad_token: str = _help(
        "Override the tokenizer's pad token (a token of its vocabulary; default: its own, else EOS).", ""
    )
    unk_token: str = _help("Override the tokenizer's unknown token (a token of its vocabulary; saved with the RM).", "")
    max_len: int = _help(
        "Maximum tokens of prompt + response (see --encoding for what is cut).", 2048, range=Range(int, ">= 1")
    )
    max_samples: int = _help(
        "Use at most this many training pairs (0 = all).", 0, range=Range(int, ">= 0", note="0 = all")
    )
    save_path: str = _help("Where the final RM is saved (HF layout + goalrm.json).", "./ckpt/reward_model")
    save_format: str = _help(
        "Layout of the saved RM: goalrm (a linear head named score, as AutoModelForSequenceClassification "
        "reads it; reward_mean/reward_std) or official (the official code's loader: value_head, mean/std, "
        "_value_head_strategy). goalrm reads both.",
        "goalrm",
        choices=CHECKPOINT_FORMATS,
    )
    overwrite: bool = _help(
        "Let --save_path replace a folder that holds other files than an earlier RM (never an input "
        "or the working folder).",
        False,
    )
    ckpt_path: str = _help(
        "DeepSpeed checkpoints (default: <save_path>.checkpoints, beside the RM dir, which a final save replaces).", ""
    )
    load_checkpoint: bool = _help("Resume from the latest checkpoint in --ckpt_path.", False)
    save_steps: int = _help(
        "Checkpoint every N steps (see --step_unit; -1 = never).",
        -1,
        range=Range(int, ">= 1", also=(-1,), note="-1 = never"),
    )
    max_ckpt_num: int = _help(
        "Keep at most this many checkpoints in --ckpt_path: after each save the oldest step folders go.",
        3,
        range=Range(int, ">= 1"),
    )
    max_ckpt_mem: int = _help(
        "GB the older checkpoints of --ckpt_path may hold: after each save the oldest step folders go while "
        "they hold more (the newest is always kept).",
        1000,
        range=Range(int, ">= 0"),
    )
    logging_steps: int = _help("Log metrics every N steps (see --step_unit).", 1, range=Range(int, ">= 1"))
    eval_steps: int = _help(
        "Evaluate on held-out pairs every N steps (see --step_unit; -1 = at the end only, or at each "
        "epoch's end with --step_unit micro_batch, as the official code).",
        -1,
        range=Range(int, ">= 1", also=(-1,), note="-1 = at the end only"),
    )
    step_unit: str = _help(
        "What --eval_steps, --save_steps and --logging_steps count: optimizer (optimiser steps) or micro_batch "
        "(the official code: one process's micro-batches; an event falls after the optimiser step whose "
        "weights the official code's would see).",
        "optimizer",
        choices=STEP_UNITS,
    )
    metrics_path: str = _help("JSONL of per-step metrics (default: <save_path>.metrics.jsonl).", "")

    # optimisation
    train_batch_size: int = _help("Global batch of pairs per optimiser step.", 128, range=Range(int, ">= 1"))
    micro_train_batch_size: int = _help("Pairs per device per forward pass.", 1, range=Range(int, ">= 1"))
    max_epochs: int = _help("Passes over the training data.", 1, range=Range(int, ">= 1"))
    max_steps: int = _help(
        "Stop after this many optimiser steps (0 = run all epochs).", 0, range=Range(int, ">= 0", note="0 = the epochs")
    )
    learning_rate: float = _help("Peak learning rate (AdamW, betas 0.9/0.95).", 9e-6, range=Range(float, "> 0"))
    head_learning_rate: float = _help(
        "Learning rate of the value head (0 = same as --learning_rate).",
        0.0,
        range=Range(float, ">= 0", note="0 = same as --learning_rate"),
    )
    lr_warmup_ratio: float = _help(
        "Fraction of steps of linear warm-up before the cosine decay.", 0.03, range=Range(float, "[0, 1]")
    )
    l2: float = _help("AdamW weight decay.", 0.0, range=Range(float, ">= 0"))
    max_norm: float = _help("Gradient clipping norm.", 1.0, range=Range(float, ">= 0", note="0 = no clipping"))
    seed: int = _help("Random seed for data order, head init and contrastive sampling.", 42, range=Range(int, ">= 0"))
    group_by_length: bool = _help("Batch pairs of similar length together to waste less compute on padding.", True)

    # engine
    zero_stage: int = _help("DeepSpeed ZeRO stage 0-3.", 2, choices=(0, 1, 2, 3))
    bf16: bool = _help("bfloat16 training where the device supports it.", False)
    flash_attn: bool = _help("Use flash-attn 2 (CUDA + the flash-attn package).", False)
    gradient_checkpointing: bool = _help("Recompute activations in the backward pass to save memory.", False)
    torch_compile: bool = _help(
        "Compile the model with torch.compile (inductor, dynamic shapes) before training: fused "
        "elementwise work around the matmuls, paid for by a one-off compile per process "
        "(benchmarks/step_levers.json). Not with --zero_stage 3 or --gradient_checkpointing.",
        False,
    )
    adam_offload: bool = _help("Keep the optimizer state in CPU memory (ZeRO-Offload; needs --zero_stage 1-3).", False)
    zpg: int = _help(
        "ZeRO++ hierarchical partition size (zero_hpz_partition_size; 1 = off; ZeRO-3).", 1, range=Range(int, ">= 1")
    )
    grad_accum_dtype: str = _help(
        "dtype gradients accumulate in (DeepSpeed's data_types.grad_accum_dtype); empty = fp32 under "
        "ZeRO 1-3 with --bf16, DeepSpeed's own choice otherwise.",
        "",
        choices=GRAD_ACCUM_DTYPES,
    )
    disable_trace_cache: bool = _help(
        "ZeRO-3 without parameter prefetching (prefetch bucket, live parameters and reuse distance 0).", False
    )
    gradient_checkpointing_use_reentrant: bool = _help(
        "With --gradient_checkpointing: torch's reentrant form (use_reentrant=True).", False
    )
    # LoRA (peft)
    lora_rank: int = _help(
        "LoRA rank r: > 0 freezes the backbone and trains a rank-r adapter beside each --target_modules layer "
        "(peft; no dropout, no bias) and the whole value head; the saved RM has the adapters merged into the "
        "backbone, an ordinary checkpoint. 0 = off (the whole backbone trains).",
        0,
        range=Range(int, ">= 0", note="0 = off"),
    )
    lora_alpha: int = _help(
        "LoRA scaling numerator: each adapter's update is scaled by lora_alpha / lora_rank.",
        16,
        range=Range(int, "> 0"),
    )
    target_modules: str = _help(
        "The backbone's layers LoRA wraps: module names (q_proj, v_proj …, or a dotted tail such as "
        "layers.0.mlp.up_proj), separated by commas or spaces, or given as several words; each must name "
        "a linear layer. Empty (or all-linear) = every linear layer of the backbone, the official default.",
        "",
        words=True,
    )
    load_in_4bit: bool = _help(
        "Load the frozen backbone in 4-bit NF4 under the LoRA adapters (bitsandbytes: double quantisation, "
        "bf16 compute; the official code's QLoRA). Needs a CUDA GPU with bitsandbytes, --bf16, --lora_rank > 0 "
        "and --zero_stage 0-2; the saved RM has the backbone dequantised and the adapters merged, an "
        "ordinary bf16 checkpoint.",
        False,
    )
    # partial fine-tuning (not in the official code: a cost lever for small CPUs, docs/migration.md)
    train_top_layers: int = _help(
        "Train only the top N decoder layers, the final norm and the value head; the embeddings and "
        "the layers below are frozen, and what they compute for each training and eval text is run "
        "once at the start (no gradients, eval mode) and cached (--feature_cache): each step then "
        "runs the top N layers only. Llama-style backbones (SmolLM2, Llama, Mistral, Qwen2); not "
        "with LoRA or ZeRO-3. 0 = every layer trains (the official code).",
        0,
        range=Range(int, ">= 0", note="0 = all layers"),
    )
    feature_cache: str = _help(
        "With --train_top_layers: memory (the frozen layers' output kept in memory for the run) or "
        "off (no cache: every step runs the frozen layers too, without their gradients; the same "
        "losses to float rounding).",
        "memory",
        choices=FEATURE_CACHES,
    )
    feature_cache_dir: str = _help(
        "With --train_top_layers and --feature_cache memory: a folder that also keeps the cache "
        "across runs, one file per backbone identity (its frozen weights, dtype, config and the "
        "layer) holding each text's states under its token ids; a later run of the same backbone "
        "reads the texts it holds and runs the frozen layers on the rest only. Empty = none.",
        "",
    )
    local_rank: int = _help(
        "Set by the deepspeed launcher.",
        -1,
        range=Range(int, ">= 0", also=(-1,), note="-1 = not launched by deepspeed"),
    )

    # method
    reward_model_strategy: str = _help(
        "vanilla: pairwise loss only; contrastive: + the goal-conditioned term.",
        "vanilla",
        choices=REWARD_MODEL_STRATEGIES,
    )
    contrastive_loss: bool = _help(
        "Shorthand for --reward_model_strategy contrastive (the official code's HH script).", False
    )
    contrastive_strategy: str = _contrastive("contrastive_strategy")
    contrastive_loss_beta: float = _contrastive("contrastive_loss_beta")
    sim_samples: int = _contrastive("sim_samples")
    unsim_samples: int = _contrastive("unsim_samples")
    source_state_percentile: float = _contrastive("source_state_percentile")
    goal_state_percentile: float = _contrastive("goal_state_percentile")
    contrastive_window: str = _contrastive("contrastive_window")
    contrastive_pairs: str = _contrastive("contrastive_pairs")
    contrastive_stop_gradient: str = _contrastive("contrastive_stop_gradient")
    contrastive_warmup_steps: int = _help(
        "Ramp the contrastive term's weight linearly from 0 to --contrastive_loss_beta over the first N optimiser "
        "steps (β·k/N at the step after k steps, the full β from step N+1 on; evaluation always uses the full β). "
        "A stabiliser, not in the paper; 0 = off (the full β from the first step).",
        0,
        range=Range(int, ">= 0", note="0 = off"),
    )
    dense_loss_coef: float = _help(
        "Weight of an auxiliary per-token loss on the value head (not in the paper): each response "
        "token's value is a logit of 'no error yet', 1 before the rejected response's first error "
        "(the pairs' optional first_error_char) and 0 from it on; 0 = off.",
        0.0,
        range=Range(float, ">= 0"),
    )
    preference_loss_coef: float = _help(
        "Weight of the pairwise preference loss (the paper's: 1). 0 with --dense_loss_coef > 0 "
        "trains a process reward model on the per-token labels alone (not in the paper).",
        1.0,
        range=Range(float, ">= 0"),
    )
    value_head_strategy: str = _help(
        "linear (HF-compatible) or mlp value head.", "linear", choices=VALUE_HEAD_STRATEGIES
    )
    mlp_head: str = _help(
        "The mlp head's form: goalrm (a bias on every layer, PyTorch's default init) or official (the last "
        "layer bias-free, weights drawn from N(0, 1/(h+1)) and N(0, 1/(h/2+1)) as the official code does; "
        "needed for --save_format official).",
        "goalrm",
        choices=MLP_HEADS,
    )
    reward_pool: str = _help(
        "What the reward is: last (the value at the last token, the paper's) or mean (the mean of the "
        "values over the response's tokens, a read-out that sees the whole response; not in the paper, "
        "saved in goalrm.json so every reader reads it so, no official format).",
        "last",
        choices=REWARD_POOLS,
    )
    loss: str = _help("Preference loss: sigmoid (-log σ) or logexp.", "sigmoid", choices=LOSS_TYPES)
    margin: float = _help("Margin subtracted from r_chosen - r_rejected in the sigmoid loss.", 0.0, range=Range(float))
    margin_loss: bool = _help(
        "Subtract each pair's own margin (the data's optional margin field, 0 when absent) from "
        "r_chosen - r_rejected in the sigmoid loss, in place of --margin (logexp ignores it, as the "
        "official code's does).",
        False,
    )
    compute_fp32_loss: bool = _help("Compute the preference loss on fp32 rewards (matters with --bf16).", False)
    aux_loss_coef: float = _help(
        "Weight of a mixture-of-experts backbone's load-balancing loss (its router logits, as "
        "Mixtral's); a backbone without router logits adds nothing.",
        0.0,
        range=Range(float, ">= 0"),
    )
    normalize_reward: bool = _help("Apply the stored reward mean/std at inference.", False)
    # logging
    log_hidden_stats: bool = _help(
        "Each train row also holds hidden_norm and hidden_effective_rank: the mean L2 norm and the effective rank "
        "(exp of the entropy of the normalised singular values of the centred states) of the chosen responses' "
        "last-layer token states, the states the contrastive term reads, over the micro-batches of the row's "
        "optimiser step. Computed without gradients from detached states, so the weights are the same either way.",
        True,
    )
    use_wandb: str = _help("A wandb key (or 'offline') turns wandb on; it never blocks offline runs.", "")
    wandb_project: str = _help("wandb project.", "goalrm")
    wandb_group: str = _help("wandb group.", "")
    wandb_org: str = _help("wandb entity.", "")
    wandb_run_name: str = _help("wandb run name (empty = rm_<MMDD>T<HH:MM> at the start, the official code's).", "")
    use_tensorboard: str = _help("Directory for tensorboard logs (empty = off).", "")
    s3_save_path: str = _help("Accepted for the official code's HH script; upload is left to the user.", "")

    # run control
    stop_after_steps: int = _help(
        "Stop after N optimiser steps, writing a checkpoint, without the final save (simulates a "
        "preemption; --max_steps and the epochs still define the schedule). 0 = off.",
        0,
        range=Range(int, ">= 0", note="0 = off"),
    )
    official_defaults: bool = _help(
        "Read the command line with the official train_rm.py's defaults (OFFICIAL_DEFAULTS: batch, "
        "max_len, learning rate, data order, step unit, held-out split, paths; docs/migration.md); "
        "flags given still win. examples/train_rm.py passes it.",
        False,
    )

    def __post_init__(self) -> None:
        # a packaged model's name (smollm2-135m) becomes its converted folder here, the one step every train-rm entry
        # point, profile and launched rank goes through (converted on first use: goalrm_core.model.pretrained)
        self.pretrain = resolve_model(self.pretrain, "--pretrain")
        if self.contrastive_loss:
            self.reward_model_strategy = "contrastive"
        for f in dataclasses.fields(self):
            if "choices" in f.metadata:
                check_choice(f.name, getattr(self, f.name), f.metadata["choices"])
            if "range" in f.metadata:
                f.metadata["range"].check(getattr(self, f.name), f"--{f.name}")
        if bool(self.chosen_key) != bool(self.rejected_key) or (self.prompt_key and not self.chosen_key):
            raise ValueError(
                "--chosen_key and --rejected_key go together (and --prompt_key only with them): "
                f"got --prompt_key {self.prompt_key!r} --chosen_key {self.chosen_key!r} --rejected_key "
                f"{self.rejected_key!r}"
            )
        if self.input_template:
            check_input_template(self.input_template)
        if self.target_modules:
            from goalrm_core.train.lora import (
                check_target_names,
            )  # lazy: peft itself is imported only to train with LoRA

            check_target_names(self.target_modules)
        if self.load_in_4bit and not self.bf16:
            raise ValueError(
                "--load_in_4bit computes in bf16 (bitsandbytes' compute dtype, as in the official code): add --bf16"
            )
        if self.load_in_4bit and self.lora_rank == 0:
            raise ValueError(
                "--load_in_4bit needs --lora_rank > 0: a 4-bit backbone cannot train whole, only LoRA adapters "
                "beside its frozen 4-bit weights"
            )
        if self.torch_compile and (self.zero_stage == 3 or self.gradient_checkpointing):
            raise ValueError(
                "--torch_compile needs --zero_stage 0, 1 or 2 and no --gradient_checkpointing: ZeRO-3's "
                "parameter hooks and activation recomputation break the compiled graph"
            )
        if self.feature_cache_dir and not (self.train_top_layers and self.feature_cache == "memory"):
            raise ValueError(
                f"--feature_cache_dir {self.feature_cache_dir} keeps the cache of --train_top_layers N > 0 with "
                f"--feature_cache memory: give both, or drop it"
            )
        if self.train_top_layers and self.lora_rank > 0:
            raise ValueError(
                "--train_top_layers trains whole layers; LoRA (--lora_rank) is not combined with it: give one of them"
            )
        if self.train_top_layers and self.zero_stage == 3:
            raise ValueError(
                "--train_top_layers needs --zero_stage 0, 1 or 2: the frozen layers' cache pass runs on whole "
                "weights, which ZeRO-3 partitions"
            )
        if self.train_top_layers and self.gradient_checkpointing and self.gradient_checkpointing_use_reentrant:
            raise ValueError(
                "--train_top_layers with --gradient_checkpointing: drop --gradient_checkpointing_use_reentrant "
                "(reentrant recomputation passes no gradient to layers whose input, the frozen layers' output, needs "
                "none)"
            )
        if self.load_in_4bit and self.zero_stage == 3:
            raise ValueError(
                "--load_in_4bit needs --zero_stage 0, 1 or 2: transformers loads a 4-bit backbone whole on each "
                "GPU, outside ZeRO-3's partitioning"
            )
        if self.preference_loss_coef == 0 and self.dense_loss_coef == 0:
            raise ValueError(
                "--preference_loss_coef 0 leaves the reward head no signal: give --dense_loss_coef > 0 "
                "(a process reward model on per-token labels) or keep the preference loss"
            )
        if self.max_steps and self.contrastive_warmup_steps > self.max_steps:
            raise ValueError(
                f"--contrastive_warmup_steps {self.contrastive_warmup_steps} is longer than --max_steps "
                f"{self.max_steps}: the contrastive weight would never reach --contrastive_loss_beta"
            )
        if self.margin_loss and self.margin:
            raise ValueError(f"--margin_loss takes each pair's margin from the data; drop --margin {self.margin}")
        if self.adam_offload and self.zero_stage == 0:
            raise ValueError(
                "--adam_offload needs --zero_stage 1, 2 or 3 (ZeRO-Offload moves the optimizer state ZeRO partitions)"
            )
        if self.save_format == "official" and self.reward_pool != "last":
            raise ValueError(
                f"--save_format official reads the reward at the last token: drop --reward_pool {self.reward_pool} "
                f"or save with --save_format goalrm"
            )
        if self.save_format == "official" and self.value_head_strategy == "mlp" and self.mlp_head != "official":
            raise ValueError(
                "--save_format official with --value_head_strategy mlp needs --mlp_head official "
                "(the official MLP head's last layer has no bias)"
            )

    @property
    def contrastive(self) -> bool:
        return self.reward_model_strategy == "contrastive"

    def contrastive_settings(self) -> ContrastiveSettings:
        """What the contrastive term reads of this config: the :class:`ContrastiveSettings` fields by their
        names here, and the strategy's own hyperparameters (the fields its registry entry names) as its options.

        >>> TrainRMConfig(pretrain="p", sim_samples=4, contrastive_pairs="matched").contrastive_settings()
        ... # doctest: +ELLIPSIS
        ContrastiveSettings(contrastive_strategy='cosine', contrastive_loss_beta=0.5, sim_samples=4, ...
        """
        options = CONTRASTIVE_STRATEGIES[self.contrastive_strategy].options
        return ContrastiveSettings(
            **{name: getattr(self, name) for name in ContrastiveSettings.setting_names()},
            options={name: getattr(self, name) for name in options},
        )

    def contrastive_beta_at(self, steps_taken: int | None) -> float:
        """The contrastive term's weight β at the optimiser step after ``steps_taken`` steps:
        ``--contrastive_loss_beta``, ramped over the first ``--contrastive_warmup_steps`` steps; the full β for
        ``None`` (evaluation).

        >>> cfg = TrainRMConfig(pretrain="p", contrastive_loss_beta=0.5, contrastive_warmup_steps=4)
        >>> [cfg.contrastive_beta_at(k) for k in (0, 1, 2, 3, 4, 100, None)]
        [0.0, 0.125, 0.25, 0.375, 0.5, 0.5, 0.5]
        """
        beta, warmup = self.contrastive_loss_beta, self.contrastive_warmup_steps
        if steps_taken is None or warmup == 0 or steps_taken >= warmup:
            return beta
        return beta * steps_taken / warmup

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def training_fields(self) -> dict:
        """The fields that decide what is trained: every field but the output ones
        (:data:`OUTPUT_FIELDS`), for a vanilla RM the contrastive ones (:data:`CONTRASTIVE_FIELDS`), and a
        stabiliser that is off (:data:`STABILISER_FIELDS`: an RM stored before it existed keeps its key).
        Two configs with equal training fields (and equal input files) train the same RM.

        >>> a, b = (
        ...     TrainRMConfig(pretrain="p", save_path=path, contrastive_loss_beta=beta)
        ...     for path, beta in (("a", 0.1), ("b", 1.0))
        ... )
        >>> a.training_fields() == b.training_fields()
        True
        >>> a, b = (
        ...     TrainRMConfig(pretrain="p", contrastive_loss=True, contrastive_loss_beta=beta) for beta in (0.1, 1.0)
        ... )
        >>> a.training_fields() == b.training_fields()
        False
        """
        skip = set(OUTPUT_FIELDS) | {"official_defaults"} | (set() if self.contrastive else set(CONTRASTIVE_FIELDS))
        fields = type(self).__dataclass_fields__
        skip |= {name for name in STABILISER_FIELDS if getattr(self, name) == fields[name].default}
        return {k: v for k, v in self.to_dict().items() if k not in skip}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "TrainRMConfig":
        """A config from ``{flag name: value}``; a key that is not a flag is a one-line error."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(f"unknown train-rm argument(s) {unknown}; valid: {', '.join(names)}")
        return cls(**values)

    def to_argv(self) -> list[str]:
        """The command line of this config, in field order: the official code's flags (:data:`OFFICIAL_FLAGS`)
        always, every other field when it differs from its default. Booleans are bare flags
        (``--bf16``, or ``--no-group_by_length`` for one that defaults to on); an empty string at
        its default is left out.

        >>> argv = TrainRMConfig(pretrain="p", bf16=True, group_by_length=False).to_argv()
        >>> argv[:4], "--bf16" in argv, "--no-group_by_length" in argv, "--l2" in argv, "--dataset" in argv
        (['--pretrain', 'p', '--dataset_probs', '1.0'], True, True, False, False)
        """
        argv: list[str] = []
        defaults = parser_defaults(self.official_defaults)  # what the command line is read against
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == defaults[f.name] and (f.name not in OFFICIAL_FLAGS or value == ""):
                continue
            if isinstance(value, bool):
                if value != defaults[f.name]:
                    argv.append(f"--{f.name}" if value else f"--no-{f.name}")
                continue
            argv += [f"--{f.name}", str(value)]
        return argv

    @classmethod
    def from_argv(
        cls, argv: Sequence[str] | None = None, description: str | None = None, prog: str | None = None
    ) -> "TrainRMConfig":
        """Parse a command line (``sys.argv[1:]`` when ``argv`` is None), with the official code's defaults
        (:data:`OFFICIAL_DEFAULTS`) when it holds ``--official_defaults``. Bad values, a number outside
        its declared range included, stop with argparse's one-line error naming the flag, the value
        and the range (exit code 2), as every goalrm command does."""
        argv = list(sys.argv[1:] if argv is None else argv)
        official = "--official_defaults" in argv  # it changes the other flags' defaults, so it is read first
        args = build_parser(cls, description, prog, official=official).parse_args(
            argv
        )  # each number's range is its argparse type
        return cls(**vars(args))


@dataclass(frozen=True)
class OfficialDefault:
    """One default of the official ``examples/train_rm.py`` (or of its trainer) that goalrm's own command line
    does not share: ``official`` as the official code has it, ``value`` what ``--official_defaults`` (and so
    the official entry point ``examples/train_rm.py``) sets, and ``why`` where it comes from and, when
    ``value`` is not ``official``, why it cannot be."""

    official: Any
    why: str
    value: Any = None  # None: the official value itself

    @property
    def applied(self) -> Any:
        return self.official if self.value is None else self.value


# The official code's defaults, defined once: --official_defaults and examples/train_rm.py apply them, the table in
# docs/migration.md is generated from them (python scripts/docs_tables.py --write), and a test keeps both equal.
# Read from the official examples/train_rm.py (argparse defaults), openrlhf/utils (data loading) and
# openrlhf/trainer/rm_trainer.py (the step counter).
OFFICIAL_DEFAULTS: dict[str, OfficialDefault] = {
    "micro_train_batch_size": OfficialDefault(
        8, "the official argparse default; goalrm's 1 is what every official script passes"
    ),
    "max_len": OfficialDefault(512, "the official argparse default; goalrm's 2048 is the paper-math scripts' value"),
    "learning_rate": OfficialDefault(
        1e-5, "the official argparse default; goalrm's 9e-6 is the paper-math scripts' value"
    ),
    "max_samples": OfficialDefault(
        1000000,
        "the official code keeps the first 1,000,000 rows of its blend; goalrm keeps all by default (capped, "
        "its blend's sample of that many)",
    ),
    "save_path": OfficialDefault(
        "./ckpt",
        "the official code writes the RM's files into ./ckpt beside what is there (the README's other RMs); goalrm's "
        "save replaces its folder whole, so the official-defaults run saves to a folder inside ./ckpt",
        value="./ckpt/reward_model",
    ),
    "ckpt_path": OfficialDefault(
        "./ckpt/checkpoints_rm",
        "the official argparse default: beside the default RM folder, as goalrm needs (a --save_path that holds it, "
        "./ckpt itself, is refused with one line: give --ckpt_path)",
    ),
    "wandb_project": OfficialDefault("openrlhf_train_rm", "the official argparse default"),
    "group_by_length": OfficialDefault(
        False,
        "the official DistributedSampler shuffles with the seed, reshuffled each epoch; "
        "goalrm's seeded permutation per epoch is a shuffle too, not the sampler's own",
    ),
    "step_unit": OfficialDefault(
        "micro_batch",
        "the official trainer counts --eval_steps/--save_steps/--logging_steps in one "
        "process's micro-batches; goalrm's own command counts optimiser steps",
    ),
    "eval_source": OfficialDefault(
        "official",
        "the official data loader evaluates on a source's test/validation split, else on "
        "its first 1% of rows (0.1% of a saved single Dataset), which it also trains on; "
        "goalrm's own command holds out a seeded 2% and leaves it out of training",
    ),
}


def parser_defaults(official: bool = False) -> dict[str, Any]:
    """Every field's default on the command line: the dataclass's, or with ``official`` the official code's
    where :data:`OFFICIAL_DEFAULTS` has one.

    >>> parser_defaults(official=True)["max_len"], parser_defaults()["max_len"]
    (512, 2048)
    """
    defaults = {f.name: f.default for f in dataclasses.fields(TrainRMConfig)}
    if official:
        defaults.update({name: entry.applied for name, entry in OFFICIAL_DEFAULTS.items()})
    return defaults


def official_defaults_table() -> str:
    """docs/migration.md's table of the official defaults: one row per :data:`OFFICIAL_DEFAULTS` entry."""

    def shown(value: Any) -> str:
        return f"`{str(value).lower() if isinstance(value, bool) else value}`"

    rows = [
        "| flag | `goalrm train-rm` | the official code | `--official_defaults`, `examples/train_rm.py` | why |",
        "|---|---|---|---|---|",
    ]
    goalrm = parser_defaults()
    for name, entry in OFFICIAL_DEFAULTS.items():
        ours = shown(goalrm[name]) if goalrm[name] != "" else "(empty: `<save_path>.checkpoints`)"
        rows.append(f"| `--{name}` | {ours} | {shown(entry.official)} | {shown(entry.applied)} | {entry.why} |")
    return "\n".join(rows)


def build_parser(
    cls=TrainRMConfig, description: str | None = None, prog: str | None = None, official: bool = False
) -> argparse.ArgumentParser:
    """An argparse parser with one flag per dataclass field, its help text taken from the field; with
    ``official`` the defaults are :func:`parser_defaults` ``(official=True)``."""
    parser = argparse.ArgumentParser(prog=prog, description=description or cls.__doc__)
    defaults = (
        parser_defaults(official) if cls is TrainRMConfig else {f.name: f.default for f in dataclasses.fields(cls)}
    )
    for f in dataclasses.fields(cls):
        # Flags that default to on (here or with the official defaults) can be turned off with --no-<name>.
        on = f.default is True or (
            cls is TrainRMConfig and OFFICIAL_DEFAULTS.get(f.name, OfficialDefault(False, "")).applied is True
        )
        add_field_flag(parser, f, defaults[f.name], negatable=on)
    return parser
