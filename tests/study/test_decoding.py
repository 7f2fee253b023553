"""Notebook 05's study layer: the method comparison at a matched budget and its verdict prose, the
pruning steps, steering's summary, the metrics, and ``goalrm decode``, on tiny inputs and tiny local
models (fixtures tiny_lm, tiny_rm, tiny_goal in tests/conftest.py)."""

import json

import numpy as np
import pandas as pd
import pytest
from transformers import LlamaForCausalLM

from goalrm_core.data.io import write_jsonl
from goalrm_core.data.rundir import RunDir
from goalrm_core.inference import sampler
from goalrm_core.inference.pruning import PruneConfig
from goalrm_core.inference.sampler import Sample
from goalrm_core.model.reward_model import save_reward_model, tiny_llama_config
from goalrm_core.study import decode_cli
from goalrm_core.study import decoding as dec
from goalrm_core.tasks.toymath.problems import ToyMathConfig

QUESTIONS = ["3 +4", "9 *2 -1"]


def _gen(q, text, answer, ok, tokens, reward, cos):
    return {
        "question": q,
        "generated_solution": text,
        "predicted_answer": answer,
        "is_correct": ok,
        "num_generated_tokens": tokens,
        "reward": reward,
        "cosine_sim": [0.0, cos],
    }


@pytest.fixture
def setup(tmp_path, tiny_lm, tiny_rm, tokenizer, tiny_goal):
    return dec.DecodingSetup(
        tmp_path / "run",
        tiny_lm,
        tiny_rm,
        tokenizer,
        tiny_goal,
        task=ToyMathConfig(),
        benchmarks=["toy-id"],
        n_questions=2,
    )


# ------------------------------------------------------------------------------- the method comparison


def test_sample_method_curves_and_matched_budget():
    qs = ["1 +1", "2 +2"]
    base = [
        _gen("1 +1", "", 2, True, 10, 0.1, 0.0),
        _gen("1 +1", "", 3, False, 10, 0.9, 0.0),
        _gen("2 +2", "", 4, True, 10, 0.5, 0.0),
        _gen("2 +2", "", 5, False, 10, 0.2, 0.0),
    ]
    goalc = [dict(r, reward=1 - r["reward"], cosine_sim=[0.0, float(r["is_correct"])]) for r in base]
    greedy = [_gen("1 +1", "", 3, False, 9, 0, 0), _gen("2 +2", "", 4, True, 11, 0, 0)]
    curves = dec.sample_method_curves(greedy, {dec.BASELINE_RM: base, dec.GOAL_RM: goalc}, qs)
    at = curves.set_index(["method", "n"])["accuracy"]
    assert at["greedy", 1] == 0.5
    assert at["best-of-N baseline reward", 2] == 0.5  # picks the wrong sample of question 1
    assert at["best-of-N goal-conditioned reward", 2] == 0.5
    assert at["best-of-N final Q", 2] == 1.0
    assert at["majority vote", 2] == 1.0  # ties go to the correct answer
    assert curves.set_index(["method", "n"])["tokens"]["majority vote", 2] == 20
    picked = dec.matched_budget(curves, tokens=15).set_index("method")["n"]
    assert picked["majority vote"] == 2 and picked["greedy"] == 1
    keys = dec.methods_metrics({"toy-id": dec.matched_budget(curves, 15)})["toy-id"]
    assert set(keys) == {
        "greedy",
        "majority_vote",
        "best_of_n_baseline_reward",
        "best_of_n_goal_conditioned_reward",
        "best_of_n_final_q",
    }
    with pytest.raises(ValueError, match="no scored generations"):
        dec.sample_method_curves(greedy, {dec.BASELINE_RM: base, dec.GOAL_RM: goalc}, qs + ["5 +5"])


def scored_row(q, text, answer, ok, n, reward, cosine_sim):
    return {
        "question": q,
        "generated_solution": text,
        "predicted_answer": answer,
        "is_correct": ok,
        "num_generated_tokens": n,
        "reward": reward,
        "num_actions": n,
        "partial_rewards": [0.0] * n,
        "cosine_sim": cosine_sim,
    }


