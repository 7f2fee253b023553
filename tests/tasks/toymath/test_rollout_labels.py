"""Rollout-estimated step labels: the labelling rule on given verdicts, its line/offset convention against
ToyMath's exact labels, and the whole estimate through the real sampler with a tiny random policy."""

import importlib.util
import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM

from goalrm_core.data.io import atomic_write_json, read_jsonl, write_jsonl
from goalrm_core.tasks.toymath import rollout_labels as rl
from goalrm_core.tasks.toymath.grading import line_end_tokens
from goalrm_core.tasks.toymath.problems import ToyMathConfig, first_error, generate_problems, problem_from_question
from goalrm_core.tasks.toymath.verify_data import slip_pairs

ROOT = Path(__file__).resolve().parents[3]
CFG = ToyMathConfig(min_steps=3, max_steps=6, operations="+-", modulus=10)


@pytest.fixture(scope="module")
def pairs():
    return slip_pairs(generate_problems(CFG, 60, seed=5), 1, modulus=10, seed=5)


def test_lines_are_the_step_benchs_lines():
    for text in ("3+5=8\n8-7=1\n#1", "3+5=8\n#8\n", "#8"):
        ends = rl.line_ends(text)
        assert [e - 1 for e in ends] == line_end_tokens(text, len(text))
        assert ends[-1] == len(text)
        lines = [text[a:b] for a, b in zip([0] + ends[:-1], ends)]
        assert "".join(lines) == text and all(line.endswith("\n") for line in lines[:-1])


def test_the_line_of_an_exact_label_is_the_graders_line(pairs):
    for pair in pairs:
        err = first_error(problem_from_question(pair["question"], 10), pair["incorrect"])
        assert rl.line_of_char(pair["incorrect"], pair["first_error_char"]) == err.step_index


def test_an_estimate_on_the_exact_line_gives_the_exact_offset_back(pairs):
    for pair in pairs:
        text, char = pair["incorrect"], pair["first_error_char"]
        line = rl.line_of_char(text, char)
        flags = [i < line for i in range(len(rl.line_ends(text)))]
        assert rl.label_from_on_track(text, flags, exact_char=char) == char


@pytest.mark.parametrize(
    "flags, exact, expected",
    [
        ([True, True, True], 10, 14),  # on track throughout: the end of the response
        ([False, False, False], 10, 0),  # earlier than the exact line: that line's first character
        ([True, False, False], 10, 10),  # on the exact line: the exact offset
        ([True, True, False], 10, 12),  # later: the answer line's first character
        ([True, False, True], None, 6),  # the first line not on track decides, later verdicts do not
    ],
)
def test_labelling_rule(flags, exact, expected):
    text = "3+5=8\n8-7=2\n#2"
    assert rl.label_from_on_track(text, flags, exact_char=exact) == expected
    assert rl.estimated_error_line(flags) == (None if all(flags) else flags.index(False))


def test_labelling_rule_rejects_a_verdict_count_that_is_not_the_line_count():
    with pytest.raises(ValueError, match="2 on-track verdicts for a solution of 3 lines"):
        rl.label_from_on_track("3+5=8\n8-7=1\n#1", [True, False])


def test_a_prefix_is_on_track_when_some_continuation_reaches_the_answer():
    problem = problem_from_question("3 +5 -7", 10)  # 3+5=8, 8-7=1, #1
    prefix = "3+5=8\n"
    assert rl.prefix_on_track(prefix, ["8-7=2\n#2", "8-7=1\n#1"], problem.answer)
    assert not rl.prefix_on_track(prefix, ["8-7=2\n#2", "8-7=1\n#"], problem.answer)
    assert not rl.prefix_on_track(prefix, [], problem.answer)


def test_agreement_shares_cover_the_labelled_pairs():
    labels = [
        rl.RolloutLabel(1, 1, (8, 0, 0), 10),
        rl.RolloutLabel(1, 0, (0, 0, 0), 0),
        rl.RolloutLabel(0, 2, (3, 2, 0), 12),
        rl.RolloutLabel(1, None, (8, 8, 1), 14),
        rl.RolloutLabel(None, 0, (0, 0, 0), 0),
    ]
    got = rl.agreement(labels)
    assert (got["n_pairs"], got["n_exact"]) == (5, 4)
    assert [got[k] for k in ("same_line", "earlier", "later", "none")] == [0.25, 0.25, 0.25, 0.25]


