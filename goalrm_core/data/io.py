"""Atomic artifact writes, strict JSONL reading, and the time a record is stamped with.

Every artifact the pipeline produces goes through these helpers, so an interrupted run never leaves a
half-written file behind: data is written to a temporary file in the same directory, then renamed.
"""

from __future__ import annotations

import errno
import gzip
import json
import math
import os
import tempfile
import zlib
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from goalrm_core.data.schema import TEXT_FIELDS


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# The process umask, read once: files and folders goalrm writes get the modes any other program's would.
UMASK = _current_umask()


def timestamp() -> str:
    """The local time to the second, with its UTC offset, as every record and page stamps it
    (``2025-01-31T14:05:09+01:00``)."""
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


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
                    raise ArtifactError(
                        f"{path}: row {n + 1} holds NaN or inf, which JSON cannot store; nothing was written"
                    ) from None
                f.write(line + "\n")
                n += 1
    return n


class _StrictJSONError(ValueError):
    """A JSON line that parses but holds what no goalrm row may: a key twice, a number no float holds."""


def append_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """Append ``rows`` to a JSON-lines table (a calibration record grows by rows; its folder is made)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    row: dict = {}
    for key, value in pairs:
        if key in row:
            raise _StrictJSONError(f"field {key!r} is given twice ({row[key]!r}, then {value!r}); keep one")
        row[key] = value
    return row


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _StrictJSONError(f"the number {text} is out of the float range")
    return value


def _float_range_int(text: str) -> int:
    if (
        len(text.lstrip("-")) > 308
    ):  # more digits than the largest float (1.8e308) has: no score, count or id is that big
        raise _StrictJSONError(f"the {len(text.lstrip('-'))}-digit number {text[:12]}... is out of the float range")
    return int(text)


def _no_constant(text: str) -> Any:
    raise _StrictJSONError(f"{text} is not a JSON number; write null for a missing value")


def _strict_loads(line: str) -> Any:
    """``json.loads``, refusing duplicated keys, numbers out of the float range and NaN / Infinity."""
    return json.loads(
        line,
        object_pairs_hook=_unique_keys,
        parse_float=_finite_float,
        parse_int=_float_range_int,
        parse_constant=_no_constant,
    )


def _text_field_error(row: dict) -> str | None:
    for key in TEXT_FIELDS:
        if key in row and not isinstance(row[key], str):
            got = "null" if row[key] is None else f"{type(row[key]).__name__} {row[key]!r}"
            return f"field {key!r} must be a string, got {got}"
        if key in row:
            try:  # JSON can escape a lone surrogate ("\ud800"), which no tokenizer can encode
                row[key].encode("utf-8")
            except UnicodeEncodeError as e:
                return (
                    f"field {key!r} holds a lone surrogate {row[key][e.start]!r} at character {e.start}, which is "
                    "no text to encode"
                )
    return None


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed value)`` of a JSONL file (``.gz`` too), skipping blank lines.

    Strict: a key given twice, a number out of the float range (``1e400``, a 400-digit integer),
    ``NaN``/``Infinity``, a text field of the row schemas (``data.schema.TEXT_FIELDS``) holding null
    or a non-string, a line that is no JSON or no UTF-8, and a damaged or truncated ``.gz`` each raise
    ``ArtifactError`` naming the file, the line and the field.
    """
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path}: file not found")
    compressed = path.name.endswith(".gz")
    opener = gzip.open if compressed else open
    lineno = 0
    try:
        with opener(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ArtifactError(f"{path}:{lineno}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
                if not line.strip():
                    continue
                try:
                    value = _strict_loads(line)
                except json.JSONDecodeError as e:
                    raise ArtifactError(f"{path}:{lineno}: malformed JSON ({e.msg}, column {e.colno})") from None
                except _StrictJSONError as e:
                    raise ArtifactError(f"{path}:{lineno}: {e}") from None
                except ValueError as e:  # Python's own limit on integer digits
                    raise ArtifactError(f"{path}:{lineno}: unreadable number ({e})") from None
                problem = _text_field_error(value) if isinstance(value, dict) else None
                if problem:
                    raise ArtifactError(f"{path}:{lineno}: {problem}")
                yield lineno, value
    except (EOFError, OSError, zlib.error) as e:
        if not compressed or isinstance(e, FileNotFoundError):
            raise
        where = f" after line {lineno}" if lineno else ""
        raise ArtifactError(
            f"{path}: damaged or truncated gzip file{where} ({e}); "
            f"compress the file again, or give the uncompressed .jsonl"
        ) from None


def read_jsonl(
    path: str | os.PathLike, required: Iterable[str] = (), check: Callable[[dict], None] | None = None
) -> list[dict]:
    """Read a JSONL file of objects; any bad line or missing field raises ``ArtifactError`` naming the file and the
    line.

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
        raise ArtifactError(
            f"{path}: not a .npy file (no NumPy header; goal states are written by `goalrm get-representation`)"
        )
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as e:
        if "pickle" in str(e):  # numpy's message would suggest loading it unsafely: goalrm never does
            raise ArtifactError(
                f"{path}: holds Python objects, not numbers; goalrm does not load pickled data"
            ) from None
        raise ArtifactError(f"{path}: damaged .npy file ({e})") from None
    except (OSError, EOFError) as e:
        raise ArtifactError(f"{path}: damaged .npy file ({e})") from None
    return array


def check_output_dir(path: str | os.PathLike, flag: str) -> None:
    """Fail before any work when ``path`` cannot become a writable folder: it is a file, it lies
    under a file, or its nearest existing folder is not writable. Names the flag and the culprit."""
    path = Path(path)
    for folder in (path, *path.parents):
        if folder.is_symlink() and not folder.exists():  # ELOOP or a missing target: no folder can be made there
            loop = _symlink_loops(folder)
            raise ArtifactError(
                f"{flag} {path}: {folder} is a symbolic link "
                f"{'loop (it leads back to itself)' if loop else 'to ' + os.readlink(folder) + ', which is not there'}"
                "; remove the link or give another folder"
            )
        if not folder.exists():
            continue
        if not folder.is_dir():
            where = "is a file" if folder == path else f"lies under the file {folder}"
            raise ArtifactError(f"{flag} {path} {where}: give a folder path")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ArtifactError(f"{flag} {path}: {folder} is not writable")
        return


def _symlink_loops(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as e:
        return e.errno == errno.ELOOP
    return False


#: Endings of a data file: a ``--dataset`` that ends so and is not there is a missing file, not a Hub name.
DATA_FILE_ENDINGS = (".jsonl", ".json", ".parquet", ".csv", ".arrow", ".gz")


def check_data_source(value: str, flag: str) -> None:
    """Fail before a model loads when a data argument names a local file that is not there (it ends like
    a data file, or reads as a path: ``./``, ``../``, ``/``, ``~``); anything else is a Hub name or a
    ``save_to_disk`` folder, left to the loader."""
    if not value or Path(str(value)).expanduser().exists():  # a whole path with a comma in its name is one file
        return
    for part in (p for p in str(value).split(",") if p):
        local = part.lower().endswith(DATA_FILE_ENDINGS) or part.startswith(("./", "../", "/", "~"))
        if local and not Path(part).expanduser().exists():
            raise ArtifactError(f"{flag} {part}: no such file or folder")


def check_model_source(value: str, flag: str) -> None:
    """Fail at once, naming the flag, when a model argument is no local folder and cannot come from the
    Hugging Face Hub either: a path that is not there, or a Hub name neither in the local cache nor
    reachable (``HF_HUB_OFFLINE``, or no route to the Hub: one connection try of 3 s, instead of the
    Hub client's minute of retries)."""
    import socket
    from urllib.parse import urlparse

    if Path(value).expanduser().exists():
        return
    if str(value).startswith(("./", "../", "/", "~")) or str(value).count("/") > 1:
        raise ArtifactError(f"{flag} {value}: no such folder")
    try:
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(str(value), "config.json"), str):
            return  # a Hub name whose files are cached here
    except Exception:  # not a valid Hub name either (huggingface_hub's validation error)
        raise ArtifactError(f"{flag} {value}: no such folder, and not a Hub model name") from None
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    if not offline:
        try:
            socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout=3).close()
            return
        except OSError:
            pass
    raise ArtifactError(
        f"{flag} {value}: no such folder, and the Hub ({endpoint.hostname}) "
        f"{'is switched off (HF_HUB_OFFLINE)' if offline else 'cannot be reached from here'} to fetch it: "
        f"give the folder of a saved model"
    )


def require_artifact(path: str | os.PathLike, produced_by: str) -> Path:
    """Fail early, telling the reader which notebook or command makes the missing artifact."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path} is missing: run {produced_by} first")
    return path


def check_not_an_input(
    path: str | os.PathLike, flag: str, inputs: Iterable[tuple[str, Any]], here: bool = True
) -> None:
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
            raise ArtifactError(
                f"{flag} {path} {how} the input {name} {value}: writing there would overwrite it; give another {flag}"
            )


def check_replaceable(
    path: str | os.PathLike,
    flag: str,
    *,
    inputs: Iterable[tuple[str, Any]],
    marks: tuple[str, ...],
    overwrite: bool = False,
) -> None:
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
    raise ArtifactError(
        f"{flag} {path} already holds files that are not an earlier output of this command ({shown}; "
        f"no {' or '.join(marks)}): a save would delete them; give a new or empty folder, or add --overwrite "
        f"to replace it"
    )


def lock_path(folder: str | os.PathLike) -> Path:
    """Where the writer of output folder ``folder`` holds its lock: ``.<name>.lock`` beside it (not
    inside: a save may replace the folder whole)."""
    folder = Path(folder)
    return folder.parent / f".{folder.name or 'output'}.lock"


def _process_alive(pid: int, started: float | None) -> bool:
    import psutil  # lazy: only a lock that is already held needs it

    try:
        process = psutil.Process(pid)
        return started is None or abs(process.create_time() - started) < 1.0  # a reused PID is another process
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


@contextmanager
def writer_lock(folder: str | os.PathLike, flag: str, command: str = "") -> Iterator[Path]:
    """Hold the one-writer lock of output folder ``folder`` while the block runs: a second goalrm run
    on the same folder is refused in one line naming the first (its PID and command), until the first
    ends. A lock left by a run that is gone (killed, power cut: its PID is not running, or runs
    another program) is stale and taken over with a notice. The lock file holds the PID, the
    process's start time and the command, and goes when the block ends, however it ends."""
    import socket
    import sys

    import psutil  # lazy: see _process_alive

    lock = lock_path(folder)
    made = [p for p in (lock.parent, *lock.parent.parents) if not p.exists()]  # folders to remove again if left empty
    lock.parent.mkdir(parents=True, exist_ok=True)
    me = {
        "pid": os.getpid(),
        "started": psutil.Process().create_time(),
        "host": socket.gethostname(),
        "command": command,
    }
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666 & ~UMASK)
        except FileExistsError:
            try:
                held = json.loads(lock.read_text(encoding="utf-8") or "{}")
            except (OSError, ValueError):
                held = {}
            pid = held.get("pid") if isinstance(held, dict) else None
            same_host = not isinstance(held, dict) or held.get("host") in (None, me["host"])
            if isinstance(pid, int) and (not same_host or _process_alive(pid, held.get("started"))):
                where = "" if same_host else f" on {held.get('host')}"
                raise ArtifactError(
                    f"{flag} {folder} is being written by another run (PID {pid}{where}: "
                    f"{held.get('command') or 'goalrm'}); wait for it to end, or stop it; if it is gone, "
                    f"delete {lock}"
                ) from None
            print(f"notice: {lock}: a stale lock of a run that is gone (PID {pid}); taking it over", file=sys.stderr)
            lock.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(me) + "\n")
        break
    else:
        raise ArtifactError(f"{flag} {folder}: its lock {lock} keeps coming back; another run is starting on it")
    try:
        yield lock
    finally:
        try:
            if json.loads(lock.read_text(encoding="utf-8")).get("pid") == me["pid"]:
                lock.unlink()
        except (OSError, ValueError):
            pass
        for parent in made:  # a run that wrote nothing leaves no empty folders behind
            try:
                parent.rmdir()
            except OSError:
                break
