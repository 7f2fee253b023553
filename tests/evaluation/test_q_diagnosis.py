"""What moves Q: the per-token frame, the variance shares and the lowest-Q tokens, on constructed Q."""

import numpy as np
import pytest

from goalrm_core.evaluation.q_analysis import lowest_q_tokens, q_token_frame, q_variance_shares


def test_frame_marks_tokens_from_the_first_error_on():
    frame = q_token_frame(
        [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7]], [list("1+2#"), list("1=2")], [None, 1], [True, False], skip_first=1
    )
    assert frame["position"].tolist() == [1, 2, 3, 1, 2]
    assert frame["token_type"].tolist() == ["+", "2", "#", "=", "2"]
    assert frame["prefix_wrong"].tolist() == [False, False, False, True, True]
    assert frame["correct"].tolist() == [True, True, True, False, False]
    with pytest.raises(ValueError, match="token types"):
        q_token_frame([[0.1, 0.2]], [["a"]], [None], [True])


def _frame(q_of):
    rng = np.random.default_rng(0)
    qs, types, errs, ok = [], [], [], []
    for g in range(60):
        n = 12
        kinds = ["digit" if i % 2 == 0 else "operator" for i in range(n)]
        err = None if g % 2 == 0 else 6
        qs.append([q_of(k, i, err is not None and i >= err) + 0.01 * rng.normal() for i, k in enumerate(kinds)])
        types.append(kinds), errs.append(err), ok.append(err is None)
    return q_token_frame(qs, types, errs, ok)


def test_variance_shares_name_the_factor_that_moves_q():
    by_type = q_variance_shares(_frame(lambda kind, i, wrong: 0.5 if kind == "digit" else -0.5)).set_index("factor")
    assert by_type.loc["token_type", "r2_alone"] > 0.95 and by_type.loc["prefix_wrong", "r2_added_last"] < 0.01
    by_error = q_variance_shares(_frame(lambda kind, i, wrong: -0.5 if wrong else 0.5)).set_index("factor")
    assert by_error.loc["prefix_wrong", "r2_added_last"] > 0.5 and by_error.loc["token_type", "r2_alone"] < 0.05


def test_lowest_q_of_correct_generations():
    frame = _frame(lambda kind, i, wrong: (-0.5 if kind == "operator" else 0.5) - 0.01 * i)
    lows = lowest_q_tokens(frame).set_index("token_type")
    assert lows.loc["operator", "n"] == 30 and lows["share"].sum() == pytest.approx(1.0)
