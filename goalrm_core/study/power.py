"""The primary conclusions computed from committed records (``study.records``), however many runs made them.

Every figure is per RM seed on the same questions, summarised over seeds and questions by the two-level
bootstrap (``evaluation.hierarchical``), with its two-sided verdict and MDE. What is computed follows
reports/confident/analysis-plan.md:

- ``delta_auroc``: goal-conditioned minus baseline reward AUROC on the headline set (sample 0 of each question),
  paired by seed; a null whose interval lies inside ``±EQUIVALENCE`` reads **equivalent**;
- per arm: AUROC judged against 0.5, the margin over length-only judged against 0, its SD over seeds with an 80%
  upper bound, and how many seeds clear length-only + ``LENGTH_TARGET``;
- ``first_error_did`` per arm (``evaluation.localisation``) on every sample, with the references' use counted.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from goalrm_core.evaluation import hierarchical
from goalrm_core.evaluation.localisation import first_error_did
from goalrm_core.evaluation.stats import sd_upper
from goalrm_core.evaluation.verdicts import EQUIVALENCE, LENGTH_TARGET, clears_length, equivalent  # noqa: F401
from goalrm_core.study.records import as_rows
from goalrm_core.study.rms import BASELINE, GOAL_CONDITIONED, PRM, PRM_LABEL, RMS

# the equivalence bound of the plan (a null whose interval lies inside ±EQUIVALENCE reads "equivalent"), the margin a
# seed clears length-only by (LENGTH_TARGET) and the SD's 80% upper bound (sd_upper) are defined once in the core
# (evaluation.verdicts, evaluation.stats), where the front page reads them too
EQUIVALENT = "equivalent"


def by_arm(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[int, list[dict]]]:
    """``{arm: {seed: rows}}`` of the records."""
    out: dict[str, dict[int, list[dict]]] = {}
    for r in records:
        out.setdefault(r["arm"], {})[int(r["seed"])] = as_rows(r)
    return out


def paired_seeds(arms: Mapping[str, Mapping[int, Any]], names: Sequence[str] = RMS) -> list[int]:
    """The seeds every arm in ``names`` has a record for, ascending."""
    common = None
    for name in names:
        seeds = set(arms.get(name, {}))
        common = seeds if common is None else common & seeds
    return sorted(common or ())


def headline(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Sample 0 of each question (the headline set: one sampled solution per question), in question order."""
    return sorted((r for r in rows if r["sample"] == 0), key=lambda r: r["question"])


def with_equivalence(summary: dict, bound: float = EQUIVALENCE) -> dict:
    """A "not shown" whose interval lies inside ``±bound`` reads :data:`EQUIVALENT` (the plan's rule)."""
    if equivalent(summary, bound):
        return {**summary, "verdict": EQUIVALENT, "equivalence_bound": bound}
    return {**summary, "equivalence_bound": bound}


