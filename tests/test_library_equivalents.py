"""The statistics written by hand agree with the library that could replace them (docs/design.md says why
each is kept): the Wilson intervals with scipy's ``binomtest``, Welch's interval with scipy's ``ttest_ind``."""

import numpy as np
import pytest
from scipy import stats

from goalrm_core.evaluation.stats import wilson_interval
from goalrm_core.report.compare_figures import _welch
from goalrm_core.report.sweep_page import wilson


@pytest.mark.parametrize("k,n", [(0, 1), (0, 10), (3, 10), (10, 10), (57, 100), (1, 300), (299, 300)])
def test_wilson_intervals_are_scipy_s(k, n):
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert wilson(k / n, n) == pytest.approx((ci.low, ci.high), abs=1e-12)


@pytest.mark.parametrize(
    "a,b",
    [
        ([0.71, 0.74, 0.69, 0.77, 0.72], [0.80, 0.78, 0.83, 0.79, 0.81]),
        ([1.0, 2.0, 4.0], [0.5, 0.7, 0.6, 0.9, 1.4, 0.8]),
    ],
)
def test_welch_interval_from_summaries_is_scipy_s_from_samples(a, b):
    a, b = np.array(a), np.array(b)
    d, low, high = _welch(a.mean(), a.var(ddof=1), a.size, b.mean(), b.var(ddof=1), b.size)
    ci = stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert d == pytest.approx(b.mean() - a.mean(), abs=1e-12)
    assert (low, high) == pytest.approx((ci.low, ci.high), abs=1e-9)
