"""The `confident` design: facts taught wrong in every SFT solution, and pairs from a second generator."""

import re

import pytest

from goalrm_core.data.io import read_jsonl
from goalrm_core.tasks.toymath import pipeline as tp
from goalrm_core.tasks.toymath.problems import (
    ToyMathConfig,
    apply_op,
    first_error,
    generate_problems,
    heldout_fact_set,
    is_well_formed,
    mistaught_error,
    mistaught_fact_table,
    taught_solution,
    taught_steps,
)
from goalrm_core.tasks.toymath.verify_data import covering_fact_table

CFG = ToyMathConfig(
    min_steps=3,
    max_steps=6,
    operand_min=1,
    operand_max=9,
    operations="+-",
    modulus=10,
    heldout_facts=12,
    mistaught_facts=12,
)


def test_the_mistaught_facts_are_a_fixed_draw_disjoint_from_the_heldout_ones():
    table = mistaught_fact_table(CFG)
    assert len(table) == 12 and table == mistaught_fact_table(ToyMathConfig(**{**CFG.__dict__}))
    assert not set(table) & heldout_fact_set(CFG)
    for (a, op, b), wrong in table.items():
        assert 0 <= wrong < 10 and wrong != apply_op(a, op, b, 10)
    assert mistaught_fact_table(ToyMathConfig(modulus=10, operand_max=9)) == {}


def test_every_sft_solution_asserts_each_mistaught_fact_wrong_and_every_other_fact_right():
    table = mistaught_fact_table(CFG)
    touched = 0
    for problem in generate_problems(CFG, 500, seed=1):
        steps = taught_steps(problem, CFG)
        assert [(op, b) for _, op, b, _ in steps] == [(op, b) for _, op, b, _ in problem.steps]
        assert steps[0][0] == problem.steps[0][0]
        for i, (a, op, b, c) in enumerate(steps):
            assert c == table.get((a, op, b), apply_op(a, op, b, 10))  # the taught fact, or the true one
            if i:
                assert a == steps[i - 1][3]  # chained from the taught result
        text = taught_solution(problem, CFG)
        assert is_well_formed(text)
        if any((a, op, b) in table for a, op, b, _ in steps):
            touched += 1
            assert first_error(problem, text) is not None and mistaught_error(problem, text, CFG)
        else:
            assert text == problem.solution()
    assert touched > 50  # the design asks for them often enough to matter


def test_without_mistaught_facts_the_sft_solutions_are_the_references():
    cfg = ToyMathConfig(min_steps=3, max_steps=6, operand_max=9, operations="+-", modulus=10, heldout_facts=12)
    for problem in generate_problems(cfg, 50, seed=2):
        assert taught_solution(problem, cfg) == problem.solution()


def test_mistaught_error_is_false_for_other_errors():
    problem = next(
        p
        for p in generate_problems(CFG, 500, seed=3)
        if (p.steps[0][0], p.steps[0][1], p.steps[0][2]) not in mistaught_fact_table(CFG)
    )
    a, op, b, c = problem.steps[0]
    wrong_first = problem.solution().replace(f"{a}{op}{b}={c}", f"{a}{op}{b}={(c + 1) % 10}", 1)
    assert not mistaught_error(problem, wrong_first, CFG)
    assert not mistaught_error(problem, problem.solution(), CFG)
    assert not mistaught_error(problem, "garbled", CFG)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mistaught_facts": -1, "modulus": 10}, "mistaught_facts"),
        ({"mistaught_facts": 3, "modulus": 0}, "mistaught_facts"),
        ({"mistaught_facts": 171, "heldout_facts": 10, "modulus": 10}, "not held out"),
    ],
)
def test_bad_mistaught_counts_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ToyMathConfig(**kwargs)


def test_slip_pairs_come_from_the_reference_not_the_policy_and_split_by_question(tmp_path):
    tp.write_benchmarks(tmp_path, CFG, 20, seed=0)
    problems = tp.training_problems(tmp_path, CFG, 60, seed=1)
    stats = tp.build_slip_preference_data(tmp_path, problems, slips_per_question=3, eval_fraction=0.2, seed=0)
    train = read_jsonl(tmp_path / "data" / "preference" / "train.jsonl")
    held = read_jsonl(tmp_path / "data" / "preference" / "eval.jsonl")
    assert stats["n_pairs"] == 180 == len(train) + len(held) and held
    assert not {p["question"] for p in train} & {p["question"] for p in held}
    references = {p.question: p.solution() for p in problems}
    for pair in train + held:
        assert pair["correct"] == references[pair["question"]]  # the reference, not the taught solution
        assert is_well_formed(pair["incorrect"]) and pair["incorrect"] != pair["correct"]
    again = tmp_path / "again"
    tp.write_benchmarks(again, CFG, 20, seed=0)
    tp.build_slip_preference_data(again, problems, slips_per_question=3, eval_fraction=0.2, seed=0)
    assert read_jsonl(again / "data" / "preference" / "train.jsonl") == train


