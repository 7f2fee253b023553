"""The result sections of a report's ``index.html``, built from ``metrics.json`` alone.

In reading order: a summary generated from the numbers (so it is honest whichever way they fall);
where the run recorded them (schema 2: ``evaluation.primary``, ``decoding.primary``), the primary
findings across RM seeds, one sentence each with its mean, 95% t-interval and "in k of n seeds" (the
reward comparison saying how many comparisons there are), and the exploratory benchmarks with
Holm-corrected p-values; Q along the incorrect solutions around the first error, a line per seed
(``evaluation.first_error_profile``; where absent, what is missing); then the seed-0 detail: the key
figure (AUROC per benchmark for every scorer), the key table (goal-conditioned − baseline, with Holm
over its k benchmarks), a figure and two tables of what Q saves (Q-filtered voting, online pruning:
tokens, accuracy with Wilson intervals, wall time, where tuning chose no pruning), the decoding
comparison (Wilson intervals, what the numbers show, budgets that do not match) and steering. Figures are embedded
PNGs, so the page works as a single file. Every section is
left out when the metrics it needs are absent (a run that stopped early).

A conclusion is stated only where the across-seeds summary holds (its interval lies wholly on the
expected side); "reversed" where the interval lies wholly on the other side; otherwise "not shown", with
the effect the run would have seen with 80% power where it recorded one; "not tested" where the
mechanism was switched off; and "cannot be judged: <reason>" where it is undefined. An undefined number reads
``undefined``, never "nan".

The sections in words live in :mod:`~goalrm_core.report.findings`, the figures and tables in
:mod:`~goalrm_core.report.result_figures` (both read metrics through :mod:`~goalrm_core.report.metrics_view`);
this module puts them in reading order.
"""

from __future__ import annotations

from collections.abc import Mapping

from goalrm_core.report.findings import (
    answer,
    exploratory_section,
    gate_state,
    judge,
    primary_findings,
    real_text_answer,
    step_answer,
    summary,
)
from goalrm_core.report.metrics_view import detail_seed
from goalrm_core.report.result_figures import (
    auroc_figure,
    decoding_table,
    delta_table,
    first_error_section,
    savings_figure,
    steering_section,
)
from goalrm_core.report.templating import part

__all__ = [
    "answer",
    "auroc_figure",
    "decoding_table",
    "delta_table",
    "exploratory_section",
    "first_error_section",
    "gate_state",
    "judge",
    "primary_findings",
    "real_text_answer",
    "result_sections",
    "savings_figure",
    "steering_section",
    "step_answer",
    "summary",
]


def result_sections(metrics: Mapping) -> str:
    """Everything between the gate and the stage table; the detail sections name the RM seed they show
    (the profile's first)."""
    detail = f" — seed {detail_seed(metrics)} (detail)"
    sections = [
        ("Summary", summary(metrics)),
        ("Primary findings across seeds", primary_findings(metrics)),
        ("Exploratory benchmarks", exploratory_section(metrics)),
        ("Q around the first error, every seed", first_error_section(metrics)),
        ("Reward models against the free scorers" + detail, auroc_figure(metrics)),
        ("Goal-conditioned − baseline" + detail, delta_table(metrics)),
        ("Tokens saved by Q" + detail, savings_figure(metrics)),
        ("Decoding at matched budgets" + detail, decoding_table(metrics)),
        ("Steering" + detail, steering_section(metrics)),
    ]
    # the story (summary and primary findings) stays open; the detail below it folds, so the page opens
    # on the answer and a reader unfolds what they want to check
    open_titles = {"Summary", "Primary findings across seeds"}
    return "\n".join(
        part("section", title=title, body=body, open=title in open_titles) for title, body in sections if body
    )
