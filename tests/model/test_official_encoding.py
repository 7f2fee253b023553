"""The official encoding against a Llama-style SentencePiece/BPE tokenizer built here (no download)."""

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from goalrm_core.model.encoding import encode_prompt_response


@pytest.fixture(scope="module")
def llama_like():
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    corpus = ["User: what is two plus two? Assistant: the answer is four", "hello world, the sum is 4"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"]))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<unk>"
    )


def test_official_encoding_is_one_call_with_the_tokenizers_bos(llama_like):
    prompt, response = "User: what is two plus two? Assistant:", "the answer is four"
    enc = encode_prompt_response(llama_like, prompt, response, max_len=512, append_eos=False, encoding="official")
    assert enc.input_ids == llama_like(prompt + response)["input_ids"]
    assert enc.input_ids[0] == llama_like.bos_token_id  # what the tokenizer adds by default, as the official call gets
    assert enc.num_actions == len(llama_like(response, add_special_tokens=False)["input_ids"])
    # the split encoding tokenises the response alone: its first piece carries "▁" and no BOS is added
    split = encode_prompt_response(llama_like, prompt, response, max_len=512, append_eos=False, encoding="split")
    assert split.input_ids != enc.input_ids and split.input_ids[0] != llama_like.bos_token_id


def test_official_training_text_ends_with_space_and_eos_even_when_cut(llama_like):
    prompt, response = "User: what is two plus two? Assistant:", "the answer is four"
    full = encode_prompt_response(llama_like, prompt, response, max_len=512, encoding="official")
    assert full.input_ids == llama_like(prompt + response + " </s>")["input_ids"] and not full.truncated
    assert full.input_ids[-1] == llama_like.eos_token_id
    cut = encode_prompt_response(llama_like, prompt, response, max_len=8, encoding="official")
    assert len(cut.input_ids) == 8 and cut.input_ids[-1] == llama_like.eos_token_id and cut.truncated
    assert cut.input_ids[:7] == full.input_ids[:7]  # cut from the right, as the official dataset does
