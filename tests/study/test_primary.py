"""The primary conclusions over RM seeds (notebook 04): each figure once per seed, then across seeds."""

import math

import pytest

from goalrm_core.study import evaluation as ev
from goalrm_core.study.rms import RMS

from tests.study.test_evaluation import write_scored

BENCHES = ["toy-id", "toy-zero"]


def rows_for(seed_shift: float, q_fall: float):
    """Four questions x 3 samples; correct samples get the higher reward (shifted per seed), incorrect
    ones an error at character 3 after which Q drops by ``q_fall``."""
    out = []
    for q in range(4):
        for i in range(3):
            correct = (q + i) % 2 == 0
            n = 6 + q
            qs = [0.5] * n if correct else [0.5] * 3 + [0.5 - q_fall] * (n - 3)
            out.append({"question": f"q{q}", "sample_index": i, "is_correct": correct, "reward": (1.0 if correct else 0.0) + seed_shift * i,
                        "num_actions": n, "generated_solution": "x" * n, "cosine_sim": qs, "predicted_answer": "1" if correct else "2",
                        "first_error_char": None if correct else 3})
    return out


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setattr(ev, "benchmark_names", lambda run_dir: BENCHES)
    for seed, shift in enumerate([0.0, 0.01, 0.02]):
        for rm in RMS:
            for bench in BENCHES:
                rows = rows_for(shift, 0.3)
                write_scored(tmp_path, rm, seed, bench, rows, [r for r in rows if r["sample_index"] == 0])
    return tmp_path


def test_primary_figures_are_judged_over_seeds(run):
    out = ev.primary_metrics(run, list(RMS), [0, 1, 2], "sample0", 0.0, 0)
    primary = out["primary"]
    assert primary["n_seeds"] == 3 and primary["benchmark"] == "toy-id"
    for rm in RMS:  # Q falls by 0.3 after every error, in every seed
        fe = primary["first_error_delta_q"][rm]
        assert fe["n"] == 3 and fe["k"] == 3 and fe["expect"] == "less"
        assert fe["mean"] == pytest.approx(-0.3)
    assert set(primary["filter"][RMS[0]]) == {"threshold", "tokens_saved_pct", "accuracy_change"}
    assert set(out["exploratory"]["delta_auroc"]) == {"toy-zero"}
    assert "p_holm" in out["exploratory"]["delta_auroc"]["toy-zero"]
    assert primary["gate"]["state"] in ("passed", "failed", "undefined")
    assert "in" in ev.primary_reading(primary) and "seeds" in ev.primary_reading(primary)
    assert len(ev.primary_frame(primary)) == 2 + 1 + 2 + 2 * 2


def test_one_seed_gives_no_verdict(run):
    primary = ev.primary_metrics(run, list(RMS), [0], "sample0", 0.0, 0)["primary"]
    assert primary["gate"]["state"] == "undefined" and "no spread" in primary["gate"]["reason"]
    assert primary["first_error_delta_q"][RMS[0]]["holds"] is None
    assert "cannot be judged" in ev.primary_reading(primary)
    assert "undefined" in ev.seed_interval({"mean": math.nan, "reason": "why"})
