"""The keys of the command-line profiles (``paper-math``, ``paper-hh``, ``gpu-check``, ``real-cpu``,
``real-lm``), defined once, and the check every one of them passes before a command is built.

A command-line profile is read by :mod:`goalrm_core.recipes.paper`, not by the notebooks. Its keys are of
three kinds: the trainer's settings in its ``rm:`` block under the trainer's names (``max_steps``, ``max_len``,
``bf16``: type, range and help from ``TrainRMConfig``, through ``study.recipe``) and its ``seed``, notebook keys that
mean the same here
(``run_dir``, ``rm_processes``, ``filter_threshold``, ``n_boot``: ``pipeline.profile_rules``), and the keys only
these commands read, in :data:`COMMAND_LINE_KEYS` below. Any other key is a typo and is refused, with the
keys it resembles; a value of the wrong type or out of range is refused the same way, in one line naming
the file, the key and the value.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from goalrm_core.flags import Range, did_you_mean
from goalrm_core.paths import shown_path
from goalrm_core.pipeline.profile_checks import check_ranges
from goalrm_core.pipeline.profile_files import load_profile, profile_path
from goalrm_core.pipeline.profile_rules import PROFILE_RULES
from goalrm_core.study.recipe import OLD_KEYS, TRAINER_KEYS, old_key_message
from goalrm_core.train.config import TrainRMConfig

_COUNT = Range(int, ">= 1")
_SHARE = Range(float, "(0, 1)")
_TYPES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list of names"}

#: the keys only the command lines read: (type, valid values or None, what it is)
COMMAND_LINE_KEYS: dict[str, tuple[type, Range | None, str]] = {
    # paper-math, paper-hh: where the official pipeline's steps read and write
    "ckpt_dir": (str, None, "Folder of the two RMs: `<ckpt_dir>/{baseline,contrastive}_reward_model`."),
    "completions_data_path": (
        str,
        None,
        "The policy's generations that eval-rm scores: `<benchmark>/output-greedy.jsonl`, `output-rs*.jsonl`.",
    ),
    "goal_state_dir": (str, None, "Where get-representation writes the goal state."),
    "eval_save_dir": (str, None, "Where eval-rm writes the scored generations."),
    "eval_max_len": (
        int,
        Range(int, ">= 0", note="0 = read whole"),
        "eval-rm's `--max_len` (the official eval_rm.py reads generations whole).",
    ),
    "benchmarks": (list, None, "The benchmarks scored and measured, each a folder of `completions_data_path`."),
    # gpu-check, real-cpu: a Llama with random weights, written locally
    "backbone_hidden_size": (int, _COUNT, "Hidden size of the random Llama backbone."),
    "backbone_layers": (int, _COUNT, "Layers of the backbone."),
    "backbone_heads": (int, _COUNT, "Attention heads of the backbone."),
    "backbone_intermediate_size": (
        int,
        _COUNT,
        "MLP width of the backbone (unset: Llama's rule from the hidden size).",
    ),
    "backbone_vocab_size": (int, _COUNT, "Vocabulary rows of the backbone (unset: the character tokenizer's)."),
    "backbone_max_positions": (int, _COUNT, "Positions of the backbone."),
    "n_pairs": (int, _COUNT, "ToyMath pairs the GPU check trains on."),
    "strategies": (list, None, "The RMs the GPU check trains: `vanilla`, `contrastive`."),
    # real-cpu: real data from ../shared/data
    "data_dir": (str, None, "Folder of the real data, relative to the project root (never copied into it)."),
    "hh_file": (str, None, "HH-RLHF harmless pairs (jsonl, gzip allowed) in `data_dir`."),
    "gsm8k_solutions_file": (str, None, "Model solutions of GSM8K questions, with verdicts, in `data_dir`."),
    "gsm8k_test_file": (str, None, "GSM8K test questions with answers, in `data_dir`."),
    "n_hh_pairs": (int, _COUNT, "HH-RLHF pairs drawn."),
    "hh_eval_fraction": (float, _SHARE, "Share of the HH pairs held out."),
    "hh_max_len": (int, _COUNT, "Tokens of an HH RM input at most (one per character: longer pairs are not drawn)."),
    "gsm8k_eval_fraction": (float, _SHARE, "Share of GSM8K questions held out for scoring."),
    "gsm8k_pairs_per_question": (int, _COUNT, "Preference pairs per GSM8K training question at most."),
    "gsm8k_max_len": (
        int,
        _COUNT,
        "Tokens of a GSM8K RM input at most (one per character: longer pairs are not drawn).",
    ),
    "notebooks": (
        str,
        None,
        "The folder of the profile's own stage notebooks, which `goalrm report --profile <name>` runs (real-lm: "
        "`notebooks/real-lm`).",
    ),
    # real-lm: the same data split three ways for a pretrained backbone (the rm: block's pretrain)
    "validation_fraction": (float, _SHARE, "Share of GSM8K questions and HH dialogues that choose sizes and levers."),
    "reported_fraction": (float, _SHARE, "Share of GSM8K questions and HH dialogues reported (drawn first)."),
    "n_gsm8k_pairs": (int, _COUNT, "GSM8K training pairs at most (a seeded sample of those the questions give)."),
    "report_split": (
        str,
        None,
        "The held-out split the real-lm notebooks score and report: `reported`, or `validation` while sizes and "
        "levers are chosen.",
    ),
}
#: the notebook keys a command-line profile may set, meaning the same as in a notebook profile
SHARED_NOTEBOOK_KEYS = (
    "run_dir",
    "torch_threads",
    "rm_processes",
    "filter_threshold",
    "skip_first",
    "n_boot",
    "rm_seeds",
)
_RECIPE_TYPES = {
    f.name: {"str": str, "int": int, "float": float, "bool": bool}.get(f.type)
    for f in dataclasses.fields(TrainRMConfig)
    if f.name in TRAINER_KEYS
}
_RECIPE_TYPES["run_dir"] = str


def _type_ok(expected: type, value: Any) -> bool:
    if value is None:
        return True  # unset: the command's default
    if expected in (int, float) and isinstance(value, bool):
        return False
    if expected is list:
        return isinstance(value, list) and all(isinstance(v, str) and v for v in value)
    return isinstance(value, (int, float) if expected is float else expected)


def check_command_line_profile(
    profile: Mapping[str, Any], source: str, sources: Mapping[str, str] | None = None
) -> None:
    """Raise a one-line ``ValueError`` for the first key of ``profile`` that no command line reads, or whose
    value has the wrong type or lies outside its range: ``"<source>: ..."`` (``sources[key]`` where a
    value came from elsewhere)."""
    known = {*_RECIPE_TYPES, *COMMAND_LINE_KEYS, *SHARED_NOTEBOOK_KEYS}
    for key, value in profile.items():
        where = (sources or {}).get(key, source)
        if key in OLD_KEYS:  # a key of the profiles before the rm: block: its new name
            raise ValueError(old_key_message(key, where))
        if key not in known:
            raise ValueError(f"{where}: key {key!r} is not read by the command-line profiles{did_you_mean(key, known)}")
        expected, rule = (
            COMMAND_LINE_KEYS[key][:2] if key in COMMAND_LINE_KEYS else (_RECIPE_TYPES.get(key), PROFILE_RULES.get(key))
        )
        if expected is not None and not _type_ok(expected, value):
            raise ValueError(f"{where}: key {key!r} must be {_TYPES.get(expected, expected)}, got {value!r}")
        if rule is not None and value is not None and key in COMMAND_LINE_KEYS:
            try:
                rule.check(value, key)
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
    check_ranges({k: v for k, v in profile.items() if k not in COMMAND_LINE_KEYS}, source, sources)


def command_line_profile(name: str, **changes: Any) -> dict:
    """Command-line profile ``name`` (``params/<name>.yaml``) with ``changes`` on top, checked
    (:func:`check_command_line_profile`)."""
    profile = {**load_profile(name), **changes}
    check_command_line_profile(profile, shown_path(profile_path(name)), {key: "the call's changes" for key in changes})
    return profile


def command_line_keys_table() -> str:
    """docs/profiles.md's table of the keys only the command-line profiles read (:data:`COMMAND_LINE_KEYS`)."""
    rows = ["| key | valid values | what it is |", "|---|---|---|"]
    for key, (kind, rule, text) in COMMAND_LINE_KEYS.items():
        rows.append(f"| `{key}` | {rule if rule is not None else _TYPES[kind]} | {text} |")
    return "\n".join(rows)
