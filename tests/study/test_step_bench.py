"""The step-verifier bench's reading of scored rows: lines, exact labels, the split, the summary."""

import numpy as np
import pytest

from goalrm_core.study import step_bench

SOLUTION = "1+2=3\n3+4=7\n7+1=8\n#8"  # 4 lines, last tokens at 5, 11, 17, 19


ENDS = [5, 11, 17, 19]


def _row(question, first_error, scores, truncate=None):
    """A scored sample; a wrong one answers 9 and its first error is read at its wrong line's last token."""
    n = len(SOLUTION) if truncate is None else truncate
    return {
        "question": question,
        "generated_solution": SOLUTION,
        "num_actions": n,
        "is_correct": first_error is None,
        "predicted_answer": "8" if first_error is None else "9",
        "first_error_step": first_error,
        "first_error_char": None if first_error is None else ENDS[first_error],
        "cosine_sim": scores[:n],
        "partial_rewards": scores[:n],
    }


def _per_token(line_values):
    """Per-token scores that hold each line's value over the line's characters."""
    out, ends = [], step_bench.line_end_tokens(SOLUTION, len(SOLUTION))
    start = 0
    for end, v in zip(ends, line_values):
        out += [v] * (end + 1 - start)
        start = end + 1
    return out


def _bench(rng, n_questions=40, noise=0.0):
    rows = []
    for q in range(n_questions):
        for _ in range(3):
            e = None if rng.random() < 0.5 else int(rng.integers(0, 4))
            values = [1.0 if e is None or k < e else 0.0 for k in range(4)]
            rows.append(_row(f"q{q}", e, _per_token(np.add(values, noise * rng.standard_normal(4)).tolist())))
    return rows


def test_line_scores_read_each_line_at_its_last_token():
    row = _row("q", None, list(range(len(SOLUTION))))
    assert step_bench.line_end_tokens(SOLUTION, len(SOLUTION)) == [5, 11, 17, 19]
    assert step_bench.line_scores(row, "cosine_sim") == [5.0, 11.0, 17.0, 19.0]
    assert step_bench.line_end_tokens(SOLUTION, 12) == [5, 11]  # truncated: the lines it reached


def test_rows_without_an_exact_label_are_left_out():
    rows = [
        _row("a", None, [0.0] * 20),
        _row("b", 1, [0.0] * 20),
        {**_row("c", None, [0.0] * 20), "is_correct": False},  # wrong, first line unknown
        _row("d", 3, [0.0] * 20, truncate=12),
    ]  # its first error was never scored
    assert step_bench.labelled(rows) == [0, 1]


def test_a_verifier_that_drops_exactly_at_the_first_error_scores_one():
    rows = _bench(np.random.default_rng(0))
    validation, reported = step_bench.split_questions(rows, seed=0)
    assert validation.isdisjoint(reported) and len(validation | reported) == 40
    result = step_bench.verifier_f1(rows, "cosine_sim", validation)
    assert result["f1"] == 1.0 and result["validation_f1"] == 1.0
    assert set(result["_questions"]) <= reported


def test_summary_has_an_interval_per_verifier_and_a_paired_difference():
    rng = np.random.default_rng(1)
    per_seed = {"sharp": [], "noisy": []}
    for seed in range(3):
        rows = _bench(np.random.default_rng(10 + seed))
        validation, _ = step_bench.split_questions(rows, seed=0)
        per_seed["sharp"].append(step_bench.verifier_f1(rows, "cosine_sim", validation))
        noisy = [
            dict(r, partial_rewards=(np.asarray(r["partial_rewards"]) + rng.standard_normal(len(SOLUTION))).tolist())
            for r in rows
        ]
        per_seed["noisy"].append(step_bench.verifier_f1(noisy, "partial_rewards", validation))
    summary = step_bench.bench_summary(per_seed, baseline="noisy", n_boot=200)
    assert set(summary) == {"sharp", "noisy", "sharp − noisy"}
    for s in summary.values():
        assert s["interval"] == "seeds and questions"
    assert summary["sharp"]["mean"] == pytest.approx(1.0)
    diff = summary["sharp − noisy"]
    assert diff["mean"] == pytest.approx(
        np.mean([a["f1"] - b["f1"] for a, b in zip(per_seed["sharp"], per_seed["noisy"])])
    )
    assert diff["ci_low"] <= diff["mean"] <= diff["ci_high"]
    again = step_bench.bench_summary(per_seed, baseline="noisy", n_boot=200)
    assert again["sharp − noisy"]["ci_low"] == diff["ci_low"]  # same seed, same draws


