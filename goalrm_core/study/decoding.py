"""Notebook 05's study: Q-guided beam search against sampling-based selection, online pruning with
measured savings, and steering toward a style, on the run directory of a profile.

The algorithms live in the inference layer (``sampler``, ``beam_search``, ``pruning``). This module
reads the run directory (``RunDir``), runs them on each benchmark's first questions, judges the
answers (``tasks.toymath.verdicts``), and turns the numbers into tables, a figure, prose and the
notebook's metrics. Each step takes a setup dataclass and returns a result dataclass:

1. ``decode_questions``: the first ``n_questions`` distinct questions of each benchmark;
2. ``run_beam_search``, then ``compare_at_matched_budget`` against greedy, majority voting and
   best-of-N over notebook 04's scored samples;
3. ``sample_solutions`` without pruning, ``tune_threshold`` on the other questions' scored samples,
   ``sample_solutions`` again with pruning, and ``pruning_results`` side by side;
4. ``steering_policy`` and ``steering_experiment``;
5. ``decoding_metrics``: the ``decoding`` section of metrics.json.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
from tqdm.auto import tqdm
from transformers import AutoTokenizer, LlamaForCausalLM

from goalrm_core.data.questions import group_by_question
from goalrm_core.data.io import atomic_write_json
from goalrm_core.data.rundir import RunDir
from goalrm_core.evaluation import hierarchical, metrics, stats, verdicts
from goalrm_core.evaluation.voting import majority_vote_per_question
from goalrm_core.evaluation.tables import read_scored
from goalrm_core.inference.beam_search import DecodeConfig, q_guided_decode
from goalrm_core.inference.goal_state import goal_state, last_token_states, q_values
from goalrm_core.inference.pruning import PRUNING_OFF, PruneConfig, choose_online_threshold
from goalrm_core.inference.sampler import Sample, check_decoding_inputs, sample
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.model.templates import apply_template
from goalrm_core.study.artifacts import load_rm, read_goal_state
from goalrm_core.study.rms import BASELINE as BASELINE_RM, GOAL_CONDITIONED as GOAL_RM
from goalrm_core.study import formatting as fmt
from goalrm_core.study import plots  # noqa: F401  (the project's seaborn theme for the figure)
from goalrm_core.tasks.toymath import problems as toymath
from goalrm_core.tasks.toymath.pipeline import TEMPLATE, load_policy, read_benchmark, training_problems
from goalrm_core.tasks.toymath.policy import PolicyConfig, train_sft
from goalrm_core.tasks.toymath.verdicts import is_verbose, judge

# The RMs this study compares are study.rms's: the baseline's and the goal-conditioned RM's rewards
# pick best-of-N; the goal-conditioned RM guides, prunes and steers. The method names and metric
# keys below are derived from them.
BEAM_METHOD = "Q-guided beam search"


@dataclass
class DecodingSetup:
    """What notebook 05 decodes with: the run, the models, the goal and the questions."""

    run: RunDir = field(metadata={"help": "The profile's run directory."})
    policy: Any = field(metadata={"help": "The causal LM that generates (the data stage's policy)."})
    rm: RewardModel = field(metadata={"help": f"The {GOAL_RM} RM; it shares the policy's tokenizer."})
    tokenizer: Any = field(metadata={"help": "The tokenizer the policy and the RM share."})
    goal: np.ndarray = field(metadata={"help": "(1, hidden) goal state of the RM."})
    task: toymath.ToyMathConfig = field(metadata={"help": "The data stage's ToyMath config (answers are judged mod its modulus)."})
    benchmarks: list[str] = field(default_factory=list, metadata={"help": "Benchmarks to decode, in report order."})
    n_questions: int = field(default=32, metadata={"help": "First distinct questions decoded per benchmark."})
    rm_seed: int = field(default=0, metadata={"help": "The training seed of ``rm`` (whose scored samples tune the pruning threshold)."})
    encoding: str = field(default="split", metadata={"help": "How the RM reads prompt + response (the profile's `encoding`)."})
    readout: str = field(default="eos", metadata={"help": "Where the RM's reward is read (the profile's `readout`)."})

    def __post_init__(self):
        self.run = RunDir(self.run)
        if (self.encoding, self.readout) != ("split", "eos"):  # the KV-cached online scorers read this way only
            raise ValueError(f"decoding follows the RM with split encoding and the EOS read-out only, "
                             f"got encoding={self.encoding!r}, readout={self.readout!r}")


# ----------------------------------------------------------------------------------------------
# Questions and verdicts
# ----------------------------------------------------------------------------------------------


def unique_questions(run, bench: str, n: int) -> list[str]:
    """The first ``n`` distinct questions of a benchmark, in file order."""
    return list(dict.fromkeys(r["question"] for r in read_benchmark(run, bench)))[:n]


def decode_questions(setup: DecodingSetup) -> dict[str, list[str]]:
    """Per benchmark, the questions every method decodes: its first ``n_questions`` distinct ones."""
    return {bench: unique_questions(setup.run, bench, setup.n_questions) for bench in setup.benchmarks}


def sample_rows(questions: Sequence[str], samples: Sequence[Sequence[Sample]], modulus: int = 0) -> list[list[dict]]:
    """Per question, one row per sample; a stopped sample never votes (no answer, not correct)."""
    out = []
    for q, group in zip(questions, samples):
        rows = []
        for i, s in enumerate(group):
            verdict = {"predicted_answer": None, "is_correct": False} if s.pruned else judge(q, s.text, modulus=modulus)
            rows.append({"question": q, "sample_index": i, "generated_solution": s.text, **verdict, "num_generated_tokens": s.num_tokens,
                         "stopped_at": s.stopped_at, "finished": s.finished})
        out.append(rows)
    return out


def samples_as_rows(questions: Sequence[str], samples: Sequence[Sequence[Sample]]) -> list[dict]:
    """The first sample of each question as a row (question, generated_solution, tokens_generated)."""
    return [{"question": q, "generated_solution": g[0].text, "tokens_generated": g[0].num_tokens} for q, g in zip(questions, samples)]


def _in_order(groups: dict[str, list[dict]], questions: Sequence[str]) -> list[list[dict]]:
    """The groups of ``questions`` (from ``adapters.group_by_question``), in that order."""
    missing = [q for q in questions if q not in groups]
    if missing:
        raise ValueError(f"{len(missing)} questions have no scored generations, e.g. {missing[0]!r}")
    return [groups[q] for q in questions]


# ----------------------------------------------------------------------------------------------
# Q-guided beam search against sampling-based selection, at a matched budget
# ----------------------------------------------------------------------------------------------


@dataclass
class MethodComparison:
    """Accuracy and generated tokens per question of every method, over N and at the matched budget."""

    curves: pd.DataFrame  # method, n, accuracy, tokens, benchmark: every N of each method
    matched: pd.DataFrame  # the same columns, one row per (benchmark, method) at the matched budget
    n_questions: int  # questions per benchmark (the fewest decoded)


def run_beam_search(setup: DecodingSetup, questions: dict[str, list[str]], cfg: DecodeConfig, progress: bool = True) -> dict[str, list[dict]]:
    """Q-guided beam search on each benchmark's questions: one row per question (``q_guided_decode``)."""
    check_decoding_inputs(setup.policy, setup.rm, setup.tokenizer, setup.goal)
    return {bench: q_guided_decode(setup.policy, setup.rm, setup.tokenizer, setup.goal, qs, cfg)[0]
            for bench, qs in tqdm(questions.items(), desc="beam search", disable=not progress)}


