"""Majority voting, Q-filtered majority voting (drop a generation once its Q falls below a
threshold, and count the tokens saved), threshold choice on validation questions, best-of-n."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from goalrm_core.data.io import parse_label
from goalrm_core.evaluation.stats import paired_t_pvalue, wilson_interval
from goalrm_core.evaluation.thresholds import choose_cheapest_within, choose_threshold

#: Q-value thresholds tried when choosing the filter threshold on a validation split.
DEFAULT_FILTER_THRESHOLDS: np.ndarray = np.round(np.linspace(-0.5, 0.9, 29), 2) + 0.0  # + 0.0: no "-0.0"


# --------------------------------------------------------------------------------------------
# Majority voting, Q-filtered majority voting, best-of-n
# --------------------------------------------------------------------------------------------
#
# A question is a list of generations; a generation is a mapping (a scored row of eval-rm) or an
# object with the attributes ``predicted_answer`` (None = no answer), ``is_correct``,
# ``cosine_sim`` (per-token Q-values of the response) and ``num_actions`` (response tokens).
#
# Voting rule (the paper's): a question is answered correctly when the votes for the correct
# answer are at least the votes for the most-voted wrong answer. A generation without an answer
# votes for nothing. The correct answer is identified by ``is_correct`` (not by comparing
# strings), so all generations marked correct vote together even if they spell the answer
# differently; wrong answers are grouped by ``str(predicted_answer)``. If the correct answer gets
# no vote the question is incorrect, even when there is no wrong vote either (nothing was
# answered, so nothing was answered correctly).


@dataclass
class AccuracyResult:
    """An accuracy over questions with its Wilson interval. ``float(result)`` is the accuracy."""

    accuracy: float
    ci_low: float
    ci_high: float
    n_correct: int
    n: int

    def __float__(self) -> float:
        return float(self.accuracy)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _accuracy_result(correct: np.ndarray, alpha: float = 0.05) -> AccuracyResult:
    n, k = int(correct.size), int(np.sum(correct))
    low, high = wilson_interval(k, n, alpha)
    return AccuracyResult(k / n if n else math.nan, low, high, k, n)


# Response tokens the Q filter never stops on, by default: Q of very short prefixes is noisy.
SKIP_FIRST = 5

_MISSING = object()


_ABSENT = object()  # a field not in the generation at all (``None`` is a value: no answer)


def _field(gen: Any, key: str, default: Any = _MISSING) -> Any:
    """Read ``key`` from a generation given as a mapping or as an object."""
    if isinstance(gen, Mapping):
        if key in gen:
            return gen[key]
    elif hasattr(gen, key):
        return getattr(gen, key)
    if default is _MISSING:
        raise KeyError(f"generation has no field {key!r}")
    return default


def _record_lows(
    qs: Sequence[np.ndarray], skip_first: int, block_cells: int = 1 << 22
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generation, position (>= ``skip_first``) and value of every point where a generation's Q
    reaches a new running minimum, ordered by generation and then by position.

    For any threshold t, the first token at index >= skip_first with Q < t is one of these
    records, and a generation's records have strictly decreasing values, so it is simply the first
    record below t. Precomputing them once lets a sweep over many thresholds run without a Python
    loop per generation. NaN Q-values never trigger a drop (they read as +inf).

    The generations go through in blocks, each padded with +inf to its longest one (padding never
    makes a record) and scanned as one array; ``block_cells`` bounds a block's size.
    """
    tails = [q[skip_first:] for q in qs]
    gens, positions, values = [], [], []
    start = 0
    while start < len(tails):
        stop, width = start + 1, max(tails[start].size, 1)  # grow the block while it stays within block_cells
        while stop < len(tails) and (stop + 1 - start) * max(width, tails[stop].size) <= block_cells:
            width = max(width, tails[stop].size)
            stop += 1
        lengths = np.asarray([t.size for t in tails[start:stop]])
        padded = np.full((stop - start, width), np.inf)
        padded[np.arange(width) < lengths[:, None]] = np.concatenate(tails[start:stop])
        padded[np.isnan(padded)] = np.inf
        running_min = np.minimum.accumulate(padded, axis=1)
        is_record = np.ones(padded.shape, dtype=bool)
        is_record[:, 1:] = running_min[:, 1:] < running_min[:, :-1]
        is_record &= np.arange(width) < lengths[:, None]  # a generation without a tail has none
        g, pos = np.nonzero(is_record)  # row-major: by generation, then by position
        gens.append(g + start)
        positions.append(pos + skip_first)
        values.append(padded[g, pos])
        start = stop
    if not gens:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0)
    return (np.concatenate(gens).astype(np.int64), np.concatenate(positions).astype(np.int64), np.concatenate(values))