def _estimate(policy, tokenizer, pairs, seed):
    return rl.estimate_first_errors(
        policy, tokenizer, pairs, k=3, temperature=1.0, seed=seed, modulus=10, max_new_tokens=10, batch_size=48
    )


def test_estimate_with_a_tiny_policy_is_one_label_per_pair_and_deterministic(tiny_lm, tokenizer, pairs):
    chosen = pairs[:8]
    labelled, labels = _estimate(tiny_lm, tokenizer, chosen, seed=3)
    assert len(labelled) == len(labels) == len(chosen)
    for pair, new, lab in zip(chosen, labelled, labels):
        assert {k: v for k, v in new.items() if k != "first_error_char"} == {
            k: v for k, v in pair.items() if k != "first_error_char"
        }
        assert lab.n_lines == len(rl.line_ends(pair["incorrect"]))
        assert all(0 <= h <= 3 for h in lab.hits) and lab.hits[-1] == 0  # a slip's own answer is wrong
        assert lab.exact_line == rl.line_of_char(pair["incorrect"], pair["first_error_char"])
        flags = [h > 0 for h in lab.hits]
        assert lab.estimated_line == rl.estimated_error_line(flags)
        assert lab.estimated_line is not None  # the last line (the slip's own answer) is never on track
        assert (
            new["first_error_char"]
            == lab.first_error_char
            == rl.label_from_on_track(pair["incorrect"], flags, pair["first_error_char"])
        )
        assert 0 <= lab.first_error_char <= len(pair["incorrect"])
    again = _estimate(tiny_lm, tokenizer, chosen, seed=3)
    assert again == (labelled, labels)


def test_estimate_names_the_pair_and_field_of_bad_input(tiny_lm, tokenizer, pairs):
    with pytest.raises(ValueError, match="pair 1: field 'incorrect'"):
        _estimate(tiny_lm, tokenizer, [pairs[0], {"question": pairs[1]["question"]}], seed=0)
    with pytest.raises(ValueError, match=r"pair 0: first_error_char must be an integer offset"):
        _estimate(tiny_lm, tokenizer, [{**pairs[0], "first_error_char": 999}], seed=0)


def test_script_writes_the_two_files_and_a_row(tmp_path, tiny_config, tokenizer, pairs):
    run = tmp_path / "run"
    torch.manual_seed(0)
    LlamaForCausalLM(tiny_config).save_pretrained(run / "data" / "policy")
    tokenizer.save_pretrained(run / "data" / "policy")
    atomic_write_json(run / "data" / "benchmarks" / "task.json", {"toymath": asdict(CFG), "benchmarks": []})
    data = run / "calibration" / "cal" / "data"
    write_jsonl(data / "train.jsonl", pairs[:12])
    spec = importlib.util.spec_from_file_location("rollout_labels_script", ROOT / "scripts" / "rollout_labels.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    table = tmp_path / "table.jsonl"
    argv = [
        "--run_dir",
        str(run),
        "--name",
        "cal",
        "--n",
        "5",
        "--k",
        "2",
        "--max_new_tokens",
        "8",
        "--table",
        str(table),
    ]
    assert script.main(argv) == 0
    exact, rollout = read_jsonl(data / "exact-5.jsonl"), read_jsonl(data / "rollout-k2-5.jsonl")
    assert exact == script.subset(pairs[:12], 5, 0) and len({p["question"] for p in exact}) == 5
    assert [{**p, "first_error_char": None} for p in rollout] == [{**p, "first_error_char": None} for p in exact]
    assert len(read_jsonl(data / "rollout-k2-5.labels.jsonl")) == 5
    row = json.loads(table.read_text().splitlines()[-1])
    assert (row["n_pairs"], row["k"], row["temperature"], row["n_available"]) == (5, 2, 1.0, 12)
    assert row["n_rollouts"] == 2 * sum(len(rl.line_ends(p["incorrect"])) - 1 for p in exact)
    with pytest.raises(SystemExit):
        script.main(argv[:4] + ["--n", "13", "--table", str(table)])