def budget_sizes(n_max: int) -> list[int]:
    """1, 2, 4, ... up to ``n_max`` (``n_max`` itself included).

    >>> budget_sizes(12)
    [1, 2, 4, 8, 12]
    """
    sizes, k = [], 1
    while k < n_max:
        sizes.append(k)
        k *= 2
    return sizes + [n_max]


def sample_method_curves(greedy: Sequence[dict], scored: dict[str, Sequence[dict]], questions: Sequence[str]) -> pd.DataFrame:
    """Accuracy and mean generated tokens per question of greedy decoding and, for N = 1, 2, 4, ...,
    majority voting and best-of-N (by each RM's reward, and by the final Q), each over the first N
    samples of every question. ``scored`` maps ``BASELINE_RM`` and ``GOAL_RM`` to their scored samples."""
    base = _in_order(group_by_question(scored[BASELINE_RM]), questions)
    goal = _in_order(group_by_question(scored[GOAL_RM]), questions)
    g = [grp[0] for grp in _in_order(group_by_question(greedy), questions)]
    records = [{"method": "greedy", "n": 1, "accuracy": float(np.mean([r["is_correct"] for r in g])),
                "tokens": float(np.mean([r["num_generated_tokens"] for r in g]))}]
    n_max = min(len(grp) for grp in base)
    for k in budget_sizes(n_max):
        b, q = [grp[:k] for grp in base], [grp[:k] for grp in goal]
        tokens = float(np.mean([sum(r["num_generated_tokens"] for r in grp) for grp in b]))
        accs = {"majority vote": metrics.majority_vote_accuracy(b).accuracy,
                f"best-of-N {BASELINE_RM} reward": metrics.best_of_n_accuracy(b, "reward").accuracy,
                f"best-of-N {GOAL_RM} reward": metrics.best_of_n_accuracy(q, "reward").accuracy,
                "best-of-N final Q": metrics.best_of_n_accuracy(q, lambda r: r["cosine_sim"][-1]).accuracy}
        records += [{"method": m, "n": k, "accuracy": a, "tokens": tokens} for m, a in accs.items()]
    return pd.DataFrame(records)


