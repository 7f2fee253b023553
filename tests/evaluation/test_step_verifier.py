"""First-error F1 (ProcessBench's step-verification metric) against a direct reading of its definition."""

import math

import numpy as np
import pytest

from goalrm_core.evaluation import step_verifier as sv
from goalrm_core.evaluation.hierarchical import hierarchical_bootstrap


def _random_bench(rng, n=60, max_lines=6):
    scores, truth = [], []
    for _ in range(n):
        k = int(rng.integers(1, max_lines + 1))
        scores.append(np.round(rng.uniform(-1, 1, size=k), 1).tolist())  # rounded: ties between lines happen
        truth.append(None if rng.random() < 0.4 else int(rng.integers(0, k)))
    return scores, truth


def _direct_f1(scores, truth, t):
    """The definition, read literally: predict, compare, average per group, harmonic mean."""
    pred = [next((k for k, s in enumerate(line) if s < t), None) for line in scores]
    err = [p == e for p, e in zip(pred, truth) if e is not None]
    ok = [p is None for p, e in zip(pred, truth) if e is None]
    a, b = sum(err) / len(err), sum(ok) / len(ok)
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def test_prediction_is_the_first_line_below_the_threshold():
    assert sv.predicted_first_error([0.9, 0.3, 0.8, 0.1], 0.5) == 1
    assert sv.predicted_first_error([0.9, 0.5], 0.5) is None  # "below" is strict
    assert sv.predicted_first_error([0.1], 0.5) == 0


def test_f1_by_hand():
    # erroneous: first errors 1 (predicted 1: right) and 2 (predicted 0: too early); correct: one kept, one flagged
    figures = sv.first_error_f1([1, 0, None, 3], [1, 2, None, None])
    assert figures["acc_erroneous"] == 0.5 and figures["acc_correct"] == 0.5 and figures["f1"] == 0.5
    assert (figures["n_erroneous"], figures["n_correct"]) == (2, 2)
    assert sv.first_error_f1([0, None], [1, None])["f1"] == 0.0  # no erroneous solution found: F1 is 0
    assert math.isnan(sv.first_error_f1([None], [None])["f1"])  # no erroneous solution at all: undefined


@pytest.mark.parametrize("seed", range(5))
def test_closed_form_intervals_match_predicting_at_every_threshold(seed):
    rng = np.random.default_rng(seed)
    scores, truth = _random_bench(rng)
    low, high = sv.right_intervals(scores, truth)
    grid = np.unique(np.concatenate([np.concatenate([np.asarray(s) for s in scores]) + d for d in (-0.05, 0.0, 0.05)]))
    for t in grid:
        direct = [
            sv.predicted_first_error(s, t) == e if e is not None else sv.predicted_first_error(s, t) is None
            for s, e in zip(scores, truth)
        ]
        assert list((low < t) & (t <= high)) == direct
        assert sv.evaluate_at(scores, truth, t)["f1"] == pytest.approx(_direct_f1(scores, truth, t))


@pytest.mark.parametrize("seed", range(5))
def test_the_chosen_threshold_is_the_best_on_a_fine_grid(seed):
    rng = np.random.default_rng(100 + seed)
    scores, truth = _random_bench(rng)
    threshold, figures = sv.choose_f1_threshold(scores, truth)
    grid = np.linspace(-1.2, 1.2, 481)
    best = max(_direct_f1(scores, truth, t) for t in grid)
    assert figures["f1"] == pytest.approx(best)
    assert sv.evaluate_at(scores, truth, threshold)["f1"] == pytest.approx(figures["f1"])


def test_ties_choose_the_lower_threshold():
    # one erroneous solution (first error at line 1) and one correct one whose lowest line is 0.2:
    # every threshold in (0.1, 0.2] is right on both
    threshold, figures = sv.choose_f1_threshold([[0.9, 0.1], [0.5, 0.2]], [1, None])
    assert figures["f1"] == 1.0 and threshold == pytest.approx(0.2)
    threshold, _ = sv.choose_f1_threshold([[0.9, 0.1], [0.5, 0.2], [0.3, 0.0]], [1, None, 1])
    assert threshold == pytest.approx(0.2)


def test_an_error_that_does_not_score_lowest_so_far_can_never_be_found():
    low, high = sv.right_intervals([[0.1, 0.5, 0.9]], [1])
    assert low[0] == high[0]  # empty: line 0 is flagged before line 1 at any threshold that flags line 1


def test_statistic_with_unit_weights_is_the_plain_f1_and_bootstraps():
    rng = np.random.default_rng(7)
    scores, truth = _random_bench(rng, n=90)
    questions = np.repeat(np.arange(30), 3)
    threshold, figures = sv.choose_f1_threshold(scores, truth)
    stat = sv.f1_statistic(scores, truth, threshold, questions)
    assert stat(np.ones((1, 30)))[0] == pytest.approx(figures["f1"])
    result = hierarchical_bootstrap([stat], n_questions=30, n_boot=200, seed=0)
    assert result.ci_low <= figures["f1"] <= result.ci_high
    again = hierarchical_bootstrap([stat], n_questions=30, n_boot=200, seed=0)
    assert np.array_equal(result.replicates, again.replicates)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="solution 1: first error line 3 is outside its 2 scored lines"):
        sv.right_intervals([[0.1], [0.2, 0.3]], [None, 3])
    with pytest.raises(ValueError, match="2 solutions' line scores but 1 first-error"):
        sv.choose_f1_threshold([[0.1], [0.2]], [None])
    with pytest.raises(ValueError, match="solution 0: line scores contain NaN"):
        sv.right_intervals([[math.nan]], [None])
    with pytest.raises(ValueError, match="both erroneous and correct"):
        sv.choose_f1_threshold([[0.1], [0.2]], [None, None])


def _synthetic(n=400, seed=0):
    rng = np.random.default_rng(seed)
    scores, truth, questions = [], [], []
    for i in range(n):
        e = None if i % 2 == 0 else int(rng.integers(0, 4))
        s = rng.normal(1, 0.3, 4)
        if e is not None:
            s[e] -= 1.0
        scores.append(s)
        truth.append(e)
        questions.append(i // 2)
    return scores, truth, questions


def test_reselected_f1_at_unit_weights_is_the_fixed_threshold_f1():
    scores, truth, q = _synthetic()
    val, rep = (scores[:200], truth[:200], q[:200]), (scores[200:], truth[200:], q[200:])
    threshold, _ = sv.choose_f1_threshold(scores[:200], truth[:200])
    stat = sv.reselected_f1_statistic(val, rep)
    assert stat(np.ones((1, 200)))[0] == pytest.approx(sv.evaluate_at(scores[200:], truth[200:], threshold)["f1"])
    draws = np.random.default_rng(1).multinomial(200, [1 / 200] * 200, size=20)
    values = stat(draws)
    assert values.shape == (20,) and np.all((values >= 0) & (values <= 1)) and np.ptp(values) > 0


def test_a_blind_rule_that_always_hits_scores_one_half():
    """Every error on line 0: naming line 0 with probability π gives F1 2π(1−π), best 0.5 at π = 0.5."""
    truth = [None, 0] * 50
    half = ([3] * 100, truth, list(range(100)))
    for rule in sv.BLIND_RULES:
        assert sv.blind_floor_statistic(rule, half, half)(np.ones((1, 100)))[0] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="unknown content-blind rule"):
        sv.blind_floor_statistic("coin", half, half)
