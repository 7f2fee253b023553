"""The checks of a profile's values that need no kernel, shared by ``goalrm report`` and ``goalrm sweep``.

Each notebook receives only the keys it declares, so the checks here catch the two mistakes that would
otherwise pass silently: a key no notebook reads (a typo), and a value whose type differs from the
notebook's default (``"1e-5"`` as a string, ``2`` for a list). :func:`check_settings` then applies the
ranges, choices and relations of :mod:`~goalrm_core.pipeline.profile_rules`, to a profile file's values and
to ``--set`` values alike, before any kernel starts.
"""

from __future__ import annotations

import ast
from typing import Any, Iterable, Mapping

from goalrm_core.flags import did_you_mean
from goalrm_core.pipeline.profile_rules import PROFILE_RULES, RELATIONS
from goalrm_core.pipeline.profile_values import parse_value
from goalrm_core.study.recipe import RM_KEYS, trainer_settings

_TYPE_NAMES = {bool: "bool", int: "int", float: "float", str: "str", list: "list"}


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


# Keys the runner itself reads (the report's name, where the run goes, the pinned thread count): a
# profile may set them although no notebook declares them.
RUNNER_READS = ("profile", "run_dir", "torch_threads", "notebooks")


def declared_keys_of(declared: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """Every key some notebook declares."""
    return {k for params in declared.values() for k in params}


def unknown_key_message(
    key: str, declared: Mapping[str, Mapping[str, Any]], source: str, exclude: Iterable[str] = ()
) -> str | None:
    """``"<source>: key 'x' is not a parameter of any notebook; did you mean y?"`` when no notebook
    declares ``key`` (and the runner does not read it either), else ``None``. ``exclude`` names keys
    never suggested (those the caller sets itself)."""
    known = declared_keys_of(declared)
    if key in known or key in RUNNER_READS or key in RM_KEYS:  # the rm block goes to notebook 02 whole
        return None
    hint = did_you_mean(key, (known | set(RUNNER_READS)) - set(exclude) - {"profile"})
    return f"{source}: key {key!r} is not a parameter of any notebook{hint}"


def _source_of(key: str, source: str, sources: Mapping[str, str] | None) -> str:
    return (sources or {}).get(key, source)


def check_profile_against_notebooks(
    profile: Mapping[str, Any],
    declared: Mapping[str, Mapping[str, Mapping[str, Any]]],
    source: str = "profile",
    sources: Mapping[str, str] | None = None,
) -> list[str]:
    """Compare a profile with the parameters each notebook declares.

    ``declared`` maps notebook name -> ``papermill.inspect_notebook`` output. Returns one warning per
    profile key that no notebook declares and the runner does not read (:data:`RUNNER_READS`), with
    the declared keys it resembles ("did you mean"). Raises ``ValueError`` naming ``source`` (the
    profile file; ``sources`` may name another per key, e.g. ``--set``), the key, the notebook, the
    expected type and the value when a value's type differs from the declared default's type: such a
    value would otherwise fail far from its cause, deep inside a notebook.
    """
    warnings_out = []
    for key, value in profile.items():
        users = [nb for nb, params in declared.items() if key in params]
        if not users and key in RM_KEYS:
            continue  # an rm key no notebook writes out: notebook 02 receives it all the same, the trainer checks it
        if not users:
            message = unknown_key_message(key, declared, _source_of(key, source, sources))
            if message:
                warnings_out.append(message)
            continue
        if value is None:
            continue
        for nb in users:
            expected = declared_type(declared[nb][key])
            if expected is not None and not _type_matches(expected, value):
                raise ValueError(
                    f"{_source_of(key, source, sources)}: key {key!r} expects {_TYPE_NAMES[expected]} (the default in "
                    f"{nb}), got {type(value).__name__}: {value!r}"
                    + ("; a list is written [0, 1]" if expected is list else "")
                )
    return warnings_out


def coerce_to_declared(
    key: str, value: Any, declared: Mapping[str, Mapping[str, Any]], stages: Iterable[str] | None = None
) -> Any:
    """An int where the notebooks declare a float becomes that float (``0`` -> ``0.0``), and a list
    typed with commas a list (:func:`list_from_text`), so a value given on the command line is recorded
    as the notebook would hold it."""
    value = list_from_text(key, value, declared, stages)
    for stage in stages if stages is not None else declared:
        if (
            key in declared[stage]
            and declared_type(declared[stage][key]) is float
            and isinstance(value, int)
            and not isinstance(value, bool)
        ):
            return float(value)
    return value


def list_from_text(
    key: str, value: Any, declared: Mapping[str, Mapping[str, Any]], stages: Iterable[str] | None = None
) -> Any:
    """``0,1`` -> ``[0, 1]`` where the notebooks declare ``key`` a list (``--set rm_seeds=0,1`` as well as
    ``[0, 1]``); any other value as it is."""
    if (
        isinstance(value, str)
        and "," in value
        and any(
            key in declared[stage] and declared_type(declared[stage][key]) is list
            for stage in (stages if stages is not None else declared)
        )
    ):
        return [parse_value(part) for part in value.split(",")]
    return value


def check_ranges(settings: Mapping[str, Any], source: str, sources: Mapping[str, str] | None = None) -> None:
    """Raise a one-line ``ValueError`` for the first value outside its key's valid range or choices
    (:data:`PROFILE_RULES`) or breaking a relation between keys (:data:`RELATIONS`): ``"<source>: <key>
    must be <range>, got <value>"``, where ``source`` is the profile file, or ``sources[key]`` (``--set``)
    for a value given elsewhere. Keys without a rule are left alone."""
    for key, value in settings.items():
        rule = PROFILE_RULES.get(key)
        if rule is None:
            continue
        try:
            rule.check(value, key)
        except ValueError as e:
            raise ValueError(f"{_source_of(key, source, sources)}: {e}") from None
    for keys, holds, message in RELATIONS:
        if not all(k in settings for k in keys):
            continue
        values = [settings[k] for k in keys]
        if not holds(*values):
            named = [sources[k] for k in keys if sources and k in sources]
            raise ValueError(f"{named[0] if named else source}: {message.format(*values)}")


def check_settings(
    settings: Mapping[str, Any],
    declared: Mapping[str, Mapping[str, Mapping[str, Any]]],
    source: str,
    sources: Mapping[str, str] | None = None,
) -> list[str]:
    """Every check of a profile's values that needs no kernel, in one place (``goalrm report`` on a
    profile and its ``--set`` values, ``goalrm sweep`` on each point): the types the notebooks
    declare, then the ranges, choices and relations of :func:`check_ranges`. Raises the first problem
    as a one-line ``ValueError``; returns the warnings (keys no notebook declares, with "did you mean")."""
    found = check_profile_against_notebooks(settings, declared, source=source, sources=sources)
    check_ranges(settings, source, sources)
    check_trainer(settings, source)
    return found


def check_trainer(settings: Mapping[str, Any], source: str) -> None:
    """The trainer's own checks of the profile's ``rm`` block and seed (its choices, ranges and the rules
    between its flags), as notebook 02 will build the config: a one-line ``ValueError`` naming ``source``."""
    from goalrm_core.train.config import TrainRMConfig

    try:
        TrainRMConfig.from_dict(trainer_settings(settings))
    except (ValueError, TypeError) as e:
        raise ValueError(f"{source}: {e}") from None
