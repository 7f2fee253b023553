"""ToyMath: generator, notation, checker, first-error location and benchmarks."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import replace

import pytest

from goalrm_core.tasks.toymath.problems import (
    BENCHMARK_SEED_OFFSET,
    BENCHMARKS,
    FirstError,
    Problem,
    ToyMathConfig,
    apply_op,
    benchmark_configs,
    benchmark_questions,
    benchmark_seed,
    first_error,
    format_solution,
    generate_problems,
    is_correct,
    make_benchmark,
    make_problem,
    parse_answer,
    problem_from_question,
    problem_to_row,
)

EXAMPLE_Q = "9 *7 *2 -8 *2"
EXAMPLE_SOLUTION = "9*7=63\n63*2=126\n126-8=118\n118*2=236\n#236"


@pytest.fixture
def example() -> Problem:
    return problem_from_question(EXAMPLE_Q)


# ------------------------------------------------------------------ config and generator


def test_config_help_text_on_every_field():
    for f in dataclasses.fields(ToyMathConfig):
        assert f.metadata.get("help"), f.name


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_steps": 0},
        {"min_steps": 3, "max_steps": 2},
        {"operand_min": 5, "operand_max": 4},
        {"operations": ""},
        {"operations": "+/"},
        {"operations": "++"},
        {"style": "fancy"},
    ],
)
def test_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        ToyMathConfig(**kwargs)


def test_generator_is_deterministic_per_seed():
    cfg = ToyMathConfig()
    a = generate_problems(cfg, 50, seed=1)
    b = generate_problems(cfg, 50, seed=1)
    c = generate_problems(cfg, 50, seed=2)
    assert a == b
    assert [p.question for p in a] != [p.question for p in c]


def test_generator_does_not_touch_global_random_state():
    random.seed(123)
    expected = random.random()
    random.seed(123)
    generate_problems(ToyMathConfig(), 20, seed=0)
    assert random.random() == expected


def test_generated_problems_respect_config_and_are_arithmetically_right():
    cfg = ToyMathConfig(min_steps=2, max_steps=3, operand_min=2, operand_max=9, operations="+*")
    for p in generate_problems(cfg, 200, seed=7):
        assert cfg.min_steps <= len(p.steps) <= cfg.max_steps
        previous = None
        for a, op, b, c in p.steps:
            assert op in cfg.operations
            assert cfg.operand_min <= b <= cfg.operand_max
            assert apply_op(a, op, b) == c
            if previous is not None:
                assert a == previous  # chained from the previous result
            previous = c
        assert p.answer == p.steps[-1][3]
        assert parse_answer(p.solution()) == p.answer
        assert first_error(p, p.solution()) is None
        assert first_error(p, p.solution("verbose")) is None


def test_make_problem_uses_given_rng():
    cfg = ToyMathConfig()
    assert make_problem(random.Random(5), cfg) == make_problem(random.Random(5), cfg)


# ------------------------------------------------------------------ notation


def test_example_notation(example):
    assert example.question == EXAMPLE_Q
    assert example.steps == [(9, "*", 7, 63), (63, "*", 2, 126), (126, "-", 8, 118), (118, "*", 2, 236)]
    assert example.answer == 236
    assert example.solution() == EXAMPLE_SOLUTION
    assert format_solution(example.steps, "terse") == EXAMPLE_SOLUTION


def test_verbose_style(example):
    assert example.solution("verbose") == (
        "9*7=63 multiply\n63*2=126 multiply\n126-8=118 subtract\n118*2=236 multiply\n#236"
    )
    assert problem_from_question("1 +2").solution("verbose") == "1+2=3 add\n#3"
    with pytest.raises(ValueError):
        example.solution("loud")


def test_negative_numbers_are_plain():
    p = problem_from_question("3 -8 *2")
    assert p.solution() == "3-8=-5\n-5*2=-10\n#-10"
    assert first_error(p, p.solution()) is None
    q = problem_from_question("9 --3")  # a negative operand sits right after its operator
    assert q.steps == [(9, "-", -3, 12)]
    assert q.question == "9 --3"


def test_question_round_trip():
    cfg = ToyMathConfig(operand_min=-5, operand_max=15)
    for p in generate_problems(cfg, 200, seed=3):
        assert problem_from_question(p.question) == p


def test_question_parser_tolerates_whitespace(example):
    assert problem_from_question("  9 * 7 *2  -8 *2\n") == example


@pytest.mark.parametrize("bad", ["", "   ", "9", "9 *", "9 /3", "abc", "9 *7 x", "*7", "9 *7 *2.5"])
def test_question_parser_rejects_malformed(bad):
    with pytest.raises(ValueError, match="malformed ToyMath question"):
        problem_from_question(bad)


def test_problem_to_row(example):
    assert problem_to_row(example) == {
        "question": EXAMPLE_Q,
        "expected_answer": 236,
        "reference_solution": EXAMPLE_SOLUTION,
        "n_steps": 4,
    }
    assert problem_to_row(example, style="verbose")["reference_solution"].endswith("multiply\n#236")


# ------------------------------------------------------------------ answer checker


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", None),
        ("no hash here\n1+2=3", None),
        ("#", None),
        ("#-", None),
        ("#12abc", None),
        ("# 12 3", None),
        ("#+5", None),
        ("#236", 236),
        ("#-10", -10),
        ("  #  42  \n", 42),
        ("#42\r", 42),
        ("#1\n#2\n#3", 3),
        ("#1\nsome text\n#7\ntrailing words", 7),
        ("#5\n#oops", None),  # the LAST # line decides, even when malformed
        ("x #5", None),  # '#' must start the line
        ("#٣", None),  # non-ASCII digits are not digits here
        ("#\u00e9\u4e2d\U0001f600", None),
        ("\U0001f600\n#9", 9),
        ("#" + "9" * 999, int("9" * 999)),
        ("#" + "9" * 100_000, None),
        ("#-" + "1" * 5000, None),
    ],
)
def test_parse_answer(text, expected):
    assert parse_answer(text) == expected


def test_parse_answer_never_raises_on_random_text():
    rng = random.Random(0)
    alphabet = "#-+*=0123456789 \n\r\tab\u00e9\u4e2d\U0001f600\x00"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        answer = parse_answer(text)
        assert answer is None or isinstance(answer, int)


def test_is_correct():
    assert is_correct(EXAMPLE_SOLUTION, 236)
    assert not is_correct(EXAMPLE_SOLUTION, 237)
    assert not is_correct("", 0)
    assert is_correct("#-0", 0)
    assert not is_correct("#", 0)


# ------------------------------------------------------------------ first error


def test_first_error_none_for_correct_solutions(example):
    assert first_error(example, EXAMPLE_SOLUTION) is None
    assert first_error(example, example.solution("verbose")) is None
    assert first_error(example, EXAMPLE_SOLUTION + "\n") is None  # trailing newline is harmless


def test_slip_in_second_step(example):
    text = "9*7=63\n63*2=127\n127-8=119\n119*2=238\n#238"
    err = first_error(example, text)
    assert err == FirstError(step_index=1, char_offset=len("9*7=63\n63*2=12"), reason="wrong_step")
    assert text[err.char_offset] == "7"


def test_wrong_operand_copied(example):
    text = "9*7=63\n62*2=124\n124-8=116\n116*2=232\n#232"
    err = first_error(example, text)
    assert err.step_index == 1
    assert err.char_offset == len("9*7=63\n6")
    assert err.reason == "wrong_step"


def test_result_too_long_and_truncated_lines(example):
    err = first_error(example, "9*7=630\n")
    assert (err.step_index, err.char_offset) == (0, 6)
    err = first_error(example, "9*7=6")
    assert (err.step_index, err.char_offset) == (0, 5)  # strict prefix: error at the line's end


def test_missing_final_line(example):
    text = "9*7=63\n63*2=126\n126-8=118\n118*2=236"
    assert first_error(example, text) == FirstError(4, len(text), "missing")
    # with a trailing newline the final line is present but empty: malformed at its first char
    assert first_error(example, text + "\n") == FirstError(4, len(text) + 1, "malformed")


def test_wrong_final_answer_line(example):
    text = "9*7=63\n63*2=126\n126-8=118\n118*2=236\n#237"
    assert first_error(example, text) == FirstError(4, len(text) - 1, "wrong_answer")
    text = "9*7=63\n63*2=126\n126-8=118\n118*2=236\n#"
    assert first_error(example, text) == FirstError(4, len(text) - 1, "malformed")


def test_final_answer_overridden_by_later_hash_line(example):
    text = EXAMPLE_SOLUTION + "\n#5"
    assert not is_correct(text, 236)
    assert first_error(example, text) == FirstError(5, len(EXAMPLE_SOLUTION) + 1, "extra_answer")
    # a repeat of the right answer or plain trailing text does not change the answer
    assert first_error(example, EXAMPLE_SOLUTION + "\n#236\ndone") is None


@pytest.mark.parametrize("garbage", ["", "hello", "\U0001f600\U0001f600", "#236", " 9*7=63", "9 * 7 = 63"])
def test_garbage_is_malformed_at_first_char(example, garbage):
    assert first_error(example, garbage) == FirstError(0, 0, "malformed")


def test_malformed_line_after_correct_prefix(example):
    text = "9*7=63\n63*2=126abc\n"
    assert first_error(example, text) == FirstError(1, len("9*7=63\n"), "malformed")


def test_verbose_explanations_are_ignored_but_errors_are_found(example):
    text = "9*7=63 add\n63*2=126 whatever words\n126-8=117 subtract\n117*2=234 multiply\n#234"
    err = first_error(example, text)
    offset = text.index("126-8=117") + len("126-8=11")
    assert err == FirstError(2, offset, "wrong_step")


def test_wrong_answer_never_passes():
    """Property: over many corrupted solutions, None from first_error implies a correct answer,
    and an incorrect final answer always gives a FirstError."""
    rng = random.Random(11)
    problems = generate_problems(ToyMathConfig(), 60, seed=5)
    alphabet = "0123456789-+*=# \n#xé"
    for p in problems:
        for style in ("terse", "verbose"):
            text = p.solution(style)
            for _ in range(20):
                chars = list(text)
                for _ in range(rng.randint(1, 3)):
                    i = rng.randrange(len(chars) + 1)
                    action = rng.random()
                    if action < 0.4 and i < len(chars):
                        chars[i] = rng.choice(alphabet)
                    elif action < 0.7:
                        chars.insert(i, rng.choice(alphabet))
                    elif i < len(chars):
                        del chars[i]
                mutated = "".join(chars)
                err = first_error(p, mutated)
                if not is_correct(mutated, p.answer):
                    assert err is not None, mutated
                if err is None:
                    assert is_correct(mutated, p.answer), mutated
                else:
                    assert 0 <= err.char_offset <= len(mutated)
                    assert 0 <= err.step_index


# ------------------------------------------------------------------ benchmarks


def test_benchmark_configs_shift_as_intended():
    train = ToyMathConfig(min_steps=2, max_steps=4, operand_min=1, operand_max=12)
    configs = benchmark_configs(train)
    assert set(configs) == set(BENCHMARKS) >= {"toy-id", "toy-long", "toy-big", "toy-mixed"}
    assert configs["toy-id"] == train
    assert (configs["toy-long"].min_steps, configs["toy-long"].max_steps) == (4, 5)
    assert configs["toy-long"].operand_max == 12
    assert configs["toy-big"].operand_max == 15  # ~ +25%, mild
    assert configs["toy-big"].max_steps == 4
    mixed = configs["toy-mixed"]
    assert (mixed.min_steps, mixed.max_steps, mixed.operand_max) == (4, 5, 15)
    assert all(c.operations == train.operations and c.style == train.style for c in configs.values())


def test_benchmarks_are_deterministic_and_disjoint_from_training_seeds():
    train = ToyMathConfig()
    for name in BENCHMARKS:
        first = make_benchmark(name, train, 30)
        assert first == make_benchmark(name, train, 30)
        assert first != make_benchmark(name, train, 30, seed=1)
        seed = benchmark_seed(name)
        assert seed >= BENCHMARK_SEED_OFFSET  # above any training seed
        assert seed == benchmark_seed(name)  # crc32, stable across processes
    seeds = {benchmark_seed(name, s) for name in BENCHMARKS for s in range(3)}
    assert len(seeds) == len(BENCHMARKS) * 3
    # same config as training and same user seed, yet a different question stream
    training = generate_problems(train, 30, seed=0)
    assert [p.question for p in make_benchmark("toy-id", train, 30, seed=0)] != [p.question for p in training]
    with pytest.raises(ValueError, match="unknown ToyMath benchmark"):
        make_benchmark("toy-nope", train, 3)


def test_training_can_exclude_benchmark_questions():
    train = ToyMathConfig(min_steps=1, max_steps=2, operand_max=5)  # small space: collisions likely
    reserved = benchmark_questions(train, 40)
    plain = generate_problems(train, 300, seed=0)
    assert any(p.question in reserved for p in plain)  # the helper is needed in small spaces
    clean = generate_problems(train, 300, seed=0, exclude=reserved)
    assert len(clean) == 300
    assert not any(p.question in reserved for p in clean)
    assert clean == generate_problems(train, 300, seed=0, exclude=reserved)


def test_exclude_raises_when_distribution_is_exhausted():
    tiny = ToyMathConfig(min_steps=1, max_steps=1, operand_min=1, operand_max=1, operations="+")
    with pytest.raises(ValueError, match="too small"):
        generate_problems(tiny, 2, seed=0, exclude={"1 +1"})


# ------------------------------------------------------------------ digit chains

CHAIN = ToyMathConfig(
    min_steps=3, max_steps=6, operand_min=1, operand_max=9, operations="+-", modulus=10, heldout_facts=12
)


def test_digit_chain_results_are_mod_10_and_the_notation_is_unchanged():
    p = problem_from_question("3 +5 -7 +9", modulus=10)
    assert p.solution() == "3+5=8\n8-7=1\n1+9=0\n#0"
    assert p.answer == 0
    # the same question without a modulus is exact arithmetic
    assert problem_from_question("3 +5 -7 +9").answer == 10
    assert first_error(p, "3+5=8\n8-7=1\n1+9=10\n#10").step_index == 2
    for problem in generate_problems(CHAIN, 200, seed=3):
        assert 3 <= len(problem.steps) <= 6
        assert all(0 <= c <= 9 and 1 <= b <= 9 for _, _, b, c in problem.steps)
        assert problem_from_question(problem.question, 10) == problem


def test_heldout_facts_never_in_training_and_always_in_toy_unseen():
    from goalrm_core.tasks.toymath.problems import heldout_fact_set, uses_heldout_fact

    heldout = heldout_fact_set(CHAIN)
    assert len(heldout) == 12 and heldout == heldout_fact_set(replace(CHAIN, operand_min=0))
    assert not any(uses_heldout_fact(p, heldout) for p in generate_problems(CHAIN, 500, seed=0))
    unseen = make_benchmark("toy-unseen", CHAIN, 100)
    assert all(uses_heldout_fact(p, heldout) for p in unseen)


def test_digit_chain_benchmarks_shift_facts_not_lengths():
    configs = benchmark_configs(CHAIN)
    assert list(configs) == ["toy-id", "toy-zero", "toy-times", "toy-unseen"]
    assert all((c.min_steps, c.max_steps, c.modulus) == (3, 6, 10) for c in configs.values())
    zero = make_benchmark("toy-zero", CHAIN, 300)
    assert any(b == 0 for p in zero for _, _, b, _ in p.steps)
    times = [op for p in make_benchmark("toy-times", CHAIN, 400) for _, op, _, _ in p.steps]
    share = times.count("*") / len(times)
    assert 0.08 < share < 0.18  # about one step in eight
    # without held-out facts there is no toy-unseen; with '*' trained there is no toy-times
    assert "toy-unseen" not in benchmark_configs(replace(CHAIN, heldout_facts=0))
    assert "toy-times" not in benchmark_configs(replace(CHAIN, operations="+-*"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"modulus": 1},
        {"modulus": -3},
        {"heldout_facts": 3},  # held-out facts need a modulus
        {"modulus": 10, "heldout_facts": 500},
        {"modulus": 10, "facts": "unseen"},
        {"facts": "some"},
        {"operations": "+-", "operation_weights": (1.0,)},
        {"operations": "+-", "operation_weights": (0.0, 0.0)},
        {"operations": "+-", "operation_weights": (1.0, -1.0)},
    ],
)
def test_digit_chain_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        ToyMathConfig(**kwargs)


def test_profile_data_keys_reach_the_task_and_policy_configs():
    """Notebook 01 builds its configs with ``configs_from_profile``: every key it maps lands in its
    field (values chosen apart from the defaults, so a dropped key shows)."""
    from goalrm_core.tasks.toymath.pipeline import configs_from_profile

    profile = {
        "min_chain_steps": 3,
        "max_chain_steps": 7,
        "operand_min": 2,
        "operand_max": 8,
        "operations": "+",
        "modulus": 10,
        "heldout_facts": 5,
        "policy_hidden_size": 48,
        "policy_layers": 3,
        "policy_steps": 11,
        "policy_batch_size": 17,
        "policy_learning_rate": 0.004,
        "seed": 9,
        "mistaught_facts": 6,
        "pair_source": "slips",
    }
    task, policy = configs_from_profile(profile)
    assert (
        task.min_steps,
        task.max_steps,
        task.operand_min,
        task.operand_max,
        task.operations,
        task.modulus,
        task.heldout_facts,
        task.mistaught_facts,
    ) == (3, 7, 2, 8, "+", 10, 5, 6)
    assert (
        policy.hidden_size,
        policy.num_layers,
        policy.steps,
        policy.batch_size,
        policy.learning_rate,
        policy.seed,
    ) == (48, 3, 11, 17, 0.004, 9)
