"""The step-verifier bench on ToyMath: every sample's first wrong line is known exactly, so each verifier
(the goal-conditioned RM's Q, an RM's partial reward, ...) is measured against the truth with
ProcessBench's first-error F1 (:mod:`goalrm_core.evaluation.step_verifier`).

A *step* is a line of the solution (ToyMath writes one operation per line, then the ``#`` answer line);
a line's score is the verifier's per-token score at the line's last token (its newline, or the last
character of the answer line): what the verifier says once it has read the whole step. The embedded
task's tokenizer has one token per character, so token ``i`` reads character ``i``.

The threshold is chosen on one half of the questions and F1 reported on the other half (a seeded split
of the questions, the same for every verifier and seed), with an interval over RM seeds and questions.
Beside F1, on the same reported half and with the same intervals, two threshold-free figures: the *line
AUROC* (every line of every solution is an example, positive when the solution went wrong at or before
it, scored by minus its reading: does a low reading mean "an error so far"?) and the *final AUROC* (each
solution's last-line reading against its correctness).

And each verifier as a *filter* (:mod:`goalrm_core.study.filter_rules`' machinery: a per-token signal fed
to majority voting that drops a sample at its first value below a threshold): its signal is its own
reading where it reads a line (:func:`filter_signal`), the threshold is chosen on the validation half by
the frontier's rule (the most tokens saved among the thresholds whose vote is within ``FRONTIER_DROP``, 1
point, of unfiltered voting: ``thresholds.choose_cheapest_within``), and on the reported half the bench reports the
tokens saved as a share of the oracle's saving (every incorrect solution stopped at its first wrong token:
``filter_share``; above 1 when a filter also drops correct samples, which the oracle keeps, and the
oracle saves nothing on a question whose samples are all wrong: the filter falls back to voting them all)
and the change in majority-vote accuracy (``filter_accuracy_change``, a fraction).
Both are statistics of question weights at the chosen threshold, so they get the same interval over RM
seeds and reported questions; the threshold itself is held fixed (its choice on validation is not
redrawn). :func:`frontier_frame` gives every candidate threshold's outcome on the reported half.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from goalrm_core.evaluation import step_verifier, voting
from goalrm_core.evaluation.auroc import bootstrap_auroc
from goalrm_core.evaluation.hierarchical import (
    across_seeds_and_questions,
    auroc_statistic,
    clipped,
    difference,
    hierarchical_bootstrap,
    mean_statistic,
    ratio_statistic,
)
from goalrm_core.study import formatting as fmt
from goalrm_core.study.rms import PRM_LABEL
from goalrm_core.tasks.toymath.grading import line_end_tokens  # a step is a line: the task says where lines end

#: Per-token score arrays a scored row can carry, by verifier kind, and how a line is read from them: at
#: its last token (Q and the partial reward read the whole prefix) or as its least likely token (the
#: policy's log-prob, ``filter_rules.with_policy_logprobs``, is per token: a slip is one unlikely token).
SCORE_KEYS = {"Q": "cosine_sim", "partial reward": "partial_rewards"}
LINE_READING = {"cosine_sim": "end", "partial_rewards": "end", "policy_token_logprobs": "min"}


def first_error_line(row: Mapping) -> int | None:
    """The exact label: the index of the first wrong line (``first_error_step``), ``None`` for a
    solution with no wrong line."""
    step = row.get("first_error_step")
    return None if step is None else int(step)


def line_scores(row: Mapping, key: str) -> list[float]:
    """The per-token ``row[key]`` read per line (:data:`LINE_READING`): at the line's last token, or the
    line's lowest value (NaN entries, tokens the source has no value for, left out)."""
    values = row[key]
    ends = line_end_tokens(row["generated_solution"], int(row["num_actions"]))
    if LINE_READING.get(key, "end") == "end":
        return [float(values[i]) for i in ends]
    starts = [0] + [e + 1 for e in ends[:-1]]
    lines = [[float(v) for v in values[a : b + 1] if v == v] for a, b in zip(starts, ends)]
    return [min(line) if line else float("inf") for line in lines]


