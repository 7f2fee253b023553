"""The embedded task's base policy: a tiny character-level Llama, SFT-trained on correct solutions.

At paper scale the policy is a given checkpoint (OpenMath-CodeLlama-7B); this module only exists so
the embedded default has a policy that makes real, propagating arithmetic slips.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm
from transformers import LlamaForCausalLM

from goalrm_core.model.encoding import left_pad
from goalrm_core.model.reward_model import tiny_llama_config


@dataclass
class PolicyConfig:
    """Size and SFT schedule of the tiny policy."""

    hidden_size: int = field(default=128, metadata={"help": "Width of the tiny Llama."})
    num_layers: int = field(default=4, metadata={"help": "Transformer blocks."})
    num_heads: int = field(default=4, metadata={"help": "Attention heads."})
    steps: int = field(default=800, metadata={"help": "SFT optimiser steps."})
    batch_size: int = field(default=64, metadata={"help": "Sequences per SFT step."})
    learning_rate: float = field(default=2e-3, metadata={"help": "Peak AdamW learning rate (cosine decay)."})
    warmup_steps: int = field(default=40, metadata={"help": "Linear warm-up steps."})
    seed: int = field(default=0, metadata={"help": "Initialisation and data-order seed."})


def build_policy(tokenizer, cfg: PolicyConfig, max_positions: int = 512) -> LlamaForCausalLM:
    torch.manual_seed(cfg.seed)
    config = tiny_llama_config(
        len(tokenizer),
        cfg.hidden_size,
        cfg.num_layers,
        cfg.num_heads,
        max_positions,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config)


def encode_sft_example(tokenizer, prompt: str, completion: str) -> tuple[list[int], list[int]]:
    """Ids of prompt + completion + EOS, and labels that ignore (-100) the prompt tokens."""
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt_ids + completion_ids, [-100] * len(prompt_ids) + completion_ids


def _lr_factor(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def train_sft(
    model, tokenizer, examples: list[tuple[str, str]], cfg: PolicyConfig, progress: bool = True
) -> list[dict]:
    """Next-token SFT on (prompt, completion) pairs; returns the loss history, one row per step."""
    encoded = [encode_sft_example(tokenizer, p, c) for p, c in examples]
    rng = random.Random(cfg.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, betas=(0.9, 0.95), weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, cfg.steps, cfg.warmup_steps))
    model.train()
    history = []
    order: list[int] = []
    for step in tqdm(range(cfg.steps), desc="SFT", disable=not progress, mininterval=2):
        if len(order) < cfg.batch_size:
            order += rng.sample(range(len(encoded)), len(encoded))
        batch = [encoded[order.pop()] for _ in range(cfg.batch_size)]
        ids, mask = left_pad([b[0] for b in batch], tokenizer.pad_token_id)
        labels, _ = left_pad([b[1] for b in batch], -100)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        history.append({"step": step, "loss": loss.item()})
    model.eval()
    return history
