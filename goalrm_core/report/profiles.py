"""Run profiles: one flat YAML file per profile in ``params/``, shared by every notebook.

A profile is deliberately flat (``key: scalar`` or ``key: [scalars]``) because papermill injects it
as literal assignments into each notebook's ``parameters`` cell; anything nested would not round-trip
into a readable parameters cell. Each notebook receives only the keys it declares, so the checks here
catch the two mistakes that would otherwise pass silently: a key no notebook reads (a typo), and a
value whose type differs from the notebook's default (``"1e-5"`` as a string, ``2`` for a list).

:data:`PROFILE_RULES` adds what a type cannot say: each notebook key's valid range or choices
(``sampling_temperature > 0``, ``encoding`` in ``split``/``official`` …; a trainer setting's are the
trainer's own), and :data:`RELATIONS` the
constraints between keys. :func:`check_settings` applies all of it, to a profile file's values and to
``--set`` values alike (``goalrm report`` and ``goalrm sweep`` share it), before any kernel starts.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from goalrm_core.choices import GOAL_METHODS, READOUTS
from goalrm_core.flags import Range, safe_path_part
from goalrm_core.inference.decode_config import DecodeConfig
from goalrm_core.paths import project_root
from goalrm_core.study.recipe import profile_rules, recipe_help
from goalrm_core.study.rms import HEADLINE_SETS
from goalrm_core.tasks.toymath.problems import OPERATORS, PREFERENCE_SOURCES

_SCALARS = (str, int, float, bool, type(None))
SWEEP_KEY = "sweep"
_TYPE_NAMES = {bool: "bool", int: "int", float: "float", str: "str", list: "list"}


def resolve_path(p: str | os.PathLike) -> Path:
    """``p`` itself when absolute, else ``p`` relative to :func:`project_root`."""
    path = Path(p).expanduser()
    return path if path.is_absolute() else project_root() / path


def shown_path(p: str | os.PathLike) -> str:
    """``p`` relative to the project root when it lies inside it (``params/demo.yaml``), else as it is:
    what a message names should not depend on where the project is checked out."""
    try:
        return str(Path(p).resolve().relative_to(project_root().resolve()))
    except ValueError:
        return str(p)


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
                raise ValueError(f"{key_node.start_mark.line + 1}: key {key!r} is given twice "
                                 f"(first on line {seen[key]}); keep one")
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
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


#: The profiles that command lines run, not the notebooks (``python -m goalrm_core.paper``): each with its command.
COMMAND_LINE_PROFILES = {"paper-math": "python -m goalrm_core.paper script --profile paper-math",
                         "paper-hh": "python -m goalrm_core.paper script --profile paper-hh",
                         "gpu-check": "python -m goalrm_core.paper gpu-check",
                         "real-cpu": "python -m goalrm_core.paper real-cpu"}


def notebook_profile(name: str) -> str:
    """``name`` when the notebooks run it (``goalrm report``, ``goalrm sweep``); a one-line error pointing to
    the command that runs it when it is a command-line profile."""
    if name in COMMAND_LINE_PROFILES:
        raise ValueError(f"params/{name}.yaml is a command-line profile, not a notebook one: run "
                         f"`{COMMAND_LINE_PROFILES[name]}` (docs/migration.md)")
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
    raise ValueError(f"no sweep spec {name!r} (a YAML file whose top level is 'sweep:'): specs in {directory} are: {listed}")


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


#: the key a profile names its base profile with: it states only what differs from the base
BASE_KEY = "base"


def _profile_file(path: Path) -> dict:
    """One profile file's own mapping (its ``base`` key included), checked to be flat."""
    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a flat mapping of parameter names to values, got {type(data).__name__}")
    for key, value in data.items():
        if not isinstance(key, str):
            raise ValueError(f"{path}: key {key!r} must be a string, got {type(key).__name__}")
        check_value(str(path), key, value)
    return data