def write_scored(run: RunDir, bench: str = "toy-id"):
    """Notebook 04's scored files for two questions, four samples of 10 tokens each: two right, two
    wrong with one shared answer, and a greedy solution per question. The baseline's reward favours a
    wrong sample. Q: on "9 *2 -1" the wrong samples fall to 0.1 and 0.2 after the first token and the
    right ones stay at 0.6; on "3 +4" it is the other way round (right 0.3, wrong 0.6)."""
    right = {
        "3 +4": ("3+4=7\n#7", 7, [0.3] * 10, [0.6] * 10, [0.6] * 10),
        "9 *2 -1": ("9*2=8\n8-1=7\n#7", 7, [0.6] * 10, [0.6] + [0.1] * 9, [0.6] + [0.2] * 9),
    }
    for rm, wrong_reward in ((dec.BASELINE_RM, 0.9), (dec.GOAL_RM, 0.1)):
        rows = []
        for q, (text, answer, q_right, q_x, q_y) in right.items():
            rows += [
                scored_row(q, text, answer, True, 10, 0.5, q_right),
                scored_row(q, "x", 1, False, 10, wrong_reward, q_x),
                scored_row(q, text, answer, True, 10, 0.4, q_right),
                scored_row(q, "y", 1, False, 10, 0.2, q_y),
            ]
        write_jsonl(run.scored(rm, bench, "all"), rows)
        write_jsonl(run.scored(rm, bench, "greedy"), [scored_row(q, "z", 2, False, 6, 0.0, [0.0] * 6) for q in right])


def test_compare_at_matched_budget_reads_the_scored_samples_of_the_decoded_questions(setup):
    write_scored(setup.run)
    beams = {
        "toy-id": [
            {"question": "3 +4", "generated_solution": "3+4=7\n#7", "tokens_generated": 25},
            {"question": "9 *2 -1", "generated_solution": "9*2=18\n#18", "tokens_generated": 15},
        ]
    }
    comparison = dec.compare_at_matched_budget(setup, beams)
    assert comparison.n_questions == 2
    matched = comparison.matched.set_index("method")
    # the beam search: one of two right, 20 tokens per question; 20 tokens buy N = 2 samples (10 each)
    assert matched.loc[dec.BEAM_METHOD, ["accuracy", "tokens", "n"]].tolist() == [0.5, 20.0, 1]
    assert matched.loc["majority vote", ["accuracy", "tokens", "n"]].tolist() == [1.0, 20.0, 2]
    assert matched.loc["best-of-N baseline reward", "accuracy"] == 0.0  # its reward favours the wrong sample
    assert matched.loc["best-of-N goal-conditioned reward", "accuracy"] == 1.0
    assert matched.loc["greedy", ["accuracy", "tokens"]].tolist() == [0.0, 6.0]
    curves = comparison.curves
    assert set(curves["benchmark"]) == {"toy-id"} and curves.query("method == 'majority vote'")["n"].tolist() == [
        1,
        2,
        4,
    ]
    table = dec.matched_table(comparison)
    cell = table.set_index("method").loc[dec.BEAM_METHOD, "toy-id"]  # the method is a column, not a pandas index
    assert cell.startswith("50.0% [") and cell.endswith(
        "] (20 tok, N=1)"
    )  # with its Wilson interval over the 2 questions
    assert "Q-guided beam search reaches 0.50" in dec.methods_reading(comparison)


def matched(rows, n_questions=4):
    frame = pd.DataFrame([{"method": m, "n": n, "accuracy": a, "tokens": t, "benchmark": b} for b, m, n, a, t in rows])
    return dec.MethodComparison(curves=frame, matched=frame, n_questions=n_questions)


