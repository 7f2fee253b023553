"""Notebook 05's study: Q-guided beam search against sampling-based selection, online pruning with
measured savings, and steering toward a style, on the run directory of a profile.

The algorithms live in the inference layer (``sampler``, ``beam_search``, ``pruning``). The study
reads the run directory (``RunDir``), runs them on each benchmark's first questions, judges the
answers (``tasks.toymath.verdicts``), and turns the numbers into tables, a figure, prose and the
notebook's metrics. Each step takes a setup dataclass and returns a result dataclass:

1. ``decode_questions``: the first ``n_questions`` distinct questions of each benchmark
   (:mod:`~goalrm_core.study.decoding_setup`);
2. ``run_beam_search``, then ``compare_at_matched_budget`` against greedy, majority voting and
   best-of-N over notebook 04's scored samples (:mod:`~goalrm_core.study.decoding_methods`);
3. ``sample_solutions`` without pruning, ``tune_threshold`` on the other questions' scored samples,
   ``sample_solutions`` again with pruning, and ``pruning_results`` side by side
   (:mod:`~goalrm_core.study.decoding_pruning`);
4. ``steering_policy`` and ``steering_experiment`` (:mod:`~goalrm_core.study.decoding_steering`);
5. ``decoding_metrics``: the ``decoding`` section of metrics.json (this module).

Every step's names are importable from here, as the notebook reads them (``dec.<name>``).
"""

from __future__ import annotations

import re

import pandas as pd

from goalrm_core.evaluation import verdicts
from goalrm_core.study.decoding_methods import (
    BEAM_METHOD,
    MethodComparison,
    accuracy_vs_tokens_figure,
    beam_rows_with_verdicts,
    budget_sizes,
    compare_at_matched_budget,
    examples_frame,
    matched_budget,
    matched_table,
    methods_reading,
    readable,
    run_beam_search,
    sample_method_curves,
    settings_frame,
)
from goalrm_core.study.decoding_pruning import (
    PruningResult,
    PruningSetup,
    SampledRun,
    ThresholdChoice,
    pruning_across_seeds,
    pruning_outcome,
    pruning_per_question,
    pruning_results,
    pruning_section,
    sample_solutions,
    tune_threshold,
)
from goalrm_core.study.decoding_setup import (
    DecodingSetup,
    decode_questions,
    sample_rows,
    samples_as_rows,
    unique_questions,
)
from goalrm_core.study.decoding_steering import (
    SteerConfig,
    SteeringPolicy,
    SteeringResult,
    SteeringSetup,
    attribute_goal_state,
    steering_examples,
    steering_experiment,
    steering_frame,
    steering_policy,
    steering_reading,
    steering_summary,
    style_separation_auroc,
)
from goalrm_core.study.rms import BASELINE as BASELINE_RM
from goalrm_core.study.rms import GOAL_CONDITIONED as GOAL_RM

__all__ = [
    "BASELINE_RM",
    "BEAM_METHOD",
    "GOAL_RM",
    "PRUNING_KEYS",
    "DecodingSetup",
    "MethodComparison",
    "PruningResult",
    "PruningSetup",
    "SampledRun",
    "SteerConfig",
    "SteeringPolicy",
    "SteeringResult",
    "SteeringSetup",
    "ThresholdChoice",
    "accuracy_vs_tokens_figure",
    "attribute_goal_state",
    "beam_rows_with_verdicts",
    "budget_sizes",
    "compare_at_matched_budget",
    "decode_questions",
    "decoding_metrics",
    "examples_frame",
    "matched_budget",
    "matched_table",
    "methods_metrics",
    "methods_reading",
    "pruning_across_seeds",
    "pruning_outcome",
    "pruning_per_question",
    "pruning_results",
    "pruning_section",
    "pruning_seeds_frame",
    "readable",
    "run_beam_search",
    "sample_method_curves",
    "sample_rows",
    "sample_solutions",
    "samples_as_rows",
    "settings_frame",
    "steering_examples",
    "steering_experiment",
    "steering_frame",
    "steering_policy",
    "steering_reading",
    "steering_summary",
    "style_separation_auroc",
    "tune_threshold",
    "unique_questions",
]


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower().replace("best-of-n", "best_of_n")).strip("_")


def methods_metrics(tables: dict[str, pd.DataFrame]) -> dict:
    """``{bench: {method: {accuracy, tokens, n}}}`` with method names as metric keys."""
    return {
        bench: {
            _key(r["method"]): {"accuracy": float(r["accuracy"]), "tokens": float(r["tokens"]), "n": int(r["n"])}
            for _, r in t.iterrows()
        }
        for bench, t in tables.items()
    }


PRUNING_KEYS = (
    "threshold",
    "tokens_generated",
    "tokens_generated_unpruned",
    "accuracy",
    "accuracy_unpruned",
    "samples_stopped_pct",
    "tokens_saved_pct",
)


def decoding_metrics(comparison: MethodComparison, pruning: PruningResult, steering: SteeringResult) -> dict:
    """The ``decoding`` section of metrics.json (deterministic numbers only; wall times go to timings)."""
    methods = methods_metrics({b: g for b, g in comparison.matched.groupby("benchmark", sort=False)})
    for rows in methods.values():  # the questions each accuracy is over: its Wilson interval on the front page
        for row in rows.values():
            row["n_questions"] = int(comparison.n_questions)
    prune = {bench: {k: float(row[k]) for k in PRUNING_KEYS} for bench, row in pruning.table.iterrows()}
    return {"methods": methods, "pruning": prune, "steering": dict(steering.summary)}


def pruning_seeds_frame(section: dict, wall: dict) -> pd.DataFrame:
    """``pruning_across_seeds`` for reading: each figure's mean over seeds [95% t-interval], the seeds
    pointing the expected way, and the conclusion."""
    from goalrm_core.study.evaluation import seed_interval

    rows = []
    for name, s, scale in (
        ("tokens pruned / unpruned (< 1)", section["tokens_ratio"], 1.0),
        ("accuracy change, points (< 0 = costs accuracy)", section["accuracy_change"], 100.0),
        ("wall time pruned / unpruned (< 1)", wall["wall_ratio"], 1.0),
    ):
        rows.append(
            {
                "figure": name,
                "mean over seeds [95% CI]": seed_interval(s, scale, signed=scale != 1.0),
                "seeds the expected way": f"{s['k']} of {s['n_seeds']}",
                "conclusion": verdicts.words(
                    verdicts.mark_not_tested(s, verdicts.pruning_switched_off(section)),
                    scale=scale,
                    unit=" points" if scale != 1.0 else "",
                ),
            }
        )
    rows.append(
        {
            "figure": "seeds whose tuned threshold is 'pruning off' (≤ −1)",
            "mean over seeds [95% CI]": "",
            "seeds the expected way": f"{section['pruning_off']} of {len(section['rm_seeds'])}",
            "conclusion": "",
        }
    )
    return pd.DataFrame(rows)