def labelled(rows: Sequence[Mapping]) -> list[int]:
    """Indices of the rows the bench can use: a correct solution, or an incorrect one whose first wrong
    line is known and was scored (a truncated score that stops before its first error has no label)."""
    keep = []
    for i, row in enumerate(rows):
        e = first_error_line(row)
        if e is None and not row["is_correct"]:
            continue  # wrong, but no line located: no exact label
        if e is not None and e >= len(line_end_tokens(row["generated_solution"], int(row["num_actions"]))):
            continue
        keep.append(i)
    return keep


def split_questions(rows: Sequence[Mapping], seed: int = 0) -> tuple[set[str], set[str]]:
    """A seeded half/half split of the questions: (validation, reported)."""
    questions = sorted({r["question"] for r in rows})
    order = np.random.default_rng(seed).permutation(len(questions))
    half = len(questions) // 2
    return {questions[i] for i in order[:half]}, {questions[i] for i in order[half:]}


def verifier_f1(rows: Sequence[Mapping], key: str, validation: set[str]) -> dict[str, Any]:
    """One verifier on one seed's scored rows: the threshold with the best F1 on the validation
    questions, and the F1 figures at it on the others (``reported``), with what the bootstrap needs."""
    keep = [rows[i] for i in labelled(rows)]
    val = [r for r in keep if r["question"] in validation]
    rep = [r for r in keep if r["question"] not in validation]
    threshold, fit = step_verifier.choose_f1_threshold(
        [line_scores(r, key) for r in val], [first_error_line(r) for r in val]
    )
    scores, truth = [line_scores(r, key) for r in rep], [first_error_line(r) for r in rep]
    figures = step_verifier.evaluate_at(scores, truth, threshold)
    aurocs = {metric: _point_auroc(*examples) for metric, examples in auroc_examples(scores, truth).items()}
    return {
        "threshold": threshold,
        "validation_f1": fit["f1"],
        **figures,
        **aurocs,
        "n_dropped": len(rows) - len(keep),
        **filter_figures(rows, key, validation),
        "_scores": scores,
        "_truth": truth,
        "_questions": [r["question"] for r in rep],
    }


#: how far below unfiltered voting (a fraction, on the validation questions) a filter's threshold may
#: vote: the issue's frontier point, the most tokens saved within 1 point of accuracy
FRONTIER_DROP = 0.01

#: the bench's figures, each summarised over seeds and questions by :func:`bench_summary`
METRICS = ("f1", "line_auroc", "final_auroc", "filter_share", "filter_accuracy_change")
AUROC_METRICS = ("line_auroc", "final_auroc")
#: the range a single verifier's figure lives in (its interval is kept inside it)
RANGES = {"f1": (0.0, 1.0), "line_auroc": (0.0, 1.0), "final_auroc": (0.0, 1.0)}


def filter_signal(row: Mapping, key: str) -> np.ndarray:
    """The per-token signal a line verifier filters by: ``row[key]`` where the verifier reads a line
    (:data:`LINE_READING`: a line's last token, or every token of a line for a per-token reading), NaN
    elsewhere, so the filter drops a sample where the verifier first flags a line.

    >>> row = {"generated_solution": "1+1=2\\n#2", "num_actions": 9, "cosine_sim": list(range(9))}
    >>> filter_signal(row, "cosine_sim").tolist()
    [nan, nan, nan, nan, nan, 5.0, nan, 7.0, nan]
    """
    values = np.asarray(row[key], dtype=np.float64)
    ends = line_end_tokens(row["generated_solution"], int(row["num_actions"]))
    out = np.full(values.shape, np.nan)
    if LINE_READING.get(key, "end") == "end":
        out[ends] = values[ends]
    elif ends:
        out[: ends[-1] + 1] = values[: ends[-1] + 1]
    return out


