"""Run profiles: one flat YAML file per profile in ``params/``, shared by every notebook.

A profile is deliberately flat (``key: scalar`` or ``key: [scalars]``) because papermill injects it
as literal assignments into each notebook's ``parameters`` cell; anything nested would not round-trip
into a readable parameters cell. Each notebook receives only the keys it declares, so the checks here
catch the two mistakes that would otherwise pass silently: a key no notebook reads (a typo), and a
value whose type differs from the notebook's default (``"1e-5"`` as a string, ``2`` for a list).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any, Mapping

import yaml

from goalrm_core.runtime import project_root

_SCALARS = (str, int, float, bool, type(None))
SWEEP_KEY = "sweep"
_TYPE_NAMES = {bool: "bool", int: "int", float: "float", str: "str", list: "list"}


def resolve_path(p: str | os.PathLike) -> Path:
    """``p`` itself when absolute, else ``p`` relative to :func:`project_root`."""
    path = Path(p).expanduser()
    return path if path.is_absolute() else project_root() / path


def _params_dir(params_dir: str | os.PathLike | None) -> Path:
    return resolve_path(params_dir if params_dir is not None else "params")


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
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def available_profiles(params_dir: str | os.PathLike | None = None) -> list[str]:
    """Profile names (YAML file stems) in ``params_dir``, sorted; sweep specs are not profiles."""
    return [p.stem for p in _yaml_files(_params_dir(params_dir)) if not is_sweep_spec(p)]


def available_sweep_specs(params_dir: str | os.PathLike | None = None) -> list[str]:
    return [p.stem for p in _yaml_files(_params_dir(params_dir)) if is_sweep_spec(p)]


def _find(name: str, directory: Path) -> Path | None:
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
    listed = ", ".join(available) if available else "none"
    raise ValueError(f"unknown profile {name!r}: available profiles in {directory} are: {listed}")


def sweep_spec_path(name: str, params_dir: str | os.PathLike | None = None) -> Path:
    """The YAML file of sweep spec ``name``; ``ValueError`` listing the available ones if absent."""
    directory = _params_dir(params_dir)
    candidate = _find(name, directory)
    if candidate is not None and is_sweep_spec(candidate):
        return candidate
    listed = ", ".join(available_sweep_specs(directory)) or "none"
    raise ValueError(f"no sweep spec {name!r} (a YAML file whose top level is 'sweep:'): specs in {directory} are: {listed}")


def check_value(source: str, key: str, value: Any) -> None:
    """Reject values papermill could not inject as a flat literal."""
    if isinstance(value, _SCALARS):
        return
    if isinstance(value, list) and all(isinstance(v, _SCALARS) for v in value):
        return
    raise ValueError(
        f"{source}: key {key!r} must be a scalar (str, int, float, bool, null) or a list of scalars, "
        f"got {type(value).__name__}: {value!r}"
    )


def load_profile(name: str, params_dir: str | os.PathLike | None = None) -> dict:
    """Read and validate profile ``name``: a flat mapping of string keys to scalars or scalar lists."""
    path = profile_path(name, params_dir)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({e})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a flat mapping of parameter names to values, got {type(data).__name__}")
    for key, value in data.items():
        if not isinstance(key, str):
            raise ValueError(f"{path}: key {key!r} must be a string, got {type(key).__name__}")
        check_value(str(path), key, value)
    return data


def declared_type(param: Mapping[str, Any]) -> type | None:
    """The type a notebook parameter expects, or ``None`` when anything goes.

    papermill reports the annotation (``"None"`` when there is none) and the default as source text,
    so the default is parsed back into a literal; a default that is not a literal (an expression)
    or is ``None`` cannot constrain the profile value.
    """
    annotation = str(param.get("inferred_type_name") or "None").strip()
    for typ, name in _TYPE_NAMES.items():
        if annotation == name or annotation.lower().startswith(f"{name}["):
            return typ
    default = param.get("default")
    if isinstance(default, str):
        try:
            default = ast.literal_eval(default)
        except (ValueError, SyntaxError):
            return None
    if isinstance(default, tuple):
        return list
    for typ in _TYPE_NAMES:  # bool before int: bool is a subclass of int
        if isinstance(default, typ):
            return typ
    return None


def _type_matches(expected: type, value: Any) -> bool:
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


def check_profile_against_notebooks(
    profile: Mapping[str, Any],
    declared: Mapping[str, Mapping[str, Mapping[str, Any]]],
    source: str = "profile",
) -> list[str]:
    """Compare a profile with the parameters each notebook declares.

    ``declared`` maps notebook name -> ``papermill.inspect_notebook`` output. Returns one warning per
    profile key that no notebook declares (``profile`` itself is always injected, so it is exempt).
    Raises ``ValueError`` naming ``source`` (the profile file), the key, the notebook, the expected
    type and the value when a value's type differs from the declared default's type: such a value
    would otherwise fail far from its cause, deep inside a notebook.
    """
    warnings_out = []
    for key, value in profile.items():
        users = [nb for nb, params in declared.items() if key in params]
        if not users:
            if key != "profile":
                warnings_out.append(f"{source}: key {key!r} is not a parameter of any notebook")
            continue
        if value is None:
            continue
        for nb in users:
            expected = declared_type(declared[nb][key])
            if expected is not None and not _type_matches(expected, value):
                raise ValueError(
                    f"{source}: key {key!r} expects {_TYPE_NAMES[expected]} (the default in {nb}), "
                    f"got {type(value).__name__}: {value!r}"
                )
    return warnings_out
