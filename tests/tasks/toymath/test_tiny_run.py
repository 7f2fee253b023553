"""``goalrm tiny-run`` / ``make_tiny_run``: a tiny run folder in the run-directory layout that ``goalrm train-rm``
trains one step on, the same bytes for the same seed, and a target that is not new or empty refused in one line
with nothing written (the folder is written under a temporary name and renamed into place)."""

import json
import os
import shlex
import subprocess
import sys

import pytest
import torch

from goalrm_core import cli
from goalrm_core.data.io import read_jsonl
from goalrm_core.data.rundir import RunDir
from goalrm_core.paths import project_root
from goalrm_core.tasks.toymath.grading import is_correct
from goalrm_core.tasks.toymath.problems import problem_from_question
from goalrm_core.tasks.toymath.tiny_run import EVAL_PAIRS, TRAIN_PAIRS, make_tiny_run


def files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_folder_is_a_policy_and_pairs_in_the_run_layout(tiny_run):
    run = tiny_run
    assert (run.policy / "config.json").is_file() and (run.policy / "model.safetensors").is_file()
    assert (run.policy / "tokenizer.json").is_file()
    train, held_out = read_jsonl(run.preference_pairs("train")), read_jsonl(run.preference_pairs("eval"))
    assert (len(train), len(held_out)) == (TRAIN_PAIRS, EVAL_PAIRS)
    for pair in train + held_out:  # a right and a wrong solution of a digit chain, the first wrong character named
        answer = problem_from_question(pair["question"], modulus=10).answer
        assert is_correct(pair["correct"], answer) and not is_correct(pair["incorrect"], answer)
        first = pair["first_error_char"]
        assert (
            pair["correct"][:first] == pair["incorrect"][:first] and pair["correct"][first] != pair["incorrect"][first]
        )
    assert sorted(p.name for p in run.root.iterdir()) == ["data"]


def test_the_same_seed_makes_the_same_bytes_and_leaves_the_callers_random_state(tmp_path, tiny_run):
    state = torch.random.get_rng_state()
    again = make_tiny_run(tmp_path / "again", seed=0)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert files(again.root) == files(tiny_run.root)
    other = files(make_tiny_run(tmp_path / "other", seed=1).root)
    same = files(tiny_run.root)
    for name in ("data/policy/model.safetensors", "data/preference/train.jsonl", "data/preference/eval.jsonl"):
        assert other[name] != same[name], name
    assert other["data/policy/config.json"] == same["data/policy/config.json"]


@pytest.mark.parametrize("what", ["a non-empty folder", "a file"])
def test_a_target_that_is_not_new_or_empty_is_refused_in_one_line(tmp_path, capsys, what):
    target = tmp_path / "run"
    if what == "a file":
        target.write_text("mine\n")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine\n")
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(ValueError) as refused:
        make_tiny_run(target)
    assert "\n" not in str(refused.value) and str(target) in str(refused.value)
    assert cli.main(["tiny-run", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"goalrm tiny-run: error: {target} ") and "new or empty folder" in err and "\n" not in err, (
        err
    )
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, no temporary folder left


def test_an_empty_folder_is_filled_and_a_failure_leaves_nothing(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert make_tiny_run(empty).root == empty and (RunDir(empty).preference_pairs("eval")).is_file()

    import goalrm_core.data.io

    def broken(path, rows):
        raise OSError("disk full")

    monkeypatch.setattr(goalrm_core.data.io, "write_jsonl", broken)
    with pytest.raises(OSError, match="disk full"):
        make_tiny_run(tmp_path / "half")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # neither the folder nor its temporary twin


def test_train_rm_trains_one_step_on_it_with_the_command_tiny_run_prints(tmp_path, capsys):
    """The command `goalrm tiny-run` prints, run as printed (with a contrastive RM's two flags added)."""
    folder = tmp_path / "tiny"
    assert cli.main(["tiny-run", str(folder), "--seed", "3"]) == 0
    printed = capsys.readouterr().out.splitlines()
    command = shlex.split(next(line for line in printed if line.startswith("one training step: ")).split(": ", 1)[1])
    assert command[:2] == ["goalrm", "train-rm"]
    argv = [
        *command[1:],
        "--zero_stage",
        "0",
        "--reward_model_strategy",
        "contrastive",
        "--contrastive_strategy",
        "cosine_avg",
    ]
    env = {**os.environ, "PYTHONPATH": str(project_root()), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "goalrm_core.cli", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((RunDir(folder).model("tiny") / "train_summary.json").read_text())
    assert (summary["steps"], summary["strategy"], summary["contrastive_strategy"]) == (1, "contrastive", "cosine_avg")
    assert (summary["train_pairs"], summary["eval_pairs"]) == (TRAIN_PAIRS, EVAL_PAIRS)