def filter_figures(rows: Sequence[Mapping], key: str, validation: set[str]) -> dict[str, Any]:
    """One verifier as a filter on one seed's rows (every sample: majority voting needs them all): the
    threshold chosen on the validation questions, and on the others the tokens saved as a share of the
    oracle's saving and the accuracy change, with the per-question counts the bootstrap needs
    (``_filter``) and every candidate threshold's outcome (``_frontier``). No token is skipped: a line
    verifier reads every line, and the oracle skips none."""
    from goalrm_core.study import filter_rules as fr  # torch comes with it

    reported = [r for r in rows if r["question"] not in validation]
    val = fr.with_signal([r for r in rows if r["question"] in validation], lambda r: filter_signal(r, key))
    rep = fr.with_signal(reported, lambda r: filter_signal(r, key))
    if not val or not rep:
        raise ValueError("the filter figures need samples on both validation and reported questions")
    candidates = fr.candidate_thresholds(val)
    threshold, _ = voting.choose_filter_threshold(
        val, candidates=candidates, skip_first=0, max_accuracy_drop=FRONTIER_DROP
    )
    oracle = voting.filter_per_question(
        fr.with_signal(reported, fr.oracle_signal), 0.0, 0
    )  # the same questions, in the same order
    mine = voting.filter_per_question(rep, threshold, 0)
    oracle_saved = float(oracle["tokens_saved"].sum())
    frontier = [
        {
            "threshold": float(t),
            "share_of_oracle": res.tokens_saved / oracle_saved if oracle_saved else math.nan,
            "accuracy_change": res.accuracy - res.accuracy_unfiltered,
            "tokens_saved_pct": res.tokens_saved_pct,
            "chosen": bool(t == threshold),
        }
        for t, res in zip(candidates, fr.votes_at(rep, candidates, 0))
    ]
    change = mine["correct"].astype(np.float64) - mine["correct_unfiltered"].astype(np.float64)
    return {
        "filter_threshold": threshold,
        "filter_share": float(mine["tokens_saved"].sum()) / oracle_saved if oracle_saved else math.nan,
        "filter_accuracy_change": float(change.mean()),
        "filter_tokens_saved_pct": 100.0 * float(mine["tokens_saved"].sum()) / float(mine["tokens_total"].sum()),
        "oracle_tokens_saved_pct": 100.0 * oracle_saved / float(oracle["tokens_total"].sum()),
        "_filter": {
            "questions": [q[0]["question"] for q in rep],
            "saved": mine["tokens_saved"],
            "oracle_saved": oracle["tokens_saved"],
            "change": change,
        },
        "_frontier": frontier,
    }


def frontier_frame(result: Mapping[str, Any], seed_index: int = 0):
    """Every verifier's filter frontier on the reported questions for one RM seed (the ``seed_index``-th):
    one row per verifier and candidate threshold (share of the oracle's saving, accuracy change, whether
    the validation questions chose it)."""
    import pandas as pd

    return pd.DataFrame(
        [
            {"verifier": verifier, **point}
            for verifier, results in result["per_seed"].items()
            for point in results[seed_index]["_frontier"]
        ]
    )


def auroc_examples(scores: Sequence[Sequence[float]], truth: Sequence[int | None]) -> dict[str, tuple[np.ndarray, ...]]:
    """``{metric: (scores, labels, solution of each example)}`` for the line and final AUROCs.

    >>> ex = auroc_examples([[3.0, 1.0], [2.0, 2.0]], [1, None])
    >>> ex["line_auroc"][1].tolist(), ex["final_auroc"][1].tolist()
    ([0.0, 1.0, 0.0, 0.0], [0.0, 1.0])
    """
    line_s, line_y, line_of = [], [], []
    for i, (lines, e) in enumerate(zip(scores, truth)):
        t = np.arange(len(lines))
        line_s.append(-np.asarray(lines, dtype=np.float64))
        line_y.append(np.zeros(t.size) if e is None else (t >= e).astype(np.float64))
        line_of.append(np.full(t.size, i))

    def cat(parts, dtype=np.float64):
        return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)

    final_s = np.array([lines[-1] for lines in scores], dtype=np.float64)
    final_y = np.array([e is None for e in truth], dtype=np.float64)
    return {
        "line_auroc": (cat(line_s), cat(line_y), cat(line_of, np.int64)),
        "final_auroc": (final_s, final_y, np.arange(len(scores))),
    }


