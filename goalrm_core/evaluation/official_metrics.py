"""The official ``metrics.py`` printout, computed the way it computes it (``goalrm metrics --official``).

What differs from goalrm's own figures (``goalrm metrics`` without ``--official``), each as the
official code does it:

* AUROC by ``sklearn.metrics.roc_auc_score`` over the greedy rows holding a ``reward``; the partial
  AUROC at percentile p reads ``partial_rewards[-len(cosine_sim):]`` at ``max(int(len * p) - 1, 0)``;
* Q-filtered voting for ``gsm8k`` and ``math`` only, over the official set: the greedy output **plus**
  the samples. A folder the official ``eval_rm.py`` wrote (no manifest) already holds that set in
  ``all/``, and so does one goalrm's eval-rm writes (the same layout); for an older goalrm folder, whose
  ``all/`` holds the samples alone, the set is the greedy rows followed by the samples in pass order
  (stably ordered by ``sample_index``), which is the official file layout: one pass over every question per file;
* questions grouped by position: row ``i`` belongs to question ``i mod dataset_len``, with the
  official question counts (gsm8k 1319, math 5000) unless ``dataset_len`` is given; two consecutive
  rows with one question text stop it, as the official ``assert`` does;
* the figures of :func:`goalrm_core.evaluation.voting.official_per_question`, printed with the
  official labels, the t-test as ``scipy.stats.ttest_ind``'s own result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score

from goalrm_core.choices import OFFICIAL_DATASET_LEN  # noqa: F401  (re-exported: defined in choices, which flags read without scipy)
from goalrm_core.data.io import ArtifactError
from goalrm_core.data.rundir import is_official_all
from goalrm_core.evaluation.tables import read_scored, scored_files
from goalrm_core.evaluation.voting import SKIP_FIRST, official_per_question


def official_auroc(rows: Sequence[dict]) -> float:
    """``get_roc_auc``: AUROC of the reward over the rows that hold one."""
    kept = [r for r in rows if "reward" in r]
    return roc_auc_score([r["is_correct"] for r in kept], [r["reward"] for r in kept])


def official_partial_auroc(rows: Sequence[dict], percentile: float, source: str) -> float:
    """``get_partial_roc_auc``: the partial reward at ``max(int(len * p) - 1, 0)`` of the response's values."""
    scores, labels = [], []
    for r in rows:
        if "reward" not in r:
            continue
        if "partial_rewards" not in r or "cosine_sim" not in r:
            raise ArtifactError(
                f"{source}: rows without partial_rewards/cosine_sim (a --vanilla run?): the official partial AUROC "
                f"needs them; give --percentiles with no value to leave it out"
            )
        partial = r["partial_rewards"][-len(r["cosine_sim"]) :]
        scores.append(partial[max(int(len(partial) * percentile) - 1, 0)])
        labels.append(r["is_correct"])
    return roc_auc_score(labels, scores)


def official_set(eval_dir: str | Path, bench: str, made: Mapping | None) -> list[dict]:
    """The rows the official code votes over (see the module docstring)."""
    written = read_scored(eval_dir, bench, "all", made, as_written=True)
    if made is None or is_official_all(
        written
    ):  # the official layout: written by the official eval_rm.py, or by eval-rm
        return written
    samples = written  # an older goalrm folder: the samples alone
    if all("sample_index" in r for r in samples):
        samples = sorted(
            samples, key=lambda r: r["sample_index"]
        )  # stable: the questions keep their order in each pass
    return read_scored(eval_dir, bench, "greedy", made) + samples


def group_by_position(rows: Sequence[dict], dataset_len: int, source: str) -> list[list[dict]]:
    """``get_accuracy``'s questions: row i belongs to question i mod ``dataset_len``."""
    if len(rows) < dataset_len:
        raise ArtifactError(
            f"{source}: {len(rows)} rows for {dataset_len} questions; the official grouping needs at least one "
            f"row per question (give --dataset_len the number of questions)"
        )
    for i in range(1, len(rows)):
        if rows[i]["question"] == rows[i - 1]["question"]:
            raise ArtifactError(
                f"{source}: rows {i - 1} and {i} hold the same question; the official metrics.py groups rows by "
                f"position (row i is question i mod {dataset_len}) and stops here (its assert)"
            )
    return [list(rows[q::dataset_len]) for q in range(dataset_len)]


def official_printout(
    eval_dir: str | Path,
    model_name: str,
    benchmarks: Sequence[str],
    made: Mapping | None,
    filter_threshold: float = 0.0,
    percentiles: Sequence[float] = (),
    vanilla: bool = False,
    dataset_len: int = 0,
    skip_first: int = SKIP_FIRST,
) -> list[str]:
    """The lines the official ``metrics.py`` prints (``print_eval_results``), in its order."""
    root = Path(eval_dir)
    greedy = {bench: read_scored(root, bench, "greedy", made) for bench in benchmarks}
    lines = [f"Model: {model_name}"]
    lines += [f"{bench}: {official_auroc(greedy[bench])}" for bench in benchmarks]
    for bench in benchmarks:
        # a --vanilla folder has no Q-values, so no partial AUROC (the official metrics.py stops there)
        for percentile in () if vanilla else percentiles:
            auroc = official_partial_auroc(greedy[bench], percentile, str(root / bench / "greedy"))
            lines.append(f"{bench} @ percentile {percentile}: {auroc}")
    if vanilla:
        return lines
    for bench, official_len in OFFICIAL_DATASET_LEN.items():
        if bench not in benchmarks:
            continue
        if not scored_files(root, bench, "all"):
            raise ArtifactError(
                f"{root / bench / 'all'}: no scored *.jsonl; the official voting reads the greedy output and the "
                "samples"
            )
        n_questions = dataset_len or official_len
        rows = official_set(root, bench, made)
        questions = group_by_position(rows, n_questions, str(root / bench / "all"))
        per = official_per_question(questions, filter_threshold, skip_first, num_samples=len(rows) // n_questions)
        lines += [
            f"{bench} accuracy: {sum(per.voted_correct) / n_questions}",
            f"Average number of generations filtered: {np.mean(per.filtered)}",
            f"Total number of generations filtered: {np.sum(per.filtered)}",
            f"Average number of tokens saved: {np.mean(per.tokens_saved)}",
            f"Total number of tokens saved: {np.sum(per.tokens_saved)}",
            f"Average number of tokens: {np.mean(per.tokens)}",
            f"Total number of tokens: {np.sum(per.tokens)}",
            f"Average proportion correct filtered: {np.mean(per.proportion_correct_filtered)}",
            f"Average proportion correct: {np.mean(per.proportion_correct)}",
            f"Ttest p value: {stats.ttest_ind(per.proportion_correct_filtered, per.proportion_correct)}",
        ]
    return lines
