"""A character-level tokenizer for the embedded ToyMath task, saved as a standard HF tokenizer.

Characters keep arithmetic legible to a tiny model (one digit, one token), and saving through
``PreTrainedTokenizerFast`` means ``AutoTokenizer.from_pretrained(dir)`` works like any Hub tokenizer.
"""

from __future__ import annotations

import string

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]
# Printable ASCII covers ToyMath, its verbose style and the HH/GSM8K text a CPU-scale run may see.
DEFAULT_ALPHABET = "".join(sorted(set(string.printable) - set("\x0b\x0c\r")))


def build_char_tokenizer(alphabet: str = DEFAULT_ALPHABET) -> PreTrainedTokenizerFast:
    """One token per character, plus pad/bos/eos/unk; unknown characters map to ``<unk>``."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in alphabet:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    return tokenizer


def distinct_pad_token(tokenizer, vocab_size: int | None = None) -> str | None:
    """A pad token other than EOS that real text never holds, so that a reader which finds a sequence's end
    by the pad id (``AutoModelForSequenceClassification`` takes the last token that is not the pad id) reads
    the reward where goalrm does, at the last token, even when the text ends with EOS. In this order: the
    tokenizer's own pad token when it is not EOS; its unknown token (Llama 1/2: ``<unk>``, which byte
    fallback never produces; SmolLM2: ``<|endoftext|>``); a reserved special token (Llama 3:
    ``<|reserved_special_token_0|>``). Each must differ from BOS and EOS and, given ``vocab_size``, have an
    embedding row, so the model's shape and its math do not change (padded positions are masked). None when
    the tokenizer has no such token.

    >>> tok = build_char_tokenizer()
    >>> distinct_pad_token(tok)
    '<pad>'
    >>> tok.pad_token = tok.eos_token
    >>> distinct_pad_token(tok)
    '<unk>'
    """
    taken = {tokenizer.eos_token_id, tokenizer.bos_token_id, None}

    def usable(token) -> bool:
        if not token:
            return False
        token_id = tokenizer.convert_tokens_to_ids(token)
        if not isinstance(token_id, int) or token_id in taken:
            return False
        if token_id == tokenizer.unk_token_id and token != tokenizer.unk_token:  # a string the vocabulary lacks
            return False
        return vocab_size is None or 0 <= token_id < vocab_size

    if usable(tokenizer.pad_token):
        return str(tokenizer.pad_token)
    if usable(tokenizer.unk_token):
        return str(tokenizer.unk_token)
    reserved = sorted(
        (
            t.content
            for t in getattr(tokenizer, "added_tokens_decoder", {}).values()
            if t.special and "reserved" in t.content
        ),
        key=tokenizer.convert_tokens_to_ids,
    )
    return next((t for t in reserved if usable(t)), None)
