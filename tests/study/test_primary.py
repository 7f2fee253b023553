"""The primary conclusions over RM seeds (notebook 04): each figure once per seed, then across seeds."""

import math

import pytest

from goalrm_core.report import conclusions
from goalrm_core.study import evaluation as ev
from goalrm_core.study.rms import RMS
from tests.study.test_evaluation import write_scored

BENCHES = ["toy-id", "toy-zero"]


def rows_for(seed_shift: float, q_fall: float, well_formed_reward: float = 0.0):
    """Four questions x 3 samples; correct samples get the higher reward (shifted per seed), incorrect
    ones an error on their second line (character 10 or 9), from which Q, rising by 0.05 a token in every
    solution, drops by ``q_fall``. The incorrect solutions of question 1 are well-formed (``1+1=2 / 2+1=4 /
    #4``) and get ``well_formed_reward``; the others are malformed (``1+1=2 / 2+1>#4``)."""
    out = []
    for q in range(4):
        for i in range(3):
            correct = (q + i) % 2 == 0
            well_formed = correct or q == 1
            text = "1+1=2\n2+1=3\n#3" if correct else "1+1=2\n2+1=4\n#4" if well_formed else "1+1=2\n2+1>#4"
            n = len(text)
            error = None if correct else 10 if well_formed else 9
            qs = [0.05 * t - (q_fall if error is not None and t >= error else 0.0) for t in range(n)]
            reward = 1.0 if correct else well_formed_reward if well_formed else 0.0
            out.append(
                {
                    "question": f"q{q}",
                    "sample_index": i,
                    "is_correct": correct,
                    "reward": reward + seed_shift * i,
                    "num_actions": n,
                    "generated_solution": text,
                    "cosine_sim": qs,
                    "predicted_answer": "1" if correct else "2",
                    "first_error_char": error,
                    "first_error_step": None if correct else 1,
                }
            )
    return out


def write_run(root, monkeypatch, well_formed_reward: float = 0.0):
    monkeypatch.setattr(ev, "benchmark_names", lambda run_dir: BENCHES)
    for seed, shift in enumerate([0.0, 0.01, 0.02]):
        for rm in RMS:
            for bench in BENCHES:
                rows = rows_for(shift, 0.3, well_formed_reward)
                write_scored(root, rm, seed, bench, rows, [r for r in rows if r["sample_index"] == 0])
    return root


@pytest.fixture
def run(tmp_path, monkeypatch):
    return write_run(tmp_path, monkeypatch)


def test_primary_figures_are_judged_over_seeds(run):
    out = ev.primary_metrics(run, list(RMS), [0, 1, 2], "sample0", 0.0, 0)
    primary = out["primary"]
    assert primary["n_seeds"] == 3 and primary["benchmark"] == "toy-id"
    for rm in RMS:  # Q falls by 0.3 at every error, against correct solutions at the same line, in every seed
        fe = primary["first_error_did"][rm]
        assert fe["n"] == 3 and fe["k"] == 3 and fe["expect"] == "less"
        assert fe["mean"] == pytest.approx(-0.3)
        # the superseded figure, kept as labelled detail, reads this fall as a rise: Q's climb along the solution
        # outweighs it (the position confound the DiD removes)
        assert out["exploratory"]["first_error_after_minus_before"]["first_error_delta_q"][rm]["mean"] > 0
    assert set(primary["filter"][RMS[0]]) == {"threshold", "tokens_saved_pct", "accuracy_change"}
    assert set(out["exploratory"]["delta_auroc"]) == {"toy-zero"}
    assert "p_holm" in out["exploratory"]["delta_auroc"]["toy-zero"]
    assert primary["gate"]["state"] in ("passed", "failed", "undefined")
    assert "in" in ev.primary_reading(primary) and "seeds" in ev.primary_reading(primary)
    assert "position" in out["exploratory"]["first_error_after_minus_before"]["note"]
    # the gate's two conditions, ΔAUROC, the first-error DiD, the filter
    assert len(ev.primary_frame(primary)) == 2 * 2 + 1 + 2 + 2 * 2


def test_one_seed_gives_no_verdict(run):
    primary = ev.primary_metrics(run, list(RMS), [0], "sample0", 0.0, 0)["primary"]
    assert primary["gate"]["state"] == "undefined" and "no spread" in primary["gate"]["reason"]
    assert primary["first_error_did"][RMS[0]]["holds"] is None
    assert "cannot be judged" in ev.primary_reading(primary)
    assert "undefined" in ev.seed_interval({"mean": math.nan, "reason": "why"})