@dataclass
class _VoteTable:
    """All generations of all questions flattened into arrays, built once per question set."""

    n_questions: int
    question_of: np.ndarray  # (G,) question index of each generation
    correct: np.ndarray  # (G,) is_correct
    answered: np.ndarray  # (G,) predicted_answer is not None
    wrong_key: np.ndarray  # (G,) id of the (question, wrong answer) it votes for; -1 if none
    wrong_key_question: np.ndarray  # (K,) question of each wrong-answer id
    n_tokens: np.ndarray  # (G,) response tokens
    rec_gen: np.ndarray  # running-minimum records of Q (see _record_lows), flattened:
    rec_pos: np.ndarray  # generation, token index and value of each record, ordered by
    rec_val: np.ndarray  # generation and then by token index


def _vote_table(questions: Sequence[Sequence[Any]], skip_first: int = 0, with_q: bool = True) -> _VoteTable:
    if len(questions) == 0:
        raise ValueError("no questions to vote on")
    if int(skip_first) != skip_first or skip_first < 0:
        raise ValueError(f"skip_first must be a non-negative integer, got {skip_first}")
    question_of, correct, answered, wrong_key, n_tokens = [], [], [], [], []
    wrong_key_question: list[int] = []
    qs: list[np.ndarray] = []
    for qi, generations in enumerate(questions):
        if len(generations) == 0:
            raise ValueError(f"question {qi} has no generations")
        wrong_ids: dict[str, int] = {}
        for gi, gen in enumerate(generations):
            answer = _field(gen, "predicted_answer", _ABSENT)
            if (
                answer is _ABSENT
            ):  # null is "no answer"; an absent field would silently make every generation answerless
                raise ValueError(
                    f"question {qi}, generation {gi} has no predicted_answer field: majority voting needs each "
                    f"generation's answer (null for none); add it to the generation files (Nemo-Skills writes it)"
                )
            ok = parse_label(_field(gen, "is_correct"), where=f"question {qi}, generation {gi}")
            key = -1
            if answer is not None and not ok:
                key = wrong_ids.setdefault(str(answer), len(wrong_key_question))
                if key == len(wrong_key_question):
                    wrong_key_question.append(qi)
            question_of.append(qi)
            correct.append(ok)
            answered.append(answer is not None)
            wrong_key.append(key)
            if with_q:
                q = np.asarray(_field(gen, "cosine_sim"), dtype=np.float64).ravel()
                n = int(_field(gen, "num_actions", q.size))
                if n != q.size:
                    raise ValueError(
                        f"question {qi}: a generation has num_actions={n} but {q.size} Q-values; "
                        "cosine_sim must hold one Q-value per response token"
                    )
                qs.append(q)
                n_tokens.append(n)
            else:
                n_tokens.append(0)
    rec_gen, rec_pos, rec_val = _record_lows(qs, int(skip_first))
    return _VoteTable(
        n_questions=len(questions),
        question_of=np.asarray(question_of, dtype=np.int64),
        correct=np.asarray(correct, dtype=bool),
        answered=np.asarray(answered, dtype=bool),
        wrong_key=np.asarray(wrong_key, dtype=np.int64),
        wrong_key_question=np.asarray(wrong_key_question, dtype=np.int64),
        n_tokens=np.asarray(n_tokens, dtype=np.int64),
        rec_gen=rec_gen,
        rec_pos=rec_pos,
        rec_val=rec_val,
    )


