"""A content-addressed store of trained RMs: one folder per :func:`rm_key`, filled once.

An RM is decided by its training config and the bytes of its inputs, not by where it is saved: two
sweep points that differ only in β share their baseline, and a rerun whose data stage writes
byte-identical files reuses every RM. Each key's slot is filled under a file lock, so two processes
asking for the same RM train it once; a slot is complete when its :data:`STORED_KEY` file exists
(written last), and a killed fill's leftovers are removed before the next one.

The study layer trains through :func:`from_store` and links the run's folders to the stored ones
(:func:`link_stored`); :func:`store_trained_rm` puts an RM trained elsewhere into the store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable

from goalrm_core.data.io import atomic_write_json
from goalrm_core.data.rundir import rm_checkpoint_dir, rm_metrics_path
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.fingerprint import settings_mismatch

# Written last into a stored RM's folder: the RM is complete, and this is the config it was trained with.
STORED_KEY = "rm_key.json"


def _digest(path: str) -> str:
    """sha256 of a local file, or of every file under a local folder (names and contents); the
    string itself for anything else (a Hub name)."""
    p = Path(path)
    h = hashlib.sha256()
    if p.is_file():
        h.update(p.read_bytes())
    elif p.is_dir():
        for f in sorted(q for q in p.rglob("*") if q.is_file()):
            h.update(f.relative_to(p).as_posix().encode() + b"\0" + f.read_bytes())
    else:
        h.update(f"not a local path: {path}".encode())
    return h.hexdigest()


def rm_key(cfg: TrainRMConfig) -> str:
    """A short hash of what decides a trained RM: the config's training fields
    (:meth:`TrainRMConfig.training_fields`, so not where it is saved nor, for a baseline, β), with
    the backbone and the datasets by content rather than by path (a sweep point's data is a link).
    """
    fields = cfg.training_fields()
    for key in ("pretrain", "dataset", "eval_dataset"):
        if fields.get(key):
            fields[key] = ",".join(_digest(part) for part in str(fields[key]).split(","))
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def _link(link: Path, target: Path) -> None:
    """``link`` -> ``target`` (relative, so the run folders can move together), replacing what was there."""
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.symlink_to(os.path.relpath(target, link.parent))


@contextlib.contextmanager
def _store_slot(cfg: TrainRMConfig, store: Path):
    """The store's place for ``cfg`` (its config there, with the log beside the folder), held under
    the key's lock; yields ``(key, stored config, log, whether it is complete)``. Whoever fills an
    incomplete slot writes :func:`_mark_stored` last. The leftovers of a killed fill (a folder
    without its key file) are removed first."""
    key = rm_key(cfg)
    stored = store / key
    stored_cfg = dataclasses.replace(
        cfg, save_path=str(stored), metrics_path=str(rm_metrics_path(stored)), ckpt_path=""
    )
    store.mkdir(parents=True, exist_ok=True)
    with open(store / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # complete: the key file, written last, and the files it vouches for (a key file alone is a fill
        # that copied it early and was killed, or a folder someone emptied)
        complete = all(
            f.is_file() for f in (stored / STORED_KEY, stored / "config.json", Path(stored_cfg.metrics_path))
        )
        if not complete:
            for leftover in (stored, rm_checkpoint_dir(stored)):
                shutil.rmtree(leftover, ignore_errors=True)
        yield key, stored_cfg, Path(str(stored) + ".log"), complete


def _trained_with(folder: Path) -> dict | None:
    """The ``training_args`` an RM folder's ``goalrm.json`` records; None when it has none to read."""
    try:
        args = json.loads((folder / "goalrm.json").read_text()).get("training_args")
    except (OSError, ValueError, AttributeError):
        return None
    return args if isinstance(args, dict) else None


def check_stored(stored: Path, key: str, cfg: TrainRMConfig) -> None:
    """A complete slot holds the RM ``cfg`` asks for: its key file names this key and this config's training
    fields, and the RM's own ``goalrm.json`` its identity settings (strategy, loss, learning rates, seed …,
    :func:`~goalrm_core.train.fingerprint.settings_mismatch`). A slot filled by another run (a folder moved or
    copied into the store by hand, a key file edited) is refused in one line, never handed out."""
    try:
        recorded = json.loads((stored / STORED_KEY).read_text())
    except ValueError as e:
        raise ValueError(f"{stored / STORED_KEY}: damaged ({e}); remove {stored} (the store trains it again)") from None
    paths = ("pretrain", "dataset", "eval_dataset")  # in the key by content, not by path
    ours = {k: v for k, v in json.loads(json.dumps(cfg.training_fields())).items() if k not in paths}
    fields = recorded.get("training_fields") if isinstance(recorded, dict) else None
    theirs = {k: v for k, v in fields.items() if k not in paths} if isinstance(fields, dict) else {}
    differ = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k, "-") != theirs.get(k, "-"))
    if not isinstance(recorded, dict) or recorded.get("key") != key or differ:
        shown = (
            ", ".join(f"{k}={theirs.get(k, '-')}" for k in differ[:6])
            or f"key {recorded.get('key') if isinstance(recorded, dict) else '?'}"
        )
        asked = ", ".join(f"{k}={ours.get(k, '-')}" for k in differ[:6]) or f"key {key}"
        raise ValueError(
            f"{stored}: this store slot was filled by another run ({STORED_KEY} records {shown}; this run asks for "
            f"{asked}); remove {stored} (the store trains it again)"
        )
    args = _trained_with(stored)
    if args is not None:
        theirs_, mine = settings_mismatch(args, cfg)
        if theirs_:
            raise ValueError(
                f"{stored}: the stored RM was trained with {', '.join(theirs_)}; this run asks for {', '.join(mine)}; "
                f"remove {stored} (the store trains it again)"
            )


