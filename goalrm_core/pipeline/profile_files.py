"""Run profiles, the files: one YAML file per profile in ``params/``, shared by every notebook.

A profile is flat (``key: scalar`` or ``key: [scalars]``) because papermill injects it as literal
assignments into each notebook's ``parameters`` cell, with one block: ``rm:``, the reward model's settings
under :class:`~goalrm_core.train.config.TrainRMConfig`'s field names (``study.recipe``). The resolved profile
holds the block's keys under those same names beside the others (no other key may share one), so a notebook
receives ``max_steps = 400`` and the trainer reads ``max_steps``: nothing is renamed. A key profiles used
before the block (``contrastive_beta``) is refused in one line naming its new name. This module finds a profile or a
sweep spec by name, reads it strictly
(a key given twice, bad YAML, a value that is not flat) and resolves its ``base`` chain. What a value
may be is :mod:`~goalrm_core.pipeline.profile_rules`'s; the checks against the notebooks are
:mod:`~goalrm_core.pipeline.profile_checks`'; values typed on a command line are
:mod:`~goalrm_core.pipeline.profile_values`'.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import yaml

from goalrm_core.flags import did_you_mean, safe_path_part
from goalrm_core.paths import resolve_path, shown_path
from goalrm_core.pipeline.profile_values import check_value
from goalrm_core.study.recipe import RM_BLOCK, RM_KEYS, old_key_message

SWEEP_KEY = "sweep"


def _params_dir(params_dir: str | os.PathLike | None) -> Path:
    return resolve_path(params_dir if params_dir is not None else "params")


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a mapping that gives a key twice is an error (PyYAML keeps the last
    value without a word: a sweep grid would lose a list, a profile a setting)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise ValueError(
                    f"{key_node.start_mark.line + 1}: key {key!r} is given twice (first on line {seen[key]}); keep one"
                )
            if isinstance(key, (str, int, float, bool)):
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> Any:
    """The YAML file ``path`` (a profile or a sweep spec), strictly: bad YAML or a key given twice is
    a ``ValueError`` naming the file and the line."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({' '.join(str(e).split())})") from None
    except ValueError as e:
        raise ValueError(f"{path}:{e}") from None


def is_sweep_spec(path: Path) -> bool:
    """A YAML file in ``params/`` whose top level is ``sweep:`` describes a sweep over a profile
    (``goalrm sweep --spec <name>``), not a profile."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, OSError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and list(data) == [SWEEP_KEY] and isinstance(data[SWEEP_KEY], dict)


def _yaml_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(
        (p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()),
        key=lambda p: (p.stem, p.suffix),
    )


#: The profiles that command lines run, not the notebooks (``python -m goalrm_core.paper``): each with its command.
COMMAND_LINE_PROFILES = {
    "paper-math": "python -m goalrm_core.paper script --profile paper-math",
    "paper-hh": "python -m goalrm_core.paper script --profile paper-hh",
    "gpu-check": "python -m goalrm_core.paper gpu-check",
    "real-cpu": "python -m goalrm_core.paper real-cpu",
    "real-lm": "python -m goalrm_core.paper real-lm",
}


#: The key of a profile that names the folder of its own stage notebooks (``real-lm``: ``notebooks/real-lm``);
#: a profile without it runs ``notebooks/``, the ToyMath notebooks.
NOTEBOOKS_KEY = "notebooks"
DEFAULT_NOTEBOOKS = "notebooks"


def notebooks_folder(settings: Mapping[str, Any]) -> str:
    """The folder of the stage notebooks that run a profile's ``settings``."""
    return settings.get(NOTEBOOKS_KEY) or DEFAULT_NOTEBOOKS


def notebook_profile(name: str, params_dir: str | os.PathLike | None = None) -> str:
    """``name`` when the notebooks run it (``goalrm report``, ``goalrm sweep``); a one-line error pointing to
    the command that runs it when it is a command-line profile with no notebooks of its own (``notebooks:``)."""
    if name in COMMAND_LINE_PROFILES and not load_profile(name, params_dir).get(NOTEBOOKS_KEY):
        raise ValueError(
            f"params/{name}.yaml is a command-line profile, not a notebook one: run "
            f"`{COMMAND_LINE_PROFILES[name]}` (docs/migration.md)"
        )
    return name


def available_profiles(params_dir: str | os.PathLike | None = None) -> list[str]:
    """Profile names (YAML file stems) in ``params_dir``, sorted; sweep specs are not profiles."""
    return [p.stem for p in _yaml_files(_params_dir(params_dir)) if not is_sweep_spec(p)]


def available_sweep_specs(params_dir: str | os.PathLike | None = None) -> list[str]:
    return [p.stem for p in _yaml_files(_params_dir(params_dir)) if is_sweep_spec(p)]


