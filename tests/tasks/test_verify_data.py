"""Pairs whose rejected side is well-formed: synthetic one-fact slips and the well-formed filter."""

import random
import re

import pytest

from goalrm_core.tasks.toymath import verify_data
from goalrm_core.tasks.toymath.problems import (
    Problem,
    ToyMathConfig,
    apply_op,
    chain_steps,
    first_error,
    generate_problems,
    is_well_formed,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("3+5=8\n8-7=1\n#1", True),
        ("3+5=9\n9-7=2\n#2", True),  # wrong facts, right shape
        ("3+5=8\n#8", True),
        ("3+5=8\n8-7>#1", False),  # a garbled operator
        ("4d-6=8\n#8", False),
        ("3+5=8\n8-7=1", False),  # no answer line
        ("3+5=8\n8-7=1\n#1\n", False),  # a trailing line
        ("3+5=8\n#8 ", False),
        ("#8", False),  # no step line
        ("", False),
    ],
)
def test_is_well_formed(text, expected):
    assert is_well_formed(text) is expected


def test_is_well_formed_takes_any_value():
    assert is_well_formed(None) is False and is_well_formed(42) is False


def test_every_slip_holds_exactly_one_wrong_fact_at_its_offset():
    cfg = ToyMathConfig(min_steps=3, max_steps=6, operations="+-", modulus=10)
    rng = random.Random(0)
    for problem in generate_problems(cfg, 200, seed=3):
        step, delta = rng.randrange(len(problem.steps)), rng.randrange(1, 10)
        text, offset = verify_data.slip(problem, step, delta, modulus=10)
        assert is_well_formed(text) and text != problem.solution()
        err = first_error(problem, text)
        assert err is not None and err.step_index == step and err.char_offset == offset
        lines = text.split("\n")
        # the steps before the slip are the reference's; every later step is right arithmetic on the
        # previous (wrong) result, and the answer line repeats the last result
        assert lines[:step] == problem.solution().split("\n")[:step]
        steps = [
            (int(m[1]), m[2], int(m[3]), int(m[4]))
            for m in (re.fullmatch(r"(-?\d+)([+*-])(-?\d+)=(-?\d+)", ln) for ln in lines[:-1])
        ]
        assert steps[step][3] == (problem.steps[step][3] + delta) % 10
        for prev, (a, op, b, c) in zip(steps[step:], steps[step + 1 :]):
            assert a == prev[3] and c == apply_op(a, op, b, 10)
        assert lines[-1] == f"#{steps[-1][3]}"


def test_slip_refuses_what_cannot_slip():
    problem = Problem.from_steps(chain_steps(3, [("+", 5)], modulus=10))
    with pytest.raises(ValueError, match="step must be in"):
        verify_data.slip(problem, 1, 1, 10)
    with pytest.raises(ValueError, match="multiple"):
        verify_data.slip(problem, 0, 10, 10)


def test_slip_pairs_are_deterministic_and_carry_the_error_offset():
    problems = generate_problems(ToyMathConfig(operations="+-", modulus=10, min_steps=3, max_steps=6), 20, seed=1)
    pairs = verify_data.slip_pairs(problems, 2, modulus=10, seed=5)
    assert pairs == verify_data.slip_pairs(problems, 2, modulus=10, seed=5)
    assert len(pairs) == 40
    for pair in pairs:
        assert set(pair) == {"question", "correct", "incorrect", "first_error_char"}
        assert pair["correct"][: pair["first_error_char"]] == pair["incorrect"][: pair["first_error_char"]]
        assert pair["correct"][pair["first_error_char"]] != pair["incorrect"][pair["first_error_char"]]


def test_policy_well_formed_keeps_only_well_formed_rejections():
    pairs = [
        {"question": "3 +5", "correct": "3+5=8\n#8", "incorrect": "3+5=9\n#9"},
        {"question": "3 +5", "correct": "3+5=8\n#8", "incorrect": "3+5>#9"},
    ]
    assert verify_data.policy_well_formed(pairs) == pairs[:1]


def _confident_cfg(mistaught=12):
    return ToyMathConfig(
        min_steps=3,
        max_steps=6,
        operand_min=1,
        operand_max=9,
        operations="+-",
        modulus=10,
        heldout_facts=12,
        mistaught_facts=mistaught,
    )


def test_covering_fact_table_holds_the_policys_facts_and_is_seeded():
    from goalrm_core.tasks.toymath.problems import heldout_fact_set, mistaught_fact_table

    cfg = _confident_cfg()
    table = verify_data.covering_fact_table(cfg, extra=12, seed=3)
    policy = mistaught_fact_table(cfg)
    assert len(table) == len(policy) + 12
    assert all(table[f] == v for f, v in policy.items())  # the policy's wrong values, kept
    assert all(table[f] != apply_op(*f, 10) for f in table)  # every fact in it is wrong
    assert not set(table) & set(heldout_fact_set(cfg))
    assert verify_data.covering_fact_table(cfg, extra=12, seed=3) == table
    assert verify_data.covering_fact_table(cfg, extra=0) == policy
    with pytest.raises(ValueError, match="extra"):
        verify_data.covering_fact_table(cfg, extra=-1)


def test_confident_pairs_reject_the_generators_chain_and_skip_what_it_gets_right():
    cfg = _confident_cfg()
    table = verify_data.covering_fact_table(cfg, extra=4, seed=0)
    problems = generate_problems(cfg, 300, seed=5)
    pairs = verify_data.confident_pairs(problems, table, 10)
    by_q = {p.question: p for p in problems}
    assert 0 < len(pairs) < len(problems)
    for pair in pairs:
        problem = by_q[pair["question"]]
        assert pair["correct"] == problem.solution()
        assert is_well_formed(pair["incorrect"]) and pair["incorrect"] != pair["correct"]
        k = pair["first_error_char"]
        assert pair["incorrect"][:k] == pair["correct"][:k] and pair["incorrect"][k] != pair["correct"][k]
        err = first_error(problem, pair["incorrect"])
        a, op, b, _ = problem.steps[err.step_index]
        assert (a, op, b) in table  # the first error is one of the generator's facts
    paired = {p["question"] for p in pairs}
    for problem in problems:  # a problem without a pair never meets one of the generator's facts
        if problem.question not in paired:
            assert verify_data.confident_steps(problem, table, 10) == list(problem.steps)
