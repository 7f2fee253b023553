"""The two-level bootstrap over RM seeds and questions, and the verdict's interval built from it."""

import math

import numpy as np
import pytest

from goalrm_core.evaluation import hierarchical as h
from goalrm_core.evaluation.auroc import bootstrap_auroc
from goalrm_core.evaluation.stats import across_seeds


def per_question_means(seed_offsets, question_effects, noise=0.0, rng=None):
    """Seed ``s``'s statistic: the mean over the drawn questions of ``offset_s + effect_q (+ noise)``."""
    c = np.arange(len(question_effects))
    stats = []
    for off in seed_offsets:
        extra = rng.normal(0, noise, len(question_effects)) if noise else 0.0
        stats.append(h.mean_statistic(off + np.asarray(question_effects) + extra, c))
    return stats


def test_structure_and_point_estimate():
    stats = per_question_means([0.1, 0.2, 0.3], [0.0, 1.0, 2.0, 3.0])
    res = h.hierarchical_bootstrap(stats, 4, n_boot=200, seed=1)
    assert res.n_seeds == 3 and res.n_questions == 4
    assert res.replicates.shape == (200,) and res.question_replicates.shape == (200,)
    assert res.n_boot_used + res.n_boot_skipped == 200
    assert res.per_seed == pytest.approx([1.6, 1.7, 1.8])
    assert res.estimate == pytest.approx(1.7)
    assert res.ci_low <= res.estimate <= res.ci_high and res.se > 0
    assert set(res.as_dict()) >= {"estimate", "ci_low", "ci_high", "se", "n_seeds", "n_questions"}