def matched_budget(curves: pd.DataFrame, tokens: float) -> pd.DataFrame:
    """Per method, the row at the smallest N whose tokens reach ``tokens`` (else the largest N)."""
    picks = []
    for _, g in curves.groupby("method", sort=False):
        g = g.sort_values("n")
        reach = g[g["tokens"] >= tokens]
        picks.append(reach.iloc[0] if len(reach) else g.iloc[-1])
    return pd.DataFrame(picks).reset_index(drop=True)


def beam_rows_with_verdicts(rows: Sequence[dict], modulus: int = 0) -> list[dict]:
    return [dict(r, **judge(r["question"], r["generated_solution"], modulus=modulus)) for r in rows]


def compare_at_matched_budget(setup: DecodingSetup, beams: dict[str, list[dict]]) -> MethodComparison:
    """The beam search (one point per benchmark) against the sample-based methods over notebook 04's
    scored samples of the same questions, and every method at the smallest N whose mean generated
    tokens per question reach the beam search's."""
    curves, matched = [], []
    for bench, rows in beams.items():
        questions = [r["question"] for r in rows]
        scored = {rm: read_scored(setup.run.eval(rm), bench, "all") for rm in (BASELINE_RM, GOAL_RM)}
        greedy = read_scored(setup.run.eval(GOAL_RM), bench, "greedy")
        judged = beam_rows_with_verdicts(rows, setup.task.modulus)
        beam = {"method": BEAM_METHOD, "n": 1, "accuracy": float(np.mean([r["is_correct"] for r in judged])),
                "tokens": float(np.mean([r["tokens_generated"] for r in judged]))}
        c = pd.concat([sample_method_curves(greedy, scored, questions), pd.DataFrame([beam])], ignore_index=True).assign(benchmark=bench)
        curves.append(c)
        matched.append(matched_budget(c, beam["tokens"]).assign(benchmark=bench))
    return MethodComparison(pd.concat(curves, ignore_index=True), pd.concat(matched, ignore_index=True),
                            min(len(rows) for rows in beams.values()))


def matched_table(comparison: MethodComparison) -> pd.DataFrame:
    """Methods as rows (the first column), benchmarks as columns in report order, cells
    :func:`formatting.accuracy_cell`."""
    matched = comparison.matched
    cells = matched.assign(cell=[fmt.accuracy_cell(r.accuracy, comparison.n_questions, r.tokens, r.n) for r in matched.itertuples()])
    return fmt.wide(cells, "method", "benchmark", "cell")


def settings_frame(cfg) -> pd.DataFrame:
    """A config dataclass as a two-column table (setting, value), one row per field."""
    return pd.DataFrame([{"setting": f.name.replace("_", " "), "value": str(getattr(cfg, f.name))}
                         for f in dataclasses.fields(cfg)])


def readable(text: str) -> str:
    """A multi-line solution on one table line: its lines joined by `` | ``."""
    return " | ".join(line for line in str(text).splitlines() if line.strip())


