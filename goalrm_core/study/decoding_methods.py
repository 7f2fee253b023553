"""Q-guided beam search against sampling-based selection at a matched budget (notebook 05): the beam
search on each benchmark's questions, greedy decoding, majority voting and best-of-N over notebook 04's
scored samples for N = 1, 2, 4, ..., every method at the smallest N whose tokens reach the beam
search's; and the tables, prose and figure that show them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
from tqdm.auto import tqdm

from goalrm_core.data.questions import group_by_question
from goalrm_core.evaluation import metrics
from goalrm_core.evaluation.tables import read_scored
from goalrm_core.inference.beam_search import DecodeConfig, q_guided_decode
from goalrm_core.inference.sampler import check_decoding_inputs
from goalrm_core.study import formatting as fmt
from goalrm_core.study import plots  # noqa: F401  (the project's seaborn theme for the figure)
from goalrm_core.study.decoding_setup import DecodingSetup, in_order
from goalrm_core.study.rms import BASELINE as BASELINE_RM
from goalrm_core.study.rms import GOAL_CONDITIONED as GOAL_RM
from goalrm_core.tasks.toymath.verdicts import judge

# The RMs this study compares are study.rms's: the baseline's and the goal-conditioned RM's rewards
# pick best-of-N; the goal-conditioned RM guides, prunes and steers. The method names and metric
# keys below are derived from them.
BEAM_METHOD = "Q-guided beam search"


@dataclass
class MethodComparison:
    """Accuracy and generated tokens per question of every method, over N and at the matched budget."""

    curves: pd.DataFrame  # method, n, accuracy, tokens, benchmark: every N of each method
    matched: pd.DataFrame  # the same columns, one row per (benchmark, method) at the matched budget
    n_questions: int  # questions per benchmark (the fewest decoded)


def run_beam_search(
    setup: DecodingSetup, questions: dict[str, list[str]], cfg: DecodeConfig, progress: bool = True
) -> dict[str, list[dict]]:
    """Q-guided beam search on each benchmark's questions: one row per question (``q_guided_decode``)."""
    check_decoding_inputs(setup.policy, setup.rm, setup.tokenizer, setup.goal)
    return {
        bench: q_guided_decode(setup.policy, setup.rm, setup.tokenizer, setup.goal, qs, cfg)[0]
        for bench, qs in tqdm(questions.items(), desc="beam search", disable=not progress)
    }


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


def sample_method_curves(
    greedy: Sequence[dict], scored: dict[str, Sequence[dict]], questions: Sequence[str]
) -> pd.DataFrame:
    """Accuracy and mean generated tokens per question of greedy decoding and, for N = 1, 2, 4, ...,
    majority voting and best-of-N (by each RM's reward, and by the final Q), each over the first N
    samples of every question. ``scored`` maps ``BASELINE_RM`` and ``GOAL_RM`` to their scored samples."""
    base = in_order(group_by_question(scored[BASELINE_RM]), questions)
    goal = in_order(group_by_question(scored[GOAL_RM]), questions)
    g = [grp[0] for grp in in_order(group_by_question(greedy), questions)]
    records = [
        {
            "method": "greedy",
            "n": 1,
            "accuracy": float(np.mean([r["is_correct"] for r in g])),
            "tokens": float(np.mean([r["num_generated_tokens"] for r in g])),
        }
    ]
    n_max = min(len(grp) for grp in base)
    for k in budget_sizes(n_max):
        b, q = [grp[:k] for grp in base], [grp[:k] for grp in goal]
        tokens = float(np.mean([sum(r["num_generated_tokens"] for r in grp) for grp in b]))
        accs = {
            "majority vote": metrics.majority_vote_accuracy(b).accuracy,
            f"best-of-N {BASELINE_RM} reward": metrics.best_of_n_accuracy(b, "reward").accuracy,
            f"best-of-N {GOAL_RM} reward": metrics.best_of_n_accuracy(q, "reward").accuracy,
            "best-of-N final Q": metrics.best_of_n_accuracy(q, lambda r: r["cosine_sim"][-1]).accuracy,
        }
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
        scored = {rm: read_scored(setup.run.eval(rm, setup.rm_seed), bench, "all") for rm in (BASELINE_RM, GOAL_RM)}
        greedy = read_scored(setup.run.eval(GOAL_RM, setup.rm_seed), bench, "greedy")
        judged = beam_rows_with_verdicts(rows, setup.task.modulus)
        beam = {
            "method": BEAM_METHOD,
            "n": 1,
            "accuracy": float(np.mean([r["is_correct"] for r in judged])),
            "tokens": float(np.mean([r["tokens_generated"] for r in judged])),
        }
        c = pd.concat(
            [sample_method_curves(greedy, scored, questions), pd.DataFrame([beam])], ignore_index=True
        ).assign(benchmark=bench)
        curves.append(c)
        matched.append(matched_budget(c, beam["tokens"]).assign(benchmark=bench))
    return MethodComparison(
        pd.concat(curves, ignore_index=True),
        pd.concat(matched, ignore_index=True),
        min(len(rows) for rows in beams.values()),
    )


def matched_table(comparison: MethodComparison) -> pd.DataFrame:
    """Methods as rows (the first column), benchmarks as columns in report order, cells
    :func:`formatting.accuracy_cell`."""
    matched = comparison.matched
    cells = matched.assign(
        cell=[fmt.accuracy_cell(r.accuracy, comparison.n_questions, r.tokens, r.n) for r in matched.itertuples()]
    )
    return fmt.wide(cells, "method", "benchmark", "cell")


def settings_frame(cfg) -> pd.DataFrame:
    """A config dataclass as a two-column table (setting, value), one row per field."""
    return pd.DataFrame(
        [{"setting": f.name.replace("_", " "), "value": str(getattr(cfg, f.name))} for f in dataclasses.fields(cfg)]
    )


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


def methods_reading(comparison: MethodComparison) -> str:
    """A plain-words verdict generated from the numbers, so it cannot drift from them."""
    lines = []
    for bench, g in comparison.matched.groupby("benchmark", sort=False):
        g = g.set_index("method")
        beam = g.loc[BEAM_METHOD]
        others = g.drop(index=BEAM_METHOD)
        best = others["accuracy"].idxmax()
        verdict = (
            "above"
            if beam["accuracy"] > others["accuracy"].max()
            else "below"
            if beam["accuracy"] < others["accuracy"].max()
            else "level with"
        )
        lines.append(
            f"On {bench}, {BEAM_METHOD} reaches {beam['accuracy']:.2f} with {beam['tokens']:.0f} generated tokens per "
            f"question, {verdict} the best other method ({best}: {others.loc[best, 'accuracy']:.2f} at "
            f"{others.loc[best, 'tokens']:.0f} tokens)."
        )
    if comparison.n_questions:
        lines.append(
            f"Each accuracy is over {comparison.n_questions} questions: a difference of one question is "
            f"{1 / comparison.n_questions:.3f}."
        )
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
            ax.plot(
                g["tokens"],
                g["accuracy"],
                marker="*" if beam else "o",
                ms=13 if beam else 4,
                ls="-" if len(g) > 1 else "none",
                c=colours[m],
                label=m,
            )
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
