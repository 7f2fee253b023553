"""What makes a training run that run, written beside each checkpoint and checked before a resume.

``--load_checkpoint`` continues the latest checkpoint of ``--ckpt_path``. The official entry point keeps one
checkpoint folder for every run (``./ckpt/checkpoints_rm``), so without a check a run of another strategy,
learning rate or dataset would silently continue someone else's weights. Each checkpoint's step folder holds
:data:`FINGERPRINT_FILE`, the :func:`run_fingerprint` of the run that wrote it; :func:`mismatch` tells a
resume what differs, and the trainer refuses it in one line naming both runs.

How the inputs are identified, cheaply and robustly:

* **the dataset** by the sha256 of its bytes (every file of a ``save_to_disk`` folder, names included): a
  size + mtime pair costs nothing but changes when a byte-identical file is copied or regenerated (the
  report's data stages rewrite theirs) and misses an edit that keeps the size within one mtime tick. One
  streamed read (about 1 GB/s) is small next to the tokenisation that follows it. A Hub name is its name.
* **the backbone** by ``config.json`` and, per weight file, its name, size and its first and last MiB
  (the safetensors header and tensor bytes at both ends): a fine-tune of the same architecture differs
  there, and the multi-GB weights are not read twice. A moved or copied folder keeps its identity. A Hub
  name is its name.

Settings are compared by value: the strategy and, for a contrastive run, every contrastive setting; the loss
and its weights; the learning rates and the rest of the optimiser's schedule shape; the value head; LoRA;
the seed. What only says where files go, how often to log or how the step runs on the hardware (ZeRO
stage, micro-batch, bf16 …) is not part of a run's identity; the schedule (batch, total steps, pairs) is
checked on its own by the trainer.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from goalrm_core.data.io import atomic_write_json
from goalrm_core.train.config import CONTRASTIVE_FIELDS, TrainRMConfig

FINGERPRINT_FILE = "goalrm_run.json"
VERSION = 1

# The settings of a run's identity, by value (the contrastive ones only for a contrastive run).
ARM = ("reward_model_strategy",)
CONTRASTIVE = tuple(f for f in CONTRASTIVE_FIELDS if f != "contrastive_loss")  # the shorthand is the strategy
LOSS = ("loss", "margin", "margin_loss", "preference_loss_coef", "dense_loss_coef", "aux_loss_coef", "reward_pool")
OPTIMISER = ("learning_rate", "head_learning_rate", "lr_warmup_ratio", "l2", "max_norm")
HEAD = ("value_head_strategy", "mlp_head")
LORA = ("lora_rank", "lora_alpha", "target_modules", "load_in_4bit")
SEED = ("seed",)
# how each setting is named in the one-line refusal (the flag's name otherwise)
SHORT = {"reward_model_strategy": "strategy", "learning_rate": "lr", "head_learning_rate": "head_lr"}
CHUNK = 1 << 20


def _sha256_file(path: Path, h) -> None:
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)


def dataset_identity(spec: str) -> str:
    """sha256 of the bytes of every source of ``--dataset`` (a file; every file of a folder, with its
    relative name); a source that is no local path (a Hub name) counts by its name."""
    from goalrm_core.data.preferences import dataset_sources

    h = hashlib.sha256()
    for source in dataset_sources(spec):
        p = Path(source)
        h.update(b"\1source\0")
        if p.is_file():
            _sha256_file(p, h)
        elif p.is_dir():
            for f in sorted(q for q in p.rglob("*") if q.is_file()):
                h.update(f.relative_to(p).as_posix().encode() + b"\0")
                _sha256_file(f, h)
        else:
            h.update(f"not a local path: {source}".encode())
    return h.hexdigest()


def model_identity(pretrain: str) -> str:
    """A cheap sign of a backbone folder: ``config.json``'s bytes and, for each weight file, its name, size
    and first and last MiB; a Hub name counts by its name."""
    p = Path(pretrain)
    h = hashlib.sha256()
    if not p.is_dir():
        h.update(f"not a local folder: {pretrain}".encode())
        return h.hexdigest()
    if (p / "config.json").is_file():
        h.update((p / "config.json").read_bytes())
    for f in sorted(
        q for q in p.iterdir() if q.is_file() and q.suffix in (".safetensors", ".bin", ".pt", ".pth", ".gguf")
    ):
        size = f.stat().st_size
        h.update(f"\0{f.name}\0{size}\0".encode())
        with open(f, "rb") as fh:
            h.update(fh.read(CHUNK))
            if size > 2 * CHUNK:
                fh.seek(size - CHUNK)
                h.update(fh.read(CHUNK))
    return h.hexdigest()


def run_fingerprint(cfg: TrainRMConfig) -> dict[str, Any]:
    """The identity of the run ``cfg`` trains: ``{"settings": {flag: value}, "pretrain": {path, sign},
    "dataset": {path, probs, sha256}}``."""
    fingerprint = {
        "version": VERSION,
        "settings": identity_settings(cfg),
        "pretrain": {"path": str(cfg.pretrain), "sign": model_identity(cfg.pretrain)},
        "dataset": {"path": str(cfg.dataset), "probs": str(cfg.dataset_probs), "sha256": dataset_identity(cfg.dataset)},
    }
    return json.loads(json.dumps(fingerprint))  # as a checkpoint's file reads back, so the two compare value for value


def identity_settings(cfg: TrainRMConfig) -> dict[str, Any]:
    """The settings of ``cfg``'s identity, by value (the ``settings`` of :func:`run_fingerprint`)."""
    names = ARM + (CONTRASTIVE if cfg.contrastive else ()) + LOSS + OPTIMISER + HEAD + LORA + SEED
    return json.loads(json.dumps({name: getattr(cfg, name) for name in names}))