def test_the_policy_log_prob_reads_a_line_as_its_least_likely_token():
    values = [0.0] * len(SOLUTION)
    values[8] = -3.0  # a slip on line 1 (characters 6..11)
    values[18] = float("nan")  # a token the policy has no value for
    row = dict(_row("q", 1, [0.0] * len(SOLUTION)), policy_token_logprobs=values)
    assert step_bench.line_scores(row, "policy_token_logprobs") == [0.0, -3.0, 0.0, 0.0]


def test_the_threshold_free_figures_are_one_for_an_exact_verifier_and_chance_for_a_constant_one():
    rows = _bench(np.random.default_rng(2))
    validation, _ = step_bench.split_questions(rows, seed=0)
    sharp = step_bench.verifier_f1(rows, "cosine_sim", validation)
    assert sharp["line_auroc"] == 1.0 and sharp["final_auroc"] == 1.0
    flat = step_bench.verifier_f1([dict(r, cosine_sim=[0.5] * len(SOLUTION)) for r in rows], "cosine_sim", validation)
    assert flat["line_auroc"] == 0.5 and flat["final_auroc"] == 0.5
    for metric in ("line_auroc", "final_auroc"):
        summary = step_bench.bench_summary(
            {"sharp": [sharp, sharp], "flat": [flat, flat]}, baseline="flat", n_boot=100, metric=metric
        )
        assert summary["sharp − flat"]["mean"] == pytest.approx(0.5)
        assert summary["sharp − flat"]["ci_low"] <= 0.5 <= summary["sharp − flat"]["ci_high"]
    with pytest.raises(ValueError, match="unknown metric 'auc'"):
        step_bench.bench_summary({"sharp": [sharp]}, metric="auc")


def test_line_examples_are_labelled_from_the_first_error_on():
    ex = step_bench.auroc_examples([[5.0, 4.0, 3.0], [1.0]], [1, None])
    scores, labels, solution = ex["line_auroc"]
    assert labels.tolist() == [0, 1, 1, 0] and solution.tolist() == [0, 0, 0, 1] and scores.tolist() == [-5, -4, -3, -1]
    assert ex["final_auroc"][0].tolist() == [3.0, 1.0] and ex["final_auroc"][1].tolist() == [0.0, 1.0]


def test_the_bench_frame_and_metrics_carry_every_figure_and_judge_only_differences():
    per_seed = {"sharp": [], "flat": []}
    for s in range(2):
        rows = _bench(np.random.default_rng(20 + s))
        validation, _ = step_bench.split_questions(rows, seed=0)
        per_seed["sharp"].append(step_bench.verifier_f1(rows, "cosine_sim", validation))
        per_seed["flat"].append(
            step_bench.verifier_f1([dict(r, cosine_sim=[0.5] * len(SOLUTION)) for r in rows], "cosine_sim", validation)
        )
    result = {
        "per_seed": per_seed,
        "reference": "flat",
        "bench": "toy-id",
        "split_seed": 0,
        "summaries": step_bench.summaries(per_seed, "flat", n_boot=100),
    }
    frame = step_bench.bench_frame(result)
    assert sorted(set(frame["figure"])) == sorted(step_bench.METRICS)
    assert set(frame["verifier"]) == {"sharp", "flat", "sharp − flat"}
    judged = frame[frame["verdict"] != ""]
    assert set(judged["verifier"]) == {"sharp − flat"}
    m = step_bench.bench_metrics(result)
    assert set(m["figures"]) == set(step_bench.METRICS) and m["reference"] == "flat"
    assert m["figures"]["line_auroc"]["sharp"]["mean"] == 1.0 and "verdict" in m["figures"]["f1"]["sharp − flat"]


