"""The calibration table's stability column: an RM recipe's AUROC SD over seeds and its 80% upper bound."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table():
    sys.path.insert(0, str(ROOT / "scripts"))
    import calibration_table

    return calibration_table


def test_sd_upper_bound_lies_above_the_sd_and_shrinks_with_more_seeds(table):
    rng = np.random.default_rng(0)
    values = list(0.7 + 0.02 * rng.standard_normal(12))
    sd6, up6 = table.sd_with_upper(values[:6])
    sd12, up12 = table.sd_with_upper(values)
    assert sd6 == pytest.approx(np.std(values[:6], ddof=1))
    assert up6 > sd6 and up12 > sd12
    assert up12 / sd12 < up6 / sd6  # more seeds: a tighter bound relative to the SD
    assert table.sd_with_upper(values[:6], level=0.9)[1] > up6


def test_sd_is_undefined_below_two_seeds_and_ignores_undefined_aurocs(table):
    assert all(np.isnan(x) for x in table.sd_with_upper([0.7]))
    assert table.sd_with_upper([0.7, None, 0.72, float("nan")])[0] == pytest.approx(np.std([0.7, 0.72], ddof=1))


def test_the_stability_cell_needs_enough_seeds_and_a_small_sd(table):
    assert table._sd_cell([0.7]) == "(1 seed)"
    assert table._sd_cell([0.70, 0.71, 0.70]).endswith(f"< {table.STABLE_MIN_SEEDS} seeds")
    # two seeds 0.156 apart: the SD's 80% lower bound is above the target already, so the recipe stops early
    assert table.sd_lower([0.772, 0.616]) > table.STABLE_SD and "unstable already" in table._sd_cell([0.772, 0.616])
    assert table.sd_lower([0.70, 0.71]) < table.sd_with_upper([0.70, 0.71])[0] < table.sd_with_upper([0.70, 0.71])[1]
    assert table._sd_cell([0.70, 0.71, 0.70, 0.71, 0.70, 0.71]).endswith(", stable")
    assert table._sd_cell([0.60, 0.75, 0.62, 0.77, 0.58, 0.70]).endswith(", unstable")


def test_the_step_verifier_table_signs_differences_and_judges_only_them(table):
    import pandas as pd

    common = {"name": "valA", "run_dir": "runs/x/val", "bench": "toy-id", "split_seed": 0}
    rows = [
        {
            **common,
            "kind": "seed",
            "verifier": "baseline Q",
            "seed": s,
            "f1": f,
            "acc_erroneous": 0.5,
            "acc_correct": 0.9,
        }
        for s, f in ((0, 0.7), (1, 0.6))
    ]
    rows += [
        {
            **common,
            "kind": "summary",
            "verifier": "baseline Q",
            "seeds": [0, 1],
            "mean": 0.65,
            "ci_low": 0.2,
            "ci_high": 1.1,
        },
        {
            **common,
            "kind": "summary",
            "verifier": "baseline Q − policy log-prob",
            "seeds": [0, 1],
            "mean": 0.3,
            "ci_low": -0.1,
            "ci_high": 0.7,
            "verdict": "not shown",
            "mde": 0.52,
        },
    ]
    text = table.step_table(pd.DataFrame(rows))
    assert "| baseline Q | 0, 1 | 0.700, 0.600 | 0.50/0.90, 0.50/0.90 | 0.650 [0.200, 1.100] |  |" in text
    assert "| +0.300 [-0.100, +0.700] | not shown (0.520) |" in text
    assert table.step_table(pd.DataFrame()) == "_No step-verifier bench recorded._\n"


def test_the_step_verifier_table_has_one_part_per_figure(table):
    import pandas as pd

    common = {"name": "valA", "run_dir": "runs/x/val", "bench": "toy-id", "split_seed": 0}
    rows = [
        {
            **common,
            "kind": "seed",
            "verifier": "baseline Q",
            "seed": 0,
            "f1": 0.7,
            "acc_erroneous": 0.5,
            "acc_correct": 0.9,
            "line_auroc": 0.81,
            "final_auroc": 0.66,
        }
    ]
    rows += [
        {
            **common,
            "kind": "summary",
            "verifier": "baseline Q",
            "metric": m,
            "seeds": [0],
            "mean": v,
            "ci_low": v - 0.1,
            "ci_high": v + 0.1,
        }
        for m, v in (("f1", 0.7), ("line_auroc", 0.81), ("final_auroc", 0.66))
    ]
    text = table.step_table(pd.DataFrame(rows))
    assert text.index("First-error F1") < text.index("Line AUROC") < text.index("Final AUROC")
    assert "| baseline Q | 0 | 0.810 | 0.810 [0.710, 0.910] |  |" in text
    assert "| baseline Q | 0 | 0.660 | 0.660 [0.560, 0.760] |  |" in text


def test_the_step_verifier_table_shows_each_verifier_as_a_filter(table):
    import pandas as pd

    common = {"name": "valA", "run_dir": "runs/x/val", "bench": "toy-id", "split_seed": 0}
    rows = [
        {
            **common,
            "kind": "seed",
            "verifier": "baseline Q",
            "seed": 0,
            "f1": 0.7,
            "acc_erroneous": 0.5,
            "acc_correct": 0.9,
            "filter_share": 0.42,
            "filter_accuracy_change": -0.005,
        }
    ]
    rows += [
        {
            **common,
            "kind": "summary",
            "verifier": "baseline Q",
            "metric": m,
            "seeds": [0],
            "mean": v,
            "ci_low": v - 0.1,
            "ci_high": v + 0.1,
        }
        for m, v in (("f1", 0.7), ("filter_share", 0.42), ("filter_accuracy_change", -0.005))
    ]
    text = table.step_table(pd.DataFrame(rows))
    assert (
        text.index("First-error F1")
        < text.index("share of the oracle's saving")
        < text.index("accuracy change at that threshold")
    )
    assert "| baseline Q | 0 | 0.420 | 0.420 [0.320, 0.520] |  |" in text
    assert "| share per seed | share [95% CI, seeds and questions] |" in text


def test_a_recipe_stops_when_unstable_or_when_no_seed_verifies(table):
    assert table.stop_reason([0.772, 0.616]).startswith("unstable already")
    assert table.stop_reason([0.591, 0.639], length=0.578).startswith("not verifying")
    assert table.stop_reason([0.591, 0.639]) is None  # without the length, only the stability rule applies
    assert table.stop_reason([0.74, 0.75], length=0.578) is None  # steady and above length + 0.15
    assert table.stop_reason([0.60], length=0.578) is None  # one seed decides nothing
    assert "not verifying" in table._sd_cell([0.591, 0.639], 0.578)


def test_the_rollout_label_table_shows_the_agreement_shares(table):
    import pandas as pd

    row = {
        "name": "valA",
        "n_pairs": 200,
        "n_available": 8964,
        "subset_seed": 0,
        "k": 8,
        "temperature": 1.0,
        "same_line": 0.735,
        "earlier": 0.24,
        "later": 0.02,
        "none": 0.005,
        "n_rollouts": 7176,
        "seconds": 125.4,
        "seconds_per_pair": 0.627,
        "load_average_1min": 5.47,
        "exact_file": "exact-200.jsonl",
        "rollout_file": "rollout-k8-200.jsonl",
    }
    text = table.rollout_table(pd.DataFrame([row]))
    assert "| valA: 200 of 8,964 (subset seed 0) | 8 | 1.0 | 73.5% | 24.0% | 2.0% | 0.5% | 7,176 |" in text
    assert table.rollout_table(pd.DataFrame()) == "_No rollout labels recorded._\n"
