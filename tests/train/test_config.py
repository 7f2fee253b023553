"""The trainer's config travels as a command line: ``to_argv`` and ``from_argv`` are inverse, for every field."""

import dataclasses

import pytest

from goalrm_core.cli.train_rm import parse_args
from goalrm_core.train.config import OFFICIAL_FLAGS, TrainRMConfig

# settings valid only with others: what each needs beside it
COMPANIONS = {
    "chosen_key": {"rejected_key": "rejected"},
    "rejected_key": {"chosen_key": "chosen"},
    "prompt_key": {"chosen_key": "chosen", "rejected_key": "rejected"},
    "adam_offload": {"zero_stage": 2},
    "load_in_4bit": {"bf16": True, "lora_rank": 4},
    "feature_cache_dir": {"train_top_layers": 1},
}


def changed_value(f: dataclasses.Field):
    """A valid value of field ``f`` other than its default."""
    if f.name == "input_template":
        return "Q: {}\nA: "
    choices = f.metadata.get("choices")
    if choices:
        return next(c for c in choices if c != f.default)
    if isinstance(f.default, bool):
        return not f.default
    if isinstance(f.default, int):
        return f.default + 3
    if isinstance(f.default, float):
        return f.default + 0.125
    return f"{f.name} value"


def test_default_config_round_trips_and_writes_the_seeds_flags():
    cfg = TrainRMConfig(pretrain="policy", dataset="pairs.jsonl")
    argv = cfg.to_argv()
    assert TrainRMConfig.from_argv(argv) == cfg
    written = [a[2:] for a in argv if a.startswith("--")]
    assert written == [f.name for f in dataclasses.fields(TrainRMConfig) if f.name in written]  # in field order
    assert set(written) == set(OFFICIAL_FLAGS)  # at the defaults: every seed flag, and only those


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(TrainRMConfig)])
def test_every_field_round_trips_through_the_command_line(name):
    f = next(f for f in dataclasses.fields(TrainRMConfig) if f.name == name)
    value = changed_value(f)
    cfg = TrainRMConfig(**{"pretrain": "policy", **COMPANIONS.get(name, {}), name: value})
    assert getattr(cfg, name) == value
    argv = cfg.to_argv()
    assert argv == cfg.to_argv()  # deterministic
    back = TrainRMConfig.from_argv(argv)
    assert back == cfg and getattr(back, name) == value


def test_a_config_with_everything_changed_round_trips():
    # contrastive_loss is a shorthand that sets the strategy; --margin_loss replaces --margin; --adam_offload needs
    # ZeRO; the official save format reads the last token, so a changed reward_pool is checked on its own below;
    # --load_in_4bit needs ZeRO 0-2 and a CUDA GPU, which the command line checks (tests/train/test_load_in_4bit.py);
    # --torch_compile needs ZeRO 0-2 and no --gradient_checkpointing, --train_top_layers ZeRO 0-2 and no LoRA (their
    # own round trips below)
    fields = [
        f
        for f in dataclasses.fields(TrainRMConfig)
        if f.name
        not in (
            "contrastive_loss",
            "margin",
            "zero_stage",
            "reward_pool",
            "load_in_4bit",
            "torch_compile",
            "train_top_layers",
            "feature_cache_dir",
        )
    ]
    cfg = TrainRMConfig(**{f.name: changed_value(f) for f in fields}, zero_stage=3)
    assert TrainRMConfig.from_argv(cfg.to_argv()) == cfg
    assert parse_args(cfg.to_argv()) == cfg  # the trainer's own parser reads the same command line
    pooled = TrainRMConfig(pretrain="p", reward_pool="mean")
    assert TrainRMConfig.from_argv(pooled.to_argv()) == pooled == parse_args(pooled.to_argv())
    compiled = TrainRMConfig(pretrain="p", torch_compile=True)
    assert TrainRMConfig.from_argv(compiled.to_argv()) == compiled == parse_args(compiled.to_argv())
    for top in (
        TrainRMConfig(pretrain="p", train_top_layers=2, feature_cache="off", zero_stage=0),
        TrainRMConfig(pretrain="p", train_top_layers=1, feature_cache_dir="features"),
    ):
        assert TrainRMConfig.from_argv(top.to_argv()) == top == parse_args(top.to_argv())


