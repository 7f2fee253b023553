"""Online pruning as notebook 05 measures it: sample each question without pruning, choose the
threshold on the benchmark's other questions (notebook 04's scored samples), sample again with the
RM stopping samples at it (the same seed), and compare tokens and majority-vote accuracy; across RM
seeds, the primary ``decoding.primary.pruning`` section with its interval over seeds and questions.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from goalrm_core.data.questions import group_by_question
from goalrm_core.evaluation import hierarchical, metrics, stats, verdicts
from goalrm_core.evaluation.tables import read_scored
from goalrm_core.evaluation.voting import majority_vote_per_question
from goalrm_core.inference.pruning import PRUNING_OFF, PruneConfig, choose_online_threshold
from goalrm_core.inference.sampler import Sample, check_decoding_inputs, sample
from goalrm_core.model.templates import apply_template
from goalrm_core.study.artifacts import load_rm, read_goal_state
from goalrm_core.study.decoding_setup import DecodingSetup, sample_rows
from goalrm_core.study.rms import GOAL_CONDITIONED as GOAL_RM
from goalrm_core.tasks.toymath.pipeline import TEMPLATE


@dataclass
class PruningSetup:
    """Online pruning as notebook 05 runs it: N samples per question, unpruned and pruned, same seed."""

    n_samples: int = field(default=8, metadata={"help": "Samples per question."})
    temperature: float = field(default=0.7, metadata={"help": "Sampling temperature."})
    max_new_tokens: int = field(default=96, metadata={"help": "Most tokens per sample."})
    seed: int = field(default=0, metadata={"help": "Sampling seed, the same for the unpruned and the pruned run."})
    rule: PruneConfig = field(
        default_factory=PruneConfig, metadata={"help": "When a sample stops; its threshold is used untuned."}
    )
    tune: bool = field(
        default=False, metadata={"help": "Choose each benchmark's threshold on its other questions' scored samples."}
    )
    batch_size: int = field(default=256, metadata={"help": "Sequences per sampling batch (whole questions)."})


@dataclass
class SampledRun:
    """The samples of one run on one benchmark's questions."""

    questions: list[str]
    samples: list[list[Sample]]  # per question
    wall_s: float  # the sampling alone (the pruned run pays for the RM too)
    threshold: float | None  # None: unpruned, the policy alone


@dataclass
class ThresholdChoice:
    """A benchmark's pruning threshold and how it was chosen."""

    threshold: float
    tuned: bool  # False: the untuned ``rule.threshold`` (tuning off, or no other question scored)
    table: pd.DataFrame | None = None  # the replayed outcome of every candidate, when tuned
    n_validation: int = 0  # questions the threshold was chosen on


@dataclass
class PruningResult:
    """Pruned against unpruned sampling per benchmark: the deterministic numbers, and the wall times."""

    table: pd.DataFrame  # one row per benchmark
    timings: dict[str, dict[str, float]]  # per benchmark: wall_s (pruned), wall_s_unpruned

    def view(self) -> pd.DataFrame:
        """The table with its wall times, for reading (wall times stay out of the metrics)."""
        cols = [
            "threshold",
            "tokens_generated",
            "tokens_generated_unpruned",
            "tokens_saved_pct",
            "samples_stopped_pct",
            "accuracy",
            "accuracy_unpruned",
        ]
        return self.table[cols].join(pd.DataFrame.from_dict(self.timings, orient="index"))


def _warm_up(setup: DecodingSetup) -> None:
    """One tiny run of the policy and the RM, so the first timed run does not pay for lazy initialisation."""
    sample(setup.policy, setup.tokenizer, ["1 +1\n"], n=2, max_new_tokens=8, rm=setup.rm, goal=setup.goal)