def load_profile(name: str, params_dir: str | os.PathLike | None = None) -> dict:
    """Read and validate profile ``name``: a flat mapping of string keys to scalars or scalar lists.

    A profile may name another as its ``base`` (``base: demo``) and state only what differs: its
    values are the base's (resolved the same way, so bases chain), with its own on top, in the base's
    key order and then its own new keys. A base that is missing, a sweep spec, or leads back to the
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
        resolved.update((k, v) for k, v in data.items() if k != BASE_KEY)
    return resolved


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
RUNNER_READS = ("profile", "run_dir", "torch_threads")


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """``"; did you mean a, b?"`` for the known names close to ``key``, else ``""``."""
    close = difflib.get_close_matches(key, sorted(set(known)), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""


def declared_keys_of(declared: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """Every key some notebook declares."""
    return {k for params in declared.values() for k in params}


def unknown_key_message(key: str, declared: Mapping[str, Mapping[str, Any]], source: str,
                        exclude: Iterable[str] = ()) -> str | None:
    """``"<source>: key 'x' is not a parameter of any notebook; did you mean y?"`` when no notebook
    declares ``key`` (and the runner does not read it either), else ``None``. ``exclude`` names keys
    never suggested (those the caller sets itself)."""
    known = declared_keys_of(declared)
    if key in known or key in RUNNER_READS:
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
                    f"{_source_of(key, source, sources)}: key {key!r} expects {_TYPE_NAMES[expected]} (the default in {nb}), "
                    f"got {type(value).__name__}: {value!r}" + ("; a list is written [0, 1]" if expected is list else "")
                )
    return warnings_out


def coerce_to_declared(key: str, value: Any, declared: Mapping[str, Mapping[str, Any]],
                       stages: Iterable[str] | None = None) -> Any:
    """An int where the notebooks declare a float becomes that float (``0`` -> ``0.0``), and a list
    typed with commas a list (:func:`list_from_text`), so a value given on the command line is recorded
    as the notebook would hold it."""
    value = list_from_text(key, value, declared, stages)
    for stage in (stages if stages is not None else declared):
        if key in declared[stage] and declared_type(declared[stage][key]) is float and isinstance(value, int) \
                and not isinstance(value, bool):
            return float(value)
    return value


def list_from_text(key: str, value: Any, declared: Mapping[str, Mapping[str, Any]], stages: Iterable[str] | None = None) -> Any:
    """``0,1`` -> ``[0, 1]`` where the notebooks declare ``key`` a list (``--set rm_seeds=0,1`` as well as
    ``[0, 1]``); any other value as it is."""
    if isinstance(value, str) and "," in value and any(
            key in declared[stage] and declared_type(declared[stage][key]) is list for stage in (stages if stages is not None else declared)):
        return [parse_value(part) for part in value.split(",")]
    return value


# --------------------------------------------------------------------------- values on a command line


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
    YAML scalar or list of scalars; a key given twice is an error.

    >>> parse_set_flags(["n_samples=4", "rm_seeds=[0, 1]", "rm_learning_rate=1e-5", "operations='+-'", "rm_store="])
    {'n_samples': 4, 'rm_seeds': [0, 1], 'rm_learning_rate': 1e-05, 'operations': '+-', 'rm_store': ''}
    """
    out: dict[str, Any] = {}
    for flag in flags:
        key, sep, text = flag.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"{what} {flag!r}: expected KEY=VALUE")
        if key in out:
            raise ValueError(f"{what}: key {key!r} is given twice")
        value = _yaml_value(text, f"{what} {flag!r}")
        check_value(what, key, value)
        out[key] = value
    return out


# --------------------------------------------------------------------------------- ranges and choices


