"""Finished or absent: an output folder says whether goalrm finished writing it, and what it holds.

A writer calls `begin` before its first file (it leaves an ``.incomplete`` marker naming the
command) and `finish` after its last one (it writes ``manifest.json`` atomically: the command, the
producer, the input and output files with their sizes, hashes and row counts, ``complete: true``;
then it removes the marker). A reader calls `check`:

* a folder with the marker was interrupted or is being written: refused;
* a folder with a manifest must still hold exactly what the manifest lists: refused otherwise
  (a file rewritten, truncated or concatenated twice shows up as a size, hash or row mismatch);
* a folder with neither was written by other software (the official scripts): read, with a
  one-line notice that nothing vouches for it.

A manifest keeps a ``history``: every earlier finished run into the same folder (its command, producer and
outputs with their hashes), oldest first. A later run replaces the manifest, never what it knew: a file an
earlier run wrote and no later run rewrote (the first RM's ``<rm>_goal_state_embedding.npy`` after a second
``get-representation`` with another RM) is still vouched for by the run that wrote it, and
:func:`check_file` returns that run's record, so its reader can refuse pairing it with another RM.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from goalrm_core.data.io import ArtifactError, atomic_write_json

MANIFEST = "manifest.json"
IN_PROGRESS = ".incomplete"


def file_digest(path: str | os.PathLike) -> dict[str, Any]:
    """``{"bytes", "sha256"}`` of one file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return {"bytes": Path(path).stat().st_size, "sha256": h.hexdigest()}


def config_hash(path: str | os.PathLike, names: Iterable[str] = ("config.json", "goalrm.json")) -> str:
    """A short hash of a model folder's config files: two RMs with the same hidden size but different
    training differ here."""
    h = hashlib.sha256()
    for name in names:
        file = Path(path) / name
        if file.exists():
            h.update(name.encode() + b"\0" + file.read_bytes())
    return h.hexdigest()[:16]


def command_line(prog: str | None = None, argv: Sequence[str] | None = None) -> str:
    """The command that writes a folder: ``prog`` and its ``argv`` (this process's arguments when
    None), or without ``prog`` this process's own command line."""
    if prog is None:
        return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
    return " ".join([prog, *(shlex.quote(str(a)) for a in (sys.argv[1:] if argv is None else argv))])


def _history(folder: Path) -> list[dict]:
    """Every earlier finished run into ``folder``, oldest first: the history the last manifest kept plus that
    manifest itself, or, when a run was interrupted after it began, the history its marker carried."""
    for name, key in ((MANIFEST, None), (IN_PROGRESS, "history")):
        try:
            found = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(found, dict):
            continue
        earlier = [h for h in found.get("history", []) if isinstance(h, dict)]
        if key is None:
            return earlier + [{k: found.get(k) for k in ("command", "producer", "outputs", "finished")}]
        return earlier
    return []


