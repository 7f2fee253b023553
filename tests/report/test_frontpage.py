"""The index's result sections and the reader formatting, from a metrics tree alone."""

import pandas as pd

from goalrm_core.study import formatting as fmt
from goalrm_core.report import frontpage
def metrics_tree(delta_low: float, delta_high: float) -> dict:
    def scorer(a):
        return {b: {"auroc": a, "auroc_ci_low": a - 0.05, "auroc_ci_high": a + 0.05} for b in ("toy-id", "toy-zero")}

    return {
        "data": {"preference": {"n_train": 6783}, "task": {"name": "digit-chain ToyMath"}},
        "training": {rm: {"eval_accuracy": 0.8, "n_seeds": 3, "steps": 400} for rm in frontpage.RMS},
        "evaluation": {
            "headline": "sample0",
            "baseline": scorer(0.80), "goal-conditioned": scorer(0.84), "length only": scorer(0.55),
            "policy mean logprob": scorer(0.99),
            "delta_auroc": {b: {"mean": (delta_low + delta_high) / 2, "ci_low": delta_low, "ci_high": delta_high, "p_value": 0.01}
                            for b in ("toy-id", "toy-zero")},
        },
    }


def test_summary_states_the_result_whichever_way_it_falls():
    better = frontpage.summary(metrics_tree(0.01, 0.07))
    assert "6,783 preference pairs" in better and "digit-chain ToyMath" in better and "3 seeds each" in better
    assert better.count(". ") + 1 <= 5  # 3-5 sentences
    assert "better on toy-id, toy-zero" in better and "0.84 [0.79, 0.89]" in better
    assert "ceiling" in better  # the log-prob beats both RMs here, and the page says so
    null = frontpage.summary(metrics_tree(-0.03, 0.05))
    assert "no detectable difference" in null and "better on" not in null
    worse = frontpage.summary(metrics_tree(-0.09, -0.01))
    assert "worse on toy-id, toy-zero" in worse


def test_result_sections_embed_figures_and_tables():
    page = frontpage.result_sections(metrics_tree(0.01, 0.07))
    assert page.count("data:image/png;base64,") == 1  # no filtering metrics: no savings figure
    assert "+0.04 [+0.01, +0.07]" in page and "0.010" in page
    assert frontpage.result_sections({}) == ""  # nothing recorded yet: nothing drawn


def test_reader_table_merges_intervals_and_words_columns():
    df = pd.DataFrame({"benchmark": ["toy-id"], "mean": [0.031], "ci_low": [-0.012], "ci_high": [0.074],
                       "p_value_two_sided": [0.0004], "tokens_saved_pct": [41.25], "sample_accuracy": [0.679]})
    row = fmt.table(df).iloc[0].to_dict()
    assert row == {"benchmark": "toy-id", "Δ AUROC [95% CI]": "+0.03 [-0.01, +0.07]", "p-value (two-sided)": "< 0.001",
                   "tokens saved": "41.2%", "sampled accuracy": "67.9%"}
    assert fmt.ci(0.5, None, None) == "0.50" and fmt.ci(None, 0.1, 0.2) == "–"