def _mark_stored(key: str, cfg: TrainRMConfig, stored_cfg: TrainRMConfig) -> None:
    atomic_write_json(Path(stored_cfg.save_path) / STORED_KEY, {"key": key, "training_fields": cfg.training_fields()})


def from_store(
    cfg: TrainRMConfig, store: Path, train: Callable[[TrainRMConfig, Path], None]
) -> tuple[TrainRMConfig, bool]:
    """The stored RM of ``cfg`` (trained into the store first by ``train(stored config, log)`` if it
    is not there) and whether it was already there. Another process training the same RM holds its
    lock until it is done."""
    with _store_slot(cfg, Path(store)) as (key, stored_cfg, log, complete):
        if complete:
            check_stored(Path(stored_cfg.save_path), key, cfg)
        else:
            train(stored_cfg, log)
            _mark_stored(key, cfg, stored_cfg)
    return stored_cfg, complete


def link_stored(cfg: TrainRMConfig, stored: TrainRMConfig, log: Path) -> None:
    """Point ``cfg``'s model folder, its metrics log and the training ``log`` at the stored RM's."""
    _link(Path(cfg.save_path), Path(stored.save_path))
    _link(Path(cfg.metrics_path) if cfg.metrics_path else rm_metrics_path(cfg.save_path), Path(stored.metrics_path))
    _link(Path(log), Path(stored.save_path + ".log"))


def store_trained_rm(cfg: TrainRMConfig, store, log=None) -> tuple[str, bool]:
    """Put the RM already trained at ``cfg.save_path`` (with its metrics log and, when given, its
    training ``log``) into ``store`` under :func:`rm_key`, as if the store had trained it; returns
    the key and whether it was already there. A rerun whose data stage writes byte-identical inputs
    then takes it from the store instead of training it again (``rm_store``)."""
    source = Path(cfg.save_path)
    if not (source / "config.json").is_file():
        raise FileNotFoundError(f"{source}: no trained RM there (run its training first)")
    args = _trained_with(source)
    if args is not None:  # filed under the key of what it was trained with, never of another run
        theirs, mine = settings_mismatch(args, cfg)
        if theirs:
            raise ValueError(
                f"{source}: its goalrm.json says it was trained with {', '.join(theirs)}, but it is being stored as "
                f"{', '.join(mine)}; store it with the config it was trained with"
            )
    with _store_slot(cfg, Path(store)) as (key, stored_cfg, stored_log, complete):
        if complete:
            check_stored(Path(stored_cfg.save_path), key, cfg)
        else:
            # never the source's own key file (an RM taken from another store has one): ours is written last
            shutil.copytree(source.resolve(), stored_cfg.save_path, ignore=shutil.ignore_patterns(STORED_KEY))
            metrics = Path(cfg.metrics_path) if cfg.metrics_path else rm_metrics_path(source)
            for extra, target in ((metrics, Path(stored_cfg.metrics_path)), (Path(log) if log else None, stored_log)):
                if extra is not None and extra.exists():
                    shutil.copyfile(extra.resolve(), target)
            _mark_stored(key, cfg, stored_cfg)
    return key, complete