def test_methods_reading_says_where_the_beam_search_stands():
    comparison = matched(
        [
            ("toy-id", "greedy", 1, 0.25, 12.0),
            ("toy-id", "majority vote", 2, 0.5, 24.0),
            ("toy-id", dec.BEAM_METHOD, 1, 0.75, 23.6),
            ("toy-zero", "majority vote", 4, 0.5, 60.0),
            ("toy-zero", dec.BEAM_METHOD, 1, 0.25, 40.0),
            ("toy-times", "majority vote", 4, 0.5, 60.0),
            ("toy-times", dec.BEAM_METHOD, 1, 0.5, 40.0),
        ]
    )
    text = dec.methods_reading(comparison)
    assert text == (
        "On toy-id, Q-guided beam search reaches 0.75 with 24 generated tokens per question, "
        "above the best other method "
        "(majority vote: 0.50 at 24 tokens). "
        "On toy-zero, Q-guided beam search reaches 0.25 with 40 generated tokens per question, "
        "below the best other method "
        "(majority vote: 0.50 at 60 tokens). "
        "On toy-times, Q-guided beam search reaches 0.50 with 40 generated tokens per question, "
        "level with the best other method "
        "(majority vote: 0.50 at 60 tokens). "
        "Each accuracy is over 4 questions: a difference of one question is 0.250."
    )
    assert "Each accuracy" not in dec.methods_reading(
        matched([("toy-id", dec.BEAM_METHOD, 1, 0.5, 9.0), ("toy-id", "greedy", 1, 0.5, 9.0)], 0)
    )


# ------------------------------------------------------------------------------- online pruning


def test_pruned_samples_do_not_vote():
    s_ok = Sample([1], [0.0], "1+1=2\n#2", True)
    s_cut = Sample([1], [0.0], "1+1=2\n#2", False, stopped_at=5)
    rows = dec.sample_rows(["1 +1"], [[s_ok, s_cut]])[0]
    assert rows[0]["is_correct"] and rows[0]["predicted_answer"] == 2
    assert not rows[1]["is_correct"] and rows[1]["predicted_answer"] is None


@pytest.mark.slow
def test_pruning_steps_report_tokens_and_accuracy(setup):
    cfg = dec.PruningSetup(n_samples=3, max_new_tokens=10, temperature=1.0)
    unpruned = dec.sample_solutions(setup, QUESTIONS, cfg)
    pruned = dec.sample_solutions(setup, QUESTIONS, cfg, threshold=1.01)
    out = dec.pruning_outcome(unpruned, pruned)
    assert out["tokens_generated"] < out["tokens_generated_unpruned"]
    assert 0 <= out["accuracy"] <= 1 and 0 <= out["accuracy_unpruned"] <= 1
    assert (out["threshold"], out["n_questions"], out["n_samples"]) == (1.01, 2, 3)
    result = dec.pruning_results(setup, {"toy-id": unpruned}, {"toy-id": pruned})
    assert set(result.timings["toy-id"]) == {"wall_s", "wall_s_unpruned"}
    assert result.view().loc["toy-id", "tokens_generated"] == out["tokens_generated"]
    same = dec.pruning_outcome(unpruned, dec.sample_solutions(setup, QUESTIONS, cfg, threshold=-1.0))
    assert same["tokens_generated"] == same["tokens_generated_unpruned"] and same["samples_stopped_pct"] == 0
    with pytest.raises(ValueError, match="same questions"):
        dec.pruning_outcome(unpruned, dec.sample_solutions(setup, QUESTIONS[:1], cfg, threshold=-1.0))


def test_tune_threshold_uses_only_the_other_questions(setup):
    write_scored(setup.run)
    untuned = dec.PruningSetup(rule=PruneConfig(threshold=0.3))
    assert dec.tune_threshold(setup, "toy-id", [], untuned).threshold == 0.3
    tuned = dec.PruningSetup(rule=PruneConfig(threshold=0.3, skip_first=1), tune=True)
    # on "9 *2 -1" alone every threshold votes right; above 0.6 all but one sample (a right one, the
    # first of the highest Q) stop after one token: the fewest tokens, so the lowest candidate above 0.6
    choice = dec.tune_threshold(setup, "toy-id", ["3 +4"], tuned)
    assert choice.tuned and choice.n_validation == 1 and choice.threshold == 0.65
    assert choice.table["chosen"].sum() == 1
    # with "3 +4" too, a threshold above 0.3 stops its right samples and loses its vote: 0.25 wins
    assert dec.tune_threshold(setup, "toy-id", [], tuned).threshold == 0.25
    fallback = dec.tune_threshold(setup, "toy-id", QUESTIONS, tuned)
    assert not fallback.tuned and fallback.threshold == 0.3


