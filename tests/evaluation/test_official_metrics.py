"""`goalrm metrics --official` on a folder laid out as the official eval_rm.py writes it, against a hand computation."""

import pytest
from scipy import stats

from goalrm_core.cli.metrics import main as metrics_main
from goalrm_core.data.io import ArtifactError, write_jsonl
from goalrm_core.evaluation.official_metrics import group_by_position, official_set


def row(question, ok, answer, q_tail, reward=0.0, response=None, sample_index=None):
    cos = [0.9] * 5 + q_tail  # the first 5 Q-values are never filtered
    values = response if response is not None else [0.0] * len(cos)
    r = {
        "question": question,
        "generated_solution": "...",
        "predicted_answer": answer,
        "expected_answer": 1,
        "is_correct": ok,
        "reward": reward,
        "partial_rewards": [9.0, 9.0] + values,
        "cosine_sim": cos,
        "num_actions": len(cos),
    }
    if sample_index is not None:
        r["sample_index"] = sample_index
    return r


# greedy output of two questions, then two sample passes, in the official order (one pass per file)
A0 = row("A", True, 1, [0.5, 0.4], reward=0.9, response=[0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0])
B0 = row("B", False, 7, [0.1, 0.1], reward=0.2, response=[0.0, 0.0, 0.8, 0.0, 0.0, 0.0, 0.0])
A1, B1 = row("A", False, 3, [0.2, -0.1]), row("B", True, 1, [0.1, -0.5])
A2, B2 = row("A", False, 3, [-0.3, 0.1]), row("B", False, 7, [0.3, 0.3])


def test_official_printout_matches_a_hand_computation(tmp_path, capsys):
    run = tmp_path / "eval" / "rm" / "gsm8k"
    write_jsonl(run / "greedy" / "output-metrics-dense.jsonl", [A0, B0])
    write_jsonl(
        run / "all" / "output-metrics-dense.jsonl", [A0, B0, A1, B1, A2, B2]
    )  # eval_rm.py's glob: greedy + samples
    assert (
        metrics_main(
            [
                "--model_name",
                "rm",
                "--eval_results_dir",
                str(tmp_path / "eval"),
                "--benchmarks",
                "gsm8k",
                "--percentiles",
                "0.0",
                "0.5",
                "--official",
                "--dataset_len",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    # A: A0 kept and correct, A1 filtered at its 2nd Q (saves 1), A2 at its 1st (saves 2) -> voted correct,
    #    1 of 1 kept correct
    # B: B1 filtered at its 2nd Q (saves 1); B0, B2 kept, both answer 7 -> 0 correct vs 2 wrong: voted wrong,
    #    0 of 2 kept correct
    assert out == [
        "Model: rm",
        "gsm8k: 1.0",  # greedy rewards 0.9 (correct) > 0.2 (wrong)
        "gsm8k @ percentile 0.0: 0.5",  # index max(int(0) - 1, 0) = 0: both 0.0
        "gsm8k @ percentile 0.5: 0.0",  # index int(7 * 0.5) - 1 = 2: 0.1 (correct) < 0.8 (wrong)
        "gsm8k accuracy: 0.5",
        "Average number of generations filtered: 1.5",
        "Total number of generations filtered: 3",
        "Average number of tokens saved: 2.0",
        "Total number of tokens saved: 4",
        "Average number of tokens: 6.0",
        "Total number of tokens: 12",
        "Average proportion correct filtered: 0.5",
        f"Average proportion correct: {(1 / 3 + 1 / 3) / 2}",
        f"Ttest p value: {stats.ttest_ind([1.0, 0.0], [1 / 3, 1 / 3])}",
    ]


def test_a_goalrm_folder_votes_over_greedy_plus_samples_in_pass_order(tmp_path):
    run = tmp_path / "gsm8k"
    samples = [
        {**r, "sample_index": i} for r, i in ((A1, 0), (A2, 1), (B1, 0), (B2, 1))
    ]  # goalrm: question by question
    write_jsonl(run / "greedy" / "output-metrics-dense.jsonl", [A0, B0])
    write_jsonl(run / "all" / "output-metrics-dense.jsonl", samples)
    made = {"outputs": {"gsm8k/greedy/output-metrics-dense.jsonl": None, "gsm8k/all/output-metrics-dense.jsonl": None}}
    rows = official_set(tmp_path, "gsm8k", made)
    assert [(r["question"], r.get("sample_index")) for r in rows] == [
        ("A", None),
        ("B", None),
        ("A", 0),
        ("B", 0),
        ("A", 1),
        ("B", 1),
    ]
    assert [[r["question"] for r in q] for q in group_by_position(rows, 2, "x")] == [["A"] * 3, ["B"] * 3]
    with pytest.raises(ArtifactError, match="rows 0 and 1 hold the same question"):
        group_by_position(samples, 2, "x")  # question-major rows: the official assert
