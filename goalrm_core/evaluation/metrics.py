"""Metrics that evaluate reward models on model generations, each with its uncertainty.

The paper judges a reward model (RM) by what it says about the policy's own generations:

* AUROC of the final reward against correctness (``bootstrap_auroc``), and the paired
  difference between two RMs on the same generations (``paired_bootstrap_delta``);
* AUROC of *partial* generations: the per-token reward or Q-value at the end of the first
  ``pct`` of each response (``prefix_index``, ``partial_auroc``);
* majority voting that drops a generation as soon as its Q-value falls below a threshold, which
  saves the tokens it would still have produced (``q_filtered_majority_vote``, a sweep over
  thresholds ``q_filtered_majority_votes``, ``tokens_saved_interval``, ``choose_filter_threshold``);
* how Q-values relate to the final reward (``q_reward_correlation``) and whether they fall once
  a solution has made its first error (``first_error_q_stats``, ``prefix_error_auroc``);
* plain majority voting and best-of-n selection, for decoding comparisons.

A number without its uncertainty invites over-reading a 0.01 AUROC gap, so every estimate comes
with a bootstrap or t interval, or a p-value. Quantities that are undefined on the data at hand
(AUROC when all generations share one label, a t-test when nothing changed) come back as NaN
with a sentence saying why, never as an exception and never as a made-up 0.5.

The definitions live in `stats`, `auroc`, `voting` and `q_analysis`; this module is their
one public namespace (``from goalrm_core.evaluation import metrics; metrics.bootstrap_auroc(...)``).
Everything is plain numpy/scipy: it runs on the CPU in a notebook or test in milliseconds.
"""

from goalrm_core.evaluation.auroc import (
    DEFAULT_PERCENTILES,
    AurocResult,
    bootstrap_auroc,
    delta_of,
    paired_bootstrap_delta,
    partial_auroc,
    prefix_index,
)
from goalrm_core.evaluation.q_analysis import first_error_q_stats, prefix_error_auroc, q_reward_correlation
from goalrm_core.evaluation.stats import mean_ci, wilson_interval
from goalrm_core.evaluation.voting import (
    DEFAULT_FILTER_THRESHOLDS,
    SKIP_FIRST,
    AccuracyResult,
    FilterResult,
    OfficialFilterFigures,
    best_of_n_accuracy,
    choose_filter_threshold,
    majority_vote_accuracy,
    official_filter_figures,
    q_filtered_majority_vote,
    q_filtered_majority_votes,
    tokens_saved_interval,
)

__all__ = [
    "AccuracyResult",
    "AurocResult",
    "DEFAULT_FILTER_THRESHOLDS",
    "DEFAULT_PERCENTILES",
    "FilterResult",
    "OfficialFilterFigures",
    "SKIP_FIRST",
    "best_of_n_accuracy",
    "bootstrap_auroc",
    "choose_filter_threshold",
    "first_error_q_stats",
    "majority_vote_accuracy",
    "mean_ci",
    "official_filter_figures",
    "delta_of",
    "paired_bootstrap_delta",
    "partial_auroc",
    "prefix_error_auroc",
    "prefix_index",
    "q_filtered_majority_vote",
    "q_filtered_majority_votes",
    "tokens_saved_interval",
    "q_reward_correlation",
    "wilson_interval",
]
