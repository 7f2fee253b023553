"""The real-text designs: which texts train, which choose, which are reported.

* **GSM8K** (the paper's math design): questions, each with model solutions marked correct or not, are split
  by question into train, validation and reported (:func:`three_way_split`). Pairs are a correct and an
  incorrect solution of one training question; the question's reference solution may be the correct side
  (:func:`gsm8k_pairs`). Validation and reported questions keep every model solution, to be scored.
* **HH-RLHF harmless** (the natural-language design): pairs are split by dialogue, the text before the last
  assistant turn (:func:`hh_split`), so that no dialogue sits on two sides.

:func:`token_lengths` counts what a ``max_len`` cut would truncate under the model's tokenizer, so that a
report states it. Nothing here reads a model or a file: the recipes load the rows (``goalrm_core.data``'s
adapters) and hand them in.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from goalrm_core.data.questions import preference_pairs, split_by_question

SPLITS = ("train", "validation", "reported")


def three_way_split(rows: Sequence[dict], validation: float, reported: float, seed: int = 0) -> dict[str, list[dict]]:
    """``rows`` split by ``question`` (every row of one question on one side) into train, validation and reported:
    ``reported`` of the questions first, then ``validation`` of all of them from the rest.

    >>> rows = [{"question": q, "i": i} for q in "abcdefghij" for i in range(2)]
    >>> parts = three_way_split(rows, 0.2, 0.3, seed=0)
    >>> {name: len({r["question"] for r in part}) for name, part in parts.items()}
    {'train': 5, 'validation': 2, 'reported': 3}
    """
    if not (0 <= validation < 1 and 0 <= reported < 1 and validation + reported < 1):
        raise ValueError(
            f"validation {validation} and reported {reported} are fractions of the questions that leave some for "
            "training: each in [0, 1), their sum below 1"
        )
    kept, held = split_by_question(rows, reported, seed)
    train, val = split_by_question(kept, validation / (1 - reported), seed + 1) if validation else (kept, [])
    return {"train": train, "validation": val, "reported": held}


def gsm8k_pairs(
    train_rows: Sequence[dict],
    references: Mapping[str, str] | None = None,
    pairs_per_question: int = 2,
    max_pairs: int = 0,
    seed: int = 0,
) -> list[dict]:
    """Correct-vs-incorrect pairs of the training questions' solutions (``generated_solution``, ``is_correct``),
    ``pairs_per_question`` per question at most; with ``references`` (question → reference solution), each
    question's reference is one more correct solution. ``max_pairs`` > 0 keeps a seeded sample of that many.

    >>> rows = [{"question": "q", "generated_solution": s, "is_correct": c} for s, c in (("a", True), ("b", False))]
    >>> [(p["correct"], p["incorrect"]) for p in gsm8k_pairs(rows, {"q": "ref"}, pairs_per_question=4)]
    [('a', 'b'), ('ref', 'b')]
    """
    rows = list(train_rows)
    if references:
        questions = dict.fromkeys(r["question"] for r in rows)
        rows += [
            {"question": q, "generated_solution": references[q], "is_correct": True, "model": "reference"}
            for q in questions
            if q in references
        ]
    pairs = preference_pairs(rows, pairs_per_question, seed)
    if max_pairs and len(pairs) > max_pairs:
        keep = sorted(random.Random(seed).sample(range(len(pairs)), max_pairs))
        pairs = [pairs[i] for i in keep]
    return pairs


def hh_split(pairs: Sequence[dict], validation: float, reported: float, seed: int = 0) -> dict[str, list[dict]]:
    """HH-RLHF pairs (``question`` is the dialogue before the last assistant turn) split by dialogue."""
    return three_way_split(pairs, validation, reported, seed)


@dataclass(frozen=True)
class TokenLengths:
    """How many texts a ``max_len`` cut would truncate, and their token lengths."""

    texts: int
    tokens: int
    over_max_len: int
    max_len: int
    longest: int
    median: float

    def as_dict(self) -> dict:
        return {
            "texts": self.texts,
            "tokens": self.tokens,
            "over_max_len": self.over_max_len,
            "max_len": self.max_len,
            "longest": self.longest,
            "median": self.median,
        }


def token_lengths(tokenizer, prompts: Sequence[str], responses: Sequence[str], max_len: int) -> TokenLengths:
    """Token lengths of prompt + response + EOS (the reward model's input) under ``tokenizer``."""
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts for {len(responses)} responses")
    if not prompts:
        return TokenLengths(0, 0, 0, max_len, 0, 0.0)
    ids = tokenizer([p + r for p, r in zip(prompts, responses)], add_special_tokens=False)["input_ids"]
    lengths = sorted(len(x) + 1 for x in ids)
    mid = len(lengths) // 2
    median = lengths[mid] if len(lengths) % 2 else (lengths[mid - 1] + lengths[mid]) / 2
    return TokenLengths(
        texts=len(lengths),
        tokens=sum(lengths),
        over_max_len=sum(n > max_len for n in lengths),
        max_len=max_len,
        longest=lengths[-1],
        median=float(median),
    )


def fitting_pairs(tokenizer, prompts: Sequence[str], rows: Sequence[dict], max_len: int) -> tuple[list[dict], int]:
    """The pairs whose prompt + each response + EOS fit in ``max_len`` tokens under ``tokenizer`` (``prompts``: each
    row's prompt as the template writes it), and how many were left out. A longer pair would be cut from the left
    until its prompt fills the input, so that its two sides could become the same text: ``train-rm`` refuses such
    pairs, and a scorer could only tie them."""
    if len(prompts) != len(rows):
        raise ValueError(f"{len(prompts)} prompts for {len(rows)} pairs")
    texts = [p + r[side] for p, r in zip(prompts, rows) for side in ("correct", "incorrect")]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    kept = [r for i, r in enumerate(rows) if max(len(ids[2 * i]), len(ids[2 * i + 1])) + 1 <= max_len]
    return kept, len(rows) - len(kept)
