"""``thresholds.choose_threshold``: one picking rule for the offline filter's threshold and the online
pruning threshold, with the outcome of a candidate as the argument."""

import numpy as np
import pytest

from goalrm_core.evaluation import metrics
from goalrm_core.evaluation.thresholds import choose_threshold


def random_questions(rng, n_questions=12, n_gens=6, n_tokens=10):
    questions = []
    for _ in range(n_questions):
        gens = []
        for _ in range(n_gens):
            answer = int(rng.integers(0, 3))
            q = np.round(rng.uniform(-0.6, 1.0, size=n_tokens), 1)  # a coarse grid: many ties between thresholds
            gens.append(
                {
                    "predicted_answer": answer,
                    "is_correct": answer == 0,
                    "cosine_sim": q.tolist(),
                    "num_actions": n_tokens,
                }
            )
        questions.append(gens)
    return questions


@pytest.mark.parametrize("seed", range(5))
def test_the_offline_filter_choice_is_this_rule_with_the_filter_as_outcome(seed):
    """``metrics.choose_filter_threshold`` picks what ``choose_threshold`` picks when a candidate's
    outcome is the Q-filtered vote (tokens generated = all tokens - tokens saved)."""
    val = random_questions(np.random.default_rng(seed))

    def filtered(t):
        res = metrics.q_filtered_majority_vote(val, threshold=t, skip_first=2)
        return {"threshold": t, "n_correct": res.n_correct, "tokens": res.tokens_total - res.tokens_saved}

    expected, _ = metrics.choose_filter_threshold(val, skip_first=2)
    chosen, table = choose_threshold(metrics.DEFAULT_FILTER_THRESHOLDS, filtered)
    assert chosen == expected
    assert table["chosen"].sum() == 1 and table.loc[table["chosen"], "threshold"].item() == chosen


def test_ties_go_to_fewer_tokens_then_to_the_lower_threshold():
    outcomes = {0.1: (5, 90), 0.2: (5, 80), 0.3: (5, 80), 0.4: (4, 10)}
    chosen, table = choose_threshold(
        list(outcomes), lambda t: {"threshold": t, "n_correct": outcomes[t][0], "tokens": outcomes[t][1]}
    )
    assert chosen == 0.2
    assert table["threshold"].tolist() == [0.1, 0.2, 0.3, 0.4]


def test_bad_candidates_or_outcomes_are_refused():
    with pytest.raises(ValueError, match="no candidate"):
        choose_threshold([], lambda t: {})
    with pytest.raises(ValueError, match="tokens"):
        choose_threshold([0.0], lambda t: {"threshold": t, "n_correct": 1})
