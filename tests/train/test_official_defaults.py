"""The official code's defaults (``OFFICIAL_DEFAULTS``): ``--official_defaults`` and the official entry point
``examples/train_rm.py`` apply them, ``goalrm train-rm`` keeps its own; the micro-batch step unit against a
transcription of the official trainer's counter; the official held-out rows; one tiny run through the shim."""

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from goalrm_core.cli.train_rm import parse_args
from goalrm_core.data.preferences import official_eval_rows
from goalrm_core.data.rundir import train_summary_path
from goalrm_core.train.config import OFFICIAL_DEFAULTS, TrainRMConfig, parser_defaults
from goalrm_core.train.trainer import steps_due

ROOT = Path(__file__).resolve().parents[2]
BASE = ["--pretrain", "p"]


def write_jsonl(path, n):
    path.write_text(
        "".join(
            json.dumps({"prompt": f"{i} + 1", "chosen": "a" * (2 + i % 5), "rejected": "b" * (3 + i % 4)}) + "\n"
            for i in range(n)
        )
    )
    return path


def test_each_official_default_is_a_field_that_differs_and_passes_the_checks():
    fields = {f.name: f for f in dataclasses.fields(TrainRMConfig)}
    for name, entry in OFFICIAL_DEFAULTS.items():
        assert name in fields, name
        assert entry.official != fields[name].default, f"{name}: the same default needs no entry"
        assert entry.why.strip(), name
    TrainRMConfig(pretrain="p", **{name: entry.applied for name, entry in OFFICIAL_DEFAULTS.items()})


def test_official_defaults_apply_only_with_the_flag_and_given_flags_win():
    ours, official = parse_args(BASE), parse_args([*BASE, "--official_defaults"])
    for name, entry in OFFICIAL_DEFAULTS.items():
        assert getattr(official, name) == entry.applied, name
        assert getattr(ours, name) == parser_defaults()[name], name
    untouched = [
        f.name
        for f in dataclasses.fields(TrainRMConfig)
        if f.name not in OFFICIAL_DEFAULTS and f.name != "official_defaults"
    ]
    assert all(getattr(ours, n) == getattr(official, n) for n in untouched)
    given = parse_args(
        [*BASE, "--official_defaults", "--max_len", "2048", "--group_by_length", "--step_unit", "optimizer"]
    )
    assert (given.max_len, given.group_by_length, given.step_unit, given.micro_train_batch_size) == (
        2048,
        True,
        "optimizer",
        8,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--official_defaults"],
        [
            "--official_defaults",
            "--max_len",
            "2048",
            "--group_by_length",
            "--eval_source",
            "test_split",
            "--micro_train_batch_size",
            "1",
        ],
        ["--max_len", "512", "--no-group_by_length", "--step_unit", "micro_batch"],
    ],
)
def test_a_config_travels_as_a_command_line_with_either_defaults(argv):
    """The training process re-reads the config from :meth:`TrainRMConfig.to_argv`: a value equal to goalrm's
    default must still reach a run read with the official ones, and the other way round."""
    cfg = parse_args([*BASE, *argv])
    assert parse_args(cfg.to_argv()) == cfg


def official_events(total_steps, accumulation, every):
    """The optimiser steps whose weights the official trainer's events see: its counter runs over micro-batches
    from 1, an event fires when it is a multiple of ``every``, and micro-batch m's weights are those after
    optimiser step m // accumulation (the update applies at the accumulation boundary)."""
    return sorted(
        {
            m // accumulation
            for m in range(1, total_steps * accumulation + 1)
            if m % every == 0 and m // accumulation >= 1
        }
    )


def test_micro_batch_steps_fall_where_the_official_counter_puts_them():
    rng = random.Random(0)
    for _ in range(300):
        total, accumulation, every = rng.randint(1, 12), rng.randint(1, 9), rng.randint(1, 30)
        ours = [s for s in range(1, total + 1) if steps_due(s, every, accumulation, total, "micro_batch")]
        assert ours == official_events(total, accumulation, every), (total, accumulation, every)
        assert [s for s in range(1, total + 1) if steps_due(s, every, accumulation, total)] == list(
            range(every, total + 1, every)
        )


def test_official_eval_rows_are_the_first_rows_or_the_test_split(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows, notes = official_eval_rows(str(write_jsonl(tmp_path / "d.jsonl", 250)))
    assert [r["question"] for r in rows] == ["0 + 1", "1 + 1"] and "1.0%" in notes[
        0
    ]  # int(250 * 1%) = 2, in file order
    assert (
        official_eval_rows(str(write_jsonl(tmp_path / "small.jsonl", 99)))[0] == []
    )  # int(0.99) = 0, as the official code
    records = [json.loads(line) for line in write_jsonl(tmp_path / "big.jsonl", 2500).read_text().splitlines()]
    datasets.Dataset.from_list(records).save_to_disk(str(tmp_path / "single"))
    rows, notes = official_eval_rows(str(tmp_path / "single"))
    assert [r["question"] for r in rows] == ["0 + 1", "1 + 1"] and "0.1%" in notes[
        0
    ]  # a single Dataset: int(2500 * 0.1%)
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(records[:50]), "test": datasets.Dataset.from_list(records[50:53])}
    ).save_to_disk(str(tmp_path / "dict"))
    rows, notes = official_eval_rows(str(tmp_path / "dict"))
    assert [r["question"] for r in rows] == ["50 + 1", "51 + 1", "52 + 1"] and "test split" in notes[0]


def test_the_official_entry_point_trains_with_the_official_defaults(tiny_policy_dir, tmp_path):
    """examples/train_rm.py as the official scripts run it: the official defaults (paths, data order, held-out rows
    kept in training, micro-batch steps), flags given winning."""
    write_jsonl(tmp_path / "d.jsonl", 200)
    argv = [
        sys.executable,
        str(ROOT / "examples" / "train_rm.py"),
        "--pretrain",
        str(tiny_policy_dir),
        "--dataset",
        "d.jsonl",
        "--train_batch_size",
        "4",
        "--micro_train_batch_size",
        "2",
        "--max_steps",
        "3",
        "--eval_steps",
        "3",
        "--save_steps",
        "4",
        "--max_len",
        "64",
        "--zero_stage",
        "0",
        "--template",
        "hh",
        "--reward_model_strategy",
        "vanilla",
        "--contrastive_strategy",
        "cosine",
        "--value_head_strategy",
        "linear",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    rm = tmp_path / "ckpt" / "reward_model"
    args = json.loads((rm / "goalrm.json").read_text())["training_args"]
    for name, entry in OFFICIAL_DEFAULTS.items():
        if name not in ("max_len", "micro_train_batch_size"):  # given on the command line
            assert args[name] == entry.applied, name
    assert (args["max_len"], args["micro_train_batch_size"], args["official_defaults"]) == (64, 2, True)
    # accumulation 2: micro-batch 3 sees step 1's weights, 6 step 3's; the save at micro-batch 4 falls after step 2
    assert sorted(p.name for p in (tmp_path / "ckpt" / "checkpoints_rm").glob("global_step*")) == ["global_step2"]
    metrics = [json.loads(line) for line in (tmp_path / "ckpt" / "reward_model.metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in metrics if r["split"] == "eval"] == [1, 3]
    stats = json.loads(train_summary_path(rm).read_text())
    assert (stats["train_pairs"], stats["eval_pairs"]) == (200, 2)  # int(200 * 1%) held out, and trained on as well
