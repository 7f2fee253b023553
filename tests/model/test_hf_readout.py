"""``AutoModelForSequenceClassification`` reads the reward goalrm computes, with and without a trailing EOS.

A Llama tokenizer has no pad token. Padding with EOS (and saving ``pad_token_id`` = EOS) makes transformers end
each sequence at its last token that is not the pad id: one token before a trailing EOS, where goalrm reads the
EOS itself. The trainer pads with a token text never holds instead (``distinct_pad_token``) and the saved config
names it, so both read the same token. Built here: a tiny Llama with a Llama-style BPE tokenizer (``<unk>``,
``<s>``, ``</s>``, no pad), saved as a ``--pretrain`` folder; and, where the real LM's tokenizer is on this
machine, SmolLM2's (pad = EOS = ``<|im_end|>``) on a tiny Llama of its vocabulary."""

import os
import shutil
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    LlamaForCausalLM,
    LlamaModel,
    PreTrainedTokenizerFast,
)

from goalrm_core.model.encoding import encode_prompt_response
from goalrm_core.model.reward_model import RewardModel, load_reward_model, save_reward_model, tiny_llama_config
from goalrm_core.train.batching import load_tokenizer
from goalrm_core.train.config import TrainRMConfig

# the real LM's tokenizer where another session's download left it (tests never download)
REAL_TOKENIZER = Path(os.environ.get("GOALRM_REAL_TOKENIZER", "/tmp/reallm/cache/smollm2-135m"))
PROMPT, RESPONSE = "User: what is two plus two? Assistant:", " the answer is four"


def llama_like_without_pad() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    corpus = ["User: what is two plus two? Assistant: the answer is four", "hello world, the sum is 4"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"]))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def pretrain_folder(path: Path, tokenizer) -> Path:
    """A tiny Llama saved with ``tokenizer`` as a ``--pretrain`` folder, its config with no pad id (as Llama's)."""
    config = tiny_llama_config(
        len(tokenizer),
        hidden_size=16,
        num_layers=2,
        num_heads=2,
        max_position_embeddings=128,
        pad_token_id=None,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def trained_like_rm(pretrain: Path, out: Path) -> tuple[Path, object]:
    """An RM saved as the trainer saves it: the trainer's tokenizer (``load_tokenizer``), a backbone of ``pretrain``."""
    tokenizer = load_tokenizer(TrainRMConfig(pretrain=str(pretrain)))
    torch.manual_seed(1)
    model = RewardModel(LlamaModel.from_pretrained(pretrain)).eval()
    torch.nn.init.normal_(model.head.weight, std=1.0)  # a head that tells tokens apart
    return save_reward_model(model, out, tokenizer, training_args={"seed": 1}), tokenizer


def assert_hf_reads_goalrms_reward(path: Path) -> None:
    ours_model = load_reward_model(path)
    hf = AutoModelForSequenceClassification.from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert tokenizer.pad_token_id != tokenizer.eos_token_id and hf.config.pad_token_id == tokenizer.pad_token_id
    with_eos = encode_prompt_response(tokenizer, PROMPT, RESPONSE, max_len=128, encoding="official").input_ids
    without_eos = encode_prompt_response(
        tokenizer, PROMPT, RESPONSE, max_len=128, append_eos=False, encoding="official"
    ).input_ids
    assert with_eos[-1] == tokenizer.eos_token_id and without_eos[-1] != tokenizer.eos_token_id
    seqs = [with_eos, without_eos, with_eos[:5]]
    with torch.no_grad():
        ours = torch.stack(
            [ours_model(torch.tensor([s]), torch.ones(1, len(s), dtype=torch.long)).reward[0] for s in seqs]
        )
        single = torch.stack([hf(torch.tensor([s])).logits[0, 0] for s in seqs])
        # a batch as a Hugging Face user pads it, with the saved tokenizer's pad token on the right
        tokenizer.padding_side = "right"
        batch = tokenizer.pad({"input_ids": seqs}, return_tensors="pt")
        batched = hf(**batch).logits[:, 0]
        one_early = ours_model(
            torch.tensor([with_eos[:-1]]), torch.ones(1, len(with_eos) - 1, dtype=torch.long)
        ).reward[0]
    torch.testing.assert_close(single, ours, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batched, ours, atol=1e-5, rtol=1e-5)
    assert (
        abs(float(ours[0] - one_early)) > 1e-4
    )  # the token before EOS reads another reward: the test can tell them apart


def test_a_llama_tokenizer_without_pad_trains_with_unk_as_pad_and_hf_reads_goalrms_reward(tmp_path):
    pretrain = pretrain_folder(tmp_path / "policy", llama_like_without_pad())
    path, tokenizer = trained_like_rm(pretrain, tmp_path / "rm")
    assert tokenizer.pad_token == "<unk>"
    assert_hf_reads_goalrms_reward(path)


def test_a_pad_token_given_on_the_command_line_is_kept(tmp_path):
    pretrain = pretrain_folder(tmp_path / "policy", llama_like_without_pad())
    assert load_tokenizer(TrainRMConfig(pretrain=str(pretrain), pad_token="</s>")).pad_token == "</s>"


def test_a_tokenizer_with_a_reserved_token_and_no_unk_pads_with_the_reserved_token():
    from goalrm_core.model.tokenization import distinct_pad_token

    tok = llama_like_without_pad()
    tok.add_special_tokens({"additional_special_tokens": ["<|reserved_special_token_0|>"]})
    tok.unk_token = None
    assert distinct_pad_token(tok) == "<|reserved_special_token_0|>"
    assert (
        distinct_pad_token(tok, vocab_size=tok.convert_tokens_to_ids("<|reserved_special_token_0|>")) is None
    )  # no embedding row


@pytest.mark.skipif(
    not (REAL_TOKENIZER / "tokenizer.json").is_file(), reason=f"the real LM's tokenizer is not at {REAL_TOKENIZER}"
)
def test_the_real_lms_tokenizer_pads_with_a_token_other_than_eos_and_hf_reads_goalrms_reward(tmp_path):
    source = tmp_path / "tokenizer"
    source.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
        if (REAL_TOKENIZER / name).is_file():
            shutil.copyfile(REAL_TOKENIZER / name, source / name)
    real = AutoTokenizer.from_pretrained(source)
    assert real.pad_token_id == real.eos_token_id  # SmolLM2 pads with EOS: the case that read one token early
    pretrain = pretrain_folder(tmp_path / "policy", real)
    path, tokenizer = trained_like_rm(pretrain, tmp_path / "rm")
    assert tokenizer.pad_token == tokenizer.unk_token == "<|endoftext|>"
    assert_hf_reads_goalrms_reward(path)