def test_an_rm_that_only_spots_malformed_text_fails_the_second_condition(tmp_path, monkeypatch):
    # the RM rewards a well-formed wrong solution like a correct one: it ranks all generations well,
    # and the correct against the well-formed incorrect ones no better than chance
    run = write_run(tmp_path, monkeypatch, well_formed_reward=1.0)
    out = ev.primary_metrics(run, list(RMS), [0, 1, 2], "sample0", 0.0, 0)
    gate = out["primary"]["gate"]
    wf = gate["well_formed"]
    assert wf["required_margin"] == ev.WELL_FORMED_MARGIN
    assert wf["state"] == "failed"
    assert wf["malformed_share"] == 0.5  # sample 0's incorrect solutions: q1 well-formed, q3 malformed
    for rm in RMS:  # sample 0: q0, q2 correct; q1 well-formed and rewarded as correct; q3 malformed
        assert out["exploratory"]["auroc_well_formed"]["toy-id"][rm]["mean"] == pytest.approx(0.5)
        assert ev.seed_figures(run, list(RMS), 0, "sample0", 0.0, 0)["auroc"]["toy-id"][rm] == pytest.approx(0.75)
    # here the RMs are not shown to beat length on all errors either, so nothing is said of malformed output
    assert gate["state"] == "failed"
    assert "not shown to check the arithmetic (50% of the incorrect solutions are malformed)" in ev.primary_reading(
        out["primary"]
    )


@pytest.mark.parametrize(
    "share, first, says",
    [
        (
            0.8,
            "passed",
            "what they detect is mostly malformed output, not wrong arithmetic "
            "(80% of the incorrect solutions are malformed)",
        ),
        (
            0.8,
            "failed",
            "they are not shown to check the arithmetic (80% of",
        ),  # beating length on all errors is not shown either
        (0.2, "passed", "they are not shown to check the arithmetic (20% of"),
        (0.0, "passed", "every incorrect solution here is well-formed, so this says nothing about malformed output"),
        (math.nan, "passed", "they are not shown to check the arithmetic."),
        (None, "passed", "they are not shown to check the arithmetic."),
    ],
)
def test_a_failed_second_condition_says_malformed_only_where_most_errors_are(share, first, says):
    wf = {} if share is None else {"malformed_share": share}
    words = conclusions.well_formed_failure(wf, first)
    assert says in words
    assert ("malformed output, not wrong" in words) == (share == 0.8 and first == "passed")


def test_an_rm_that_verifies_passes_both_conditions(tmp_path, monkeypatch):
    run = write_run(tmp_path, monkeypatch, well_formed_reward=0.0)
    gate = ev.primary_metrics(run, list(RMS), [0, 1, 2], "sample0", 0.0, 0)["primary"]["gate"]
    margins = gate["well_formed"]["margin_over_length"]
    assert all(m["mean"] > ev.WELL_FORMED_MARGIN for m in margins.values())
    assert gate["well_formed"]["state"] in ("passed", "failed")  # judged, whatever the t-interval says


def test_primary_intervals_cover_seeds_and_questions(run):
    out = ev.primary_metrics(run, list(RMS), [0, 1, 2], "sample0", 0.0, 0, n_boot=200, policy_seeds=[0])
    primary = out["primary"]
    assert primary["policy_seeds"] == [0] and "questions" in primary["interval"]
    for s in [
        primary["delta_auroc"],
        *primary["first_error_did"].values(),
        *(f[k] for f in primary["filter"].values() for k in ("tokens_saved_pct", "accuracy_change")),
    ]:
        assert s["verdict"] in ("holds", "reversed", "not shown", "undefined")
        assert s["holds"] is (s["verdict"] == "holds") or s["verdict"] == "undefined"
        if s["verdict"] != "undefined":
            assert s["interval"] == "seeds and questions" and s["n_questions"] == 4
            assert s["se"] >= s["se_seeds"] and s["ci_low"] <= s["mean"] <= s["ci_high"]
    # the per-seed values are the ones the seeds-only summary has, and the run is deterministic
    seeds_only = ev.primary_metrics(run, list(RMS), [0, 1, 2], "sample0", 0.0, 0, n_boot=0)["primary"]
    assert seeds_only["delta_auroc"]["per_seed"] == primary["delta_auroc"]["per_seed"]
    assert seeds_only["delta_auroc"]["interval"] == "seeds"
    again = ev.primary_metrics(run, list(RMS), [0, 1, 2], "sample0", 0.0, 0, n_boot=200, policy_seeds=[0])["primary"]
    assert again["delta_auroc"] == primary["delta_auroc"]
    assert "for this policy (policy seed 0)" in ev.primary_reading(primary)


def test_seed_statistics_reproduce_the_seed_figures(run):
    import numpy as np

    index: dict = {}
    stats_ = ev.seed_statistics(run, list(RMS), 1, "sample0", 0.0, 0, index)
    figures = ev.seed_figures(run, list(RMS), 1, "sample0", 0.0, 0)
    ones = lambda b: np.ones((1, len(index[b])), dtype=np.int64)  # noqa: E731
    for rm in RMS:
        assert stats_["auroc"]["toy-id"][rm](ones("toy-id"))[0] == pytest.approx(figures["auroc"]["toy-id"][rm])
        assert stats_["first_error_delta_q"][rm](ones("toy-id"))[0] == pytest.approx(figures["first_error_delta_q"][rm])
        assert stats_["first_error_did"][rm](ones("toy-id"))[0] == pytest.approx(figures["first_error_did"][rm])
        for key in ("tokens_saved_pct", "accuracy_change"):
            assert stats_["filter"][rm][key](ones("toy-id"))[0] == pytest.approx(figures["filter"][rm][key])
