"""Profile values as a command line gives them (``--set KEY=VALUE``, a sweep's ``--grid``) and the one rule
every value obeys, in a file or on a command line: a flat literal papermill can inject (a scalar or a list
of scalars), and no NaN or inf."""

from __future__ import annotations

import math
from typing import Any, Iterable

import yaml

_SCALARS = (str, int, float, bool, type(None))


def check_value(source: str, key: str, value: Any) -> None:
    """Reject values papermill could not inject as a flat literal, and NaN or inf (no setting means them)."""
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{source}: key {key!r} must be a finite number, got {value!r}")
    if isinstance(value, _SCALARS):
        return
    if isinstance(value, list) and all(isinstance(v, _SCALARS) for v in value):
        return
    raise ValueError(
        f"{source}: key {key!r} must be a scalar (str, int, float, bool, null) or a list of scalars, "
        f"got {type(value).__name__}: {value!r}"
    )


def parse_value(text: str) -> Any:
    """A value from the command line: an int, a finite float, true/false, null, else the text.

    >>> [parse_value(t) for t in ("0", "0.1", "1e-5", "true", "cosine_avg")]
    [0, 0.1, 1e-05, True, 'cosine_avg']
    """
    t = text.strip()
    for convert in (int, float):
        try:
            value = convert(t)
        except ValueError:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"value {text!r} is not a finite number")
        return value
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if t.lower() in ("null", "none"):
        return None
    return t


def _yaml_value(text: str, what: str) -> Any:
    """``text`` as YAML, where an unquoted string that reads as a number is that number (YAML 1.1
    reads ``1e-5`` as a string) and an empty text is the empty string."""
    t = text.strip()
    if not t:
        return ""
    try:
        value = yaml.safe_load(t)
    except yaml.YAMLError as e:
        raise ValueError(f"{what}: not a YAML value ({' '.join(str(e).split())})") from None
    if isinstance(value, str) and t[:1] not in "\"'":
        return parse_value(t)
    if isinstance(value, list):
        return [parse_value(v) if isinstance(v, str) else v for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what}: {t!r} is not a finite number")
    return value


def parse_set_flags(flags: Iterable[str], what: str = "--set") -> dict:
    """``["n_samples=4", "rm_seeds=[0, 1]"]`` -> ``{"n_samples": 4, "rm_seeds": [0, 1]}``: each value a
    YAML scalar or list of scalars; a key given twice is an error. A trainer setting is named as the profile's
    ``rm:`` block has it, ``rm.learning_rate`` (or ``learning_rate``), and held under its own name; an old key
    is refused with its new name (``study.recipe.setting_key``).

    >>> parse_set_flags(["n_samples=4", "rm_seeds=[0, 1]", "rm.learning_rate=1e-5", "operations='+-'", "rm_store="])
    {'n_samples': 4, 'rm_seeds': [0, 1], 'learning_rate': 1e-05, 'operations': '+-', 'rm_store': ''}
    """
    from goalrm_core.study.recipe import setting_key

    out: dict[str, Any] = {}
    for flag in flags:
        key, sep, text = flag.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"{what} {flag!r}: expected KEY=VALUE")
        key = setting_key(key, what)
        if key in out:
            raise ValueError(f"{what}: key {key!r} is given twice")
        value = _yaml_value(text, f"{what} {flag!r}")
        check_value(what, key, value)
        out[key] = value
    return out