def _point_auroc(scores: np.ndarray, labels: np.ndarray, _solution: np.ndarray) -> float:
    finite = np.isfinite(scores)  # a line the source has no value for (log-prob's inf) is left out
    return bootstrap_auroc(scores[finite], labels[finite], n_boot=1).auroc if finite.any() else float("nan")


def _statistics(r: Mapping, index: Mapping[str, int]) -> dict[str, Any]:
    """Each metric of one verifier-seed result as a statistic of question multiplicities."""
    clusters = np.array([index[q] for q in r["_questions"]], dtype=np.int64)
    out = {"f1": step_verifier.f1_statistic(r["_scores"], r["_truth"], r["threshold"], clusters)}
    for metric, (scores, labels, solution) in auroc_examples(r["_scores"], r["_truth"]).items():
        finite = np.isfinite(scores)
        out[metric] = auroc_statistic(scores[finite], labels[finite], clusters[solution[finite]])
    f = r["_filter"]  # one entry per reported question: the filter's saving over the oracle's, the vote's change
    of = np.array([index[q] for q in f["questions"]], dtype=np.int64)
    out["filter_share"] = ratio_statistic(f["saved"], f["oracle_saved"], of)
    out["filter_accuracy_change"] = mean_statistic(f["change"], of)
    return out


