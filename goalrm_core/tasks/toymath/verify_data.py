"""Preference pairs for reward models that must *verify* the arithmetic, not spot garbled text.

The policy's own incorrect samples at a high temperature are mostly malformed (``4-3>#3``), which an
RM can learn to reject by their shape alone. Two kinds of pairs whose rejected side is well-formed:

- ``policy_well_formed``: the policy's pairs, keeping only those whose incorrect solution is
  well-formed (:func:`~goalrm_core.tasks.toymath.grading.is_well_formed`);
- ``slips``: synthetic pairs, free to make in any number: the reference solution against the same
  solution with one step's result changed and the change carried through the later steps, so the
  rejected side holds exactly one wrong fact and is otherwise consistent;
- ``confident``: a second generator taught wrong every fact the policy is taught wrong, and a few more
  (:func:`covering_fact_table`), so its errors are confident ones on the policy's own facts: the
  reference solution against that generator's chain (:func:`confident_pairs`), where they differ.

>>> from goalrm_core.tasks.toymath.problems import Problem, chain_steps
>>> p = Problem.from_steps(chain_steps(3, [("+", 5), ("-", 7)], modulus=10))
>>> text, offset = slip(p, step=0, delta=1, modulus=10)
>>> text, offset, p.solution()
('3+5=9\\n9-7=2\\n#2', 4, '3+5=8\\n8-7=1\\n#1')
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from goalrm_core.tasks.toymath import problems as toymath

# The training sets a calibration run can draw its pairs from (scripts/calibrate_rm.py --data).
PAIR_SOURCES = ("policy", "policy_well_formed", "slips", "policy+slips", "confident", "confident+slips")


def slip(problem: toymath.Problem, step: int, delta: int, modulus: int) -> tuple[str, int]:
    """The reference solution with step ``step``'s result moved by ``delta`` (mod ``modulus``), the
    later steps chained from the wrong result; returns the text and the offset of its first wrong
    character."""
    if not 0 <= step < len(problem.steps):
        raise ValueError(f"step must be in [0, {len(problem.steps)}), got {step}")
    if modulus < 2 or delta % modulus == 0:
        raise ValueError(
            f"a slip needs modulus >= 2 and a delta that is not a multiple of it, got {delta} mod {modulus}"
        )
    steps = list(problem.steps)
    a, op, b, c = steps[step]
    steps[step] = (a, op, b, (c + delta) % modulus)
    for i in range(step + 1, len(steps)):
        _, op_i, b_i, _ = steps[i]
        prev = steps[i - 1][3]
        steps[i] = (prev, op_i, b_i, toymath.apply_op(prev, op_i, b_i, modulus))
    text = toymath.format_solution(steps)
    reference = problem.solution()
    first = next(i for i, (x, y) in enumerate(zip(text, reference)) if x != y)
    return text, first


def slip_pairs(problems: Sequence[toymath.Problem], per_question: int, modulus: int, seed: int = 0) -> list[dict]:
    """``per_question`` slips of each problem (a random step and a random nonzero change each), as
    preference pairs ``{question, correct, incorrect, first_error_char}``."""
    if modulus < 2:
        raise ValueError(f"slips need a modulus >= 2 (digit chains), got {modulus}")
    rng = random.Random(seed)
    pairs = []
    for problem in problems:
        for _ in range(per_question):
            text, first = slip(problem, rng.randrange(len(problem.steps)), rng.randrange(1, modulus), modulus)
            pairs.append(
                {
                    "question": problem.question,
                    "correct": problem.solution(),
                    "incorrect": text,
                    "first_error_char": first,
                }
            )
    return pairs


def covering_fact_table(cfg: toymath.ToyMathConfig, extra: int, seed: int = 0) -> dict[tuple[int, str, int], int]:
    """The mis-taught facts of a second, confidently wrong generator: every fact the policy is taught
    wrong (``toymath.mistaught_fact_table(cfg)``, with its wrong result) and ``extra`` more '+'/'-' facts
    (neither held out nor already in the table), each given a seeded wrong result."""
    if extra < 0:
        raise ValueError(f"extra must be >= 0, got {extra}")
    table = dict(toymath.mistaught_fact_table(cfg))
    held = set(toymath.heldout_fact_set(cfg)) if cfg.heldout_facts else set()
    free = [f for f in toymath._fact_space(cfg.modulus) if f not in table and f not in held]
    if extra > len(free):
        raise ValueError(f"extra ({extra}) exceeds the {len(free)} facts neither held out nor mis-taught")
    rng = random.Random(seed)
    for f in rng.sample(free, extra):
        table[f] = (toymath.apply_op(*f, cfg.modulus) + rng.randrange(1, cfg.modulus)) % cfg.modulus
    return table


def confident_steps(problem: toymath.Problem, table: dict, modulus: int) -> list:
    """The chain a generator taught ``table`` writes for ``problem``: every step asserting a fact of
    ``table`` gives its wrong result, and the later steps chain from it."""
    steps, acc = [], problem.steps[0][0]
    for _, op, b, _ in problem.steps:
        result = table.get((acc, op, b), toymath.apply_op(acc, op, b, modulus))
        steps.append((acc, op, b, result))
        acc = result
    return steps


def confident_pairs(problems: Sequence[toymath.Problem], table: dict, modulus: int) -> list[dict]:
    """Preference pairs of a confidently wrong generator: for each problem whose chain meets a fact of
    ``table``, the reference solution against the generator's solution (:func:`confident_steps`);
    problems it gets right give no pair."""
    pairs = []
    for problem in problems:
        text = toymath.format_solution(confident_steps(problem, table, modulus))
        reference = problem.solution()
        if text == reference:
            continue
        first = next(i for i, (x, y) in enumerate(zip(text, reference)) if x != y)
        pairs.append({"question": problem.question, "correct": reference, "incorrect": text, "first_error_char": first})
    return pairs


def policy_well_formed(pairs: Sequence[dict]) -> list[dict]:
    """The policy's pairs whose incorrect solution is well-formed."""
    return [p for p in pairs if toymath.is_well_formed(p["incorrect"])]