def sample_solutions(
    setup: DecodingSetup, questions: Sequence[str], cfg: PruningSetup, threshold: float | None = None
) -> SampledRun:
    """``cfg.n_samples`` samples per question with the KV-cache sampler: the policy alone when
    ``threshold`` is None, else with the RM following every sample and ``cfg.rule`` stopping it at
    ``threshold`` (at or below -1, ``PRUNING_OFF``, the sampler runs the policy alone: no RM call).
    The same seed either way, so a kept sample is the unpruned one."""
    check_decoding_inputs(setup.policy, setup.rm, setup.tokenizer, setup.goal)
    prompts = [apply_template(TEMPLATE, q) for q in questions]
    _warm_up(setup)
    kw = dict(
        n=cfg.n_samples,
        temperature=cfg.temperature,
        max_new_tokens=cfg.max_new_tokens,
        seed=cfg.seed,
        batch_size=cfg.batch_size,
    )
    if threshold is not None:
        kw |= dict(rm=setup.rm, goal=setup.goal, prune=PruneConfig(threshold, cfg.rule.skip_first, cfg.rule.keep_last))
    t0 = time.perf_counter()
    samples = sample(setup.policy, setup.tokenizer, prompts, **kw)
    return SampledRun(list(questions), samples, time.perf_counter() - t0, threshold)


def tune_threshold(setup: DecodingSetup, bench: str, exclude: Sequence[str], cfg: PruningSetup) -> ThresholdChoice:
    """With ``cfg.tune``: the threshold whose replayed online pruning votes best on notebook 04's
    scored samples of the benchmark's questions NOT in ``exclude`` (then fewest tokens, then the lower
    threshold; -1, no pruning, is a candidate for when every threshold costs accuracy). Otherwise,
    or when no such question is left, ``cfg.rule.threshold``."""
    if not cfg.tune:
        return ThresholdChoice(cfg.rule.threshold, tuned=False)
    held = set(exclude)
    groups = [
        g
        for q, g in group_by_question(read_scored(setup.run.eval(GOAL_RM, setup.rm_seed), bench, "all")).items()
        if q not in held
    ]
    if not groups:
        return ThresholdChoice(cfg.rule.threshold, tuned=False)
    candidates = np.r_[-1.0, metrics.DEFAULT_FILTER_THRESHOLDS]
    threshold, table = choose_online_threshold(
        groups, candidates, skip_first=cfg.rule.skip_first, keep_last=cfg.rule.keep_last
    )
    return ThresholdChoice(threshold, tuned=True, table=table, n_validation=len(groups))


def pruning_outcome(unpruned: SampledRun, pruned: SampledRun, modulus: int = 0) -> dict:
    """Tokens and majority-vote accuracy of a pruned run against the unpruned one (same questions).
    Tokens are those the policy drew: a pruned sample's tokens drawn past its stop before the RM read
    them (``Sample.overrun``) count, though they are cut from its text."""
    if unpruned.questions != pruned.questions:
        raise ValueError("the pruned and the unpruned run must sample the same questions")
    questions, n = pruned.questions, len(pruned.samples[0]) if pruned.samples else 0
    rows_plain, rows_pruned = (
        sample_rows(questions, unpruned.samples, modulus),
        sample_rows(questions, pruned.samples, modulus),
    )
    n_stopped = sum(s.pruned for g in pruned.samples for s in g)
    out = {
        "threshold": pruned.threshold,
        "n_questions": len(questions),
        "n_samples": n,
        "tokens_generated": sum(s.num_tokens + s.overrun for g in pruned.samples for s in g),
        "tokens_generated_unpruned": sum(s.num_tokens for g in unpruned.samples for s in g),
        "accuracy": metrics.majority_vote_accuracy(rows_pruned).accuracy,
        "accuracy_unpruned": metrics.majority_vote_accuracy(rows_plain).accuracy,
        "samples_stopped_pct": 100.0 * n_stopped / max(1, len(questions) * n),
    }
    out["tokens_saved_pct"] = 100.0 * (1 - out["tokens_generated"] / max(1, out["tokens_generated_unpruned"]))
    return out


def pruning_results(
    setup: DecodingSetup, unpruned: dict[str, SampledRun], pruned: dict[str, SampledRun]
) -> PruningResult:
    """``pruning_outcome`` per benchmark, and the wall times of both runs."""
    rows = {bench: pruning_outcome(unpruned[bench], pruned[bench], setup.task.modulus) for bench in pruned}
    timings = {bench: {"wall_s": pruned[bench].wall_s, "wall_s_unpruned": unpruned[bench].wall_s} for bench in pruned}
    return PruningResult(pd.DataFrame.from_dict(rows, orient="index"), timings)


