"""Tests for goalrm_core.evaluation.metrics on hand-made fixtures whose answers are worked out by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from goalrm_core.evaluation import metrics
from goalrm_core.evaluation.metrics import (
    AurocResult,
    best_of_n_accuracy,
    bootstrap_auroc,
    choose_filter_threshold,
    first_error_q_stats,
    majority_vote_accuracy,
    mean_ci,
    paired_bootstrap_delta,
    partial_auroc,
    prefix_error_auroc,
    prefix_index,
    q_filtered_majority_vote,
    q_filtered_majority_votes,
    q_reward_correlation,
    wilson_interval,
)


def gen(answer, correct, q=None, n=None, **extra):
    """One generation; ``q`` defaults to a flat, high Q-value trace of ``n`` (default 10) tokens."""
    if q is None:
        q = [0.5] * (n or 10)
    return {"predicted_answer": answer, "is_correct": correct, "cosine_sim": list(q), "num_actions": len(q), **extra}


def dip(n, at, low=-0.5, high=0.5):
    """Q trace of n tokens, ``high`` everywhere except ``low`` at index ``at``."""
    q = [high] * n
    q[at] = low
    return q


# ------------------------------------------------------------------------------------- AUROC


def test_auroc_perfect_inverse_and_ties():
    labels = [0, 0, 1, 1]
    assert bootstrap_auroc([0.1, 0.2, 0.8, 0.9], labels, n_boot=50).auroc == 1.0
    assert bootstrap_auroc([0.9, 0.8, 0.2, 0.1], labels, n_boot=50).auroc == 0.0
    tied = bootstrap_auroc([0.3, 0.3, 0.3, 0.3], labels, n_boot=50)
    assert tied.auroc == 0.5 and tied.ci_low == 0.5 and tied.ci_high == 0.5
    # one positive tied with one negative, otherwise separated: (1 + 0.5 + 1 + 1) / 4
    assert bootstrap_auroc([0.1, 0.5, 0.5, 0.9], labels, n_boot=50).auroc == pytest.approx(0.875)


def test_auroc_matches_sklearn_with_ties():
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 2, 300)
    scores = np.round(rng.normal(size=300) + 0.7 * labels, 1)  # rounding creates many ties
    res = bootstrap_auroc(scores, labels, n_boot=200)
    assert res.auroc == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert res.n == 300 and res.n_positive == int(labels.sum())


@pytest.mark.parametrize(
    "labels, reason",
    [
        ([True] * 37, "all 37 generations are correct: AUROC undefined"),
        ([0] * 5, "all 5 generations are incorrect: AUROC undefined"),
        ([], "no generations: AUROC undefined"),
    ],
)
def test_auroc_single_class_is_undefined_not_half(labels, reason):
    res = bootstrap_auroc(np.linspace(0, 1, len(labels)), labels)
    assert math.isnan(res.auroc) and math.isnan(res.ci_low) and math.isnan(res.ci_high)
    assert res.undefined_reason == reason
    assert res.as_dict()["undefined_reason"] == reason


def test_bootstrap_ci_contains_estimate_and_is_deterministic():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 200)
    scores = rng.normal(size=200) + labels
    a = bootstrap_auroc(scores, labels, n_boot=300, seed=3)
    b = bootstrap_auroc(scores, labels, n_boot=300, seed=3)
    c = bootstrap_auroc(scores, labels, n_boot=300, seed=4)
    assert a == b
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high)
    assert a.ci_low < a.auroc < a.ci_high
    assert a.n_boot_used == 300 and a.n_boot_skipped == 0


def test_single_class_resamples_are_skipped_and_counted():
    res = bootstrap_auroc([0.2, 0.9], [0, 1], n_boot=400, seed=0)
    assert res.auroc == 1.0
    # each resample of two items has both classes with probability 1/2
    assert res.n_boot_used + res.n_boot_skipped == 400
    assert 120 < res.n_boot_skipped < 280
    assert res.ci_low == res.ci_high == 1.0


def test_cluster_bootstrap_is_wider_for_duplicated_clusters():
    rng = np.random.default_rng(1)
    labels = np.repeat(rng.integers(0, 2, 40), 10)  # 40 clusters of 10 identical items
    scores = np.repeat(rng.normal(size=40), 10) + 0.5 * labels
    clusters = np.repeat(np.arange(40), 10)
    iid = bootstrap_auroc(scores, labels, n_boot=300)
    clustered = bootstrap_auroc(scores, labels, n_boot=300, clusters=clusters)
    assert clustered.auroc == iid.auroc
    assert clustered.ci_high - clustered.ci_low > 1.5 * (iid.ci_high - iid.ci_low)


def test_nan_scores_and_bad_labels_raise():
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_auroc([0.1, float("nan")], [0, 1])
    with pytest.raises(ValueError, match="0/1"):
        bootstrap_auroc([0.1, 0.2], [0, 2])


# ------------------------------------------------------------------------------ paired delta


def test_paired_delta_of_identical_scorers_is_zero():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 100)
    scores = rng.normal(size=100) + labels
    d = paired_bootstrap_delta(scores, scores, labels, n_boot=200)
    assert d["delta"] == 0 and d["ci_low"] == 0 and d["ci_high"] == 0
    assert d["p_value_two_sided"] == 1.0
    assert d["undefined_reason"] is None


def test_paired_delta_perfect_vs_inverse():
    labels = [0, 0, 0, 1, 1, 1]
    good = [0.1, 0.2, 0.3, 0.7, 0.8, 0.9]
    d = paired_bootstrap_delta(good, [-s for s in good], labels, n_boot=200)
    assert d["auroc_a"] == 1.0 and d["auroc_b"] == 0.0 and d["delta"] == 1.0
    assert d["ci_low"] == d["ci_high"] == 1.0  # every two-class resample is perfectly separated
    assert d["p_value_two_sided"] == 0.0


def test_paired_delta_undefined():
    d = paired_bootstrap_delta([1, 2], [2, 1], [1, 1])
    assert math.isnan(d["delta"]) and math.isnan(d["ci_low"]) and math.isnan(d["p_value_two_sided"])
    assert d["undefined_reason"] == "all 2 generations are correct: AUROC undefined"


# ----------------------------------------------------------------------- partial generations


@pytest.mark.parametrize(
    "n, pct, expected",
    [
        (10, 0.0, 0),
        (10, 1.0, 9),
        (10, 0.5, 4),
        (10, 0.3, 2),
        (10, 0.05, 0),
        (10, 0.11, 1),
        (1, 0.0, 0),
        (1, 1.0, 0),
        (3, 0.34, 1),
    ],
)
def test_prefix_index(n, pct, expected):
    assert prefix_index(n, pct) == expected


@pytest.mark.parametrize("n, pct", [(0, 0.5), (5, -0.1), (5, 1.1)])
def test_prefix_index_rejects_bad_input(n, pct):
    with pytest.raises(ValueError):
        prefix_index(n, pct)


def test_partial_auroc_informative_only_late():
    # every trace starts at 0 (uninformative); correct ones end high, incorrect ones end low
    per_token = [[0.0] * 5 + [1.0] * 5, [0.0] * 8 + [0.9] * 2, [0.0] * 10, [0.0] * 6 + [-1.0] * 4]
    labels = [1, 1, 0, 0]
    df = partial_auroc(per_token, labels, percentiles=(0.0, 0.5, 1.0), n_boot=100)
    assert list(df.columns[:4]) == ["percentile", "auroc", "ci_low", "ci_high"]
    assert df["percentile"].tolist() == [0.0, 0.5, 1.0]
    # token 0 and token 4 (the end of the first half) are 0.0 everywhere: all tied -> 0.5
    assert df["auroc"].tolist() == [0.5, 0.5, 1.0]


# ----------------------------------------------------------------------------------- voting


def test_vote_tie_with_top_wrong_answer_counts_as_correct():
    tie = [gen("4", True), gen("4", True), gen("5", False), gen("5", False), gen("6", False)]
    lose = [gen("4", True), gen("5", False), gen("5", False)]
    acc = majority_vote_accuracy([tie, lose])
    assert acc.n_correct == 1 and acc.n == 2 and float(acc) == 0.5
    assert acc.ci_low < 0.5 < acc.ci_high


def test_vote_none_answers_are_not_votes():
    # one correct vote beats three generations without an answer
    assert (
        float(majority_vote_accuracy([[gen("4", True), gen(None, False), gen(None, False), gen(None, False)]])) == 1.0
    )
    # no votes at all: incorrect, even though no wrong answer exists
    assert float(majority_vote_accuracy([[gen(None, False), gen(None, False)]])) == 0.0
    # a generation marked correct without an answer is no vote either
    assert float(majority_vote_accuracy([[gen(None, True)]])) == 0.0


def test_correct_answer_is_identified_by_is_correct():
    # "0.5" and "1/2" are both graded correct: they vote together (2) against "3" (2): tie -> correct
    question = [gen("0.5", True), gen("1/2", True), gen("3", False), gen("3", False)]
    assert float(majority_vote_accuracy([question])) == 1.0


def test_single_sample_question():
    right = q_filtered_majority_vote([[gen("1", True, dip(10, 7))]], threshold=0.0, skip_first=5)
    # the only generation is dropped at token 7 -> fallback to plain voting, nothing saved
    assert right.accuracy == 1.0 and right.n_fallback == 1 and right.tokens_saved == 0
    wrong = q_filtered_majority_vote([[gen("2", False)]], threshold=0.0)
    assert wrong.accuracy == 0.0 and wrong.accuracy_unfiltered == 0.0 and wrong.n_fallback == 0


def test_all_filtered_falls_back_and_saves_nothing():
    question = [gen("4", True, dip(10, 6)), gen("5", False, dip(10, 5)), gen("4", True, dip(10, 8))]
    res = q_filtered_majority_vote([question], threshold=0.0, skip_first=5)
    assert res.n_fallback == 1 and res.question_fallback.tolist() == [True]
    assert res.tokens_saved == 0 and res.tokens_saved_pct == 0.0
    assert res.generations_filtered_pct == 0.0
    assert res.accuracy == res.accuracy_unfiltered == 1.0
    assert res.generation_kept.all()


def test_nothing_filtered_equals_unfiltered():
    questions = [
        [gen("4", True, dip(10, 6)), gen("5", False, dip(10, 7)), gen("5", False)],
        [gen("1", True), gen("2", False, dip(10, 9))],
    ]
    res = q_filtered_majority_vote(questions, threshold=-2.0, skip_first=5)
    assert res.accuracy == res.accuracy_unfiltered == 0.5
    assert res.tokens_saved == 0 and res.generations_filtered_pct == 0.0 and res.n_fallback == 0
    assert res.proportion_correct_before == res.proportion_correct_after == 2 / 5
    assert math.isnan(res.p_value) and "no difference" in res.p_value_reason


def test_skip_first_is_respected():
    question = [gen("4", True), gen("5", False, dip(10, 3))]
    kept = q_filtered_majority_vote([question], threshold=0.0, skip_first=5)
    assert kept.generation_kept.tolist() == [True, True] and kept.tokens_saved == 0
    dropped = q_filtered_majority_vote([question], threshold=0.0, skip_first=3)
    assert dropped.generation_kept.tolist() == [True, False]
    assert dropped.generation_drop_token.tolist() == [-1, 3]
    assert dropped.tokens_saved == 10 - 3 - 1


def test_drop_at_first_dip_and_threshold_is_strict():
    q = [0.5] * 12
    q[6], q[9] = -0.1, -0.9  # two dips: the first one decides
    res = q_filtered_majority_vote([[gen("4", True), gen("5", False, q)]], threshold=0.0, skip_first=5)
    assert res.generation_drop_token.tolist() == [-1, 6] and res.tokens_saved == 5
    at_threshold = q_filtered_majority_vote([[gen("4", True), gen("5", False, dip(10, 6, low=0.0))]], threshold=0.0)
    assert at_threshold.tokens_saved == 0  # Q equal to the threshold is not below it


def test_tokens_saved_and_filtered_pct_by_hand():
    q1 = [
        gen("7", True, dip(10, 6)),  # dropped at 6: saves 10 - 6 - 1 = 3
        gen("7", True, [0.5] * 8),  # kept
    ]
    q2 = [
        gen("3", False, dip(12, 5)),  # dropped at 5: saves 12 - 5 - 1 = 6
        gen("2", True, [0.5] * 10),  # kept
        gen("3", False, dip(10, 9)),  # dropped at its last token: saves 0, still dropped
    ]
    res = q_filtered_majority_vote([q1, q2], threshold=0.0, skip_first=5)
    assert res.tokens_total == 50 and res.tokens_saved == 9
    assert res.tokens_saved_pct == pytest.approx(18.0)
    assert res.generations_filtered_pct == pytest.approx((50.0 + 200.0 / 3) / 2)
    assert res.n_generations_kept == 2
    # q2: unfiltered "3" (2 votes) beats "2" (1 vote); filtered only "2" is left
    assert res.question_correct_unfiltered.tolist() == [True, False]
    assert res.question_correct.tolist() == [True, True]
    assert res.accuracy == 1.0 and res.accuracy_unfiltered == 0.5
    assert res.proportion_correct_before == pytest.approx(3 / 5)
    assert res.proportion_correct_after == 1.0
    assert res.question_filtered_pct == pytest.approx([50.0, 200.0 / 3])


def test_p_value_is_the_paired_t_test():
    helped = [gen("1", True), gen("2", False, dip(10, 6)), gen("2", False, dip(10, 7))]
    hurt = [gen("1", True, dip(10, 6)), gen("1", True), gen("2", False), gen("2", False)]  # 2-2 tie -> 1-2
    same = [gen("1", True), gen("1", True)]
    questions = [helped, helped, hurt, same]
    res = q_filtered_majority_vote(questions, threshold=0.0, skip_first=5)
    assert res.question_correct.tolist() == [True, True, False, True]
    assert res.question_correct_unfiltered.tolist() == [False, False, True, True]
    expected = stats.ttest_rel([1.0, 1, 0, 1], [0.0, 0, 1, 1]).pvalue
    assert res.p_value == pytest.approx(expected) and res.p_value_reason is None


def test_filter_result_as_dict_is_json_ready():
    res = q_filtered_majority_vote([[gen("1", True), gen("2", False, dip(10, 6))]])
    summary = res.as_dict()
    json.dumps(summary)
    assert "question_correct" not in summary and summary["n_questions"] == 1
    assert res.as_dict(details=True)["generation_drop_token"] == [-1, 6]


def _reference_vote(questions, threshold, skip_first):
    """The filter's rule written out one generation at a time: (drop token per generation, -1 if
    kept; tokens saved; question voted correct), for the sweep to be checked against."""
    drops, saved, voted = [], 0, []
    for gens in questions:
        first = []
        for g in gens:
            below = [k for k, v in enumerate(g["cosine_sim"]) if k >= skip_first and v < threshold]  # NaN < t is False
            first.append(below[0] if below else -1)
        if all(k >= 0 for k in first):  # all dropped: plain voting, nothing saved
            first = [-1] * len(gens)
        drops += first
        saved += sum(g["num_actions"] - k - 1 for g, k in zip(gens, first) if k >= 0)
        kept = [g for g, k in zip(gens, first) if k < 0 and g["predicted_answer"] is not None]
        right = sum(g["is_correct"] for g in kept)
        wrong: dict = {}
        for g in kept:
            if not g["is_correct"]:
                wrong[str(g["predicted_answer"])] = wrong.get(str(g["predicted_answer"]), 0) + 1
        voted.append(right > 0 and right >= max(wrong.values(), default=0))
    return drops, saved, voted


@pytest.mark.parametrize("seed", range(5))
def test_threshold_sweep_matches_a_loop_over_generations(seed):
    rng = np.random.default_rng(seed)
    questions = []
    for _ in range(rng.integers(1, 12)):
        gens = []
        for _ in range(rng.integers(1, 6)):
            q = rng.normal(0.2, 0.5, rng.integers(0, 15))
            q[rng.random(q.size) < 0.2] = np.nan
            ok = bool(rng.random() < 0.5)
            gens.append(gen(None if rng.random() < 0.1 else ("c" if ok else str(rng.integers(3))), ok, q.tolist()))
        questions.append(gens)
    skip_first = int(rng.integers(0, 4))
    thresholds = [-5.0, -0.3, 0.0, 0.1, 0.4, 2.0]
    sweep = q_filtered_majority_votes(questions, thresholds, skip_first=skip_first)
    assert [r.threshold for r in sweep] == thresholds
    for t, res in zip(thresholds, sweep):
        drops, saved, voted = _reference_vote(questions, t, skip_first)
        assert res.generation_drop_token.tolist() == drops
        assert res.tokens_saved == saved and res.question_correct.tolist() == voted
        one = q_filtered_majority_vote(questions, threshold=t, skip_first=skip_first)
        assert repr(one.as_dict(details=True)) == repr(res.as_dict(details=True))  # the same numbers, NaN included
    with pytest.raises(ValueError, match="finite"):
        q_filtered_majority_votes(questions, [0.0, -math.inf])


def test_running_minimum_records_do_not_depend_on_the_block_size():
    from goalrm_core.evaluation.voting import _record_lows

    rng = np.random.default_rng(0)
    qs = [rng.normal(size=rng.integers(0, 20)) for _ in range(50)]
    qs[3][:2] = np.nan
    whole = _record_lows(qs, 2)
    for block_cells in (1, 7, 40):  # blocks of one generation up to a few
        parts = _record_lows(qs, 2, block_cells=block_cells)
        assert all(np.array_equal(a, b) for a, b in zip(whole, parts))
    gen_of, pos, val = whole
    for g, q in enumerate(qs):  # each record: a new running minimum of the tail (NaN reads +inf)
        tail = np.where(np.isnan(q[2:]), np.inf, q[2:])
        expected = [k for k in range(tail.size) if k == 0 or tail[k] < tail[:k].min()]
        assert pos[gen_of == g].tolist() == [k + 2 for k in expected]
        assert val[gen_of == g].tolist() == tail[expected].tolist()


def test_mismatched_num_actions_raises():
    bad = gen("1", True, [0.5] * 10)
    bad["num_actions"] = 11
    with pytest.raises(ValueError, match="num_actions"):
        q_filtered_majority_vote([[bad]])


def test_choose_filter_threshold_picks_obvious_one():
    # question A: wrong answers dip to 0.1 at token 6, correct ones stay at 0.5.
    # Unfiltered "9" wins 3-2; any threshold in (0.1, 0.5] leaves only the correct answer.
    wrong = [0.5] * 6 + [0.1] * 4
    question_a = [gen("4", True), gen("4", True)] + [gen("9", False, wrong) for _ in range(3)]
    # question B is right either way; its one wrong generation dips to 0.25, so a threshold in
    # (0.25, 0.5] saves more tokens without changing accuracy.
    question_b = [gen("1", True) for _ in range(3)] + [gen("2", False, [0.5] * 6 + [0.25] * 4)]
    best, table = choose_filter_threshold([question_a, question_b], candidates=[0.0, 0.2, 0.3, 0.4, 0.6], skip_first=5)
    assert table["accuracy"].tolist() == [0.5, 1.0, 1.0, 1.0, 0.5]  # 0.6 drops everything: fallback
    assert table["tokens_saved"].tolist() == [0, 9, 12, 12, 0]
    assert best == 0.3  # 0.3 and 0.4 tie on accuracy and savings: the lower one wins
    assert table.loc[table["chosen"], "threshold"].tolist() == [0.3]


# ----------------------------------------------------------------------------- best-of-n


def test_best_of_n_accuracy():
    questions = [
        [gen("1", False, reward=0.2), gen("2", True, reward=0.9)],
        [gen("1", True, reward=0.7), gen("2", False, reward=0.8)],
        [gen("1", True, reward=0.5), gen("2", False, reward=0.5)],  # tie -> first
        [gen("1", False, reward=float("nan")), gen("2", True, reward=-3.0)],  # NaN never wins
    ]
    acc = best_of_n_accuracy(questions, "reward")
    assert acc.n_correct == 3 and acc.n == 4
    by_last_q = best_of_n_accuracy(questions, lambda g: g["cosine_sim"][-1])
    # all Q traces are flat 0.5, so the first generation wins every tie: correct in questions 2, 3
    assert by_last_q.n_correct == 2


# ------------------------------------------------------------------------- Q vs final reward


def test_q_reward_correlation():
    rewards = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    per_token_q = [[0.0, r / 10, r / 10, r / 10, r / 10] for r in rewards]  # token 0 is constant
    df = q_reward_correlation(rewards, per_token_q, percentiles=(0.2, 0.4, 1.0))
    assert df.loc[0, "percentile"] == 0.2 and math.isnan(df.loc[0, "pearson_r"])
    assert "constant" in df.loc[0, "undefined_reason"]
    assert df.loc[1, "pearson_r"] == pytest.approx(1.0) and df.loc[1, "spearman_rho"] == pytest.approx(1.0)
    assert df.loc[2, "pearson_p"] < 0.01 and df.loc[2, "pearson_ci_high"] <= 1.0


# ----------------------------------------------------------------------------- first error


def test_first_error_q_stats_by_hand():
    per_token_q = [
        [0.8] * 4 + [0.2] * 4,  # error at 4: before 0.8, after 0.2 -> delta -0.6
        [0.6] * 3 + [0.1] * 3,  # error at 3: before 0.6, after 0.1 -> delta -0.5
        [0.5] * 5,  # correct: no first error
        [0.3] * 5,  # error at token 0: nothing before it -> excluded
    ]
    out = first_error_q_stats(per_token_q, [4, 3, None, 0])
    assert out["n"] == 2 and out["n_excluded"] == 1
    assert out["mean_q_before"] == pytest.approx(0.7) and out["mean_q_after"] == pytest.approx(0.15)
    assert out["mean_delta"] == pytest.approx(-0.55)
    assert out["delta_ci_low"] < -0.55 < out["delta_ci_high"]
    assert out["p_value"] == pytest.approx(stats.ttest_rel([0.2, 0.1], [0.8, 0.6]).pvalue)
    assert out["fraction_lower_after"] == 1.0
    # skip_first drops the first tokens from "before": generation 1's error at 3 becomes excluded
    assert first_error_q_stats(per_token_q, [4, 3, None, 0], skip_first=3)["n_excluded"] == 2


def test_first_error_out_of_range_raises():
    with pytest.raises(ValueError, match="outside"):
        first_error_q_stats([[0.1, 0.2]], [2])


def test_prefix_error_auroc():
    per_token_q = [[0.8] * 4 + [0.2] * 4, [0.7] * 6, [0.3] * 2]
    first_error = [4, None, None]
    is_correct = [False, True, False]  # the third has an unknown error: left out
    res = prefix_error_auroc(per_token_q, first_error, is_correct, n_boot=100)
    assert isinstance(res, AurocResult)
    assert res.n == 14 and res.n_positive == 4 and res.auroc == 1.0
    strided = prefix_error_auroc(per_token_q, first_error, is_correct, stride=2, n_boot=100)
    assert strided.n == 7 and strided.n_positive == 2
    only_correct = prefix_error_auroc([[0.7] * 6], [None], [True], n_boot=10)
    assert only_correct.undefined_reason == "all 6 prefixes are error-free: AUROC undefined"
    with pytest.raises(ValueError, match="marked correct"):
        prefix_error_auroc([[0.5] * 3], [1], [True])


# -------------------------------------------------------------------------------- helpers


def test_mean_ci():
    mean, low, high = mean_ci([1.0, 2.0, 3.0])
    half = stats.t.ppf(0.975, 2) / math.sqrt(3)
    assert mean == 2.0 and low == pytest.approx(2 - half) and high == pytest.approx(2 + half)
    one = mean_ci([0.7])
    assert one[0] == 0.7 and math.isnan(one[1]) and math.isnan(one[2])
    assert all(math.isnan(v) for v in mean_ci([]))


def test_wilson_interval():
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and 0.2 < high < 0.35
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(1 - high)


def test_wilson_from_a_rate_is_the_count_s_to_the_bit():
    """The sweep page's interval of a recorded accuracy is the counts' formula, not a second one."""
    from goalrm_core.evaluation.stats import wilson_rate_interval

    for k, n in [(0, 1), (3, 10), (10, 10), (57, 100), (1, 300)]:
        assert wilson_rate_interval(k / n, n) == wilson_interval(k, n)
    for p, n in [(float("nan"), 10), (None, 10), (0.5, None), (0.5, 0), (True, 10)]:
        assert all(math.isnan(v) for v in wilson_rate_interval(p, n))


def test_official_filter_figures_by_hand():
    # skip_first = 1, threshold 0. Question A: 3 generations; B: 2, all filtered (falls back).
    def g(q, ok, ans):
        return {"cosine_sim": q, "is_correct": ok, "predicted_answer": ans}

    a = [
        g([9, 0.5, 0.4], True, 1),  # kept: min(0.5, 0.4) >= 0
        g([9, 0.3, -0.1, 0.2], False, None),  # filtered at the 2nd of 3 kept-window values: saves 3 - 1 = 2
        g([9, 0.2, 0.1], False, None),
    ]  # kept, wrong with no answer: the None group
    b = [
        g([9, -1.0], True, 3),  # filtered at 0: saves 1 (reset: all filtered)
        g([9, -0.5, 0.5], False, 4),
    ]  # filtered at 0: saves 2 (reset)
    f = metrics.official_filter_figures([a, b], threshold=0.0, skip_first=1)
    # A kept: 1 correct vs the None group of 1 -> correct (1 >= 1); proportion kept 1/2; all: 1/3
    # B all filtered -> unfiltered vote 1 correct vs {4: 1} -> correct; proportion 1/2 both ways
    assert f.accuracy == 1.0
    assert (f.generations_filtered_total, f.generations_filtered_mean) == (1, 0.5)
    assert (f.tokens_saved_total, f.tokens_saved_mean) == (2, 1.0)
    assert (f.tokens_total, f.tokens_mean) == (2 + 3 + 2 + 1 + 2, 5.0)
    assert f.proportion_correct_filtered_mean == pytest.approx((1 / 2 + 1 / 2) / 2, abs=1e-6)
    assert f.proportion_correct_mean == pytest.approx((1 / 3 + 1 / 2) / 2, abs=1e-6)
    assert f.p_value == pytest.approx(stats.ttest_ind([0.5, 0.5], [1 / 3, 0.5]).pvalue, abs=1e-6)
    # the None group decides a question: two answerless wrong generations outvote one correct one
    c = [g([9, 1.0], True, 1), g([9, 1.0], False, None), g([9, 1.0], False, None)]
    assert metrics.official_filter_figures([c], 0.0, 1).accuracy == 0.0
    assert metrics.q_filtered_majority_vote([c], 0.0, 1).accuracy == 1.0  # ours: no answer, no vote
