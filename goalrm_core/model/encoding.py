"""Preference pairs: tokenisation with truncation accounting, and the padding collator.

Two encodings of prompt + response (``ENCODINGS``):

* ``official``: what the official code does. The text ``prompt + response`` (+ ``" " + EOS`` when
  training) is tokenised in **one** call with the tokenizer's own special tokens (a Llama tokenizer
  adds BOS), cut from the right at ``max_len`` with EOS kept last; ``num_actions`` is the length of
  the response tokenised alone, without the ``" " + EOS``. Tokenising the concatenation lets
  SentencePiece merge across the prompt/response boundary, exactly as the official code sees it.
* ``split``: prompt and response are tokenised separately and joined, so ``num_actions`` counts the
  response's own tokens exactly (``" "`` and EOS included when appended) and a too-long prompt is
  cut from the left, never the response. The ToyMath profiles were calibrated with it; for their
  character tokenizer both encodings give the same ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch

from goalrm_core.choices import ENCODINGS
from goalrm_core.data.preferences import AS_IS, NO_INPUT_TEMPLATE, PROMPT_FORM
from goalrm_core.flags import check_choice
from goalrm_core.model.templates import apply_template


@dataclass
class EncodedResponse:
    input_ids: list[int]
    num_actions: int  # response tokens, EOS included
    truncated: bool


@dataclass
class EncodingStats:
    """What tokenisation did to the data: nothing is truncated or dropped silently."""

    n_rows: int = 0
    n_truncated: int = 0
    n_dropped: int = 0
    dropped_rows: list[int] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.n_rows} rows: {self.n_truncated} truncated (prompt cut from the left), {self.n_dropped} "
            "dropped (response alone longer than max_len)"
        )


def encode_prompt_response(
    tokenizer, prompt: str, response: str, max_len: int, append_eos: bool = True, encoding: str = "split"
) -> EncodedResponse | None:
    """Token ids of prompt + response (+ " " + EOS) in one of the ``ENCODINGS``.

    ``split`` cuts the prompt from the left to fit ``max_len`` and returns ``None`` when the response
    alone does not fit (cutting it would lose its end); ``official`` cuts from the right, as the
    official code does, and marks the result ``truncated``.
    """
    if check_choice("encoding", encoding, ENCODINGS) == "official":
        return _encode_official(tokenizer, prompt, response, max_len, append_eos)
    response_text = response + " " if append_eos else response
    # A huge response is dropped without tokenising all of it: if its tail alone overflows, so does it.
    tail = response_text[-8 * max_len :]
    if len(tail) < len(response_text) and len(tokenizer(tail, add_special_tokens=False)["input_ids"]) > max_len:
        return None
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    response_ids = tokenizer(response_text, add_special_tokens=False)["input_ids"]
    if append_eos:
        response_ids = response_ids + [tokenizer.eos_token_id]
    if len(response_ids) > max_len:
        return None
    room = max_len - len(response_ids)
    truncated = len(prompt_ids) > room
    if truncated:
        prompt_ids = prompt_ids[len(prompt_ids) - room :] if room > 0 else []
    return EncodedResponse(prompt_ids + response_ids, len(response_ids), truncated)


def _encode_official(tokenizer, prompt: str, response: str, max_len: int, append_eos: bool) -> EncodedResponse:
    text = prompt + response + (" " + tokenizer.eos_token if append_eos else "")
    ids = tokenizer(text, truncation=True, max_length=max_len)["input_ids"]
    if append_eos and ids:
        ids[-1] = tokenizer.eos_token_id  # the official dataset keeps EOS last even when the text was cut
    num_actions = len(tokenizer(response, add_special_tokens=False)["input_ids"])
    full = len(tokenizer(text)["input_ids"])
    truncated = full > len(ids)
    if (
        truncated
    ):  # the cut fell in the response (or the prompt): the last num_actions ids must all lie after the prompt
        room = len(ids) - len(tokenizer(prompt)["input_ids"])
        num_actions = max(min(num_actions, room), 0)
    return EncodedResponse(ids, min(num_actions, len(ids)), truncated)


def _where(row: dict, row_index: int) -> str:
    return row.get("_source") or f"row {row_index}"  # file:line when the loader recorded it


def require_text(row: dict, key: str, row_index: int) -> str:
    """``row[key]`` as a string (a response must not be empty); an error names the file and line
    when the loader recorded them (``_source``), else the row index."""
    where = _where(row, row_index)
    value = row.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{where}: field {key!r} must be a string, got {type(value).__name__}")
    if key != "question" and not value.strip():
        raise ValueError(f"{where}: field {key!r} is an empty response")
    return value


def row_prompt(row: dict, question: str, template: str, input_template: str = "") -> str:
    """The prompt of a normalised row: ``input_template.format(question)`` (the official ``--input_template``)
    when one is given and the row takes it, else the named ``template``; a row whose prompt form
    (``PROMPT_FORM``) says so keeps its question as it is."""
    form = row.get(PROMPT_FORM)
    if form == AS_IS:
        return question
    if input_template:
        return question if form == NO_INPUT_TEMPLATE else input_template.format(question)
    return apply_template(template, question)


def encode_preference_rows(
    tokenizer, rows: Sequence[dict], template: str, max_len: int, encoding: str = "split", input_template: str = ""
) -> tuple[list[dict], EncodingStats]:
    """Tokenise pairs in the OpenMathInstruct shape (question / correct / incorrect); the prompt is
    :func:`row_prompt`'s. A row's optional ``margin`` is kept on its item (0 when absent).

    Each output item holds chosen/rejected ids and num_actions. A pair is dropped when either
    response alone exceeds ``max_len``; drops and truncations are counted in the stats. A row whose
    two responses are identical is an error naming its file and line (or its index); so are pairs whose
    two sides are identical once cut to ``max_len`` (``official``: a prompt that fills it), counted.
    """
    stats = EncodingStats()
    items = []
    identical: list[tuple[int, dict, str]] = []
    for i, row in enumerate(rows):
        stats.n_rows += 1
        prompt = row_prompt(row, require_text(row, "question", i), template, input_template)
        correct, incorrect = require_text(row, "correct", i), require_text(row, "incorrect", i)
        if correct == incorrect:
            raise ValueError(
                f"{_where(row, i)}: fields 'correct' and 'incorrect' hold the same response, "
                f"so the pair prefers nothing; remove the row"
            )
        chosen = encode_prompt_response(tokenizer, prompt, correct, max_len, encoding=encoding)
        rejected = encode_prompt_response(tokenizer, prompt, incorrect, max_len, encoding=encoding)
        if chosen is None or rejected is None:
            stats.n_dropped += 1
            stats.dropped_rows.append(i)
            continue
        stats.n_truncated += int(chosen.truncated or rejected.truncated)
        if chosen.input_ids == rejected.input_ids:  # the cut left the prompt (and a common start) only
            identical.append((i, row, prompt))
            continue
        item = {
            "chosen_ids": chosen.input_ids,
            "rejected_ids": rejected.input_ids,
            "chosen_num_actions": chosen.num_actions,
            "rejected_num_actions": rejected.num_actions,
            "margin": float(row.get("margin", 0.0)),
        }
        if row.get("first_error_char") is not None:
            item["rejected_error_action"] = error_action(
                tokenizer, incorrect, row["first_error_char"], rejected.num_actions
            )
        items.append(item)
    if identical:
        i, row, prompt = identical[0]
        prompt_len = len(tokenizer(prompt)["input_ids"])
        raise ValueError(
            f"{len(identical)} of {stats.n_rows} pairs have identical chosen and rejected sides once cut to --max_len "
            f"{max_len} (--encoding {encoding}; the first, {_where(row, i)}, has a prompt of {prompt_len} tokens): an "
            "RM would learn nothing from them; raise --max_len above the prompts' length or use --encoding split"
        )
    return items, stats


def error_action(tokenizer, response: str, first_error_char: int, num_actions: int) -> int:
    """Index, among a response's tokens, of the first token that holds its first wrong character
    (the number of tokens of the text before it); -1 when that lies beyond the ``num_actions``
    tokens kept. Exact for a character tokenizer; for a subword one, the token that merges the
    error with what precedes it counts as wrong.

    >>> from goalrm_core.model.tokenization import build_char_tokenizer
    >>> error_action(build_char_tokenizer(), "3+5=9", 4, num_actions=7)
    4
    """
    index = (
        len(tokenizer(response[:first_error_char], add_special_tokens=False)["input_ids"]) if first_error_char else 0
    )
    return index if index < num_actions else -1


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that start at 0 on the first real token, so left padding does not shift them."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def left_pad(sequences: Iterable[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad to the longest sequence, so every response ends at the last position.

    >>> ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [0, 0, 8]], [[1, 1, 1], [0, 0, 1]])
    """
    sequences = [list(s) for s in sequences]
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if seq:
            ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[row, width - len(seq) :] = 1
    return ids, mask


