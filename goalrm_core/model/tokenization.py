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