@pytest.fixture
def no_generation(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("generation started before the inputs were checked")

    monkeypatch.setattr(sampler, "_sample_batch", fail)


def test_policy_with_other_vocabulary_fails_before_sampling(setup, tokenizer, no_generation):
    setup.policy = LlamaForCausalLM(tiny_llama_config(len(tokenizer) + 10, hidden_size=32, num_layers=1, num_heads=4))
    with pytest.raises(ValueError, match="vocabulary"):
        dec.sample_solutions(setup, ["3 +4"], dec.PruningSetup())


# ------------------------------------------------------------------------------- steering and metrics


def test_steering_summary():
    guided = [
        {"question": "9 *7", "generated_solution": "9*7=63 multiply\n#63"},
        {"question": "1 +1", "generated_solution": "1+1=3 add\n#3"},
    ]
    unguided = [
        {"question": "9 *7", "generated_solution": "9*7=63\n#63"},
        {"question": "1 +1", "generated_solution": "1+1=2\n#2"},
    ]
    out = dec.steering_summary(guided, unguided)
    assert out == {
        "attribute_rate": 1.0,
        "attribute_rate_unguided": 0.0,
        "accuracy": 0.5,
        "accuracy_unguided": 1.0,
        "n_questions": 2,
    }
    examples = dec.steering_examples(dec.SteeringResult(out, guided, unguided), k=1)
    assert examples.to_dict("records") == [
        {"question": "9 *7", "steered": "9*7=63 multiply\n#63", "unguided": "9*7=63\n#63"}
    ]
    shown = dec.examples_frame(examples.to_dict("records"), {"question": "question", "steered": "steered"})
    assert shown.to_dict("records") == [{"question": "9 *7", "steered": "9*7=63 multiply | #63"}]  # one line, readable
    table = dec.steering_frame(dec.SteeringResult(out, guided, unguided))
    assert table.to_dict("records") == [  # one unit per column: every cell a percentage
        {
            "measure": "verbose style (% of solutions)",
            "steered toward the verbose goal": "100.0%",
            "unguided sample": "0.0%",
        },
        {
            "measure": "accuracy (% of questions)",
            "steered toward the verbose goal": "50.0%",
            "unguided sample": "100.0%",
        },
    ]


def test_decoding_metrics_keep_their_keys():
    comparison = matched([("toy-id", "greedy", 1, 0.25, 12.0), ("toy-id", dec.BEAM_METHOD, 1, 0.75, 23.6)])
    row = {
        "threshold": -0.2,
        "n_questions": 4,
        "n_samples": 8,
        "tokens_generated": 156,
        "tokens_generated_unpruned": 192,
        "accuracy": 1.0,
        "accuracy_unpruned": 1.0,
        "samples_stopped_pct": 37.5,
        "tokens_saved_pct": 18.75,
    }
    pruning = dec.PruningResult(
        pd.DataFrame.from_dict({"toy-id": row}, orient="index"), {"toy-id": {"wall_s": 1.0, "wall_s_unpruned": 0.5}}
    )
    out = dec.decoding_metrics(comparison, pruning, dec.SteeringResult({"attribute_rate": 0.5}, [], []))
    n = comparison.n_questions  # each accuracy's question count: its Wilson interval on the front page
    assert out["methods"] == {
        "toy-id": {
            "greedy": {"accuracy": 0.25, "tokens": 12.0, "n": 1, "n_questions": n},
            "q_guided_beam_search": {"accuracy": 0.75, "tokens": 23.6, "n": 1, "n_questions": n},
        }
    }
    assert out["pruning"]["toy-id"] == {
        k: float(row[k])
        for k in (
            "threshold",
            "tokens_generated",
            "tokens_generated_unpruned",
            "accuracy",
            "accuracy_unpruned",
            "samples_stopped_pct",
            "tokens_saved_pct",
        )
    }
    assert out["steering"] == {"attribute_rate": 0.5}


# ------------------------------------------------------------------------------- command line


def test_cli_beam_and_sample(tmp_path, tiny_lm, tiny_rm, tokenizer, tiny_goal):
    tiny_lm.save_pretrained(tmp_path / "policy")
    tokenizer.save_pretrained(tmp_path / "policy")
    save_reward_model(tiny_rm, tmp_path / "rm", tokenizer)
    np.save(tmp_path / "goal.npy", tiny_goal)
    (tmp_path / "q.jsonl").write_text(
        "".join(json.dumps({"question": q, "expected_answer": a}) + "\n" for q, a in (("3 +4", 7), ("2 *2", 4)))
    )
    common = [
        "--policy_path",
        str(tmp_path / "policy"),
        "--reward_model_path",
        str(tmp_path / "rm"),
        "--goal_state_path",
        str(tmp_path / "goal.npy"),
        "--questions_path",
        str(tmp_path / "q.jsonl"),
        "--max_new_tokens",
        "8",
    ]
    assert (
        decode_cli.main(
            [
                "beam",
                *common,
                "--save_path",
                str(tmp_path / "beam.jsonl"),
                "--beam_size",
                "2",
                "--samples_per_step",
                "2",
                "--max_steps",
                "2",
                "--max_line_tokens",
                "4",
            ]
        )
        == 0
    )
    beam = [json.loads(line) for line in (tmp_path / "beam.jsonl").read_text().splitlines()]
    assert len(beam) == 2 and {"generated_solution", "is_correct", "tokens_generated"} <= set(beam[0])
    assert (
        decode_cli.main(
            [
                "sample",
                *common,
                "--save_path",
                str(tmp_path / "s.jsonl"),
                "--n_samples",
                "2",
                "--prune_threshold",
                "1.01",
                "--skip_first",
                "2",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and sum(r["stopped_at"] is not None for r in rows) >= 2
    bad = np.zeros((1, 7), dtype=np.float32)
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(ValueError, match="hidden size"):
        decode_cli.main(
            [
                "beam",
                *common[:4],
                "--goal_state_path",
                str(tmp_path / "bad.npy"),
                *common[6:],
                "--save_path",
                str(tmp_path / "x.jsonl"),
            ]
        )


def test_pruning_section_covers_questions_and_says_when_nothing_was_tested():
    import numpy as np

    from goalrm_core.study.decoding import pruning_section

    rng = np.random.default_rng(0)

    def seed_data(ratio):
        unpruned = rng.integers(50, 100, 20).astype(float)
        correct_u = rng.random(20) < 0.6
        return (
            {
                "tokens_generated": float((unpruned * ratio).sum()),
                "tokens_generated_unpruned": float(unpruned.sum()),
                "accuracy": float(correct_u.mean()),
                "accuracy_unpruned": float(correct_u.mean()),
            },
            {
                "tokens": unpruned * ratio,
                "tokens_unpruned": unpruned,
                "correct": correct_u,
                "correct_unpruned": correct_u,
            },
        )

    pruned = [seed_data(r) for r in (0.8, 0.7, 0.75)]
    section = pruning_section(
        "toy-id", [0, 1, 2], [0.1, 0.2, 0.1], [o for o, _ in pruned], [p for _, p in pruned], n_boot=200
    )
    assert section["pruning_off"] == 0 and section["tokens_ratio"]["interval"] == "seeds and questions"
    assert section["tokens_ratio"]["verdict"] == "holds"
    off = [seed_data(1.0) for _ in range(3)]
    section = pruning_section("toy-id", [0, 1, 2], [-1.0] * 3, [o for o, _ in off], [p for _, p in off], n_boot=200)
    assert section["pruning_off"] == 3
    for key in ("tokens_ratio", "accuracy_change"):
        assert (
            section[key]["verdict"] == "not tested"
            and section[key]["holds"] is None
            and "pruning off" in section[key]["reason"]
        )