class PreferenceCollator:
    """Stacks chosen then rejected into one left-padded batch of 2B rows, for one forward pass.

    >>> batch = PreferenceCollator(pad_id=0)([{"chosen_ids": [4, 5], "rejected_ids": [4, 6, 7],
    ...     "chosen_num_actions": 1, "rejected_num_actions": 2}])
    >>> batch["input_ids"].tolist(), batch["num_actions"].tolist()
    ([[0, 4, 5], [4, 6, 7]], [1, 2])
    """

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, items: Sequence[dict]) -> dict[str, torch.Tensor]:
        ids, mask = left_pad([it["chosen_ids"] for it in items] + [it["rejected_ids"] for it in items], self.pad_id)
        num_actions = [it["chosen_num_actions"] for it in items] + [it["rejected_num_actions"] for it in items]
        # per row, the response tokens before its first error: all of a chosen response's; -1 = unknown
        error_action = [it["chosen_num_actions"] for it in items] + [
            it.get("rejected_error_action", -1) for it in items
        ]
        return {
            "input_ids": ids,
            "attention_mask": mask,
            "num_actions": torch.tensor(num_actions, dtype=torch.long),
            "error_action": torch.tensor(error_action, dtype=torch.long),
            # one per pair: the data's margin (--margin_loss), 0 for a pair without one
            "margin": torch.tensor([float(it.get("margin", 0.0)) for it in items], dtype=torch.float32),
        }
