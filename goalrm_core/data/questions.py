"""Rows keyed by question: grouping, splitting with no question on both sides, and preference pairs.

Every row here is a mapping with a ``question`` field (a generation, a pair or a scored row). These
are the project's only definitions of the three operations.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from goalrm_core.data.io import parse_label

PAIRINGS = ("combinations", "each_incorrect")


def group_by_question(rows: Iterable[dict]) -> dict[str, list[dict]]:
    """Rows grouped by question text, questions in order of first appearance.

    >>> list(group_by_question([{"question": "b"}, {"question": "a"}, {"question": "b"}]).items())
    [('b', [{'question': 'b'}, {'question': 'b'}]), ('a', [{'question': 'a'}])]
    """
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["question"], []).append(row)
    return groups


def held_out_questions(questions: Sequence[str], fraction: float, seed: int = 0) -> set[str]:
    """A random ``fraction`` of ``questions`` (at least one, never all of them, none when
    ``fraction`` is 0), drawn by shuffling them in the order given with ``random.Random(seed)``.

    >>> sorted(held_out_questions(["a", "b", "c", "d"], 0.5, seed=0))
    ['a', 'c']
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"the held-out fraction must be in [0, 1), got {fraction}")
    order = list(dict.fromkeys(questions))
    random.Random(seed).shuffle(order)
    n_held = 0 if fraction == 0 or len(order) < 2 else min(max(int(len(order) * fraction), 1), len(order) - 1)
    return set(order[:n_held])


def split_by_question(rows: Sequence[dict], fraction: float, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(kept, held-out) rows with every question on one side only; questions are held out as in
    `held_out_questions`, taken in order of first appearance.

    >>> rows = [{"question": q, "i": i} for q in "abcd" for i in range(2)]
    >>> kept, held = split_by_question(rows, 0.5, seed=0)
    >>> len(kept), len(held), {r["question"] for r in kept} & {r["question"] for r in held}
    (4, 4, set())
    """
    held = held_out_questions([r["question"] for r in rows], fraction, seed)
    return [r for r in rows if r["question"] not in held], [r for r in rows if r["question"] in held]


def preference_pairs(
    rows: Sequence[dict],
    pairs_per_question: int = 2,
    seed: int = 0,
    pairing: str = "combinations",
    carry: Sequence[str] = (),
) -> list[dict]:
    """Preference pairs from generations: a correct and an incorrect solution of the same question,
    as ``{"question", "correct", "incorrect"}`` (plus ``incorrect_<field>`` for each field in
    ``carry``, copied from the incorrect generation). Empty solutions and repeated texts are left out.

    ``pairing`` says which pairs are drawn from one question:

    * ``"combinations"``: every (correct, incorrect) combination of distinct texts is a candidate,
      and ``pairs_per_question`` of them are drawn at random (0 = all);
    * ``"each_incorrect"``: each distinct incorrect text at most once (``pairs_per_question`` of
      them), paired with the distinct correct texts in turn: for tasks whose correct solutions are
      often the same text, so pairs differ by their incorrect side.

    >>> rows = [
    ...     {"question": "q", "generated_solution": s, "is_correct": c}
    ...     for s, c in (("a", True), ("b", False), ("c", False))
    ... ]
    >>> sorted(p["incorrect"] for p in preference_pairs(rows, pairs_per_question=0))
    ['b', 'c']
    >>> [p["correct"] for p in preference_pairs(rows, pairs_per_question=2, pairing="each_incorrect")]
    ['a', 'a']
    """
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    rng = random.Random(seed)
    pairs = []
    for question, gens in group_by_question(rows).items():
        correct: dict[str, dict] = {}
        incorrect: dict[str, dict] = {}
        for g in gens:
            text = g["generated_solution"]
            if not text.strip():
                continue
            if parse_label(g["is_correct"], where=f"question {question!r}"):
                correct.setdefault(text, g)
            else:
                incorrect[text] = g  # a repeated text keeps its first place and its last row
        if pairing == "combinations":
            chosen = [(c, incorrect[i]) for c in correct for i in incorrect]
            rng.shuffle(chosen)
            if pairs_per_question > 0:
                chosen = chosen[:pairs_per_question]
        else:
            good, bad = list(correct), list(incorrect.values())
            rng.shuffle(good)
            rng.shuffle(bad)
            if not good:
                continue
            chosen = [(good[k % len(good)], g) for k, g in enumerate(bad[:pairs_per_question])]
        for good_text, bad_row in chosen:
            pair = {"question": question, "correct": good_text, "incorrect": bad_row["generated_solution"]}
            pairs.append(pair | {f"incorrect_{f}": bad_row[f] for f in carry})
    return pairs