def examples_frame(rows: Sequence[dict], columns: dict[str, str]) -> pd.DataFrame:
    """``rows`` as a table of the ``columns`` (key -> heading), solutions on one line (:func:`readable`),
    floats to 2 decimals."""
    def cell(v):
        if isinstance(v, float):
            return f"{v:.2f}"
        return readable(v) if isinstance(v, str) else v

    return pd.DataFrame([{heading: cell(r.get(key)) for key, heading in columns.items()} for r in rows])


def steering_frame(steering: SteeringResult) -> pd.DataFrame:
    """The steering summary with one unit per column: rows are the two rates (share of solutions
    in the verbose style, accuracy), columns the decodings, every cell a percentage."""
    s = steering.summary
    runs = [("steered toward the verbose goal", ""), ("steered toward the correctness goal", "_correctness_goal"),
            ("unguided sample", "_unguided")]
    rows = []
    for label, key in (("verbose style (% of solutions)", "attribute_rate"), ("accuracy (% of questions)", "accuracy")):
        rows.append({"measure": label, **{name: fmt.pct(s[key + suffix]) for name, suffix in runs if key + suffix in s}})
    return pd.DataFrame(rows)


def steering_reading(steering: SteeringResult) -> str:
    """How many questions the steering table is over, and whether the goal can steer at all."""
    s = steering.summary
    text = f"Each rate is over {s['n_questions']} questions, one seed, one run."
    if "goal_separation_auroc" in s:
        text += (f" The verbose goal's cosine tells a verbose solution from the terse one of the same problem with AUROC "
                 f"{fmt.num(s['goal_separation_auroc'])} (0.5: it could not steer at all).")
    return text


def methods_reading(comparison: MethodComparison) -> str:
    """A plain-words verdict generated from the numbers, so it cannot drift from them."""
    lines = []
    for bench, g in comparison.matched.groupby("benchmark", sort=False):
        g = g.set_index("method")
        beam = g.loc[BEAM_METHOD]
        others = g.drop(index=BEAM_METHOD)
        best = others["accuracy"].idxmax()
        verdict = "above" if beam["accuracy"] > others["accuracy"].max() else "below" if beam["accuracy"] < others["accuracy"].max() else "level with"
        lines.append(f"On {bench}, {BEAM_METHOD} reaches {beam['accuracy']:.2f} with {beam['tokens']:.0f} generated tokens per question, "
                     f"{verdict} the best other method ({best}: {others.loc[best, 'accuracy']:.2f} at {others.loc[best, 'tokens']:.0f} tokens).")
    if comparison.n_questions:
        lines.append(f"Each accuracy is over {comparison.n_questions} questions: a difference of one question is {1 / comparison.n_questions:.3f}.")
    return " ".join(lines)


def accuracy_vs_tokens_figure(curves: pd.DataFrame, title: str = "Accuracy vs generated tokens per question"):
    """One panel per benchmark: a line per sample-based method over N, a point each for greedy and
    the Q-guided beam search (star); log-scaled token axis."""
    benches = list(dict.fromkeys(curves["benchmark"]))
    fig, axes = plt.subplots(1, len(benches), figsize=(3.6 * len(benches), 3.6), sharey=True, squeeze=False)
    methods = list(dict.fromkeys(curves["method"]))
    colours = dict(zip(methods, plt.get_cmap("tab10").colors))
    for ax, bench in zip(axes[0], benches):
        data = curves[curves["benchmark"] == bench]
        for m in methods:
            g = data[data["method"] == m].sort_values("tokens")
            beam = "beam" in m
            ax.plot(g["tokens"], g["accuracy"], marker="*" if beam else "o", ms=13 if beam else 4,
                    ls="-" if len(g) > 1 else "none", c=colours[m], label=m)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(bench)
        ax.set_xlabel("tokens per question (log)")
    axes[0][0].set_ylabel("accuracy")
    axes[0][0].set_ylim(0, 1.02)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


# ----------------------------------------------------------------------------------------------
# Online pruning: sample, choose the threshold on other questions, prune, compare
# ----------------------------------------------------------------------------------------------


