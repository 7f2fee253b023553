"""The first-error difference in differences on synthetic Q traces: position alone gives ~0 (where the
superseded after-minus-before figure is positive), a drop at the error gives < 0; references are used in order."""

import math

import numpy as np
import pytest

from goalrm_core.evaluation import localisation
from goalrm_core.evaluation.q_analysis import first_error_q_stats

LINE = 6  # tokens per line in the synthetic solutions


def _solutions(n_questions=40, n_lines=5, seed=0):
    """Per question: two correct solutions and two wrong ones (first error on line 1..n_lines-1)."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n_questions):
        for i in range(4):
            wrong = i >= 2
            e = int(rng.integers(1, n_lines)) if wrong else None
            out.append({"question": f"q{q}", "correct": not wrong, "first_error_line": e, "n_lines": n_lines})
    return out


def _token_q(sol, drop, rng):
    """Per-token Q rising with position (to 0.9 at the end), minus ``drop`` from the first wrong line on."""
    n = sol["n_lines"] * LINE
    q = np.linspace(-0.2, 0.9, n) + rng.normal(0, 0.01, n)
    if sol["first_error_line"] is not None:
        q[sol["first_error_line"] * LINE :] -= drop
    return q


def _line_q(q):
    return [float(q[k]) for k in range(LINE - 1, q.size, LINE)]


@pytest.mark.parametrize("drop, sign", [(0.0, 0), (0.3, -1)])
def test_did_reads_the_error_not_the_position(drop, sign):
    rng = np.random.default_rng(1)
    sols = _solutions()
    token_q = [_token_q(s, drop, rng) for s in sols]
    line_q = [_line_q(q) for q in token_q]
    r = localisation.first_error_did(
        line_q, [s["first_error_line"] for s in sols], [s["correct"] for s in sols], [s["question"] for s in sols]
    )
    # the superseded token-level figure: after - before the first wrong token
    errs = [None if s["first_error_line"] is None else s["first_error_line"] * LINE for s in sols]
    old = first_error_q_stats(token_q, errs)["mean_delta"]
    if sign == 0:
        assert abs(r.did) < 0.02 and old > 0.2  # position alone: the old figure says "Q rises after the error"
    else:
        assert r.did == pytest.approx(-drop, abs=0.03) and r.did < 0
    assert r.references["same question"] == r.contributions.size == 80
    if sign == 0:  # the same confound on line-end Q
        assert (
            localisation.after_minus_before(line_q, [s["first_error_line"] for s in sols], [s["correct"] for s in sols])
            > 0.1
        )


def test_references_fall_back_in_the_planned_order():
    up = [0.0, 0.1, 0.2]
    longer = [0.0, 0.1, 0.2, 0.3]
    line_q = [up, up, longer, up, longer, up]
    first_error = [None, 1, None, 1, 2, 0]
    correct = [True, False, True, False, False, False]
    question = ["a", "a", "b", "c", "d", "e"]
    r = localisation.first_error_did(line_q, first_error, correct, question)
    # a: same question; c: same length (3 lines, from a); d: same length (4 lines, from b); e: line 0, not used
    assert r.references == {"same question": 1, "same length": 2, "any length": 0, "none": 0, "first line": 1}
    r2 = localisation.first_error_did([up, longer], [None, 3], [True, False], ["a", "b"])
    assert r2.references["none"] == 1 and math.isnan(r2.did) and r2.contributions.size == 0


def test_mismatched_inputs_are_one_line():
    with pytest.raises(ValueError, match="2 Q traces but 1 first-error"):
        localisation.first_error_did([[0.1], [0.2]], [None], [True, True], ["a", "b"])


def test_the_reference_order_is_a_parameter_and_a_bad_one_is_refused():
    from goalrm_core.evaluation.localisation import first_error_did

    rising, flat = [0.1, 0.2, 0.3, 0.4], [0.1, 0.1, 0.1, 0.1]
    # question "a" has a flat correct solution, question "b" a rising one of the same number of lines
    args = ([flat, rising, [0.1, 0.2, 0.0, 0.4]], [None, None, 2], [True, True, False], ["a", "b", "a"])
    default = first_error_did(*args)
    by_length = first_error_did(*args, references=("same length",))
    assert default.references["same question"] == 1 and by_length.references["same length"] == 1
    assert default.did == pytest.approx(-0.2) and by_length.did == pytest.approx(-0.25)  # the length pool: both correct
    for bad in (("nearby",), (), ("same length", "same length")):
        with pytest.raises(ValueError, match="references"):
            first_error_did(*args, references=bad)
