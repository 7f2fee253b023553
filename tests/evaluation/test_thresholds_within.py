"""The frontier's threshold rule: the most tokens saved within a drop of unfiltered voting."""

import pytest

from goalrm_core.evaluation import voting
from goalrm_core.evaluation.thresholds import choose_cheapest_within, choose_threshold


def _outcome(correct, tokens, unfiltered=100):
    return lambda t: {
        "threshold": t,
        "n_correct": correct[int(round(10 * t))],
        "n_correct_unfiltered": unfiltered,
        "tokens": tokens[int(round(10 * t))],
    }


def test_it_takes_the_cheapest_threshold_within_the_drop_and_falls_back_to_the_most_right():
    outcome = _outcome([100, 100, 99, 98, 90], [1000, 900, 700, 600, 100])
    cands = [0.0, 0.1, 0.2, 0.3, 0.4]
    assert choose_threshold(cands, outcome)[0] == 0.1
    assert choose_cheapest_within(cands, outcome, n_questions=100, max_drop=0.01)[0] == 0.2
    assert choose_cheapest_within(cands, outcome, n_questions=100, max_drop=0.02)[0] == 0.3
    assert choose_cheapest_within(cands, outcome, n_questions=100, max_drop=0.0)[0] == 0.1
    worse = _outcome([95, 95, 94, 93, 90], [1000, 900, 700, 600, 100])  # nothing within 1 point: the most right
    value, table = choose_cheapest_within(cands, worse, n_questions=100, max_drop=0.01)
    assert value == choose_threshold(cands, worse)[0] == 0.1 and table["chosen"].sum() == 1
    with pytest.raises(ValueError, match="max_drop"):
        choose_cheapest_within(cands, outcome, n_questions=100, max_drop=1.0)


def _sample(correct, answer, q):
    return {"is_correct": correct, "predicted_answer": answer, "cosine_sim": [q] * 10}


def test_the_filter_picker_trades_one_point_of_accuracy_for_tokens_only_when_asked():
    easy = [[_sample(True, "1", 0.9), _sample(True, "1", 0.9), _sample(False, "2", -0.5)] for _ in range(99)]
    hard = [[_sample(True, "1", 0.2), _sample(True, "1", 0.2), _sample(False, "2", 0.9)]]  # Q doubts its right samples
    cands = [-1.0, 0.0, 0.5]
    most, _ = voting.choose_filter_threshold(easy + hard, candidates=cands, skip_first=0)
    cheap, table = voting.choose_filter_threshold(easy + hard, candidates=cands, skip_first=0, max_accuracy_drop=0.01)
    assert most == 0.0  # every question right, the wrong samples dropped
    assert cheap == 0.5  # one question of 100 lost (1 point) for the hard question's two samples
    assert (
        table.loc[table["chosen"], "n_correct"].item() == table.loc[table["chosen"], "n_correct_unfiltered"].item() - 1
    )
    assert (
        voting.choose_filter_threshold(easy + hard, candidates=cands, skip_first=0, max_accuracy_drop=0.005)[0] == 0.0
    )
