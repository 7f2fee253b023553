import numpy as np
import pytest

from goalrm_core.cli import metrics as metrics_cli
from goalrm_core.data.io import ArtifactError, write_jsonl
from goalrm_core.evaluation import tables as evaluation


def gen(q, correct, reward, q_values, answer):
    return {
        "question": q,
        "is_correct": correct,
        "reward": reward,
        "num_actions": len(q_values),
        "partial_rewards": [reward] * len(q_values),
        "cosine_sim": q_values,
        "predicted_answer": answer,
        "generated_solution": "x" * (len(q_values) - 2),
    }


HIGH, LOW = [0.5] * 10, [0.5] * 6 + [-0.2] * 4  # LOW drops at token 6: 3 tokens saved


@pytest.fixture
def seed_layout(tmp_path):
    greedy = [
        gen("q1", True, 2.0, HIGH, 1),
        gen("q2", False, -1.0, LOW, 5),
        gen("q3", True, 1.0, HIGH, 3),
        gen("q4", False, 0.5, LOW, 9),
    ]
    # q1: 2 correct kept + 3 wrong (answer 7) that drop -> filtering turns it correct
    # q2: all generations drop -> fallback to plain voting, wrong (answer 8 twice vs correct once)
    samples = (
        [gen("q1", True, 1.0, HIGH, 1)] * 2
        + [gen("q1", False, 0.0, LOW, 7)] * 3
        + [gen("q2", True, 1.0, LOW, 2)]
        + [gen("q2", False, 0.0, LOW, 8)] * 2
    )
    write_jsonl(tmp_path / "rm" / "toy-id" / "greedy" / "scored.jsonl", greedy)
    write_jsonl(tmp_path / "rm" / "toy-id" / "all" / "scored.jsonl", samples)
    return tmp_path


def test_metrics_cli_prints_expected_values(seed_layout, capsys):
    code = metrics_cli.main(
        [
            "--model_name",
            "rm",
            "--eval_results_dir",
            str(seed_layout),
            "--filter_threshold",
            "0.0",
            "--benchmarks",
            "toy-id",
            "--percentiles",
            "0.5",
            "1.0",
            "--n_boot",
            "200",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "toy-id: greedy n=4 AUROC 1.000" in out
    assert "partial AUROC Q-value" in out and "partial AUROC partial reward" in out
    # q1 correct only after filtering, q2 wrong both ways: 0.5 vs 0.0
    assert "filtered voting @0 (goalrm: answerless votes ignored, Wilson CIs, paired t-test): accuracy 0.500 [" in out
    assert "(unfiltered 0.000)" in out
    assert "filtered voting @0 (the official figures): accuracy " in out  # its numbers: tests/test_metrics.py
    # 6 of 8 generations dropped... per question: q1 3/5 = 60%, q2 falls back = 0% -> mean 30%
    assert "generations filtered 30.0%" in out
    # saved tokens: q1's three dropping generations save 3 each = 9 of 80 total
    assert f"tokens saved {9 / 80 * 100:.1f}%" in out


def test_metrics_checks_every_benchmark_before_printing_any(seed_layout, capsys):
    with pytest.raises(ArtifactError, match="toy-nope"):
        metrics_cli.main(
            [
                "--model_name",
                "rm",
                "--eval_results_dir",
                str(seed_layout),
                "--benchmarks",
                "toy-id",
                "toy-nope",
                "--n_boot",
                "20",
            ]
        )
    assert capsys.readouterr().out == ""  # toy-id's results were not printed before the failure


def test_vanilla_scores_cannot_be_filtered(seed_layout):
    rows = evaluation.read_scored(seed_layout / "rm", "toy-id", "all")
    for r in rows:
        r.pop("cosine_sim")
    with pytest.raises(ArtifactError, match="--vanilla"):
        evaluation.filter_summary(rows)


def test_missing_benchmark_lists_existing(seed_layout):
    with pytest.raises(ArtifactError, match="benchmarks in .*: toy-id"):
        evaluation.read_scored(seed_layout / "rm", "gsm8k")


def test_auroc_table_includes_reference_scorers(seed_layout):
    rows = evaluation.read_scored(seed_layout / "rm", "toy-id")
    for i, r in enumerate(rows):
        r["policy_mean_logprob"], r["policy_min_logprob"] = -0.1 * i, -float(i)
    table = evaluation.auroc_table({"baseline": rows, "goal-conditioned": rows}, "toy-id", n_boot=100)
    assert list(table["scorer"]) == [
        "baseline",
        "goal-conditioned",
        "policy mean logprob",
        "policy min logprob",
        "length only",
    ]
    assert table.set_index("scorer").loc["baseline", "auroc"] == 1.0
    delta = evaluation.delta_auroc(rows, rows, n_boot=100)
    assert delta["delta"] == 0.0


def test_all_correct_benchmark_is_undefined_not_a_crash(seed_layout):
    rows = [dict(r, is_correct=True) for r in evaluation.read_scored(seed_layout / "rm", "toy-id")]
    table = evaluation.auroc_table({"rm": rows}, "toy-id", n_boot=50)
    assert np.isnan(table.loc[0, "auroc"]) and "all 4 generations are correct" in table.loc[0, "undefined_reason"]


def test_first_error_summary_sees_the_drop():
    rows = []
    for i in range(6):
        rows.append(
            {
                "question": f"c{i}",
                "is_correct": True,
                "num_actions": 10,
                "cosine_sim": [0.8] * 10,
                "first_error_char": None,
                "generated_solution": "x" * 8,
            }
        )
        rows.append(
            {
                "question": f"w{i}",
                "is_correct": False,
                "num_actions": 10,
                "cosine_sim": [0.8] * 4 + [0.1] * 6,
                "first_error_char": 4,
                "generated_solution": "x" * 8,
            }
        )
    summary = evaluation.first_error_summary(rows, n_boot=100)
    assert summary["prefix_error_auroc"] == pytest.approx(1.0)


def test_fmt_ci_writes_the_command_line_s_interval():
    assert evaluation.fmt_ci(0.61, 0.55, 0.672) == "0.610 [0.550, 0.672]"
    assert (
        evaluation.fmt_ci(0.61, None, 0.7) == evaluation.fmt_ci(0.61, float("nan"), 0.7) == "0.610 [interval undefined]"
    )
    assert evaluation.fmt_ci(float("nan"), 0.1, 0.2) == evaluation.fmt_ci(None, None, None) == "undefined"
    assert (
        evaluation.fmt_p(float("nan"), "no pairs") == "undefined (no pairs)" and evaluation.fmt_p(0.01234) == "0.0123"
    )
