"""Conclusions over training seeds: mean ± t·s/√n, seeds pointing the expected way, Holm."""

import math

import pytest

from goalrm_core.evaluation.stats import across_seeds, holm, mean_ci


def test_holds_only_when_the_interval_clears_the_null():
    clear = across_seeds([0.20, 0.22, 0.18, 0.21, 0.19])
    assert clear["holds"] is True and clear["k"] == 5 and clear["n"] == 5
    assert (clear["mean"], clear["ci_low"], clear["ci_high"]) == pytest.approx(mean_ci([0.20, 0.22, 0.18, 0.21, 0.19]))
    mixed = across_seeds([-0.4, -0.3, 0.1, -0.2, -0.35], expect="less")  # 4 of 5 fall, interval includes 0? check
    assert mixed["k"] == 4 and mixed["holds"] == (mixed["ci_high"] < 0)
    ratio = across_seeds([0.9, 0.8, 0.85], null=1.0, expect="less")
    assert ratio["holds"] is True and ratio["null"] == 1.0


def test_undefined_seeds_are_counted_apart_and_never_become_a_verdict():
    s = across_seeds([0.2, None, math.nan, 0.3])
    assert s["n_seeds"] == 4 and s["n"] == 2 and s["per_seed"][1] is None and s["per_seed"][2] is None
    none = across_seeds([None, None])
    assert none["holds"] is None and "0 of 2" in none["reason"] and math.isnan(none["mean"])
    with pytest.raises(ValueError, match="expect"):
        across_seeds([1.0, 2.0], expect="bigger")


def test_holm_is_monotone_and_skips_undefined():
    adjusted = holm([0.01, math.nan, 0.04, 0.03])
    assert math.isnan(adjusted[1])
    assert (
        adjusted[0] == pytest.approx(0.03) and adjusted[3] == pytest.approx(0.06) and adjusted[2] == pytest.approx(0.06)
    )
    assert holm([0.9, 0.8]) == [1.0, 1.0]
