"""Atomic artifact writes and strict JSONL reading.

Every artifact the pipeline produces goes through these helpers, so an interrupted run never leaves a
half-written file behind: data is written to a temporary file in the same directory, then renamed.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# The process umask, read once: files and folders goalrm writes get the modes any other program's would.
UMASK = _current_umask()


class ArtifactError(ValueError):
    """A file the pipeline reads is missing, corrupt, or has the wrong shape."""


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp" + suffix, dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp makes 0600; artifacts are meant to be shared
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _finite_or_none(obj: Any) -> Any:
    """JSON has no NaN: undefined numbers are written as null."""
    if isinstance(obj, (np.generic, np.ndarray)):
        obj = obj.tolist()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_none(v) for v in obj]
    return obj


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2) -> None:
    """Write ``obj`` as JSON atomically; NaN and inf (an undefined number) are written as null."""
    text = json.dumps(_finite_or_none(obj), indent=indent, default=_json_default, sort_keys=False, allow_nan=False)
    atomic_write_text(path, text + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> int:
    """Write rows atomically, one JSON object per line. Returns the number of rows.

    A row holding NaN or inf is an error (JSON has no such numbers) and nothing is written.
    """
    n = 0
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                try:
                    line = json.dumps(row, default=_json_default, ensure_ascii=False, allow_nan=False)
                except ValueError:
                    raise ArtifactError(f"{path}: row {n + 1} holds NaN or inf, which JSON cannot store; nothing was written") from None
                f.write(line + "\n")
                n += 1
    return n


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed value)`` of a JSONL file (``.gz`` too), skipping blank lines.

    A bad line raises ``ArtifactError`` naming the file and the line.
    """
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path}: file not found")
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ArtifactError(f"{path}:{lineno}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                raise ArtifactError(f"{path}:{lineno}: malformed JSON ({e.msg}, column {e.colno})") from None


def read_jsonl(path: str | os.PathLike, required: Iterable[str] = (), check: Callable[[dict], None] | None = None) -> list[dict]:
    """Read a JSONL file of objects; any bad line or missing field raises ``ArtifactError`` naming the file and the line.

    ``check(row)`` may validate (and normalise) each row in place; a ``ValueError`` it raises becomes
    an ``ArtifactError`` naming the file and the line.
    """
    required = tuple(required)
    rows = []
    for lineno, row in iter_jsonl(path):
        if not isinstance(row, dict):
            raise ArtifactError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
        missing = [k for k in required if k not in row]
        if missing:
            raise ArtifactError(f"{path}:{lineno}: missing field(s) {missing}; expected fields {list(required)}")
        if check is not None:
            try:
                check(row)
            except ValueError as e:
                raise ArtifactError(f"{path}:{lineno}: {e}") from None
        rows.append(row)
    return rows


def parse_label(value: Any, key: str = "is_correct", where: str = "") -> bool:
    """A correctness label: a boolean, or the integer 0 or 1. Anything else (the string ``"false"``,
    null, 2, 1.0) raises ``ValueError`` naming the field and the value (and ``where``, if given)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    prefix = f"{where}: " if where else ""
    raise ValueError(f"{prefix}field {key!r} must be true/false (or 0/1), got {value!r}")


def check_label(row: dict) -> None:
    """``read_jsonl`` check of generation rows: ``is_correct`` must be a label; it is stored as a bool."""
    row["is_correct"] = parse_label(row["is_correct"])


def save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    with atomic_path(path, suffix=".npy") as tmp:
        np.save(tmp, array)


def load_npy(path: str | os.PathLike) -> np.ndarray:
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path}: file not found")
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic != b"\x93NUMPY":
        raise ArtifactError(f"{path}: not a .npy file (no NumPy header; goal states are written by `goalrm get-representation`)")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as e:
        if "pickle" in str(e):  # numpy's message would suggest loading it unsafely: goalrm never does
            raise ArtifactError(f"{path}: holds Python objects, not numbers; goalrm does not load pickled data") from None
        raise ArtifactError(f"{path}: damaged .npy file ({e})") from None
    except (OSError, EOFError) as e:
        raise ArtifactError(f"{path}: damaged .npy file ({e})") from None
    return array


def check_output_dir(path: str | os.PathLike, flag: str) -> None:
    """Fail before any work when ``path`` cannot become a writable folder: it is a file, it lies
    under a file, or its nearest existing folder is not writable. Names the flag and the culprit."""
    path = Path(path)
    for folder in (path, *path.parents):
        if not folder.exists():
            continue
        if not folder.is_dir():
            where = "is a file" if folder == path else f"lies under the file {folder}"
            raise ArtifactError(f"{flag} {path} {where}: give a folder path")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ArtifactError(f"{flag} {path}: {folder} is not writable")
        return


def require_artifact(path: str | os.PathLike, produced_by: str) -> Path:
    """Fail early, telling the reader which notebook or command makes the missing artifact."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path} is missing: run {produced_by} first")
    return path


def check_not_an_input(path: str | os.PathLike, flag: str, inputs: Iterable[tuple[str, Any]], here: bool = True) -> None:
    """Fail before any work when output ``path`` is the working folder (or a folder above it), or is
    one of ``inputs`` (``(flag, path)`` pairs; values that are no existing path, such as Hub names, are
    skipped) or a folder holding one: writing there would overwrite what the command reads.
    ``here=False`` lets a command that only adds files use the working folder itself."""
    target, check_here = Path(path).resolve(), here
    here = Path.cwd().resolve()
    if (target == here and check_here) or target in here.parents:
        where = "the working folder" if target == here else f"a folder holding the working folder {here}"
        raise ArtifactError(f"{flag} {path} is {where}; give a folder of its own, e.g. {flag} {Path(path) / 'out'}")
    for name, value in inputs:
        if value is None or str(value) == "" or not Path(value).exists():
            continue
        source = Path(value).resolve()
        if source == target or target in source.parents:
            how = "is" if source == target else "holds"
            raise ArtifactError(f"{flag} {path} {how} the input {name} {value}: writing there would overwrite it; "
                                f"give another {flag}")


def check_replaceable(path: str | os.PathLike, flag: str, *, inputs: Iterable[tuple[str, Any]], marks: tuple[str, ...],
                      overwrite: bool = False) -> None:
    """Fail before any work unless output folder ``path`` may be replaced whole: it is absent, empty,
    or a previous output of the same command (it holds one of ``marks``, the files that command
    writes), or ``overwrite`` is set. Never when it is an input, holds one, or is or holds the working
    folder (:func:`check_not_an_input`), ``overwrite`` or not."""
    check_output_dir(path, flag)
    check_not_an_input(path, flag, inputs)
    folder = Path(path)
    if overwrite or not folder.is_dir():
        return
    entries = sorted(p.name for p in folder.iterdir())
    if not entries or any((folder / mark).is_file() for mark in marks):
        return
    shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
    raise ArtifactError(f"{flag} {path} already holds files that are not an earlier output of this command ({shown}; "
                        f"no {' or '.join(marks)}): a save would delete them; give a new or empty folder, or add --overwrite "
                        f"to replace it")