def _vote_outcome(t: _VoteTable, kept: np.ndarray) -> np.ndarray:
    """Per question: does the correct answer win (or tie) the vote among ``kept`` generations?"""
    votes = kept & t.answered
    correct_votes = np.bincount(t.question_of, weights=votes & t.correct, minlength=t.n_questions)
    wrong_counts = np.bincount(t.wrong_key[votes & (t.wrong_key >= 0)], minlength=t.wrong_key_question.size)
    top_wrong = np.zeros(t.n_questions)
    np.maximum.at(top_wrong, t.wrong_key_question, wrong_counts)
    return (correct_votes > 0) & (correct_votes >= top_wrong)


def _drop_points(t: _VoteTable, threshold: float) -> np.ndarray:
    """Token index at which each generation is dropped (first Q < threshold), -1 if never."""
    drop = np.full(t.question_of.size, -1, dtype=np.int64)
    below = np.flatnonzero(t.rec_val < threshold)
    if below.size:
        gens, first = np.unique(t.rec_gen[below], return_index=True)  # earliest record per generation
        drop[gens] = t.rec_pos[below[first]]
    return drop


@dataclass
class FilterResult:
    """Outcome of Q-filtered majority voting (see ``q_filtered_majority_vote``).

    Percentages are in 0..100, accuracies and proportions in 0..1. ``as_dict()`` returns the
    scalar summary; the ``question_*``/``generation_*`` arrays hold per-item detail.
    """

    threshold: float
    skip_first: int
    accuracy: float
    accuracy_ci_low: float
    accuracy_ci_high: float
    accuracy_unfiltered: float
    accuracy_unfiltered_ci_low: float
    accuracy_unfiltered_ci_high: float
    generations_filtered_pct: float
    tokens_saved_pct: float
    proportion_correct_before: float
    proportion_correct_after: float
    p_value: float
    p_value_reason: str | None
    n_questions: int
    n_fallback: int
    n_correct: int
    n_correct_unfiltered: int
    n_generations: int
    n_generations_kept: int
    tokens_saved: int
    tokens_total: int
    question_correct: np.ndarray = field(repr=False)
    question_correct_unfiltered: np.ndarray = field(repr=False)
    question_fallback: np.ndarray = field(repr=False)
    question_filtered_pct: np.ndarray = field(repr=False)
    generation_kept: np.ndarray = field(repr=False)
    generation_drop_token: np.ndarray = field(repr=False)

    def as_dict(self, details: bool = False) -> dict[str, Any]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                if details:
                    out[f.name] = value.tolist()
            else:
                out[f.name] = value
        return out