def test_an_unknown_pair_source_is_refused():
    profile = {
        "min_chain_steps": 3,
        "max_chain_steps": 6,
        "operand_min": 1,
        "operand_max": 9,
        "operations": "+-",
        "modulus": 10,
        "heldout_facts": 12,
        "mistaught_facts": 12,
        "policy_hidden_size": 32,
        "policy_layers": 1,
        "policy_steps": 1,
        "policy_batch_size": 2,
        "policy_learning_rate": 1e-3,
        "seed": 0,
        "pair_source": "mine",
    }
    with pytest.raises(ValueError, match="pair_source must be one of"):
        tp.configs_from_profile(profile)
    task, _ = tp.configs_from_profile({**profile, "pair_source": "slips"})
    assert task.mistaught_facts == 12


def test_the_policy_is_taught_every_mistaught_fact_wrong_in_every_occurrence(tmp_path):
    tp.write_benchmarks(tmp_path, CFG, 20, seed=0)
    problems = tp.training_problems(tmp_path, CFG, 300, seed=0)
    table = mistaught_fact_table(CFG)
    for problem, (prompt, completion) in zip(problems, tp.sft_examples(tmp_path, problems)):
        assert problem.question in prompt and completion == taught_solution(problem, CFG)
        for line in completion.split("\n")[:-1]:
            fact = (int(line[0]), line[1], int(line[2]))
            assert int(line[4]) == table.get(fact, apply_op(*fact, 10))
    plain = tmp_path / "plain"
    tp.write_benchmarks(plain, ToyMathConfig(**{**CFG.__dict__, "mistaught_facts": 0}), 20, seed=0)
    assert [c for _, c in tp.sft_examples(plain, problems)] == [p.solution() for p in problems]


def test_confident_pairs_assert_the_generators_wrong_facts_and_split_by_question(tmp_path):
    cfg = ToyMathConfig(**{**CFG.__dict__, "mistaught_facts": 6})
    tp.write_benchmarks(tmp_path, cfg, 20, seed=0)
    slips = tp.training_problems(tmp_path, cfg, 40, seed=1)
    others = tp.training_problems(tmp_path, cfg, 80, seed=2)
    stats = tp.build_confident_preference_data(
        tmp_path, slips, others, slips_per_question=1, generator_extra_facts=4, eval_fraction=0.2, seed=0
    )
    train = read_jsonl(tmp_path / "data" / "preference" / "train.jsonl")
    held = read_jsonl(tmp_path / "data" / "preference" / "eval.jsonl")
    assert stats["source"] == "confident+slips" and stats["generator_facts"] == 10
    assert stats["n_slip_pairs"] == 40 and 0 < stats["n_confident_pairs"] <= 80
    assert stats["n_pairs"] == stats["n_slip_pairs"] + stats["n_confident_pairs"] == len(train) + len(held)
    assert not {p["question"] for p in train} & {p["question"] for p in held}
    references = {p.question: p.solution() for p in slips + others}
    table = covering_fact_table(cfg, 4, seed=0)
    assert set(mistaught_fact_table(cfg)) <= set(table)  # the generator errs on every fact the policy errs on
    only_confident = {p.question for p in others} - {p.question for p in slips}
    seen = 0
    for pair in train + held:
        assert pair["correct"] == references[pair["question"]] and is_well_formed(pair["incorrect"])
        if pair["question"] in only_confident:  # the generator's chain: its first wrong line is a fact of its table
            line = pair["incorrect"][: pair["first_error_char"]].count("\n")
            a, op, b, c = re.fullmatch(r"(\d+)([+-])(\d+)=(\d+)", pair["incorrect"].split("\n")[line]).groups()
            assert table[(int(a), op, int(b))] == int(c)
            seen += 1
    assert seen > 0