def begin(folder: str | os.PathLike, command: str | None = None) -> Path:
    """Mark ``folder`` as being written (and forget any manifest of an earlier run: it no longer
    describes what will be there). The marker carries the earlier runs' history to :func:`finish`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # the marker first: when it cannot be written (a full disk), the earlier manifest is still there
    atomic_write_json(
        folder / IN_PROGRESS,
        {"command": command or command_line(), "started": time.time(), "history": _history(folder)},
    )
    (folder / MANIFEST).unlink(missing_ok=True)
    return folder


def finish(
    folder: str | os.PathLike,
    outputs: Mapping[str, int | None],
    *,
    command: str | None = None,
    producer: Mapping[str, Any] | None = None,
    inputs: Iterable[str | os.PathLike] = (),
) -> dict:
    """Write the manifest of a finished ``folder``, then remove the in-progress marker.

    ``outputs`` maps each written file (relative to ``folder``) to its row count (None when rows do
    not apply); ``producer`` says what made them (the RM's path and config hash, the settings)."""
    folder = Path(folder)
    history = _history(folder) if (folder / IN_PROGRESS).exists() or (folder / MANIFEST).exists() else []
    manifest = {
        "complete": True,
        "command": command or command_line(),
        "producer": dict(producer or {}),
        "inputs": {str(p): file_digest(p) for p in inputs},
        "outputs": {rel: {**file_digest(folder / rel), "rows": rows} for rel, rows in sorted(outputs.items())},
        "finished": time.time(),
        "history": history,
    }
    atomic_write_json(folder / MANIFEST, manifest)
    (folder / IN_PROGRESS).unlink(missing_ok=True)
    return manifest


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def _notice(message: str) -> None:
    print(message, file=sys.stderr)


def check_file(path: str | os.PathLike, what: str = "output folder") -> dict | None:
    """The manifest that vouches for one file, after `check` of its folder; None (silently) when
    nothing of goalrm's speaks for it: no in-progress marker beside it, and no run that finished the
    folder lists it (a file from other software, or one placed in a folder that some other run finished).

    A file the last run did not write but an earlier one did (the manifest's ``history``) is vouched for
    by the latest earlier run that lists it: its record is returned (``command``, ``producer``,
    ``outputs``), after checking that the file is still what that run wrote."""
    path = Path(path)
    folder = path.parent
    if not (folder / IN_PROGRESS).exists():
        try:
            found = json.loads((folder / MANIFEST).read_text())
            outputs = found.get("outputs", {})
        except FileNotFoundError:
            return None
        except ValueError:
            found, outputs = {}, {path.name: None}  # damaged: `check` says so
        if path.name not in outputs:
            earlier = [
                h for h in found.get("history", []) if isinstance(h, dict) and path.name in (h.get("outputs") or {})
            ]
            if not earlier:
                return None
            check(folder, what, notice=None)  # the folder as a whole first: finished, and its last run's files intact
            record, expected = earlier[-1], earlier[-1]["outputs"][path.name]
            if file_digest(path) != {"bytes": expected.get("bytes"), "sha256": expected.get("sha256")}:
                raise ArtifactError(
                    f"{path}: changed since `{record.get('command', '?')}` wrote it; "
                    f"re-run that command instead of editing its output"
                )
            return {**record, "complete": True}
    return check(folder, what, notice=None)


def check(folder: str | os.PathLike, what: str = "output folder", notice=_notice) -> dict | None:
    """The manifest of a finished ``folder``, after checking that the folder still matches it; None
    (and a one-line notice) for a folder written by other software; an error otherwise."""
    folder = Path(folder)
    marker = folder / IN_PROGRESS
    if marker.exists():
        try:
            command = json.loads(marker.read_text()).get("command", "?")
        except (OSError, ValueError):
            command = "?"
        raise ArtifactError(
            f"{folder}: this {what} is incomplete (an interrupted or running `{command}` left {IN_PROGRESS}); "
            f"re-run it before reading the folder"
        )
    path = folder / MANIFEST
    if not path.exists():
        if notice is not None:
            notice(
                f"note: {folder} has no {MANIFEST} (written by other software?): read as it is, nothing vouches for it"
            )
        return None
    try:
        manifest = json.loads(path.read_text())
    except ValueError as e:
        raise ArtifactError(f"{path}: damaged manifest ({e})") from None
    if manifest.get("complete") is not True:
        raise ArtifactError(f"{path}: the manifest does not say the {what} is complete")
    for rel, expected in manifest.get("outputs", {}).items():
        file = folder / rel
        if not file.exists():
            raise ArtifactError(f"{file}: listed in {path} but missing; re-run `{manifest.get('command', '?')}`")
        actual = file_digest(file)
        if actual != {"bytes": expected.get("bytes"), "sha256": expected.get("sha256")}:
            rows = _count_lines(file) if expected.get("rows") is not None else None
            detail = (
                f" ({rows} rows, the manifest says {expected['rows']})"
                if rows is not None and rows != expected["rows"]
                else ""
            )
            raise ArtifactError(
                f"{file}: changed since `{manifest.get('command', '?')}` wrote it{detail}; "
                f"re-run that command instead of editing its output"
            )
    return manifest