def pruning_per_question(unpruned: SampledRun, pruned: SampledRun, modulus: int = 0) -> dict[str, np.ndarray]:
    """:func:`pruning_outcome` question by question (for the bootstrap over questions): tokens the
    policy drew with and without pruning, and whether the majority vote is right with and without."""
    if unpruned.questions != pruned.questions:
        raise ValueError("the pruned and the unpruned run must sample the same questions")
    questions = pruned.questions
    return {
        "tokens": np.asarray([sum(s.num_tokens + s.overrun for s in g) for g in pruned.samples], dtype=float),
        "tokens_unpruned": np.asarray([sum(s.num_tokens for s in g) for g in unpruned.samples], dtype=float),
        "correct": majority_vote_per_question(sample_rows(questions, pruned.samples, modulus)),
        "correct_unpruned": majority_vote_per_question(sample_rows(questions, unpruned.samples, modulus)),
    }


def pruning_across_seeds(
    setup: DecodingSetup,
    rm_seeds: Sequence[int],
    questions: Sequence[str],
    unpruned: SampledRun,
    cfg: PruningSetup,
    bench: str = "toy-id",
    n_boot: int = 1000,
) -> tuple[dict, dict]:
    """Online pruning on ``bench`` with each seed's goal-conditioned RM (its own goal state and its own
    tuned threshold) against the one unpruned run of the same questions: a primary conclusion, so its
    interval covers RM-seed and question variance (`hierarchical.across_seeds_and_questions`); where
    every seed's tuning chose pruning off, nothing was pruned and both figures are ``not tested``.
    Returns the ``decoding.primary.pruning`` section of metrics.json and its wall-time part (for
    ``timings``; wall time has no per-question part, so its interval is over seeds)."""
    outcomes, walls, thresholds, per_question = [], [], [], []
    for rm_seed in rm_seeds:
        rm, _ = load_rm(setup.run, GOAL_RM, rm_seed)
        seeded = dataclasses.replace(
            setup, rm=rm, goal=read_goal_state(setup.run, GOAL_RM, seed=rm_seed), rm_seed=rm_seed
        )
        choice = tune_threshold(seeded, bench, questions, cfg)
        pruned = sample_solutions(seeded, questions, cfg, choice.threshold)
        outcomes.append(pruning_outcome(unpruned, pruned, setup.task.modulus))
        per_question.append(pruning_per_question(unpruned, pruned, setup.task.modulus))
        walls.append(pruned.wall_s / unpruned.wall_s if unpruned.wall_s > 0 else float("nan"))
        thresholds.append(float(choice.threshold))
    return pruning_section(bench, rm_seeds, thresholds, outcomes, per_question, n_boot), {
        "wall_ratio": stats.across_seeds(walls, null=1.0, expect="less"),
        "wall_s_unpruned": unpruned.wall_s,
    }


def pruning_section(
    bench: str,
    rm_seeds: Sequence[int],
    thresholds: Sequence[float],
    outcomes: Sequence[dict],
    per_question: Sequence[dict],
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """The ``decoding.primary.pruning`` section from each seed's :func:`pruning_outcome` and
    :func:`pruning_per_question`."""
    n_q = len(per_question[0]["tokens"]) if per_question else 0
    c = np.arange(n_q)

    def over(values, stat, **kw):
        boot = (
            hierarchical.hierarchical_bootstrap([stat(p) for p in per_question], n_q, n_boot, seed=seed)
            if n_boot and n_q and len(per_question) >= 2
            else None
        )
        return hierarchical.across_seeds_and_questions(values, boot, **kw)

    off = sum(t <= PRUNING_OFF for t in thresholds)
    section = {
        "benchmark": bench,
        "rm_seeds": list(rm_seeds),
        "threshold": list(thresholds),
        "pruning_off": off,
        "tokens_ratio": over(
            [o["tokens_generated"] / max(1, o["tokens_generated_unpruned"]) for o in outcomes],
            lambda p: hierarchical.ratio_statistic(p["tokens"], p["tokens_unpruned"], c),
            null=1.0,
            expect="less",
        ),
        # expect "less": `holds` means pruning costs accuracy
        "accuracy_change": over(
            [o["accuracy"] - o["accuracy_unpruned"] for o in outcomes],
            lambda p: hierarchical.mean_statistic(p["correct"].astype(float) - p["correct_unpruned"].astype(float), c),
            expect="less",
        ),
    }
    if rm_seeds and off == len(rm_seeds):
        why = verdicts.pruning_switched_off(section)
        for key in ("tokens_ratio", "accuracy_change"):
            section[key] = hierarchical.not_tested(section[key], why)
    return section