def _filter_with_table(t: _VoteTable, threshold: float, skip_first: int) -> FilterResult:
    drop = _drop_points(t, threshold)
    dropped = drop >= 0
    n_gen_q = np.bincount(t.question_of, minlength=t.n_questions)
    fallback_q = np.bincount(t.question_of, weights=dropped, minlength=t.n_questions) == n_gen_q
    # A fallback question votes with all its generations and saves nothing, so its drops undo.
    effective = dropped & ~fallback_q[t.question_of]
    kept = ~effective
    saved = np.where(effective, t.n_tokens - drop - 1, 0)
    filtered_pct_q = 100.0 * np.bincount(t.question_of, weights=effective, minlength=t.n_questions) / n_gen_q

    correct_f = _vote_outcome(t, kept)
    correct_u = _vote_outcome(t, np.ones_like(kept))
    acc_f, acc_u = _accuracy_result(correct_f), _accuracy_result(correct_u)
    p, reason = paired_t_pvalue(correct_f.astype(float), correct_u.astype(float), "questions")
    tokens_total = int(t.n_tokens.sum())
    return FilterResult(
        threshold=float(threshold),
        skip_first=int(skip_first),
        accuracy=acc_f.accuracy,
        accuracy_ci_low=acc_f.ci_low,
        accuracy_ci_high=acc_f.ci_high,
        accuracy_unfiltered=acc_u.accuracy,
        accuracy_unfiltered_ci_low=acc_u.ci_low,
        accuracy_unfiltered_ci_high=acc_u.ci_high,
        generations_filtered_pct=float(filtered_pct_q.mean()),
        tokens_saved_pct=100.0 * float(saved.sum()) / tokens_total if tokens_total else math.nan,
        proportion_correct_before=float(t.correct.mean()),
        proportion_correct_after=float(t.correct[kept].mean()),
        p_value=p,
        p_value_reason=reason,
        n_questions=t.n_questions,
        n_fallback=int(fallback_q.sum()),
        n_correct=acc_f.n_correct,
        n_correct_unfiltered=acc_u.n_correct,
        n_generations=int(kept.size),
        n_generations_kept=int(kept.sum()),
        tokens_saved=int(saved.sum()),
        tokens_total=tokens_total,
        question_correct=correct_f,
        question_correct_unfiltered=correct_u,
        question_fallback=fallback_q,
        question_filtered_pct=filtered_pct_q,
        generation_kept=kept,
        generation_drop_token=np.where(effective, drop, -1),
    )


def q_filtered_majority_vote(
    questions: Sequence[Sequence[Any]], threshold: float = 0.0, skip_first: int = SKIP_FIRST
) -> FilterResult:
    """Majority voting that stops a generation as soon as its Q-value drops below ``threshold``.

    The paper's rule, per generation of ``n = num_actions`` tokens with Q-values ``q``:

    * it is dropped at the first token index ``k >= skip_first`` with ``q[k] < threshold``, and
      the ``n - k - 1`` tokens after that point count as saved (they need not be generated);
      the first ``skip_first`` tokens are ignored because Q-values of very short prefixes are
      noisy; a generation that never falls below the threshold is kept whole;
    * if every generation of a question is dropped, the question falls back to plain majority
      voting over all of them, saves nothing and counts 0 % filtered (``n_fallback`` counts it);
    * the kept generations vote with the rule described above this section.

    Reported: ``accuracy`` vs ``accuracy_unfiltered`` (plain voting, Wilson intervals),
    ``generations_filtered_pct`` (mean over questions of the % of generations dropped),
    ``tokens_saved_pct`` (saved / all response tokens x 100), ``proportion_correct_before`` /
    ``_after`` (fraction of correct generations among all vs among kept ones, pooled over
    generations), and ``p_value`` of a paired t-test (``scipy.stats.ttest_rel``) of per-question
    correctness filtered vs unfiltered (NaN with ``p_value_reason`` when nothing changed).
    """
    return q_filtered_majority_votes(questions, [threshold], skip_first)[0]


def q_filtered_majority_votes(
    questions: Sequence[Sequence[Any]], thresholds: Sequence[float] | np.ndarray, skip_first: int = SKIP_FIRST
) -> list[FilterResult]:
    """:func:`q_filtered_majority_vote` at each of ``thresholds`` (a sweep: accuracy against tokens
    saved), the same results in the same order, reading ``questions`` once for all of them."""
    for threshold in thresholds:
        if not math.isfinite(threshold):
            raise ValueError(f"filter threshold must be a finite number, got {threshold}")
    table = _vote_table(questions, skip_first)
    return [_filter_with_table(table, threshold, skip_first) for threshold in thresholds]