@dataclass
class PruningSetup:
    """Online pruning as notebook 05 runs it: N samples per question, unpruned and pruned, same seed."""

    n_samples: int = field(default=8, metadata={"help": "Samples per question."})
    temperature: float = field(default=0.7, metadata={"help": "Sampling temperature."})
    max_new_tokens: int = field(default=96, metadata={"help": "Most tokens per sample."})
    seed: int = field(default=0, metadata={"help": "Sampling seed, the same for the unpruned and the pruned run."})
    rule: PruneConfig = field(default_factory=PruneConfig, metadata={"help": "When a sample stops; its threshold is used untuned."})
    tune: bool = field(default=False, metadata={"help": "Choose each benchmark's threshold on its other questions' scored samples."})
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
        cols = ["threshold", "tokens_generated", "tokens_generated_unpruned", "tokens_saved_pct", "samples_stopped_pct", "accuracy", "accuracy_unpruned"]
        return self.table[cols].join(pd.DataFrame.from_dict(self.timings, orient="index"))


def _warm_up(setup: DecodingSetup) -> None:
    """One tiny run of the policy and the RM, so the first timed run does not pay for lazy initialisation."""
    sample(setup.policy, setup.tokenizer, ["1 +1\n"], n=2, max_new_tokens=8, rm=setup.rm, goal=setup.goal)


def sample_solutions(setup: DecodingSetup, questions: Sequence[str], cfg: PruningSetup, threshold: float | None = None) -> SampledRun:
    """``cfg.n_samples`` samples per question with the KV-cache sampler: the policy alone when
    ``threshold`` is None, else with the RM following every sample and ``cfg.rule`` stopping it at
    ``threshold`` (at or below -1, ``PRUNING_OFF``, the sampler runs the policy alone: no RM call).
    The same seed either way, so a kept sample is the unpruned one."""
    check_decoding_inputs(setup.policy, setup.rm, setup.tokenizer, setup.goal)
    prompts = [apply_template(TEMPLATE, q) for q in questions]
    _warm_up(setup)
    kw = dict(n=cfg.n_samples, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, seed=cfg.seed, batch_size=cfg.batch_size)
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
    groups = [g for q, g in group_by_question(read_scored(setup.run.eval(GOAL_RM, setup.rm_seed), bench, "all")).items() if q not in held]
    if not groups:
        return ThresholdChoice(cfg.rule.threshold, tuned=False)
    candidates = np.r_[-1.0, metrics.DEFAULT_FILTER_THRESHOLDS]
    threshold, table = choose_online_threshold(groups, candidates, skip_first=cfg.rule.skip_first, keep_last=cfg.rule.keep_last)
    return ThresholdChoice(threshold, tuned=True, table=table, n_validation=len(groups))


def pruning_outcome(unpruned: SampledRun, pruned: SampledRun, modulus: int = 0) -> dict:
    """Tokens and majority-vote accuracy of a pruned run against the unpruned one (same questions).
    Tokens are those the policy drew: a pruned sample's tokens drawn past its stop before the RM read
    them (``Sample.overrun``) count, though they are cut from its text."""
    if unpruned.questions != pruned.questions:
        raise ValueError("the pruned and the unpruned run must sample the same questions")
    questions, n = pruned.questions, len(pruned.samples[0]) if pruned.samples else 0
    rows_plain, rows_pruned = sample_rows(questions, unpruned.samples, modulus), sample_rows(questions, pruned.samples, modulus)
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


def pruning_results(setup: DecodingSetup, unpruned: dict[str, SampledRun], pruned: dict[str, SampledRun]) -> PruningResult:
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
    return {"tokens": np.asarray([sum(s.num_tokens + s.overrun for s in g) for g in pruned.samples], dtype=float),
            "tokens_unpruned": np.asarray([sum(s.num_tokens for s in g) for g in unpruned.samples], dtype=float),
            "correct": majority_vote_per_question(sample_rows(questions, pruned.samples, modulus)),
            "correct_unpruned": majority_vote_per_question(sample_rows(questions, unpruned.samples, modulus))}