def bench_summary(
    per_seed: Mapping[str, Sequence[dict]],
    baseline: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    metric: str = "f1",
) -> dict[str, dict]:
    """Per verifier, ``metric`` (one of :data:`METRICS`) over its seeds (``verifier_f1`` results, seeds in
    the same order for every verifier) with an interval over seeds and questions; with ``baseline``, each
    other verifier's figure minus the baseline's, seed by seed on the same question draws."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; valid: {', '.join(METRICS)}")
    # one question index for every verifier and seed, so a draw weights the same questions in all of them
    questions = sorted(
        {q for results in per_seed.values() for r in results for q in [*r["_questions"], *r["_filter"]["questions"]]}
    )
    index = {q: i for i, q in enumerate(questions)}
    summary, statistics = {}, {}
    for name, results in per_seed.items():
        statistics[name] = [_statistics(r, index)[metric] for r in results]
        boot = hierarchical_bootstrap(statistics[name], n_questions=len(questions), n_boot=n_boot, seed=seed)
        # a single scorer's AUROC is judged against chance (0.5), every other figure against 0; kept in range
        null = 0.5 if metric in AUROC_METRICS else 0.0
        summary[name] = clipped(
            across_seeds_and_questions([r[metric] for r in results], boot, null=null),
            *RANGES.get(metric, (-math.inf, math.inf)),
        )
    if baseline is not None:
        for name, results in per_seed.items():
            if name == baseline or len(results) != len(per_seed[baseline]):
                continue
            pairs = [difference(a, b) for a, b in zip(statistics[name], statistics[baseline])]
            boot = hierarchical_bootstrap(pairs, n_questions=len(questions), n_boot=n_boot, seed=seed)
            deltas = [a[metric] - b[metric] for a, b in zip(results, per_seed[baseline])]
            summary[f"{name} − {baseline}"] = across_seeds_and_questions(deltas, boot, null=0.0)
    return summary


def summaries(
    per_seed: Mapping[str, Sequence[dict]], reference: str | None, n_boot: int = 1000, seed: int = 0
) -> dict[str, dict[str, dict]]:
    """``{metric: bench_summary(...)}`` for every figure of :data:`METRICS`."""
    return {
        metric: bench_summary(per_seed, baseline=reference, n_boot=n_boot, seed=seed, metric=metric)
        for metric in METRICS
    }


def bench_run(
    run_dir,
    rms: Sequence[str],
    rm_seeds: Sequence[int],
    bench: str = "toy-id",
    split_seed: int = 0,
    n_boot: int = 1000,
    seed: int = 0,
    arms: Sequence[str] = (),
) -> dict[str, Any]:
    """Notebook 04's step-verifier bench: every RM's Q and partial reward, per seed, on all samples of
    ``bench`` as notebook 04 scored them, each step-verifier arm's partial reward (``rms.step_arms``: the
    exact-label PRM), and the policy's own log-prob; differences against the baseline RM's partial reward
    (the reward model a researcher would read per step without goal-conditioning). Returns the per-seed
    results and :func:`summaries`."""
    from goalrm_core.data.rundir import RunDir
    from goalrm_core.evaluation.tables import read_scored
    from goalrm_core.study.filter_rules import with_policy_logprobs
    from goalrm_core.study.rms import BASELINE, PRM

    run = RunDir(run_dir)
    per_seed: dict[str, list[dict]] = {}
    logprobs = None
    readings = [(rm, rm, tuple(SCORE_KEYS.items())) for rm in rms]
    readings += [(arm, PRM_LABEL if arm == PRM else arm, (("partial reward", "partial_rewards"),)) for arm in arms]
    for rm, label, kinds in readings:
        for rm_seed in rm_seeds:
            rows = read_scored(run.eval(rm, rm_seed), bench, "all")
            validation, _ = split_questions(rows, split_seed)
            for kind, key in kinds:
                per_seed.setdefault(f"{label} {kind}", []).append(verifier_f1(rows, key, validation))
            if logprobs is None:  # the policy has no seed: one reading, paired with every RM seed
                logprobs = verifier_f1(with_policy_logprobs(run_dir, rows), "policy_token_logprobs", validation)
    if logprobs is not None:
        per_seed["policy log-prob"] = [logprobs] * len(rm_seeds)
    reference = f"{BASELINE} partial reward" if f"{BASELINE} partial reward" in per_seed else None
    return {
        "per_seed": per_seed,
        "reference": reference,
        "summaries": summaries(per_seed, reference, n_boot, seed),
        "bench": bench,
        "split_seed": split_seed,
        "filter_max_drop": FRONTIER_DROP,
    }


def blind_floors(
    rows: Sequence[Mapping],
    split_seed: int = 0,
    rules: Sequence[str] = step_verifier.BLIND_RULES,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """The content-blind floors of the first-error F1 (``step_verifier.blind_floor_statistic``) on a benchmark's
    scored ``rows`` (any RM's: every RM scores the same samples): each rule in ``rules`` fitted on the validation
    half of the questions (the split of :func:`bench_run`) and scored on the reported half, with a 95% interval
    over questions kept in [0, 1]. The rules read only how many lines a solution has, never its text, so a
    verifier at or below them has no skill."""
    validation, _ = split_questions(rows, split_seed)  # on every row, as bench_run splits them
    rows = [rows[i] for i in labelled(rows)]
    index: dict[str, int] = {}
    for r in rows:
        index.setdefault(r["question"], len(index))
    halves = []
    for in_val in (True, False):
        part = [r for r in rows if (r["question"] in validation) == in_val]
        halves.append(
            (
                [len(line_end_tokens(r["generated_solution"], int(r["num_actions"]))) for r in part],
                [first_error_line(r) for r in part],
                [index[r["question"]] for r in part],
            )
        )
    ones = np.ones((1, len(index)), dtype=np.int64)
    out = {}
    for rule in rules:
        statistic = step_verifier.blind_floor_statistic(rule, *halves)
        boot = hierarchical_bootstrap([statistic], len(index), n_boot, seed=seed)
        out[rule] = {
            "f1": float(statistic(ones)[0]),
            "ci_low": max(0.0, boot.ci_low),
            "ci_high": min(1.0, boot.ci_high),
        }
    return out


def skill_scores(result: Mapping[str, Any], floors: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Each verifier's skill ``(F1 − floor) / (PRM − floor)`` (and its interval, F1's mapped) against the higher
    floor and the exact-label PRM's mean F1; empty where the bench has no PRM or the PRM is not above the floor."""
    f1 = result["summaries"]["f1"]
    prm = f1.get(f"{PRM_LABEL} partial reward")
    floor = max((v["f1"] for v in floors.values()), default=None)
    if prm is None or floor is None or prm.get("mean") is None or not prm["mean"] > floor:
        return {}
    span = prm["mean"] - floor
    return {
        "floor": floor,
        "prm_f1": prm["mean"],
        "verifiers": {
            name: {k: (s[k] - floor) / span for k in ("mean", "ci_low", "ci_high") if s.get(k) is not None}
            for name, s in f1.items()
            if " − " not in name
        },
    }


def floor_frame(floors: Mapping[str, Mapping[str, Any]], skill: Mapping[str, Any]):
    """The floors' first-error F1, then each verifier's skill score, each with its 95% interval, as one table."""
    import pandas as pd

    def interval(lo, hi) -> str:
        return "" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"

    rows = [
        {"reading": f"floor: {rule}", "F1 or skill": f["f1"], "95% interval": interval(f["ci_low"], f["ci_high"])}
        for rule, f in floors.items()
    ]
    rows += [
        {
            "reading": f"skill: {name}",
            "F1 or skill": s.get("mean"),
            "95% interval": interval(s.get("ci_low"), s.get("ci_high")),
        }
        for name, s in skill.get("verifiers", {}).items()
    ]
    return pd.DataFrame(rows)


def bench_frame(result: Mapping[str, Any]):
    """One row per verifier (and difference) and figure: mean [95% CI over seeds and questions], per seed."""
    import pandas as pd

    rows = []
    for metric, by_verifier in result["summaries"].items():
        for verifier, s in by_verifier.items():
            per = [r[metric] for r in result["per_seed"][verifier]] if verifier in result["per_seed"] else []
            rows.append(
                {
                    "figure": metric,
                    "verifier": verifier,
                    "mean": s.get("mean"),
                    "ci_low": s.get("ci_low"),
                    "ci_high": s.get("ci_high"),
                    "per seed": ", ".join(f"{v:.3f}" for v in per),
                    "verdict": s.get("verdict") if " − " in verifier else "",
                    "mde": s.get("mde") if " − " in verifier else None,
                }
            )
    return pd.DataFrame(rows)


def bench_metrics(result: Mapping[str, Any]) -> dict[str, Any]:
    """What metrics.json keeps of the bench: per figure and verifier, the mean, its interval, the per-seed
    values and, for a difference, its two-sided verdict and MDE."""
    keep = (
        "mean",
        "ci_low",
        "ci_high",
        "per_seed",
        "interval",
        "se_seeds",
        "se_questions",
        "verdict",
        "mde",
        "n_seeds",
        "reason",
    )
    return {
        "bench": result["bench"],
        "split_seed": result["split_seed"],
        "reference": result["reference"],
        "filter_max_drop": result.get("filter_max_drop"),
        "figures": {
            metric: {verifier: {k: v for k, v in s.items() if k in keep} for verifier, s in by_verifier.items()}
            for metric, by_verifier in result["summaries"].items()
        },
    }


def reading(result: Mapping[str, Any], verifier: str = "goal-conditioned Q") -> str:
    """The bench in one sentence: ``verifier``'s first-error F1 against the reference's, with the difference's
    interval, two-sided verdict and MDE (the same words as every primary conclusion)."""
    f1 = result["summaries"]["f1"]
    reference = result["reference"]
    if verifier not in f1 or reference is None or reference not in f1:
        return f"The step-verifier bench has no {verifier} or no reference to compare it with."
    mine, ref, diff = f1[verifier], f1[reference], f1.get(f"{verifier} − {reference}", {})

    figure = f1_figure

    prm = f1.get(f"{PRM_LABEL} partial reward")
    share = ""
    if prm is not None:
        share = f" The {PRM_LABEL}'s F1 is {figure(prm)}"
        if isinstance(prm.get("mean"), (int, float)) and prm["mean"] > 0 and isinstance(mine.get("mean"), (int, float)):
            share += f": {verifier}, with no step labels, reaches {100 * mine['mean'] / prm['mean']:.0f}% of it"
        share += "."
    return (
        f"Step verification on {result['bench']}'s exact labels: {verifier}'s first-error F1 is {figure(mine)}, "
        f"{reference}'s {figure(ref)}; difference {figure(diff, signed=True)}: {_verdict(diff)} "
        f"(95% intervals over RM seeds and questions).{share}"
    )


def f1_figure(s: Mapping[str, Any], signed: bool = False) -> str:
    """``mean [low, high]`` of an F1 (``signed``: of a difference of two F1s, which may be negative). An F1
    lies in [0, 1], and so does its interval: a t-interval that reaches past a bound is shown cut at it."""
    low, high = s.get("ci_low"), s.get("ci_high")
    if not signed:
        low, high = (
            min(max(v, 0.0), 1.0) if isinstance(v, (int, float)) and not fmt.is_undefined(v) else v for v in (low, high)
        )
    return fmt.interval(s.get("mean"), low, high, 3, signed=signed)


def _verdict(diff: Mapping[str, Any]) -> str:
    """A difference's two-sided verdict, a null with the effect it would have seen (its MDE)."""
    verdict = diff.get("verdict", "undefined")
    if verdict == "not shown" and diff.get("mde"):
        return f"{verdict}, an effect of {diff['mde']:.3f} would have been seen with 80% power"
    if verdict in ("undefined", "not tested") and diff.get("reason"):
        return f"{verdict} ({diff['reason']})"
    return verdict


#: The label-noise twins of a calibration: a PRM on rollout-estimated step labels and its exact-label
#: twin on the same pairs (``scripts/step_verifier_bench.py`` names the difference this way).
TWINS = re.compile(
    r"rollout-label PRM \((?P<n>[\d,]+) pairs\) partial reward − exact-label PRM \((?P=n) pairs\) partial reward"
)


def label_noise_reading(rows: Sequence[Mapping[str, Any]], design: str) -> str:
    """What label noise costs, in one sentence, from a calibration's step-verifier rows (the committed
    ``reports/calibration/step-verifier.jsonl``): the last first-error F1 comparison of a rollout-label
    PRM with its exact-label twin recorded for ``design`` (rows whose run folder lies under
    ``calibration/<design>/``), with both twins' F1. Empty when the calibration has no twins."""
    mine = [
        r
        for r in rows
        if r.get("kind") == "summary"
        and r.get("metric") == "f1"
        and f"calibration/{design}/" in str(r.get("run_dir", ""))
    ]
    diffs = [i for i, r in enumerate(mine) if TWINS.fullmatch(str(r.get("verifier", "")))]
    if not diffs:
        return ""
    diff = mine[diffs[-1]]
    n = TWINS.fullmatch(diff["verifier"])["n"]
    twin = {}
    for r in mine[: diffs[-1]]:  # the twins' own rows, recorded before their difference in the same block
        if r.get("name") == diff.get("name") and r.get("verifier") in (
            f"rollout-label PRM ({n} pairs) partial reward",
            f"exact-label PRM ({n} pairs) partial reward",
        ):
            twin[r["verifier"].split(" ")[0]] = r
    figure = f1_figure
    both = (
        f": first-error F1 {figure(twin['rollout-label'])} (rollout labels) against {figure(twin['exact-label'])} "
        "(exact)"
        if {"rollout-label", "exact-label"} <= set(twin)
        else ""
    )
    seeds = ", ".join(str(s) for s in diff.get("seeds", []))
    return (
        f"Label noise, measured in this design's calibration, not in this run (validation questions, RM seeds {seeds}; "
        f"block {diff.get('name')} of reports/calibration/step-verifier.jsonl): a PRM on step labels estimated from "
        f"policy rollouts (Math-Shepherd) and its twin on the exact labels of the same {n} pairs{both}; difference "
        f"{figure(diff, signed=True)}: {_verdict(diff)}."
    )