def primary_from_records(records: Sequence[Mapping[str, Any]], n_boot: int = 2000, boot_seed: int = 0) -> dict:
    """The ``primary`` conclusions of the plan from ``records`` (all of one data fingerprint): see the module
    docstring. Seeds without both arms' records are left out and counted."""
    arms = by_arm(records)
    seeds = paired_seeds(arms)
    if len(seeds) < 2:
        return {"n_seeds": len(seeds), "rm_seeds": seeds, "reason": f"{len(seeds)} paired seeds: at least 2 are needed"}
    first = headline(arms[BASELINE][seeds[0]])
    questions = [r["question"] for r in first]
    index: dict[str, int] = {}
    for q in questions:  # a question drawn twice is one cluster
        index.setdefault(q, len(index))
    c = np.array([index[q] for q in questions], dtype=np.int64)
    y = np.array([bool(r["correct"]) for r in first])
    length = hierarchical.auroc_statistic([-r["tokens"] for r in first], y, c)
    logprob = hierarchical.auroc_statistic([r["policy_mean_logprob"] for r in first], y, c)

    def auroc_stat(rm, seed):
        rows = headline(arms[rm][seed])
        if [r["question"] for r in rows] != questions:
            raise ValueError(f"{rm} seed {seed}: its headline questions differ from {BASELINE} seed {seeds[0]}'s")
        return hierarchical.auroc_statistic([r["score"] for r in rows], y, c)

    stats = {rm: [auroc_stat(rm, s) for s in seeds] for rm in RMS}
    ones = np.ones((1, len(questions)), dtype=np.int64)

    def point(f):
        return float(np.asarray(f(ones))[0])

    def summarise(statistics, null=0.0, expect="greater"):
        values = [point(f) for f in statistics]
        boot = hierarchical.hierarchical_bootstrap(statistics, len(index), n_boot, seed=boot_seed)
        return hierarchical.across_seeds_and_questions(values, boot, null=null, expect=expect)

    out: dict[str, Any] = {
        "rm_seeds": seeds,
        "n_seeds": len(seeds),
        "n_questions": len(index),
        "headline": "sample0",
        "n_boot": n_boot,
        "unpaired_seeds": {rm: sorted(set(arms.get(rm, {})) - set(seeds)) for rm in RMS},
    }
    delta = [hierarchical.difference(g, b) for g, b in zip(stats[GOAL_CONDITIONED], stats[BASELINE])]
    out["delta_auroc"] = with_equivalence(summarise(delta))
    out["reference"] = {"length only": point(length), "policy mean logprob": point(logprob)}
    for rm in RMS:
        values = [point(f) for f in stats[rm]]
        margin = [hierarchical.difference(f, length) for f in stats[rm]]
        out[rm] = {
            "auroc": summarise(stats[rm], null=0.5),
            "margin_over_length": summarise(margin),
            "sd": float(np.std(values, ddof=1)),
            "sd_upper_80": sd_upper(values),
            "seeds_clearing_length": int(sum(clears_length(v - point(length)) for v in values)),
            "first_error_did": did_summary(arms[rm], seeds, index, n_boot, boot_seed),
        }
    return out


def did_summary(
    per_seed: Mapping[int, Sequence[Mapping[str, Any]]],
    seeds: Sequence[int],
    index: Mapping[str, int],
    n_boot: int,
    boot_seed: int,
) -> dict:
    """:func:`~goalrm_core.evaluation.localisation.first_error_did` of one arm on every sample of each seed,
    summarised over seeds and questions (expected below 0: Q falls at the error), with the references' use."""
    values, statistics, references = [], [], {}
    for s in seeds:
        rows = [r for r in per_seed[s] if r["line_q"] is not None]
        if not rows:
            return {"verdict": "not tested", "reason": "this arm has no goal state (no Q)"}
        r = first_error_did(
            [x["line_q"] for x in rows],
            [x["first_error_line"] for x in rows],
            [x["correct"] for x in rows],
            [x["question"] for x in rows],
        )
        values.append(r.did)
        statistics.append(hierarchical.mean_statistic(r.contributions, np.array([index[q] for q in r.questions])))
        for k, v in r.references.items():
            references[k] = references.get(k, 0) + v
    boot = hierarchical.hierarchical_bootstrap(statistics, len(index), n_boot, seed=boot_seed)
    return {**hierarchical.across_seeds_and_questions(values, boot, expect="less"), "references": references}


#: the step bench's verifiers read from records: (label, arm, the record's line column)
VERIFIERS = (
    ("goal-conditioned Q", GOAL_CONDITIONED, "line_q"),
    ("goal-conditioned partial reward", GOAL_CONDITIONED, "line_partial"),
    ("baseline Q", BASELINE, "line_q"),
    ("baseline partial reward", BASELINE, "line_partial"),
    (f"{PRM_LABEL} partial reward", PRM, "line_partial"),
)