def pruning_across_seeds(setup: DecodingSetup, rm_seeds: Sequence[int], questions: Sequence[str], unpruned: SampledRun,
                         cfg: PruningSetup, bench: str = "toy-id", n_boot: int = 1000) -> tuple[dict, dict]:
    """Online pruning on ``bench`` with each seed's goal-conditioned RM (its own goal state and its own
    tuned threshold) against the one unpruned run of the same questions: a primary conclusion, so its
    interval covers RM-seed and question variance (`hierarchical.across_seeds_and_questions`); where
    every seed's tuning chose pruning off, nothing was pruned and both figures are ``not tested``.
    Returns the ``decoding.primary.pruning`` section of metrics.json and its wall-time part (for
    ``timings``; wall time has no per-question part, so its interval is over seeds)."""
    outcomes, walls, thresholds, per_question = [], [], [], []
    for rm_seed in rm_seeds:
        rm, _ = load_rm(setup.run, GOAL_RM, rm_seed)
        seeded = dataclasses.replace(setup, rm=rm, goal=read_goal_state(setup.run, GOAL_RM, seed=rm_seed), rm_seed=rm_seed)
        choice = tune_threshold(seeded, bench, questions, cfg)
        pruned = sample_solutions(seeded, questions, cfg, choice.threshold)
        outcomes.append(pruning_outcome(unpruned, pruned, setup.task.modulus))
        per_question.append(pruning_per_question(unpruned, pruned, setup.task.modulus))
        walls.append(pruned.wall_s / unpruned.wall_s if unpruned.wall_s > 0 else float("nan"))
        thresholds.append(float(choice.threshold))
    return pruning_section(bench, rm_seeds, thresholds, outcomes, per_question, n_boot), \
        {"wall_ratio": stats.across_seeds(walls, null=1.0, expect="less"), "wall_s_unpruned": unpruned.wall_s}


def pruning_section(bench: str, rm_seeds: Sequence[int], thresholds: Sequence[float], outcomes: Sequence[dict],
                    per_question: Sequence[dict], n_boot: int = 1000, seed: int = 0) -> dict:
    """The ``decoding.primary.pruning`` section from each seed's :func:`pruning_outcome` and
    :func:`pruning_per_question`."""
    n_q = len(per_question[0]["tokens"]) if per_question else 0
    c = np.arange(n_q)

    def over(values, stat, **kw):
        boot = hierarchical.hierarchical_bootstrap([stat(p) for p in per_question], n_q, n_boot, seed=seed) \
            if n_boot and n_q and len(per_question) >= 2 else None
        return hierarchical.across_seeds_and_questions(values, boot, **kw)

    off = sum(t <= PRUNING_OFF for t in thresholds)
    section = {
        "benchmark": bench, "rm_seeds": list(rm_seeds), "threshold": list(thresholds), "pruning_off": off,
        "tokens_ratio": over([o["tokens_generated"] / max(1, o["tokens_generated_unpruned"]) for o in outcomes],
                             lambda p: hierarchical.ratio_statistic(p["tokens"], p["tokens_unpruned"], c), null=1.0, expect="less"),
        # expect "less": `holds` means pruning costs accuracy
        "accuracy_change": over([o["accuracy"] - o["accuracy_unpruned"] for o in outcomes],
                                lambda p: hierarchical.mean_statistic(p["correct"].astype(float) - p["correct_unpruned"].astype(float), c),
                                expect="less"),
    }
    if rm_seeds and off == len(rm_seeds):
        why = verdicts.pruning_switched_off(section)
        for key in ("tokens_ratio", "accuracy_change"):
            section[key] = hierarchical.not_tested(section[key], why)
    return section


# ----------------------------------------------------------------------------------------------
# Steering toward an attribute: ToyMath's verbose style
# ----------------------------------------------------------------------------------------------


@dataclass
class SteerConfig:
    """The short style SFT that makes a copy of the policy produce both styles."""

    steps: int = field(default=300, metadata={"help": "SFT steps on the terse/verbose mix."})
    batch_size: int = field(default=32, metadata={"help": "Sequences per step."})
    learning_rate: float = field(default=1e-3, metadata={"help": "Peak AdamW learning rate."})
    n_problems: int = field(default=2000, metadata={"help": "Training problems in the mix (never benchmark questions)."})
    verbose_fraction: float = field(default=0.5, metadata={"help": "Share of verbose solutions in the mix."})
    seed: int = field(default=0, metadata={"help": "Data and order seed."})


@dataclass
class SteeringPolicy:
    """The style-mixed copy of the policy, and its SFT loss history."""

    model: LlamaForCausalLM
    tokenizer: Any
    history: list[dict]


@dataclass
class SteeringSetup:
    """Steering toward the verbose style."""

    n_goal: int = field(default=200, metadata={"help": "Verbose correct solutions the goal is averaged over (training problems)."})
    bench: str = field(default="toy-id", metadata={"help": "Benchmark whose first questions are decoded."})
    style: str = field(default="verbose", metadata={"help": "The ToyMath style the goal is built from."})