def tokens_saved_interval(
    questions: Sequence[Sequence[Any]],
    threshold: float = 0.0,
    skip_first: int = SKIP_FIRST,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float]:
    """A percentile-bootstrap interval over questions of :func:`q_filtered_majority_vote`'s
    ``tokens_saved_pct`` (the same drops and fallbacks; questions resampled with replacement).

    >>> gen = lambda q, ok: {
    ...     "predicted_answer": "1" if ok else "2", "is_correct": ok, "cosine_sim": q, "num_actions": len(q)
    ... }
    >>> questions = [[gen([1, 1, 1, 1], True), gen([1, -1, -1, -1], False)]] * 3 + [[gen([1, 1, 1, 1], True)] * 2]
    >>> low, high = tokens_saved_interval(questions, threshold=0.0, skip_first=0, n_boot=200)
    >>> q_filtered_majority_vote(questions, threshold=0.0, skip_first=0).tokens_saved_pct, low < 18.75 < high, high
    (18.75, True, 25.0)
    """
    if not math.isfinite(threshold):
        raise ValueError(f"filter threshold must be a finite number, got {threshold}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    t = _vote_table(questions, skip_first)
    drop = _filter_with_table(t, threshold, skip_first).generation_drop_token
    saved = np.where(drop >= 0, t.n_tokens - drop - 1, 0)
    saved_q = np.bincount(t.question_of, weights=saved, minlength=t.n_questions)
    total_q = np.bincount(t.question_of, weights=t.n_tokens, minlength=t.n_questions)
    picks = np.random.default_rng(seed).integers(0, t.n_questions, size=(n_boot, t.n_questions))
    totals = total_q[picks].sum(axis=1)
    pct = 100.0 * saved_q[picks].sum(axis=1) / np.where(totals > 0, totals, 1)
    low, high = np.quantile(pct, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def filter_per_question(
    questions: Sequence[Sequence[Any]], threshold: float, skip_first: int = SKIP_FIRST
) -> dict[str, np.ndarray]:
    """:func:`q_filtered_majority_vote` question by question, for a bootstrap over questions:
    ``tokens_saved`` and ``tokens_total`` (response tokens), ``correct`` (the filtered vote) and
    ``correct_unfiltered``, one entry per question in input order. ``tokens_saved.sum() /
    tokens_total.sum()`` is the vote's ``tokens_saved_pct`` / 100."""
    t = _vote_table(questions, skip_first)
    res = _filter_with_table(t, threshold, skip_first)
    drop = res.generation_drop_token
    saved = np.where(drop >= 0, t.n_tokens - drop - 1, 0)
    return {
        "tokens_saved": np.bincount(t.question_of, weights=saved, minlength=t.n_questions),
        "tokens_total": np.bincount(t.question_of, weights=t.n_tokens, minlength=t.n_questions),
        "correct": res.question_correct.astype(bool),
        "correct_unfiltered": res.question_correct_unfiltered.astype(bool),
    }


def majority_vote_per_question(questions: Sequence[Sequence[Any]]) -> np.ndarray:
    """Plain majority voting, question by question: does the correct answer win (or tie)?"""
    table = _vote_table(questions, with_q=False)
    return _vote_outcome(table, np.ones(table.question_of.size, dtype=bool)).astype(bool)


def choose_filter_threshold(
    val_questions: Sequence[Sequence[Any]],
    candidates: Sequence[float] | np.ndarray = DEFAULT_FILTER_THRESHOLDS,
    skip_first: int = SKIP_FIRST,
    max_accuracy_drop: float | None = None,
) -> tuple[float, pd.DataFrame]:
    """Pick the filter threshold on a validation split with `thresholds.choose_threshold`: the most
    questions voted right, then the most tokens saved, then the lower (less aggressive) threshold.
    With ``max_accuracy_drop`` (a fraction, e.g. 0.01 for 1 point), the frontier's rule instead
    (`thresholds.choose_cheapest_within`): the most tokens saved among the thresholds whose vote is
    at most that far below unfiltered voting.

    Choose it on held-out questions and report on the test split, otherwise the reported
    accuracy is optimistically tuned. Returns the threshold and one table row per candidate
    (``chosen`` marks the winner).
    """
    table = _vote_table(val_questions, skip_first)

    def outcome(threshold: float) -> dict:
        res = _filter_with_table(table, threshold, skip_first)
        return {
            "threshold": threshold,
            "accuracy": res.accuracy,
            "n_correct": res.n_correct,
            "n_correct_unfiltered": res.n_correct_unfiltered,
            "accuracy_unfiltered": res.accuracy_unfiltered,
            "tokens_saved_pct": res.tokens_saved_pct,
            "tokens_saved": res.tokens_saved,
            "generations_filtered_pct": res.generations_filtered_pct,
            "n_fallback": res.n_fallback,
            "tokens": res.tokens_total - res.tokens_saved,
        }

    if max_accuracy_drop is not None:
        return choose_cheapest_within(candidates, outcome, len(val_questions), max_accuracy_drop)
    return choose_threshold(candidates, outcome)


def majority_vote_accuracy(questions: Sequence[Sequence[Any]], alpha: float = 0.05) -> AccuracyResult:
    """Plain majority voting over all generations of each question (rule above this section)."""
    table = _vote_table(questions, with_q=False)
    return _accuracy_result(_vote_outcome(table, np.ones(table.question_of.size, dtype=bool)), alpha)


def best_of_n_accuracy(
    questions: Sequence[Sequence[Any]], score_key: str | Callable[[Any], float], alpha: float = 0.05
) -> AccuracyResult:
    """Pick each question's generation with the highest score; the question is correct if that
    generation ``is_correct``.

    ``score_key`` names a field (e.g. ``"reward"``) or is a function of a generation. Ties go to
    the earliest generation (deterministic); NaN scores never win unless all are NaN.
    """
    if len(questions) == 0:
        raise ValueError("no questions to select from")
    get = score_key if callable(score_key) else (lambda gen: _field(gen, score_key))
    correct = np.zeros(len(questions), dtype=bool)
    for qi, generations in enumerate(questions):
        if len(generations) == 0:
            raise ValueError(f"question {qi} has no generations")
        scores = np.array([get(gen) for gen in generations], dtype=np.float64)
        scores = np.where(np.isnan(scores), -np.inf, scores)
        best = int(np.argmax(scores))
        correct[qi] = parse_label(_field(generations[best], "is_correct"), where=f"question {qi}, generation {best}")
    return _accuracy_result(correct, alpha)


# --------------------------------------------------------------------------------------------
# The official code's figures (its examples/metrics.py), reproduced by definition
# --------------------------------------------------------------------------------------------


@dataclass
class OfficialFilterFigures:
    """What the official ``metrics.py`` prints for Q-filtered majority voting, by its definitions.

    Per generation, the first ``skip_first`` Q-values are dropped; it is *kept* when every
    remaining Q-value is ``>= threshold``, else it is filtered at the first one below and saves the
    remaining tokens from there (counted among the ``len(q) - skip_first`` it has). Per question:

    * votes: correct generations vote together; each distinct wrong ``predicted_answer`` is a
      group, and ``None`` (no answer) is one more group; the question is correct when the correct
      votes are at least the largest wrong group, or when there is no wrong vote at all;
    * when every generation of a question is filtered, it votes unfiltered, and its filtered count
      and tokens saved are set to 0;
    * ``proportion_correct`` is correct / all generations; ``proportion_correct_filtered`` the
      same among the kept ones (1 when no kept generation is wrong).

    ``accuracy`` is the share of questions voted correct; ``p_value`` is
    ``scipy.stats.ttest_ind(proportion_correct_filtered, proportion_correct)`` over questions
    (an unpaired test of paired data; `q_filtered_majority_vote` gives the paired one).
    """

    accuracy: float
    generations_filtered_mean: float
    generations_filtered_total: int
    tokens_saved_mean: float
    tokens_saved_total: int
    tokens_mean: float
    tokens_total: int
    proportion_correct_filtered_mean: float
    proportion_correct_mean: float
    p_value: float

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _official_vote(correct: int, wrong_groups: dict) -> tuple[bool, float]:
    """(voted correct, proportion correct) of one set of votes, as the official code decides them."""
    if not wrong_groups:
        return True, 1.0
    return correct >= max(wrong_groups.values()), correct / (correct + sum(wrong_groups.values()))


@dataclass
class OfficialPerQuestion:
    """The official ``metrics.py``'s per-question lists (``get_accuracy``), one entry per question."""

    voted_correct: list[bool]
    filtered: list[int]
    tokens_saved: list[int]
    tokens: list[int]
    proportion_correct_filtered: list[float]
    proportion_correct: list[float]


def official_per_question(
    questions: Sequence[Sequence[Any]],
    threshold: float = 0.0,
    skip_first: int = SKIP_FIRST,
    num_samples: int | None = None,
) -> OfficialPerQuestion:
    """The per-question figures of the official Q-filtered voting (see :class:`OfficialFilterFigures`).
    ``num_samples``: the official code's ``len(data) // dataset_len``, the count a question's filtered
    generations are compared with to see whether all were filtered (default: each question's own count)."""
    out = OfficialPerQuestion([], [], [], [], [], [])
    for gens in questions:
        n_correct = n_kept_correct = n_filtered = q_saved = q_tokens = 0
        wrong: dict = {}
        kept_wrong: dict = {}
        for g in gens:
            q = np.asarray(_field(g, "cosine_sim"), dtype=np.float64)[skip_first:]
            ok = parse_label(_field(g, "is_correct"), where="is_correct")
            answer = _field(g, "predicted_answer", None)
            q_tokens += q.size
            below = np.flatnonzero(q < threshold)
            if below.size == 0:
                if ok:
                    n_kept_correct += 1
                else:
                    kept_wrong[answer] = kept_wrong.get(answer, 0) + 1
            else:
                q_saved += q.size - int(below[0])
                n_filtered += 1
            if ok:
                n_correct += 1
            else:
                wrong[answer] = wrong.get(answer, 0) + 1
        out.proportion_correct.append(n_correct / (n_correct + sum(wrong.values())))
        if n_filtered == (len(gens) if num_samples is None else num_samples):
            q_saved = n_filtered = 0
            outcome = _official_vote(n_correct, wrong)
        else:
            outcome = _official_vote(n_kept_correct, kept_wrong)
        out.voted_correct.append(outcome[0])
        out.proportion_correct_filtered.append(outcome[1])
        out.filtered.append(n_filtered)
        out.tokens_saved.append(q_saved)
        out.tokens.append(q_tokens)
    return out


def official_filter_figures(
    questions: Sequence[Sequence[Any]],
    threshold: float = 0.0,
    skip_first: int = SKIP_FIRST,
    num_samples: int | None = None,
) -> OfficialFilterFigures:
    """The official code's Q-filtered voting figures for ``questions`` (lists of scored generations)."""
    from scipy import stats  # loaded when the figures are computed: `goalrm metrics --help` reads SKIP_FIRST from here

    per = official_per_question(questions, threshold, skip_first, num_samples)
    p_value = (
        float(stats.ttest_ind(per.proportion_correct_filtered, per.proportion_correct).pvalue)
        if len(questions) > 1
        else math.nan
    )
    return OfficialFilterFigures(
        accuracy=float(np.mean(per.voted_correct)),
        generations_filtered_mean=float(np.mean(per.filtered)),
        generations_filtered_total=int(np.sum(per.filtered)),
        tokens_saved_mean=float(np.mean(per.tokens_saved)),
        tokens_saved_total=int(np.sum(per.tokens_saved)),
        tokens_mean=float(np.mean(per.tokens)),
        tokens_total=int(np.sum(per.tokens)),
        proportion_correct_filtered_mean=float(np.mean(per.proportion_correct_filtered)),
        proportion_correct_mean=float(np.mean(per.proportion_correct)),
        p_value=p_value,
    )