def test_the_reading_says_how_much_of_the_exact_label_prm_the_label_free_q_reaches():
    figure = {"mean": 0.40, "ci_low": 0.3, "ci_high": 0.5}
    f1 = {
        "goal-conditioned Q": figure,
        "baseline partial reward": {"mean": 0.3, "ci_low": 0.2, "ci_high": 0.4},
        "goal-conditioned Q − baseline partial reward": {
            "mean": 0.1,
            "ci_low": 0.05,
            "ci_high": 0.15,
            "verdict": "holds",
        },
    }
    result = {"summaries": {"f1": f1}, "reference": "baseline partial reward", "bench": "toy-id"}
    assert "holds" in step_bench.reading(result) and "PRM" not in step_bench.reading(result)
    f1["exact-label PRM partial reward"] = {"mean": 0.8, "ci_low": 0.7, "ci_high": 0.9}
    assert step_bench.reading(result).endswith(
        "The exact-label PRM's F1 is 0.800 [0.700, 0.900]: goal-conditioned Q, with no step labels, reaches 50% of it."
    )


def _vote_bench(seed, n_questions=40, p_wrong=0.25):
    """Four samples a question, a quarter wrong: an exact verifier reads 1 on every line before the first
    wrong one and 0 from it on (the share of zeros stays below the top candidate quantile)."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_questions):
        for _ in range(4):
            e = None if rng.random() >= p_wrong else int(rng.integers(0, 3))
            rows.append(_row(f"q{q}", e, _per_token([1.0 if e is None or k < e else 0.0 for k in range(4)])))
    return rows


def test_an_exact_verifier_as_a_filter_saves_what_the_oracle_saves_and_a_constant_one_saves_nothing():
    rows = _vote_bench(3)
    validation, _ = step_bench.split_questions(rows, seed=0)
    sharp = step_bench.verifier_f1(rows, "cosine_sim", validation)
    assert sharp["filter_share"] == pytest.approx(1.0) and sharp["oracle_tokens_saved_pct"] > 0
    assert sharp["filter_tokens_saved_pct"] == pytest.approx(sharp["oracle_tokens_saved_pct"])
    assert sharp["filter_accuracy_change"] >= 0  # dropping only wrong samples never costs a vote
    flat = step_bench.verifier_f1([dict(r, cosine_sim=[0.5] * len(SOLUTION)) for r in rows], "cosine_sim", validation)
    assert flat["filter_share"] == 0.0 and flat["filter_accuracy_change"] == 0.0
    assert set(sharp["_filter"]["questions"]).isdisjoint(validation)  # reported on the other half
    # an error read before its line ends: the oracle stops there, a line verifier only at the newline
    early = [
        dict(r, first_error_char=None if r["first_error_char"] is None else r["first_error_char"] - 2) for r in rows
    ]
    assert 0 < step_bench.verifier_f1(early, "cosine_sim", validation)["filter_share"] < 1


def test_the_filter_signal_is_the_verifiers_own_line_reading():
    row = dict(_row("q", 1, [float(i) for i in range(len(SOLUTION))]), policy_token_logprobs=[-1.0] * len(SOLUTION))
    signal = step_bench.filter_signal(row, "cosine_sim")
    assert np.flatnonzero(np.isfinite(signal)).tolist() == ENDS and signal[ENDS].tolist() == [5.0, 11.0, 17.0, 19.0]
    assert np.isfinite(step_bench.filter_signal(row, "policy_token_logprobs")).all()  # read at every token of a line


def test_the_filter_figures_are_summarised_over_seeds_and_questions_and_repeat():
    per_seed = {"sharp": [], "flat": []}
    for s in range(3):
        rows = _vote_bench(30 + s)
        validation, _ = step_bench.split_questions(rows, seed=0)
        per_seed["sharp"].append(step_bench.verifier_f1(rows, "cosine_sim", validation))
        per_seed["flat"].append(
            step_bench.verifier_f1([dict(r, cosine_sim=[0.5] * len(SOLUTION)) for r in rows], "cosine_sim", validation)
        )
    assert {"filter_share", "filter_accuracy_change"} <= set(step_bench.METRICS)
    summary = step_bench.bench_summary(per_seed, baseline="flat", n_boot=100, metric="filter_share")
    assert set(summary) == {"sharp", "flat", "sharp − flat"}
    assert summary["sharp − flat"]["mean"] == pytest.approx(1.0)
    change = step_bench.bench_summary(per_seed, baseline="flat", n_boot=100, metric="filter_accuracy_change")
    assert change["sharp"]["interval"] == "seeds and questions"
    assert change["sharp"]["ci_low"] <= change["sharp"]["mean"] <= change["sharp"]["ci_high"]
    again = step_bench.bench_summary(per_seed, baseline="flat", n_boot=100, metric="filter_accuracy_change")
    assert (
        again["sharp"]["ci_low"] == change["sharp"]["ci_low"]
        and again["sharp"]["ci_high"] == change["sharp"]["ci_high"]
    )
    result = {
        "per_seed": per_seed,
        "reference": "flat",
        "bench": "toy-id",
        "split_seed": 0,
        "summaries": step_bench.summaries(per_seed, "flat", n_boot=100),
    }
    metrics = step_bench.bench_metrics(result)
    assert metrics["figures"]["filter_share"]["sharp"]["mean"] == pytest.approx(1.0)
    assert not any(k.startswith("_") for by in metrics["figures"].values() for s in by.values() for k in s)
    frame = step_bench.frontier_frame(result)
    assert set(frame["verifier"]) == {"sharp", "flat"}
    assert frame.groupby("verifier")["chosen"].sum().tolist() == [1, 1]  # one chosen threshold per verifier
    assert frame.loc[frame["verifier"] == "flat", "share_of_oracle"].eq(0).all()


def test_notebook_04s_frontier_cell_runs_on_synthetic_rows():
    import json
    from pathlib import Path

    from goalrm_core.study import plots

    nb = json.loads(
        (Path(__file__).resolve().parents[2] / "notebooks" / "04_evaluation.ipynb").read_text(encoding="utf-8")
    )
    ids = [c.get("id") for c in nb["cells"]]
    cell = nb["cells"][ids.index("cell-step-frontier")]
    assert (
        ids.index("cell-step-frontier") == ids.index("cell-steps") + 2
        and nb["cells"][ids.index("cell-steps") + 1]["cell_type"] == "markdown"
    )
    rows = _vote_bench(40)
    validation, _ = step_bench.split_questions(rows, seed=0)
    per_seed = {
        "sharp": [step_bench.verifier_f1(rows, "cosine_sim", validation)],
        "flat": [
            step_bench.verifier_f1([dict(r, cosine_sim=[0.5] * len(SOLUTION)) for r in rows], "cosine_sim", validation)
        ],
    }
    steps = {"per_seed": per_seed, "reference": "flat", "bench": "toy-id", "split_seed": 0}
    namespace = {"sb": step_bench, "plots": plots, "steps": steps, "detail_seed": 7}
    exec("figure = " + "".join(cell["source"]).rstrip().rstrip(";"), namespace)
    labels = [line.get_label() for line in namespace["figure"].axes[0].get_lines()]
    assert {"sharp", "flat"} <= set(labels) and "RM seed 7" in namespace["figure"].axes[0].get_title()
    import matplotlib.pyplot as plt

    plt.close(namespace["figure"])


def test_a_row_scored_without_a_goal_state_is_read_as_a_filter_too():
    """A step-verifier arm (the PRM) is scored without a goal state: its rows have no ``cosine_sim``."""
    rows = [{k: v for k, v in r.items() if k != "cosine_sim"} for r in _bench(np.random.default_rng(5))]
    validation, _ = step_bench.split_questions(rows, seed=0)
    result = step_bench.verifier_f1(rows, "partial_rewards", validation)
    assert result["f1"] == 1.0 and np.isfinite(result["filter_accuracy_change"]) and "filter_threshold" in result


def _twin_rows(design: str, name: str, rollout: float, exact: float, n: str = "2,000") -> list[dict]:
    common = {
        "kind": "summary",
        "name": name,
        "run_dir": f"runs/calibration/{design}/val",
        "metric": "f1",
        "seeds": [0, 1],
    }
    rows = [
        {
            **common,
            "verifier": f"{kind}-label PRM ({n} pairs) partial reward",
            "mean": f1,
            "ci_low": f1 - 0.05,
            "ci_high": f1 + 0.05,
        }
        for kind, f1 in (("rollout", rollout), ("exact", exact))
    ]
    diff = {
        **common,
        "verifier": f"rollout-label PRM ({n} pairs) partial reward − exact-label PRM ({n} pairs) partial reward",
        "mean": rollout - exact,
        "ci_low": rollout - exact - 0.07,
        "ci_high": rollout - exact + 0.07,
        "mde": 0.1,
        "verdict": "not shown",
    }
    return [*rows, {**common, "metric": "line_auroc", "verifier": diff["verifier"], "mean": 0.5}, diff]


def test_the_label_noise_sentence_reads_the_designs_last_twin_comparison():
    rows = [
        *_twin_rows("confident", "first", 0.70, 0.60),
        *_twin_rows("demo", "other design", 0.10, 0.90),
        *_twin_rows("confident", "last", 0.858, 0.838),
    ]
    text = step_bench.label_noise_reading(rows, "confident")
    assert "block last" in text and "same 2,000 pairs" in text and "not in this run" in text
    assert "0.858 [0.808, 0.908] (rollout labels) against 0.838 [0.788, 0.888] (exact)" in text
    assert "difference +0.020 [-0.050, +0.090]: not shown, an effect of 0.100 would have been seen" in text
    assert "0.900" not in step_bench.label_noise_reading(rows, "confident")  # the other design's rows are not read
    # twins on different pair sets are not twins; a design with none gets no sentence
    unmatched = [
        {
            **r,
            "verifier": r["verifier"].replace(
                "(2,000 pairs) partial reward − exact-label PRM (2,000",
                "(2,000 pairs) partial reward − exact-label PRM (8,964",
            ),
        }
        for r in rows
    ]
    assert step_bench.label_noise_reading(unmatched, "confident") == ""
    assert step_bench.label_noise_reading(rows, "smoke") == ""


def test_the_blind_floors_match_what_their_rules_flag_and_stay_in_range():
    """Every error on line 0: "first line" finds each one (F1 of its reported half equals the position prior's,
    which learns line 0 too); errors spread over lines: both floors lie in [0, 1] with their intervals."""
    rng = np.random.default_rng(3)
    line0 = [_row(f"q{q}", None if k % 2 else 0, _per_token([1.0] * 4)) for q in range(30) for k in range(4)]
    floors = step_bench.blind_floors(line0, split_seed=0, n_boot=50, seed=0)
    assert set(floors) == {"first line", "position prior"}
    assert floors["first line"]["f1"] == floors["position prior"]["f1"] > 0.0
    spread = step_bench.blind_floors(_bench(rng), split_seed=0, n_boot=50, seed=0)
    for f in spread.values():
        assert 0.0 <= f["ci_low"] <= f["f1"] <= f["ci_high"] <= 1.0
    with pytest.raises(ValueError, match="unknown content-blind rule"):
        step_bench.blind_floors(line0, rules=("last line",), n_boot=10)


def test_skill_is_zero_at_the_floor_and_one_at_the_prm_and_single_aurocs_are_judged_against_chance():
    result = {
        "summaries": {
            "f1": {
                "exact-label PRM partial reward": {"mean": 0.9, "ci_low": 0.8, "ci_high": 1.0},
                "goal-conditioned Q": {"mean": 0.5, "ci_low": 0.3, "ci_high": 0.7},
                "goal-conditioned Q − baseline partial reward": {"mean": 0.1},
            }
        }
    }
    floors = {
        "first line": {"f1": 0.5, "ci_low": 0.4, "ci_high": 0.6},
        "position prior": {"f1": 0.3, "ci_low": 0.2, "ci_high": 0.4},
    }
    skill = step_bench.skill_scores(result, floors)
    assert skill["floor"] == 0.5 and skill["verifiers"]["exact-label PRM partial reward"]["mean"] == pytest.approx(1.0)
    assert skill["verifiers"]["goal-conditioned Q"]["mean"] == pytest.approx(0.0)
    assert "goal-conditioned Q − baseline partial reward" not in skill["verifiers"]
    assert step_bench.skill_scores({"summaries": {"f1": {"goal-conditioned Q": {"mean": 0.5}}}}, floors) == {}
    # a verifier whose line AUROC sits at chance is not shown to hold: the null of a single AUROC is 0.5
    rows = _bench(np.random.default_rng(4), noise=0.0)
    flat = [dict(r, cosine_sim=[0.5] * len(SOLUTION)) for r in rows]
    validation, _ = step_bench.split_questions(rows, seed=0)
    per_seed = {"flat": [step_bench.verifier_f1(flat, "cosine_sim", validation) for _ in range(3)]}
    summary = step_bench.bench_summary(per_seed, n_boot=50, metric="line_auroc")["flat"]
    assert summary["mean"] == pytest.approx(0.5) and summary["verdict"] != "holds"
