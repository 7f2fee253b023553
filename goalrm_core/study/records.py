"""One RM seed's evaluation as a compact, committed record: evidence that accumulates over runs.

A record is what the primary conclusions need from one trained RM (one arm, one seed) on the in-distribution
benchmark, for every sample the policy generated there, so that seeds trained in separate runs (and on other
days) pool into one analysis without keeping any weights::

    reports/<profile>/records/<arm>-seed<k>.json.gz
      {"schema": 1, "arm", "seed", "bench", "made": {commit, dirty, recipe, recipe_hash, data, cpu, matmul_gflops,
       threads, date}, "train": {steps, eval_accuracy, wall_s}, "questions": [...], "columns": [...], "rows": [...]}

Each row is one sample: ``question`` (an index into ``questions``), ``sample`` (its sample index), ``correct``,
``first_error_line`` (None for a correct one or where no line is located), ``tokens`` (response tokens scored),
``policy_mean_logprob``, ``score`` (the RM's reward), ``line_q`` and ``line_partial`` (the RM's Q and partial
reward at each line's last token; ``line_q`` is None for an arm without a goal state). Floats are rounded to
4 decimals. ``made.data`` fingerprints the generations and pairs the RM was trained and scored on: records
pool only where it is the same (:func:`read_records` refuses a mix, naming the files).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from goalrm_core.data.io import atomic_path
from goalrm_core.tasks.toymath.grading import line_end_tokens

SCHEMA = 1
COLUMNS = (
    "question",
    "sample",
    "correct",
    "first_error_line",
    "tokens",
    "policy_mean_logprob",
    "score",
    "line_q",
    "line_partial",
)
#: the most one record may weigh (the issue's bound; a record over it is refused when written)
MAX_BYTES = 5 * 1024 * 1024
DIGITS = 4


def record_name(arm: str, seed: int) -> str:
    return f"{arm}-seed{int(seed)}.json.gz"


def _round(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return round(x, DIGITS) if math.isfinite(x) else None


def fingerprint(paths: Iterable[str | Path]) -> str:
    """sha256 over the bytes of ``paths`` in order (the data a record depends on), first 16 hex digits."""
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:16]


def compact_rows(scored: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list]]:
    """Scored sample rows (eval-rm's ``all`` rows of one benchmark) as ``(questions, rows)`` in
    :data:`COLUMNS`' order; questions numbered in sorted order."""
    questions = sorted({r["question"] for r in scored})
    index = {q: i for i, q in enumerate(questions)}
    rows = []
    for r in scored:
        n = int(r["num_actions"])
        ends = line_end_tokens(r["generated_solution"], n)
        q = r.get("cosine_sim")
        step = r.get("first_error_step")
        rows.append(
            [
                index[r["question"]],
                int(r.get("sample_index", 0)),
                bool(r["is_correct"]),
                None if step is None else int(step),
                n,
                _round(r.get("policy_mean_logprob")),
                _round(r["reward"]),
                None if q is None else [_round(q[i]) for i in ends],
                [_round(r["partial_rewards"][i]) for i in ends],
            ]
        )
    return questions, rows


def write_record(
    folder: str | Path,
    arm: str,
    seed: int,
    bench: str,
    scored: Sequence[Mapping[str, Any]],
    made: Mapping[str, Any],
    train: Mapping[str, Any],
) -> Path:
    """Write one record (atomically: a temp file renamed into place) and return its path."""
    questions, rows = compact_rows(scored)
    record = {
        "schema": SCHEMA,
        "arm": arm,
        "seed": int(seed),
        "bench": bench,
        "made": dict(made),
        "train": dict(train),
        "questions": questions,
        "columns": list(COLUMNS),
        "rows": rows,
    }
    data = gzip.compress(json.dumps(record, separators=(",", ":")).encode("utf-8"), mtime=0)
    if len(data) > MAX_BYTES:
        raise ValueError(f"record {arm} seed {seed}: {len(data)} bytes, over the {MAX_BYTES}-byte bound")
    path = Path(folder) / record_name(arm, seed)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return path


def read_record(path: str | Path) -> dict:
    """One record, checked: its schema, columns and that every row has a column's worth of values."""
    path = Path(path)
    try:
        record = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError, EOFError) as e:
        raise ValueError(f"{path}: not a readable record ({e})") from None
    if record.get("schema") != SCHEMA:
        raise ValueError(f"{path}: field 'schema' is {record.get('schema')!r}, expected {SCHEMA}")
    if record.get("columns") != list(COLUMNS):
        raise ValueError(f"{path}: field 'columns' is {record.get('columns')!r}, expected {list(COLUMNS)}")
    for i, row in enumerate(record["rows"]):
        if len(row) != len(COLUMNS):
            raise ValueError(f"{path}: row {i} holds {len(row)} values, expected {len(COLUMNS)}")
    record["path"] = str(path)
    return record


def read_records(folder: str | Path) -> list[dict]:
    """Every record under ``folder``, in (arm, seed) order; refused when they do not share one set of data
    (``made.data``) or one question list, naming the two files that differ."""
    records = sorted((read_record(p) for p in Path(folder).glob("*.json.gz")), key=lambda r: (r["arm"], r["seed"]))
    for r in records[1:]:
        first = records[0]
        for key, value in (("made.data", lambda x: x["made"].get("data")), ("questions", lambda x: x["questions"])):
            if value(r) != value(first):
                raise ValueError(
                    f"{r['path']}: field {key!r} differs from {first['path']}'s: records of other data do not pool"
                )
    return records


def as_rows(record: Mapping[str, Any]) -> list[dict]:
    """A record's rows as dicts (``question`` as its text), the shape the estimators read."""
    qs = record["questions"]
    return [{**dict(zip(COLUMNS, row)), "question": qs[row[0]]} for row in record["rows"]]