@dataclass
class SteeringResult:
    summary: dict  # attribute rate and accuracy, steered vs unguided (and toward the correctness goal)
    guided: list[dict]  # one beam-search row per question
    unguided: list[dict]  # one plain sample per question


def steering_policy(run, task: toymath.ToyMathConfig, cfg: SteerConfig | None = None, progress: bool = False) -> SteeringPolicy:
    """A copy of the data stage's policy fine-tuned on a terse/verbose mix, cached in
    ``RunDir.steering_policy`` (reused while its settings are unchanged). ``cfg`` defaults to ``SteerConfig()``."""
    cfg = SteerConfig() if cfg is None else cfg
    out = RunDir(run).steering_policy
    settings = {"steer": asdict(cfg), "toymath": asdict(task)}
    meta = out / "steer.json"
    if meta.exists() and json.loads(meta.read_text()).get("settings") == settings:
        history = json.loads(meta.read_text())["history"]
    else:
        model, tokenizer = load_policy(run)
        problems = training_problems(run, task, cfg.n_problems, cfg.seed + 7)
        rng = random.Random(cfg.seed)
        examples = [(apply_template(TEMPLATE, p.question), p.solution("verbose" if rng.random() < cfg.verbose_fraction else "terse"))
                    for p in problems]
        sft = PolicyConfig(steps=cfg.steps, batch_size=cfg.batch_size, learning_rate=cfg.learning_rate,
                           warmup_steps=max(1, cfg.steps // 10), seed=cfg.seed)
        history = train_sft(model, tokenizer, examples, sft, progress=progress)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        atomic_write_json(meta, {"settings": settings, "history": history})
    return SteeringPolicy(LlamaForCausalLM.from_pretrained(out).eval(), AutoTokenizer.from_pretrained(out), history)


def attribute_goal_state(rm: RewardModel, tokenizer, run, task: toymath.ToyMathConfig, n: int = 200, seed: int = 0,
                         style: str = "verbose", encoding: str = "split", readout: str = "eos") -> np.ndarray:
    """(1, hidden) goal: the mean last-token RM state of ``n`` correct solutions written in ``style``
    (training problems, never benchmark questions)."""
    problems = training_problems(run, task, n, seed + 11)
    return goal_state(rm, tokenizer, [apply_template(TEMPLATE, p.question) for p in problems], [p.solution(style) for p in problems],
                      max_len=512, batch_size=64, encoding=encoding, readout=readout)


def style_separation_auroc(rm: RewardModel, tokenizer, run, task: toymath.ToyMathConfig, goal, n: int = 200, seed: int = 0,
                           encoding: str = "split", readout: str = "eos") -> float:
    """Can the goal steer at all? AUROC of the final Q toward ``goal`` for telling the verbose from the
    terse reference solution of the same ``n`` training problems (other problems than the goal's).
    0.5: the cosine to this goal does not see the style, so the beam search cannot select for it."""
    problems = training_problems(run, task, n, seed + 13)
    rows = [{"question": p.question, "generated_solution": p.solution(style)} for style in ("verbose", "terse") for p in problems]
    q = q_values(last_token_states(rm, tokenizer, rows, TEMPLATE, max_len=512, encoding=encoding, readout=readout), goal).numpy()
    return metrics.bootstrap_auroc(q, [1] * len(problems) + [0] * len(problems), n_boot=0).auroc


def steering_summary(guided: Sequence[dict], unguided: Sequence[dict], modulus: int = 0) -> dict:
    """Attribute rate and accuracy of steered vs unguided decoding (rows with generated_solution)."""
    def rates(rows):
        judged = [judge(r["question"], r["generated_solution"], modulus=modulus) for r in rows]
        return (float(np.mean([is_verbose(r["generated_solution"]) for r in rows])),
                float(np.mean([j["is_correct"] for j in judged])))

    (attr, acc), (attr_u, acc_u) = rates(guided), rates(unguided)
    return {"attribute_rate": attr, "attribute_rate_unguided": attr_u, "accuracy": acc, "accuracy_unguided": acc_u,
            "n_questions": len(guided)}


def steering_experiment(setup: DecodingSetup, steer_policy, cfg: DecodeConfig, steer: SteeringSetup | None = None,
                        control_goal=None) -> SteeringResult:
    """Steer ``steer_policy`` (``steering_policy``'s model) toward the style: goal from the RM's
    last-token states of correct solutions in that style, Q-guided beam search toward it, against one
    unguided sample per question from the same policy at the same temperature and seed. With
    ``control_goal`` (the ordinary correctness goal) the same search runs toward it too, so the style
    effect of the search itself (e.g. the log-probability term favouring the predictable explanation
    words) is not credited to the style goal: ``attribute_rate_correctness_goal`` and
    ``accuracy_correctness_goal``. ``steer`` defaults to ``SteeringSetup()``."""
    steer = SteeringSetup() if steer is None else steer
    rm, tokenizer, modulus = setup.rm, setup.tokenizer, setup.task.modulus
    check_decoding_inputs(steer_policy, rm, tokenizer, control_goal)
    goal = attribute_goal_state(rm, tokenizer, setup.run, setup.task, steer.n_goal, cfg.seed, style=steer.style,
                                encoding=setup.encoding, readout=setup.readout)
    separation = style_separation_auroc(rm, tokenizer, setup.run, setup.task, goal, steer.n_goal, cfg.seed,
                                        encoding=setup.encoding, readout=setup.readout)
    questions = unique_questions(setup.run, steer.bench, setup.n_questions)
    guided, _ = q_guided_decode(steer_policy, rm, tokenizer, goal, questions, cfg)
    prompts = [apply_template(TEMPLATE, q) for q in questions]
    unguided = samples_as_rows(questions, sample(steer_policy, tokenizer, prompts, n=1, temperature=cfg.temperature,
                                                 max_new_tokens=cfg.max_new_tokens, seed=cfg.seed))
    summary = steering_summary(guided, unguided, modulus) | {"goal_separation_auroc": separation}
    if control_goal is not None:
        control, _ = q_guided_decode(steer_policy, rm, tokenizer, control_goal, questions, cfg)
        rates = steering_summary(control, unguided, modulus)
        summary |= {"attribute_rate_correctness_goal": rates["attribute_rate"], "accuracy_correctness_goal": rates["accuracy"]}
    return SteeringResult(summary, guided, unguided)


def steering_examples(steering: SteeringResult, k: int = 4) -> pd.DataFrame:
    guided, unguided = steering.guided, steering.unguided
    return pd.DataFrame({"question": [r["question"] for r in guided[:k]],
                         "steered": [r["generated_solution"] for r in guided[:k]],
                         "unguided": [r["generated_solution"] for r in unguided[:k]]})


# ----------------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------------


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower().replace("best-of-n", "best_of_n")).strip("_")


def methods_metrics(tables: dict[str, pd.DataFrame]) -> dict:
    """``{bench: {method: {accuracy, tokens, n}}}`` with method names as metric keys."""
    return {bench: {_key(r["method"]): {"accuracy": float(r["accuracy"]), "tokens": float(r["tokens"]), "n": int(r["n"])}
                    for _, r in t.iterrows()} for bench, t in tables.items()}


PRUNING_KEYS = ("threshold", "tokens_generated", "tokens_generated_unpruned", "accuracy", "accuracy_unpruned", "samples_stopped_pct",
                "tokens_saved_pct")


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
    for name, s, scale in (("tokens pruned / unpruned (< 1)", section["tokens_ratio"], 1.0),
                           ("accuracy change, points (< 0 = costs accuracy)", section["accuracy_change"], 100.0),
                           ("wall time pruned / unpruned (< 1)", wall["wall_ratio"], 1.0)):
        rows.append({"figure": name, "mean over seeds [95% CI]": seed_interval(s, scale, signed=scale != 1.0),
                     "seeds the expected way": f"{s['k']} of {s['n_seeds']}",
                     "conclusion": verdicts.words(verdicts.mark_not_tested(s, verdicts.pruning_switched_off(section)),
                                                  scale=scale, unit=" points" if scale != 1.0 else "")})
    rows.append({"figure": "seeds whose tuned threshold is 'pruning off' (≤ −1)", "mean over seeds [95% CI]": "",
                 "seeds the expected way": f"{section['pruning_off']} of {len(section['rm_seeds'])}", "conclusion": ""})
    return pd.DataFrame(rows)
