"""From scored generations to the paper's tables: AUROC with CIs, partial AUROC, Q-filtered voting,
Q/reward correlation and the first-error check. Command line: ``goalrm metrics`` (the official
``metrics.py`` flags; :mod:`goalrm_core.cli.metrics`).

Scored files live in ``<eval_dir>/<bench>/{greedy,all}/*.jsonl`` (``output-metrics-dense.jsonl`` from ``goalrm
eval-rm``).
A folder eval-rm wrote carries its manifest: readers refuse it unfinished or changed (``data.manifest``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from goalrm_core.data import manifest
from goalrm_core.data.adapters import benchmark_dir
from goalrm_core.data.io import ArtifactError, parse_label, read_jsonl
from goalrm_core.data.questions import group_by_question, split_by_question
from goalrm_core.data.rundir import samples_of_all
from goalrm_core.evaluation import metrics
from goalrm_core.evaluation.numeric import interval, is_undefined, num, undefined

# name -> (field of a scored row, sign): higher score = more likely correct. Used when the field exists.
REFERENCE_SCORERS: dict[str, tuple[str, int]] = {
    "policy mean logprob": ("policy_mean_logprob", 1),
    "policy min logprob": ("policy_min_logprob", 1),
    "length only": ("num_actions", -1),
}


def scored_files(eval_dir: str | Path, bench: str, split: str) -> list[Path]:
    """Every ``*.jsonl`` of one benchmark's split folder, in name order (the official metrics.py reads
    them all: ``output-metrics-dense.jsonl`` from eval-rm, or several files from elsewhere)."""
    return sorted((Path(eval_dir) / bench / split).glob("*.jsonl"))


def check_scored_folder(eval_dir: str | Path) -> dict | None:
    """The manifest of one RM's eval-rm folder, after checking the folder against it
    (:func:`goalrm_core.data.manifest.check`): a folder eval-rm has not finished, or whose files
    changed since, is refused; one written by other software (the official eval_rm.py) has no
    manifest, and is read with a one-line notice (None)."""
    return manifest.check(eval_dir, "eval-rm output folder")


def read_scored(
    eval_dir: str | Path,
    bench: str,
    split: str = "greedy",
    made: Mapping | None | str = "check",
    as_written: bool = False,
) -> list[dict]:
    """Every scored row of one benchmark's split: of ``all/`` the samples alone, in their input order, unless
    ``as_written`` (the official layout eval-rm writes, greedy rows first). ``made`` is the folder's manifest when the
    caller
    has already checked it (:func:`check_scored_folder`; None for a folder without one); by default
    the folder is checked here. In a folder eval-rm finished, a file its manifest does not list (the
    output of another run or RM, mixed in) is refused."""
    if isinstance(made, str):
        made = check_scored_folder(eval_dir)
    folder = benchmark_dir(Path(eval_dir), bench) / split
    files = scored_files(eval_dir, bench, split)
    if not files:
        raise ArtifactError(
            f"{folder}: no scored *.jsonl; run `goalrm eval-rm` (or notebooks/04_evaluation.ipynb) first"
        )
    if made is not None:
        listed = made.get("outputs", {})
        for f in files:
            if f.relative_to(eval_dir).as_posix() not in listed:
                raise ArtifactError(
                    f"{f}: not written by `{made.get('command', '?')}` (the folder's {manifest.MANIFEST} does not list "
                    "it); another run's output mixed in? Remove it or re-run eval-rm"
                )
    rows = [
        row
        for f in files
        for row in read_jsonl(f, required=("question", "is_correct", "reward", "num_actions"), check=check_scored_row)
    ]
    return rows if split != "all" or as_written else samples_of_all(rows)


def check_scored_row(row: dict) -> None:
    """One scored row: a boolean label, a finite reward, and one finite partial reward (and Q-value)
    per response token. Raises ``ValueError``; ``read_jsonl`` adds the file and the line. The official
    eval_rm.py writes the partial rewards of the whole sequence, prompt included: they are cut to the
    response's last ``num_actions`` here, as the official metrics.py cuts them."""
    row["is_correct"] = parse_label(row["is_correct"])
    if num(row["reward"]) is None:
        raise ValueError(f"field 'reward' must be a finite number, got {row['reward']!r}")
    n = row["num_actions"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"field 'num_actions' must be a positive integer, got {n!r}")
    for key in ("partial_rewards", "cosine_sim"):
        if key not in row:
            continue
        values = row[key]
        if key == "partial_rewards" and isinstance(values, list) and len(values) > n:
            values = row[key] = values[-n:]
        if not isinstance(values, list) or len(values) != n:
            got = f"{len(values)} values" if isinstance(values, list) else repr(values)
            raise ValueError(f"field {key!r} must hold num_actions={n} values (one per response token), got {got}")
        if not all(num(v) is not None for v in values):
            raise ValueError(f"field {key!r} holds a value that is not a finite number")