def settings_mismatch(recorded: dict, cfg: TrainRMConfig) -> tuple[list[str], list[str]]:
    """What of ``cfg``'s identity settings a record of another run (an RM's ``training_args``) says otherwise, as
    ``(the record's "name=value" list, cfg's)``; a setting the record lacks (an older RM) is not compared."""
    theirs, mine = [], []
    for name, value in identity_settings(cfg).items():
        if name in recorded and recorded[name] != value:
            theirs.append(f"{SHORT.get(name, name)}={recorded[name]}")
            mine.append(f"{SHORT.get(name, name)}={value}")
    return theirs, mine


def write_fingerprint(step_dir: str | os.PathLike, fingerprint: dict) -> None:
    Path(step_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_json(Path(step_dir) / FINGERPRINT_FILE, fingerprint)


def read_fingerprint(step_dir: str | os.PathLike) -> dict | None:
    """The fingerprint a checkpoint's step folder records; None for one written before goalrm kept it.
    A damaged file is a ``ValueError`` naming it."""
    path = Path(step_dir) / FINGERPRINT_FILE
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: damaged ({e}); use another --ckpt_path or drop --load_checkpoint") from None
    if not isinstance(found, dict) or not isinstance(found.get("settings"), dict):
        raise ValueError(f"{path}: not a goalrm run fingerprint; use another --ckpt_path or drop --load_checkpoint")
    return found


def _short(value: str, n: int = 12) -> str:
    return str(value)[:n]


def mismatch(saved: dict, ours: dict) -> tuple[list[str], list[str]]:
    """What differs between two fingerprints, as ``(the saved run's "name=value" list, this run's)``, in
    the same order; two empty lists when they are the same run. A setting only one side has (the contrastive
    ones, beside a vanilla run) is left out: the differing strategy names that difference."""
    theirs, mine = [], []
    a, b = saved.get("settings", {}), ours.get("settings", {})
    for name in dict.fromkeys([*a, *b]):
        if name not in a or name not in b:  # a contrastive setting beside a vanilla run: the strategy says it
            continue
        if a[name] != b[name]:
            label = SHORT.get(name, name)
            theirs.append(f"{label}={a[name]}")
            mine.append(f"{label}={b[name]}")
    pa, pb = saved.get("pretrain", {}), ours.get("pretrain", {})
    if pa.get("sign") != pb.get("sign"):
        theirs.append(f"pretrain={pa.get('path', '?')} (sign {_short(pa.get('sign', '?'))})")
        mine.append(f"pretrain={pb.get('path', '?')} (sign {_short(pb.get('sign', '?'))})")
    da, db = saved.get("dataset", {}), ours.get("dataset", {})
    if (da.get("sha256"), da.get("probs")) != (db.get("sha256"), db.get("probs")):
        theirs.append(
            f"dataset={da.get('path', '?')} (sha256 {_short(da.get('sha256', '?'))}, probs {da.get('probs', '?')})"
        )
        mine.append(
            f"dataset={db.get('path', '?')} (sha256 {_short(db.get('sha256', '?'))}, probs {db.get('probs', '?')})"
        )
    return theirs, mine


def refusal(step_dir: str | os.PathLike, saved: dict, ours: dict) -> str | None:
    """The one-line refusal of resuming ``step_dir`` (written by the run ``saved``) into the run ``ours``;
    None when they are the same run."""
    theirs, mine = mismatch(saved, ours)
    if not theirs:
        return None
    return (
        f"--load_checkpoint: {step_dir} was written by a run with {', '.join(theirs)}; this run has {', '.join(mine)}; "
        f"use another --ckpt_path or drop --load_checkpoint"
    )