def test_same_seed_same_replicates_other_seed_other_ones():
    stats = per_question_means([0.0, 0.5], np.linspace(0, 1, 30))
    a = h.hierarchical_bootstrap(stats, 30, n_boot=300, seed=7)
    b = h.hierarchical_bootstrap(stats, 30, n_boot=300, seed=7)
    c = h.hierarchical_bootstrap(stats, 30, n_boot=300, seed=8)
    assert np.array_equal(a.replicates, b.replicates) and (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert not np.array_equal(a.replicates, c.replicates)


def test_one_seed_is_the_question_bootstrap_of_auroc():
    rng = np.random.default_rng(0)
    n_q, per_q = 40, 5
    clusters = np.repeat(np.arange(n_q), per_q)
    labels = rng.random(n_q * per_q) < 0.5
    scores = labels + rng.normal(0, 1.0, labels.size)
    stat = h.auroc_statistic(scores, labels, clusters)
    res = h.hierarchical_bootstrap([stat], n_q, n_boot=500, seed=3)
    ref = bootstrap_auroc(scores, labels, n_boot=500, seed=3, clusters=clusters)
    assert res.estimate == pytest.approx(ref.auroc)
    assert (res.ci_low, res.ci_high) == pytest.approx((ref.ci_low, ref.ci_high))
    assert res.n_boot_used == ref.n_boot_used
    # and with seed resampling switched off it is the same again (one seed: nothing to resample)
    same = h.hierarchical_bootstrap([stat], n_q, n_boot=500, seed=3, resample_seeds=False)
    assert np.array_equal(same.replicates, res.replicates)


@pytest.mark.parametrize("shared", [True, False])
def test_both_levels_are_at_least_as_wide_as_the_seeds_alone(shared):
    # seeds differ by an offset, and questions differ a lot: the seed-only bootstrap holds the
    # questions fixed and misses their variance
    rng = np.random.default_rng(1)
    stats = per_question_means([-0.05, 0.0, 0.02, 0.05, 0.1], rng.normal(0, 1.0, 60), noise=0.2, rng=rng)
    both = h.hierarchical_bootstrap(stats, 60, n_boot=1000, seed=0, shared_questions=shared)
    seeds_only = h.hierarchical_bootstrap(stats, 60, n_boot=1000, seed=0, resample_questions=False)
    questions_only = h.hierarchical_bootstrap(
        stats, 60, n_boot=1000, seed=0, resample_seeds=False, shared_questions=shared
    )

    def width(r):
        return r.ci_high - r.ci_low

    assert width(both) >= width(seeds_only)
    assert both.se >= seeds_only.se
    assert width(both) > 0 and width(questions_only) > 0


def test_an_undefined_seed_statistic_skips_its_replicates():
    # a one-question AUROC set: every draw that misses the question with both classes is one-class
    clusters = np.array([0, 0, 1, 1])
    labels = np.array([1, 0, 1, 1])
    stat = h.auroc_statistic([0.9, 0.1, 0.8, 0.7], labels, clusters)
    res = h.hierarchical_bootstrap([stat, stat], 2, n_boot=200, seed=0)
    assert res.n_boot_skipped > 0 and res.n_boot_used + res.n_boot_skipped == 200


def test_ratio_statistic_and_difference():
    c = np.array([0, 1, 1])
    r = h.ratio_statistic([1.0, 2.0, 2.0], [10.0, 10.0, 10.0], c, scale=100.0)
    assert r(np.ones((1, 2), dtype=np.int64))[0] == pytest.approx(100 * 5 / 30)
    assert r(np.array([[2, 0]]))[0] == pytest.approx(10.0)
    assert math.isnan(r(np.array([[0, 0]]))[0])
    d = h.difference(r, r)
    assert d(np.array([[1, 3]]))[0] == 0.0


def test_bad_input_is_one_clear_error():
    with pytest.raises(ValueError, match="at least one seed"):
        h.hierarchical_bootstrap([], 3)
    with pytest.raises(ValueError, match="n_boot"):
        h.hierarchical_bootstrap(per_question_means([0.0], [1.0, 2.0]), 2, n_boot=0)
    with pytest.raises(ValueError, match="same length"):
        h.mean_statistic([1.0, 2.0], [0])


# ------------------------------------------------------------------ the verdict's summary


def summary_for(offsets, effects, noise=0.0, **kw):
    rng = np.random.default_rng(5)
    stats = per_question_means(offsets, effects, noise, rng)
    boot = h.hierarchical_bootstrap(stats, len(effects), n_boot=1000, seed=0)
    return h.across_seeds_and_questions(boot.per_seed, boot, **kw), boot


def test_summary_adds_question_variance_to_the_seed_interval():
    effects = np.random.default_rng(2).normal(0, 0.5, 50)
    s, _ = summary_for([0.01, 0.02, 0.03, 0.02, 0.04], effects - effects.mean())
    seeds = across_seeds(s["per_seed"])
    assert s["interval"] == "seeds and questions" and s["n_questions"] == 50
    assert s["se"] ** 2 == pytest.approx(s["se_seeds"] ** 2 + s["se_questions"] ** 2)
    assert s["ci_high"] - s["ci_low"] > seeds["ci_high"] - seeds["ci_low"]
    assert s["ci_low"] < s["mean"] < s["ci_high"]
    assert s["mde"] > 0 and s["verdict"] in ("holds", "reversed", "not shown")
    assert s["holds"] == (s["verdict"] == "holds")


def test_a_zero_width_seed_interval_widens_to_its_questions():
    # every seed loses the same two questions: a t-interval over seeds has zero width and "holds"
    change = np.zeros(300)
    change[[3, 7]] = -1.0
    s, _ = summary_for([0.0] * 5, change, expect="less")
    assert across_seeds(s["per_seed"], expect="less")["holds"] is True  # the overstatement
    assert s["se_seeds"] == 0 and s["se_questions"] > 0 and math.isinf(s["df"])
    assert s["ci_low"] < s["mean"] < s["ci_high"]
    assert s["verdict"] == "not shown" and s["holds"] is False


def test_a_difference_the_other_way_is_reversed():
    s, _ = summary_for([-0.30, -0.32, -0.28, -0.31, -0.29], np.linspace(-0.01, 0.01, 40))
    assert s["verdict"] == "reversed" and s["holds"] is False and s["ci_high"] < 0


def test_one_defined_seed_is_undefined_and_no_boot_is_seeds_only():
    one = h.across_seeds_and_questions([0.1, None], None)
    assert one["verdict"] == "undefined" and one["holds"] is None and "1 of 2 seeds" in one["reason"]
    seeds = h.across_seeds_and_questions([0.1, 0.2, 0.15], None)
    assert seeds["interval"] == "seeds" and seeds["verdict"] == "holds"
    same = h.across_seeds_and_questions([0.1, 0.1, 0.1], None)
    assert same["verdict"] == "undefined" and "no question variance" in same["reason"]


def test_not_tested_is_its_own_state():
    s = h.not_tested(across_seeds([1.0, 1.0, 1.0], null=1.0, expect="less"), "pruning was off in every seed")
    assert s["verdict"] == "not tested" and s["holds"] is None and s["reason"] == "pruning was off in every seed"