def _find(name: str, directory: Path) -> Path | None:
    safe_path_part(name, "profile")
    for suffix in (".yaml", ".yml"):
        candidate = directory / f"{name}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def profile_path(name: str, params_dir: str | os.PathLike | None = None) -> Path:
    """The YAML file of profile ``name``; ``ValueError`` listing the available ones if absent."""
    directory = _params_dir(params_dir)
    candidate = _find(name, directory)
    if candidate is not None and is_sweep_spec(candidate):
        raise ValueError(f"{candidate} is a sweep spec, not a profile: run it with `goalrm sweep --spec {name}`")
    if candidate is not None:
        return candidate
    available = available_profiles(directory)
    notebooks = [p for p in available if p not in COMMAND_LINE_PROFILES]
    commands = [p for p in available if p in COMMAND_LINE_PROFILES]
    listed = ", ".join(notebooks) if notebooks else "none"
    if commands:
        listed += f" (run by `python -m goalrm_core.paper`, not the notebooks: {', '.join(commands)})"
    raise ValueError(f"unknown profile {name!r}: available profiles in {directory} are: {listed}")


def sweep_spec_path(name: str, params_dir: str | os.PathLike | None = None) -> Path:
    """The YAML file of sweep spec ``name``; ``ValueError`` listing the available ones if absent."""
    directory = _params_dir(params_dir)
    candidate = _find(name, directory)
    if candidate is not None and is_sweep_spec(candidate):
        return candidate
    listed = ", ".join(available_sweep_specs(directory)) or "none"
    raise ValueError(
        f"no sweep spec {name!r} (a YAML file whose top level is 'sweep:'): specs in {directory} are: {listed}"
    )


#: the key a profile names its base profile with: it states only what differs from the base
BASE_KEY = "base"


def rm_block(block: Any, where: str) -> dict:
    """A profile's ``rm:`` block (``where`` names it in errors), checked: a mapping of trainer settings
    (:data:`~goalrm_core.study.recipe.RM_KEYS`) to flat values; an old key is refused with its new name."""
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise ValueError(
            f"{where}: key {RM_BLOCK!r} must be a mapping of the trainer's settings "
            f"({RM_BLOCK}: {{max_steps: 400, ...}}), got {type(block).__name__}: {block!r}"
        )
    for key, value in block.items():
        message = old_key_message(str(key), where, in_block=True)
        if message:
            raise ValueError(message)
        if key not in RM_KEYS:
            raise ValueError(
                f"{where}: key {f'{RM_BLOCK}.{key}'!r} is no setting of the trainer (goalrm train-rm --help)"
                f"{did_you_mean(str(key), RM_KEYS)}"
            )
        check_value(where, f"{RM_BLOCK}.{key}", value)
    return dict(block)


def _profile_file(path: Path) -> dict:
    """One profile file's own mapping (its ``base`` key and ``rm`` block included), checked to be flat but
    for the block."""
    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a flat mapping of parameter names to values, got {type(data).__name__}")
    where = shown_path(path)
    for key, value in data.items():
        if not isinstance(key, str):
            raise ValueError(f"{path}: key {key!r} must be a string, got {type(key).__name__}")
        if key == RM_BLOCK:
            rm_block(value, where)
            continue
        message = old_key_message(key, where)
        if message:
            raise ValueError(message)
        check_value(str(path), key, value)
    return data


def load_profile(name: str, params_dir: str | os.PathLike | None = None) -> dict:
    """Read and validate profile ``name``: a flat mapping of string keys to scalars or scalar lists, the
    keys of its ``rm:`` block among them under their own names (the trainer's).

    A profile may name another as its ``base`` (``base: demo``) and state only what differs: its
    values are the base's (resolved the same way, so bases chain), with its own on top, in the base's
    key order and then its own new keys; an ``rm:`` block overrides the base's key by key. A base that is missing, a
    sweep spec, or leads back to the
    profile is a one-line error naming the file, the ``base`` field and its value."""
    chain: list[str] = []
    layers: list[dict] = []
    current, path = name, profile_path(name, params_dir)
    while True:
        chain.append(current)
        data = _profile_file(path)
        layers.append(data)
        if BASE_KEY not in data:
            break
        base = data[BASE_KEY]
        where = f"{shown_path(path)}: field {BASE_KEY!r}"
        if not isinstance(base, str) or not base:
            raise ValueError(f"{where} must name a profile, got {base!r}")
        if base in chain:
            raise ValueError(f"{where} is {base!r}, which makes a cycle: {' -> '.join([*chain, base])}")
        try:
            base_path = profile_path(base, params_dir)
        except ValueError as e:
            raise ValueError(f"{where} is {base!r}: {e}") from None
        current, path = base, base_path
    resolved: dict = {}
    for data in reversed(layers):
        for key, value in data.items():
            if key == RM_BLOCK:
                resolved.update(value or {})
            elif key != BASE_KEY:
                resolved[key] = value
    return resolved