def require_q_values(rows: Sequence[dict], source: str) -> None:
    if rows and "cosine_sim" not in rows[0]:
        raise ArtifactError(
            f"{source}: scored rows have no cosine_sim; this RM was scored with --vanilla, so Q-filtering is not "
            "possible"
        )


def labels(rows: Sequence[dict]) -> np.ndarray:
    return np.array([parse_label(r["is_correct"], where=f"row {i}") for i, r in enumerate(rows)], dtype=bool)


def question_ids(rows: Sequence[dict]) -> np.ndarray:
    """Cluster ids for the bootstrap: samples of one question are resampled together."""
    index: dict[str, int] = {}
    return np.array([index.setdefault(r["question"], len(index)) for r in rows])


def auroc_row(scorer: str, bench: str, scores: Sequence[float], rows: Sequence[dict], n_boot: int, seed: int) -> dict:
    res = metrics.bootstrap_auroc(
        np.asarray(scores, dtype=float), labels(rows), n_boot=n_boot, seed=seed, clusters=question_ids(rows)
    )
    return {"scorer": scorer, "benchmark": bench, **res.as_dict()}


def auroc_table(scored: dict[str, Sequence[dict]], bench: str, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """AUROC of each RM's reward, and of every reference scorer whose fields exist, on one benchmark."""
    rows_out = [auroc_row(rm, bench, [r["reward"] for r in rows], rows, n_boot, seed) for rm, rows in scored.items()]
    any_rows = next(iter(scored.values()))
    for name, (key, sign) in REFERENCE_SCORERS.items():
        if all(r.get(key) is not None for r in any_rows):
            rows_out.append(auroc_row(name, bench, [sign * r[key] for r in any_rows], any_rows, n_boot, seed))
    return pd.DataFrame(rows_out)


def delta_auroc(rows_a: Sequence[dict], rows_b: Sequence[dict], n_boot: int = 1000, seed: int = 0) -> dict:
    """Paired bootstrap of AUROC(a) − AUROC(b) on the same generations."""
    if [r["question"] for r in rows_a] != [r["question"] for r in rows_b]:
        raise ValueError("the two RMs were scored on different generations; re-run eval-rm on the same files")
    return metrics.paired_bootstrap_delta(
        [r["reward"] for r in rows_a],
        [r["reward"] for r in rows_b],
        labels(rows_a),
        n_boot=n_boot,
        seed=seed,
        clusters=question_ids(rows_a),
    )


def partial_auroc_table(
    rows: Sequence[dict], percentiles=metrics.DEFAULT_PERCENTILES, n_boot: int = 500, seed: int = 0
) -> pd.DataFrame:
    """Partial AUROC from partial rewards and, when present, Q-values, at each response percentile."""
    frames = []
    signals = [("partial reward", "partial_rewards")] + (
        [("Q-value", "cosine_sim")] if rows and "cosine_sim" in rows[0] else []
    )
    for name, key in signals:
        df = metrics.partial_auroc(
            [r[key] for r in rows], labels(rows), percentiles, n_boot=n_boot, seed=seed, clusters=question_ids(rows)
        )
        frames.append(df.assign(signal=name))
    return pd.concat(frames, ignore_index=True)


def filter_summary(
    rows: Sequence[dict],
    threshold: float = 0.0,
    skip_first: int = metrics.SKIP_FIRST,
    val_fraction: float = 0.3,
    seed: int = 0,
) -> pd.DataFrame:
    """Q-filtered majority voting at the paper's threshold (all questions) and at a threshold chosen on
    a validation split (reported on the remaining test questions)."""
    require_q_values(rows, "filtering")
    groups = list(group_by_question(rows).values())
    paper = metrics.q_filtered_majority_vote(groups, threshold=threshold, skip_first=skip_first).as_dict()
    out = [{"setting": f"paper threshold {threshold:g} (all questions)", **paper}]
    test_rows, val_rows = split_by_question(rows, val_fraction, seed)
    val, test = list(group_by_question(val_rows).values()), list(group_by_question(test_rows).values())
    if val and test:
        chosen, _ = metrics.choose_filter_threshold(val, skip_first=skip_first)
        tuned = metrics.q_filtered_majority_vote(test, threshold=chosen, skip_first=skip_first).as_dict()
        low, high = metrics.tokens_saved_interval(test, threshold=chosen, skip_first=skip_first, seed=seed)
        out.append(
            {
                "setting": f"validation-chosen {chosen:g} (test questions)",
                **tuned,
                "tokens_saved_ci_low": low,
                "tokens_saved_ci_high": high,
            }
        )
    return pd.DataFrame(out)


def correlation_table(rows: Sequence[dict]) -> pd.DataFrame:
    require_q_values(rows, "correlation")
    return metrics.q_reward_correlation([r["reward"] for r in rows], [r["cosine_sim"] for r in rows])


def first_error_token(row: dict, tokenizer=None) -> int | None:
    """Token index of the first error inside the response (char offset -> token index)."""
    offset = row.get("first_error_char")
    if offset is None:
        return None
    if tokenizer is None:  # the character tokenizer: one token per character
        index = int(offset)
    else:
        index = len(tokenizer(row["generated_solution"][:offset], add_special_tokens=False)["input_ids"])
    return min(index, row["num_actions"] - 1)


def first_error_summary(
    rows: Sequence[dict], tokenizer=None, skip_first: int = 0, n_boot: int = 500, seed: int = 0
) -> dict:
    """Does Q fall at the first error? Mean Q before/after it, and AUROC of 'prefix already wrong' from −Q."""
    require_q_values(rows, "first-error check")
    correct = labels(rows)
    known = [i for i, r in enumerate(rows) if correct[i] or r.get("first_error_char") is not None]
    q = [rows[i]["cosine_sim"] for i in known]
    errs = [None if correct[i] else first_error_token(rows[i], tokenizer) for i in known]
    stats = metrics.first_error_q_stats(q, errs, skip_first=skip_first)
    prefix = metrics.prefix_error_auroc(
        q, errs, correct[known].tolist(), stride=2, skip_first=skip_first, n_boot=n_boot, seed=seed
    )
    return {
        **stats,
        "prefix_error_auroc": prefix.auroc,
        "prefix_error_auroc_ci_low": prefix.ci_low,
        "prefix_error_auroc_ci_high": prefix.ci_high,
    }


def fmt_ci(value: float, low: float, high: float) -> str:
    """``value [low, high]`` to 3 decimals; "undefined" for an undefined value, ``[interval undefined]`` for undefined
    bounds."""
    return interval(value, low, high, 3, no_interval=" [interval undefined]")


def fmt_p(value: float, reason: str | None = None) -> str:
    """A p-value, or "undefined (reason)"."""
    return undefined(reason) if is_undefined(value) else f"{value:.3g}"
