"""Shared fixtures: a tiny Llama and the character tokenizer, built locally (nothing is downloaded)."""

from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM

from goalrm_core.models import tiny_llama_config
from goalrm_core.tokenization import build_char_tokenizer

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def tokenizer():
    return build_char_tokenizer()


@pytest.fixture(scope="session")
def tiny_config(tokenizer):
    return tiny_llama_config(len(tokenizer), hidden_size=32, num_layers=2, num_heads=4, max_position_embeddings=256)


@pytest.fixture(scope="session")
def tiny_policy_dir(tmp_path_factory, tokenizer, tiny_config):
    """A randomly initialised causal LM saved like a Hub checkpoint, for --pretrain."""
    path = tmp_path_factory.mktemp("tiny_policy")
    torch.manual_seed(0)
    LlamaForCausalLM(tiny_config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
