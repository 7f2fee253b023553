"""Filtering rules: each rule's per-token signal, the oracle, and the validation-chosen comparison."""

import math

import numpy as np
import pytest
import torch

from goalrm_core.study import filter_rules as fr


def row(text, q, correct, first_error_char=None, question="q", partial=None, logp=None):
    n = len(text) + 2  # the solution's characters, then " " and EOS
    assert len(q) == n
    return {
        "question": question,
        "generated_solution": text,
        "cosine_sim": list(q),
        "num_actions": n,
        "is_correct": correct,
        "predicted_answer": "1" if correct else "2",
        "first_error_char": first_error_char,
        "partial_rewards": partial if partial is not None else list(q),
        "policy_token_logprobs": logp if logp is not None else [0.0] * n,
    }


def test_signals_look_where_their_rule_says():
    r = row("1+1=2\n#2", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], True)
    assert fr.signal("Q", r).tolist() == r["cosine_sim"]
    at_ends = fr.signal("Q at line ends", r)
    assert np.flatnonzero(np.isfinite(at_ends)).tolist() == [5, 9]  # the newline and the EOS
    fall = fr.signal("Q fall since last line end", r)
    assert np.flatnonzero(np.isfinite(fall)).tolist() == [9] and fall[9] == pytest.approx(1.0 - 0.6)
    base = fr.type_baseline([r])
    assert base["digit"] == pytest.approx(np.mean([0.1, 0.3, 0.5, 0.8]))
    assert fr.signal("Q − token-type baseline", r, base)[0] == pytest.approx(0.1 - base["digit"])
    with pytest.raises(ValueError, match="baseline"):
        fr.signal("Q − token-type baseline", r)
    with pytest.raises(ValueError, match="unknown rule"):
        fr.signal("Q squared", r)


def test_oracle_stops_each_incorrect_solution_at_its_first_error():
    wrong = row("1+1=3\n#3", [0.5] * 10, False, first_error_char=4)
    assert fr.oracle_signal(wrong).tolist() == [1.0] * 4 + [-1.0] * 6
    assert fr.oracle_signal(row("1+1=2\n#2", [0.5] * 10, True)).tolist() == [1.0] * 10


def _questions(n=40):
    """Each question: 3 correct solutions whose Q stays high, and 2 incorrect ones whose Q falls at
    their first error (character 4): a Q that tracks errors."""
    rows = []
    for i in range(n):
        for _k in range(3):
            rows.append(row("1+1=2\n#2", [0.5] * 10, True, question=f"q{i}"))
        for _k in range(2):
            rows.append(row("1+1=3\n#3", [0.5] * 4 + [-0.5] * 6, False, first_error_char=4, question=f"q{i}"))
    return rows


def test_a_q_that_tracks_errors_reaches_the_oracle_on_test_questions():
    chosen, frontier = fr.rule_table(_questions(), rules=("Q",), skip_first=0, n_boot=50)
    c = chosen.set_index("rule")
    assert c.loc["Q", "accuracy_change"] == 0.0
    assert c.loc["Q", "tokens_saved_pct"] == pytest.approx(c.loc["oracle (first error)", "tokens_saved_pct"])
    assert c.loc["Q", "share_of_oracle"] == pytest.approx(1.0)
    assert frontier["chosen"].sum() == 1 and set(frontier["rule"]) == {"Q"}
    summary = fr.pooled(chosen.assign(benchmark="toy-id"))
    assert summary.set_index("rule").loc["Q", "meets_target"]


def test_policy_token_logprobs_line_up_with_the_response_tokens(tokenizer, tiny_lm):
    prompts, solutions = ["1 +1\n", "2 +2 +3\n"], ["1+1=2\n#2", "2+2=4\n4+3=7\n#7"]
    logps = fr.policy_token_logprobs(tiny_lm, tokenizer, prompts, solutions, batch_size=2)
    assert [len(x) for x in logps] == [len(s) + 2 for s in solutions]  # as many as the RM's values
    # the same numbers one at a time, without padding: the solution as the policy generated it, then EOS;
    # the " " the RM reads before its EOS is no policy token (NaN)
    ids = tokenizer(prompts[0] + solutions[0], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    with torch.no_grad():
        logits = tiny_lm(input_ids=torch.tensor([ids])).logits
    alone = (
        torch.log_softmax(logits[0, :-1], -1)
        .gather(-1, torch.tensor(ids[1:])[:, None])
        .squeeze(-1)[-(len(solutions[0]) + 1) :]
    )
    assert math.isnan(logps[0][-2])
    assert np.allclose(logps[0][:-2] + logps[0][-1:], alone.tolist(), atol=1e-5)
    assert all(math.isfinite(v) and v <= 0 for i, v in enumerate(logps[1]) if i != len(logps[1]) - 2)


def test_each_rule_reports_the_vote_of_its_chosen_threshold_on_the_test_questions():
    from goalrm_core.data.questions import group_by_question, split_by_question
    from goalrm_core.evaluation import metrics

    rng = np.random.default_rng(0)
    rows = [
        row(
            "1+1=2\n#2",
            rng.normal(0.3, 0.4, 10).tolist(),
            bool(rng.random() < 0.6),
            question=f"q{i}",
            partial=rng.normal(size=10).tolist(),
        )
        for i in range(30)
        for _ in range(4)
    ]
    rules = ("Q", "Q at line ends", "partial reward")
    chosen, frontier = fr.rule_table(rows, rules=rules, skip_first=2, n_boot=20)
    test_rows, _ = split_by_question(rows, 0.3, 0)
    for rule in rules:
        c = chosen.set_index("rule").loc[rule]
        test = list(group_by_question({**r, "cosine_sim": fr.signal(rule, r).tolist()} for r in test_rows).values())
        direct = metrics.q_filtered_majority_vote(
            test, c["threshold"] if math.isfinite(c["threshold"]) else -1e300, skip_first=2
        )
        assert (c["accuracy"], c["tokens_saved_pct"]) == (direct.accuracy, direct.tokens_saved_pct)
        f = frontier[(frontier["rule"] == rule) & frontier["chosen"]]
        assert len(f) == 1 and (f["accuracy"].item(), f["tokens_saved_pct"].item()) == (
            direct.accuracy,
            direct.tokens_saved_pct,
        )