class Choice:
    """A key whose value is one of ``options``."""

    def __init__(self, *options: Any):
        self.options = tuple(options)

    def __str__(self) -> str:
        return "one of " + ", ".join(map(str, self.options))

    def check(self, value: Any, name: str) -> None:
        if isinstance(value, bool) and not any(isinstance(o, bool) for o in self.options) or value not in self.options:
            raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(map(str, self.options))}")


class ListOf:
    """A key whose value is a list of numbers each in ``item`` (at least ``min_len``; ``distinct``: no repeats)."""

    def __init__(self, item: Range, min_len: int = 1, distinct: bool = False):
        self.item, self.min_len, self.distinct = item, min_len, distinct

    def __str__(self) -> str:
        size = "a non-empty list" if self.min_len == 1 else f"a list of at least {self.min_len}"
        return f"{size} of {'distinct ' if self.distinct else ''}values, each {self.item}"

    def check(self, value: Any, name: str) -> None:
        ok = isinstance(value, list) and len(value) >= self.min_len and all(self.item.contains(v) for v in value)
        if ok and self.distinct:
            ok = len({_distinct_key(v) for v in value}) == len(value)
        if not ok:
            raise ValueError(f"{name} must be {self}, got {value!r}")


def _distinct_key(value: Any) -> str:
    return repr(float(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)


class Letters:
    """A string of distinct characters drawn from ``alphabet`` (at least one)."""

    def __init__(self, alphabet: str, what: str):
        self.alphabet, self.what = alphabet, what

    def __str__(self) -> str:
        return f"a non-empty string of distinct {self.what} from {self.alphabet!r}"

    def check(self, value: Any, name: str) -> None:
        if not (isinstance(value, str) and value and set(value) <= set(self.alphabet) and len(set(value)) == len(value)):
            raise ValueError(f"{name} must be {self}, got {value!r}")


# The choices of the model's keys come from goalrm_core.choices and the trainer's config, those of
# the task from its problem module (all torch-free, so checking a profile imports no model code).
HEADLINE_CHOICES = tuple(HEADLINE_SETS)

_COUNT = Range(int, ">= 1")
_FRACTION = Range(float, "(0, 1)")
_RATE = Range(float, "> 0")
_SEARCH = {f.name: f.metadata for f in dataclasses.fields(DecodeConfig)}


def _search(setting: str, help_text: str = "") -> tuple[Range, str]:
    """A decoding key's rule and help: the beam search's setting of that name (``DecodeConfig``)."""
    return _SEARCH[setting]["range"], help_text or _SEARCH[setting]["help"]


# Every key of a notebook profile, defined once: its valid values and what it is (params/demo.yaml sets
# every key written out here; a test holds it to that). A rule of ``None``: any value of the type the
# notebook's default has. The trainer's settings are not written here: their ranges, choices and help
# are the trainer's own (``TrainRMConfig``'s fields), under the profile's names (``study.recipe``), and
# the beam search's are its own (``DecodeConfig``'s fields).
# docs/profiles.md's table of the keys is generated from this (scripts/docs_tables.py).
_NOTEBOOK_KEYS: dict[str, tuple[Any, str]] = {
    "run_dir": (None, "Where the run's artifacts go (data, models, scores); the report goes elsewhere."),
    "torch_threads": (Range(int, ">= 1", note="pinned: floats depend on it"), "CPU threads of every stage."),
    # 01_data: the task
    "min_chain_steps": (_COUNT, "Fewest operations in a training question."),
    "max_chain_steps": (_COUNT, "Most operations in a training question."),
    "operand_min": (Range(int, ">= 0"), "Smallest operand."),
    "operand_max": (Range(int, ">= 0"), "Largest operand."),
    "operations": (Letters(OPERATORS, "operators"), "The operators of training questions."),
    "modulus": (Range(int, ">= 2", also=(0,), note="0 = exact results"), "Every result taken mod this (digit chains: 10)."),
    "heldout_facts": (Range(int, ">= 0"), "'+'/'-' facts never in training (the toy-unseen benchmark asks them)."),
    "mistaught_facts": (Range(int, ">= 0"), "Facts taught wrong in every SFT solution (the paper's regime: confident errors)."),
    "n_benchmark_questions": (_COUNT, "Questions per benchmark."),
    "n_train_questions": (_COUNT, "SFT questions of the policy."),
    # 01_data: the policy and its samples
    "policy_steps": (_COUNT, "SFT steps of the policy."),
    "policy_batch_size": (_COUNT, "SFT sequences per step."),
    "policy_hidden_size": (_COUNT, "Hidden size of the policy (a character-level Llama)."),
    "policy_layers": (_COUNT, "Layers of the policy."),
    "policy_learning_rate": (_RATE, "Peak SFT learning rate."),
    "n_samples": (_COUNT, "Sampled solutions per benchmark question."),
    "sampling_temperature": (Range(float, "> 0"), "Temperature of the sampled solutions and pairs."),
    "max_new_tokens": (_COUNT, "Tokens per generated solution at most."),
    "n_pair_questions": (_COUNT, "Training questions the preference pairs come from."),
    "pair_samples_per_question": (Range(int, ">= 2", note="a pair needs two samples"), "Policy samples per pair question."),
    "pairs_per_question": (_COUNT, "Pairs (correct vs incorrect) per question at most."),
    "eval_fraction": (_FRACTION, "Share of pairs held out for the RMs' held-out accuracy."),
    "pair_source": (Choice(*PREFERENCE_SOURCES), "Where pairs come from: the policy's samples, a generator's slips, or "
                                                 "slips and a confidently wrong generator."),
    "slips_per_question": (_COUNT, "One-fact slips per question (pair_source slips)."),
    "generator_extra_facts": (Range(int, ">= 0"), "Facts the confident generator gets wrong beyond the policy's mistaught ones."),
    # 02_training: how many RMs, where, and how many at once (the trainer's settings follow below)
    "rm_seeds": (ListOf(Range(int, ">= 0"), distinct=True), "One RM of each kind per seed."),
    "rm_processes": (_COUNT, "Processes per RM (DeepSpeed data parallel)."),
    "rm_parallel": (_COUNT, "RMs trained at once."),
    "rm_store": (None, "A folder that keeps RMs by their config, reused when unchanged (\"\": none)."),
    "prm_arm": (None, "Also train and score a step verifier on exact per-token labels."),
    # 03_representations, 04_evaluation, 05_decoding
    "readout": (Choice(*READOUTS), "Where the reward is read: the appended EOS, or the response's last token."),
    "goal_method": (Choice(*GOAL_METHODS), "How the goal state is formed."),
    "headline": (Choice(*HEADLINE_CHOICES), "The generations the headline AUROC reads."),
    "n_boot": (_COUNT, "Bootstrap resamples of an interval."),
    "filter_threshold": (Range(float), "Q below which Q-filtered voting drops a generation (the paper's: 0)."),
    "skip_first": (Range(int, ">= 0"), "Response tokens before Q can drop or stop a generation."),
    "val_fraction": (_FRACTION, "Share of questions that choose a threshold; the rest report it."),
    "decode_questions": (_COUNT, "Questions decoded per method."),
    "beam_size": _search("beam_size"),
    "samples_per_step": _search("samples_per_step"),
    "decode_temperature": _search("temperature", "Sampling temperature of decoding (the search's first step, the pruned samples)."),
    "temperature_decay": _search("temperature_decay"),
    "conf_ratio": _search("conf_ratio"),
    "reward_weight": _search("reward_weight"),
    "decode_max_steps": _search("max_steps"),
    "prune_threshold": (Range(float), "Q below which online pruning stops a sample (when not tuned)."),
    "prune_samples": (_COUNT, "Samples per question of online pruning."),
    "tune_prune_threshold": (None, "Choose the pruning threshold on validation questions."),
    "steer_sft_steps": (_COUNT, "SFT steps that teach a copy of the policy both styles (steering)."),
    "steer_learning_rate": (_RATE, "Peak learning rate of that SFT."),
    "steer_goal_solutions": (_COUNT, "Solutions of the wanted style the steering goal is averaged over."),
}
_TRAINER_KEYS = {key: Choice(*rule) if isinstance(rule, tuple) else rule for key, rule in profile_rules().items()}
_NOTEBOOK_ORDER = list(_NOTEBOOK_KEYS)
_AFTER_TRAINING = _NOTEBOOK_ORDER.index("readout")

#: every notebook key's valid values (``None``: any value of its notebook default's type), in demo.yaml's order
PROFILE_RULES: dict[str, Any] = {
    **{key: _NOTEBOOK_KEYS[key][0] for key in _NOTEBOOK_ORDER[:_AFTER_TRAINING]},
    **_TRAINER_KEYS,  # the trainer's settings (``seed`` among them), from TrainRMConfig
    **{key: _NOTEBOOK_KEYS[key][0] for key in _NOTEBOOK_ORDER[_AFTER_TRAINING:]},
}
#: what every notebook key is: its own line, or the trainer flag's help
PROFILE_HELP: dict[str, str] = {key: _NOTEBOOK_KEYS[key][1] if key in _NOTEBOOK_KEYS else recipe_help(key) for key in PROFILE_RULES}



def profile_keys_table(params_dir: str | os.PathLike | None = None) -> str:
    """docs/profiles.md's table of the notebook keys a profile sets beside the trainer's: valid values,
    the demo's value and what each is (:data:`PROFILE_RULES`, :data:`PROFILE_HELP`, params/demo.yaml)."""
    demo = load_profile("demo", params_dir)

    def shown(value: Any) -> str:
        return "`" + yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("...").strip() + "`"

    rows = ["| key | valid values | demo | what it is |", "|---|---|---|---|"]
    for key, help_text in PROFILE_HELP.items():
        if key in _NOTEBOOK_KEYS:
            rule = PROFILE_RULES[key]
            valid = rule if rule is not None else "true or false" if isinstance(demo.get(key), bool) else "a string"
            rows.append(f"| `{key}` | {valid} | {shown(demo.get(key))} | {help_text} |")
    return "\n".join(rows)

def _heldout_ok(heldout: int, modulus: int) -> bool:
    return heldout == 0 or (modulus >= 2 and heldout <= 2 * modulus * (modulus - 1))


# Constraints between keys: (keys, holds(*values), message). Checked only when every key is set and
# each value is in its own range.
RELATIONS: tuple[tuple[tuple[str, ...], Callable[..., bool], str], ...] = (
    (("min_chain_steps", "max_chain_steps"), lambda lo, hi: lo <= hi,
     "max_chain_steps ({1}) must be >= min_chain_steps ({0})"),
    (("operand_min", "operand_max"), lambda lo, hi: lo <= hi, "operand_max ({1}) must be >= operand_min ({0})"),
    (("heldout_facts", "modulus"), _heldout_ok,
     "heldout_facts ({0}) needs digit chains (modulus >= 2) and at most the 2*m*(m-1) '+'/'-' facts mod m, got modulus {1}"),
    (("mistaught_facts", "heldout_facts", "modulus"),
     lambda mis, held, m: mis == 0 or (m >= 2 and mis + held <= 2 * m * (m - 1)),
     "mistaught_facts ({0}) needs digit chains (modulus >= 2) and at most the 2*m*(m-1) '+'/'-' facts mod m "
     "that are not held out ({1}), got modulus {2}"),
    (("rm_batch_size", "rm_micro_batch_size", "rm_processes"), lambda b, m, p: b % (m * p) == 0,
     "rm_batch_size ({0}) must be a multiple of rm_micro_batch_size x rm_processes ({1} x {2})"),
)


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
    return found
