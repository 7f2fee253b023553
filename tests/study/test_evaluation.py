"""Run-directory helpers of the embedded study: the headline set, every seed's AUROC, the length gate."""

import numpy as np
import pandas as pd
import pytest

from goalrm_core.data.io import write_jsonl
from goalrm_core.data.rundir import RunDir
from goalrm_core.report.index_page import gate_html
from goalrm_core.study import artifacts
from goalrm_core.study import evaluation as ev


def scored_row(q, i, correct, reward, n):
    return {
        "question": q,
        "sample_index": i,
        "is_correct": correct,
        "reward": reward,
        "num_actions": n,
        "generated_solution": "x" * n,
    }


def write_scored(run, rm, seed, bench, rows_all, rows_greedy):
    root = RunDir(run).eval(rm, seed) / bench
    write_jsonl(root / "all" / "scored.jsonl", rows_all)
    write_jsonl(root / "greedy" / "scored.jsonl", rows_greedy)


def test_headline_rows_pick_one_fixed_sample_per_question(tmp_path):
    rows = [scored_row(f"q{q}", i, (q + i) % 2 == 0, float(i), 5) for q in range(4) for i in range(3)]
    greedy = [scored_row(f"q{q}", 0, True, 1.0, 5) for q in range(4)]
    write_scored(tmp_path, "baseline", 0, "toy-id", rows, greedy)
    picked = artifacts.headline_rows(tmp_path, "baseline", "toy-id", "sample0")
    assert [r["question"] for r in picked] == ["q0", "q1", "q2", "q3"]
    assert all(r["sample_index"] == 0 for r in picked)
    assert artifacts.headline_rows(tmp_path, "baseline", "toy-id", "greedy") == greedy
    with pytest.raises(ValueError, match="headline must be one of"):
        artifacts.headline_rows(tmp_path, "baseline", "toy-id", "best")


def auroc_frame(values):
    return pd.DataFrame(
        [
            {"scorer": s, "benchmark": "toy-id", "auroc": a, "ci_low": a - 0.05, "ci_high": a + 0.05}
            for s, a in values.items()
        ]
    )


def test_length_gate_needs_both_rms_above_length_only():
    passed = ev.length_gate(auroc_frame({"baseline": 0.8, "goal-conditioned": 0.82, "length only": 0.6}))
    assert passed["passed"] and passed["length_only"]["auroc"] == 0.6
    failed = ev.length_gate(auroc_frame({"baseline": 0.8, "goal-conditioned": 0.55, "length only": 0.6}))
    assert not failed["passed"]
    assert "#c62828" in gate_html(failed) and "no evidence for or against the method" in gate_html(failed)
    assert "#2e7d32" in gate_html(passed) and "0.82 [0.77, 0.87]" in gate_html(passed)


def test_seed_spread_is_mean_and_t_interval_over_seeds():
    per_seed = pd.DataFrame(
        [
            {"scorer": "baseline", "benchmark": "toy-id", "auroc": a, "rm_seed": s}
            for s, a in enumerate([0.78, 0.80, 0.82])
        ]
    )
    spread = ev.seed_spread(per_seed).iloc[0]
    assert spread["auroc_mean"] == pytest.approx(0.80)
    assert spread["ci_low"] < 0.78 and spread["ci_high"] > 0.82  # t with 2 d.o.f. is wide
    assert (spread["auroc_min"], spread["auroc_max"], spread["n_seeds"]) == (0.78, 0.82, 3)
    assert ev.seed_metrics(ev.seed_spread(per_seed))["baseline"]["toy-id"]["n_seeds"] == 3
    assert np.isnan(ev.seed_spread(per_seed.iloc[:1]).iloc[0]["ci_low"])  # one seed: no spread to estimate


def test_first_error_profile_averages_q_by_offset_from_the_first_wrong_token():
    from goalrm_core.study.evaluation import first_error_profile

    rows = [
        {"is_correct": False, "first_error_char": 2, "num_actions": 5, "cosine_sim": [0.9, 0.8, 0.1, 0.0, -0.1]},
        {"is_correct": False, "first_error_char": 1, "num_actions": 3, "cosine_sim": [0.7, 0.2, 0.1]},
        {
            "is_correct": True,
            "first_error_char": None,
            "num_actions": 3,
            "cosine_sim": [5.0, 5.0, 5.0],
        },  # no error: left out
        {"is_correct": False, "first_error_char": None, "num_actions": 2, "cosine_sim": [9.0, 9.0]},
    ]  # error unknown: left out
    prof = first_error_profile(rows, window=2)
    assert prof["offsets"] == [-2, -1, 0, 1, 2]
    assert prof["n"] == [1, 2, 2, 2, 1]
    assert prof["mean_q"] == pytest.approx([0.9, 0.75, 0.15, 0.05, -0.1])
    assert first_error_profile([], window=1)["mean_q"] == [None, None, None]  # no incorrect solution: undefined, not 0


def test_goal_ablation_reading_names_the_best_goal_and_explains_below_chance():
    from goalrm_core.study.representations import goal_ablation_reading

    ablation = pd.DataFrame(
        [
            {"rm": "baseline", "goal": "mean_last", "separation_auroc": 0.82, "ci_low": 0.76, "ci_high": 0.88},
            {"rm": "baseline", "goal": "random_token", "separation_auroc": 0.18, "ci_low": 0.16, "ci_high": 0.20},
        ]
    )
    text = goal_ablation_reading(ablation)
    assert "`mean_last` goal separates best (0.82 [0.76, 0.88])" in text
    assert "`random_token` goal score below 0.5" in text and "1 − AUROC" in text
