"""What each key of a notebook profile may be and what it is, defined once: :data:`PROFILE_RULES` adds
what a type cannot say (each key's valid range or choices: ``sampling_temperature > 0``, ``encoding`` in
``split``/``official`` …; a trainer setting's are the trainer's own), :data:`PROFILE_HELP` says what each
key is (a trainer setting of the ``rm:`` block: its ``TrainRMConfig`` field's), and :data:`RELATIONS` holds the
constraints between keys. docs/profiles.md's table of the keys is
generated from them (:func:`profile_keys_table`). They are applied in
:mod:`~goalrm_core.pipeline.profile_checks`."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

import yaml

from goalrm_core.choices import GOAL_METHODS, READOUTS
from goalrm_core.flags import Range
from goalrm_core.inference.decode_config import DecodeConfig
from goalrm_core.pipeline.profile_files import load_profile
from goalrm_core.study.recipe import rm_help, rm_rules
from goalrm_core.study.rms import HEADLINE_SETS
from goalrm_core.tasks.toymath.problems import OPERATORS, PREFERENCE_SOURCES


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
        if not (
            isinstance(value, str) and value and set(value) <= set(self.alphabet) and len(set(value)) == len(value)
        ):
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
# are the trainer's own (``TrainRMConfig``'s fields), under the same names (the ``rm:`` block, ``study.recipe``), and
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
    "modulus": (
        Range(int, ">= 2", also=(0,), note="0 = exact results"),
        "Every result taken mod this (digit chains: 10).",
    ),
    "heldout_facts": (Range(int, ">= 0"), "'+'/'-' facts never in training (the toy-unseen benchmark asks them)."),
    "mistaught_facts": (
        Range(int, ">= 0"),
        "Facts taught wrong in every SFT solution (the paper's regime: confident errors).",
    ),
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
    "pair_samples_per_question": (
        Range(int, ">= 2", note="a pair needs two samples"),
        "Policy samples per pair question.",
    ),
    "pairs_per_question": (_COUNT, "Pairs (correct vs incorrect) per question at most."),
    "eval_fraction": (_FRACTION, "Share of pairs held out for the RMs' held-out accuracy."),
    "pair_source": (
        Choice(*PREFERENCE_SOURCES),
        "Where pairs come from: the policy's samples, a generator's slips, or slips and a confidently wrong generator.",
    ),
    "slips_per_question": (_COUNT, "One-fact slips per question (pair_source slips)."),
    "generator_extra_facts": (
        Range(int, ">= 0"),
        "Facts the confident generator gets wrong beyond the policy's mistaught ones.",
    ),
    # 02_training: how many RMs, where, and how many at once (the trainer's settings, the rm: block, follow below)
    "rm_seeds": (ListOf(Range(int, ">= 0"), distinct=True), "One RM of each kind per seed."),
    "rm_processes": (_COUNT, "Processes per RM (DeepSpeed data parallel)."),
    "rm_parallel": (_COUNT, "RMs trained at once."),
    "rm_store": (None, 'A folder that keeps RMs by their config, reused when unchanged ("": none).'),
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
    "decode_temperature": _search(
        "temperature", "Sampling temperature of decoding (the search's first step, the pruned samples)."
    ),
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
_TRAINER_KEYS = {key: Choice(*rule) if isinstance(rule, tuple) else rule for key, rule in rm_rules().items()}
_NOTEBOOK_ORDER = list(_NOTEBOOK_KEYS)
_AFTER_TRAINING = _NOTEBOOK_ORDER.index("readout")

#: every notebook key's valid values (``None``: any value of its notebook default's type), in demo.yaml's order
PROFILE_RULES: dict[str, Any] = {
    **{key: _NOTEBOOK_KEYS[key][0] for key in _NOTEBOOK_ORDER[:_AFTER_TRAINING]},
    **_TRAINER_KEYS,  # the trainer's settings (``seed`` among them), from TrainRMConfig
    **{key: _NOTEBOOK_KEYS[key][0] for key in _NOTEBOOK_ORDER[_AFTER_TRAINING:]},
}
#: what every notebook key is: its own line, or the trainer flag's help
PROFILE_HELP: dict[str, str] = {
    key: _NOTEBOOK_KEYS[key][1] if key in _NOTEBOOK_KEYS else rm_help(key) for key in PROFILE_RULES
}


def profile_keys_table(params_dir: str | os.PathLike | None = None) -> str:
    """docs/profiles.md's table of the notebook keys a profile sets beside the trainer's: valid values,
    the demo's value and what each is (:data:`PROFILE_RULES`, :data:`PROFILE_HELP`, params/demo.yaml)."""
    demo = load_profile("demo", params_dir)

    def shown(value: Any) -> str:
        return (
            "`" + yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("...").strip() + "`"
        )

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
    (
        ("min_chain_steps", "max_chain_steps"),
        lambda lo, hi: lo <= hi,
        "max_chain_steps ({1}) must be >= min_chain_steps ({0})",
    ),
    (("operand_min", "operand_max"), lambda lo, hi: lo <= hi, "operand_max ({1}) must be >= operand_min ({0})"),
    (
        ("heldout_facts", "modulus"),
        _heldout_ok,
        "heldout_facts ({0}) needs digit chains (modulus >= 2) and at most the 2*m*(m-1) '+'/'-' facts mod m, got "
        "modulus {1}",
    ),
    (
        ("mistaught_facts", "heldout_facts", "modulus"),
        lambda mis, held, m: mis == 0 or (m >= 2 and mis + held <= 2 * m * (m - 1)),
        "mistaught_facts ({0}) needs digit chains (modulus >= 2) and at most the 2*m*(m-1) '+'/'-' facts mod m "
        "that are not held out ({1}), got modulus {2}",
    ),
    (
        ("train_batch_size", "micro_train_batch_size", "rm_processes"),
        lambda b, m, p: b % (m * p) == 0,
        "rm.train_batch_size ({0}) must be a multiple of rm.micro_train_batch_size x rm_processes ({1} x {2})",
    ),
)