@pytest.mark.parametrize("flags", [{"zero_stage": 3}, {"gradient_checkpointing": True}])
def test_torch_compile_refuses_what_breaks_its_graph(flags):
    with pytest.raises(
        ValueError, match=r"--torch_compile needs --zero_stage 0, 1 or 2 and no --gradient_checkpointing"
    ):
        TrainRMConfig(pretrain="p", torch_compile=True, **flags)


def test_booleans_are_bare_flags_and_floats_keep_their_digits():
    argv = TrainRMConfig(
        pretrain="p", bf16=True, group_by_length=False, learning_rate=9e-6, lr_warmup_ratio=1 / 3
    ).to_argv()
    assert "--bf16" in argv and "--no-group_by_length" in argv and "True" not in argv and "False" not in argv
    assert argv[argv.index("--learning_rate") + 1] == "9e-06"
    assert TrainRMConfig.from_argv(argv).lr_warmup_ratio == 1 / 3


def test_contrastive_loss_shorthand_survives_the_round_trip():
    cfg = TrainRMConfig(pretrain="p", contrastive_loss=True)
    assert cfg.contrastive and TrainRMConfig.from_argv(cfg.to_argv()) == cfg


def test_from_dict_names_unknown_flags():
    assert TrainRMConfig.from_dict({"pretrain": "p", "max_len": 64}) == TrainRMConfig(pretrain="p", max_len=64)
    with pytest.raises(ValueError, match=r"unknown train-rm argument\(s\) \['pretrian'\]; valid: pretrain, dataset"):
        TrainRMConfig.from_dict({"pretrian": "p"})


def test_bad_values_are_one_line_errors(capsys):
    with pytest.raises(SystemExit):
        TrainRMConfig.from_argv(["--pretrain", "p", "--learning_rate", "0"])
    assert "argument --learning_rate: must be a finite number > 0, got 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown value_head_strategy 'huge'"):
        TrainRMConfig(value_head_strategy="huge")


def test_every_numeric_field_declares_its_range_and_its_default_lies_in_it():
    for f in dataclasses.fields(TrainRMConfig):
        if f.type in ("int", "float"):
            assert "range" in f.metadata or "choices" in f.metadata, f"--{f.name} declares no valid range"
            assert "choices" in f.metadata or f.metadata["range"].contains(f.default), f.name


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        ("--max_steps", "-3", "must be an integer >= 0 (0 = the epochs), got -3"),
        ("--max_epochs", "0", "must be an integer >= 1, got 0"),
        ("--save_steps", "0", "must be an integer >= 1 or -1 (-1 = never), got 0"),
        ("--eval_split", "1", "must be a finite number in [0, 1), got 1"),
        ("--lr_warmup_ratio", "1.5", "must be a finite number in [0, 1], got 1.5"),
        ("--sim_samples", "0", "must be an integer >= 1, got 0"),
        ("--goal_state_percentile", "nan", "must be a finite number in [0, 1), got nan"),
        ("--seed", "-1", "must be an integer >= 0, got -1"),
        ("--max_len", "2.5", "must be an integer, got '2.5'"),
    ],
)
def test_a_number_outside_its_range_names_flag_value_and_range(capsys, flag, value, expected):
    with pytest.raises(SystemExit) as info:
        TrainRMConfig.from_argv(["--pretrain", "p", flag, value])
    assert info.value.code == 2
    assert f"error: argument {flag}: {expected}" in capsys.readouterr().err
    if expected.endswith(f"got {value}"):  # the Python API refuses the same value in the same words
        with pytest.raises(ValueError, match=f"^{flag} must be "):
            TrainRMConfig(**{"pretrain": "p", flag[2:]: float(value) if "." in value or value == "nan" else int(value)})