def split_questions(questions: Sequence[str], seed: int = 0) -> set[str]:
    """The validation half of the questions (a seeded half/half split, as the report's step bench draws it)."""
    ordered = sorted(set(questions))
    order = np.random.default_rng(seed).permutation(len(ordered))
    return {ordered[i] for i in order[: len(ordered) // 2]}


def step_bench_from_records(
    records: Sequence[Mapping[str, Any]], n_boot: int = 1000, boot_seed: int = 0, split_seed: int = 0
) -> dict:
    """First-error F1 of each verifier (:data:`VERIFIERS`) on every labelled sample, the threshold chosen on the
    validation half of the questions and re-chosen in every bootstrap replicate; the content-blind floors
    (``step_verifier.BLIND_RULES``) fitted on the same half; and each verifier's skill score
    ``(F1 − floor) / (PRM − floor)`` against the higher floor and the PRM's mean F1 (both held fixed: the
    skill's interval is F1's, mapped)."""
    from goalrm_core.evaluation import step_verifier

    arms = by_arm(records)
    any_rows = next(iter(next(iter(arms.values())).values()))
    keep = [
        r
        for r in any_rows
        if r["correct"] or (r["first_error_line"] is not None and r["first_error_line"] < len(r["line_partial"]))
    ]
    validation = split_questions([r["question"] for r in any_rows], split_seed)
    index: dict[str, int] = {}
    for r in any_rows:
        index.setdefault(r["question"], len(index))
    key = [(r["question"], r["sample"]) for r in keep]

    def halves(rows, column):
        by_key = {(r["question"], r["sample"]): r for r in rows}
        picked = [by_key[k] for k in key]
        out = []
        for in_val in (True, False):
            part = [r for r in picked if (r["question"] in validation) == in_val]
            out.append(
                (
                    [r[column] for r in part],
                    [None if r["correct"] else r["first_error_line"] for r in part],
                    [index[r["question"]] for r in part],
                )
            )
        return out

    ones = np.ones((1, len(index)), dtype=np.int64)
    result: dict[str, Any] = {
        "split_seed": split_seed,
        "n_labelled": len(keep),
        "n_validation_questions": len(validation),
        "n_boot": n_boot,
        "f1": {},
        "floors": {},
    }
    lengths = halves(any_rows, "line_partial")
    for rule in step_verifier.BLIND_RULES:
        (v_scores, v_e, v_c), (r_scores, r_e, r_c) = lengths
        f = step_verifier.blind_floor_statistic(
            rule, ([len(s) for s in v_scores], v_e, v_c), ([len(s) for s in r_scores], r_e, r_c)
        )
        boot = hierarchical.hierarchical_bootstrap([f], len(index), n_boot, seed=boot_seed)
        result["floors"][rule] = {
            "f1": float(f(ones)[0]),
            "ci_low": max(0.0, boot.ci_low),
            "ci_high": min(1.0, boot.ci_high),
        }
    for label, arm, column in VERIFIERS:
        seeds = sorted(arms.get(arm, {}))
        if not seeds or arms[arm][seeds[0]][0][column] is None:
            continue
        statistics = [step_verifier.reselected_f1_statistic(*halves(arms[arm][s], column)) for s in seeds]
        values = [float(f(ones)[0]) for f in statistics]
        boot = hierarchical.hierarchical_bootstrap(statistics, len(index), n_boot, seed=boot_seed)
        result["f1"][label] = {
            **hierarchical.clipped(hierarchical.across_seeds_and_questions(values, boot, null=0.0)),
            "rm_seeds": seeds,
        }
    floor = max(v["f1"] for v in result["floors"].values())
    prm = result["f1"].get(f"{PRM_LABEL} partial reward")
    if prm is not None and prm["mean"] > floor:
        span = prm["mean"] - floor
        result["skill"] = {
            label: {k: (s[k] - floor) / span for k in ("mean", "ci_low", "ci_high")}
            for label, s in result["f1"].items()
        }
        result["skill_reference"] = {"floor": floor, "prm_f1": prm["mean"]}
    return result
