"""eval-rm killed at random points (SIGKILL after N generations): its folder is never read as
finished, and a re-run completes with the numbers of an uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import LlamaModel

from goalrm_core import cli
from goalrm_core.data import manifest
from goalrm_core.data.io import lock_path, read_jsonl, write_jsonl
from goalrm_core.model.reward_model import RewardModel, save_reward_model

TREE = Path(__file__).resolve().parents[2]
FAULTS = TREE / "tests" / "faults.py"  # runs a command line with a fault put in
GREEDY_ROWS = 6  # then 6 sampled rows: eval-rm scores greedy first, and writes each split when it is scored


def generation(a: int, b: int, answer: int) -> dict:
    return {
        "question": f"{a} +{b}",
        "generated_solution": f"{a}+{b}={answer}\n#{answer}",
        "predicted_answer": answer,
        "expected_answer": (a + b) % 10,
        "is_correct": answer == (a + b) % 10,
    }


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_config, tokenizer):
    root = tmp_path_factory.mktemp("killed-eval")
    torch.manual_seed(0)
    rm = save_reward_model(RewardModel(LlamaModel(tiny_config)).eval(), root / "rm", tokenizer)
    write_jsonl(
        root / "gens" / "toy" / "greedy.jsonl", [generation(a, 2, (a + 2 + a % 2) % 10) for a in range(GREEDY_ROWS)]
    )
    write_jsonl(
        root / "gens" / "toy" / "samples.jsonl", [generation(a, 3, (a + 3 + k) % 10) for a in range(3) for k in (0, 1)]
    )
    np.save(root / "goal.npy", np.random.default_rng(0).normal(size=(1, tiny_config.hidden_size)).astype(np.float32))
    args = [
        "--completions_data_path",
        str(root / "gens"),
        "--reward_model_path",
        str(rm),
        "--goal_state_path",
        str(root / "goal.npy"),
        "--benchmarks",
        "toy",
        "--template",
        "toymath",
        "--batch_size",
        "2",
    ]
    assert cli.main(["eval-rm", *args, "--save_dir", str(root / "uninterrupted")]) == 0
    return args, root / "uninterrupted" / "rm"


def metrics(save_dir, capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(
        ["metrics", "--model_name", "rm", "--eval_results_dir", str(save_dir), "--benchmarks", "toy", "--n_boot", "10"]
    )
    return code, capsys.readouterr().err


@pytest.mark.bad_inputs
@pytest.mark.filterwarnings("ignore:Precision loss occurred")  # scipy's t-test on a handful of near-equal Q-values
@pytest.mark.parametrize("n, earlier_run", [(GREEDY_ROWS, False), (9, False), (9, True), (12, True)])
def test_killed_eval_rm_is_refused_and_a_rerun_equals_an_uninterrupted_run(setup, tmp_path, capsys, n, earlier_run):
    args, uninterrupted = setup
    save_dir = tmp_path / "eval"
    if earlier_run:  # a finished run of other settings in the same folder, which the killed run was replacing
        assert cli.main(["eval-rm", *args, "--save_dir", str(save_dir), "--max_samples", "2"]) == 0
        assert metrics(save_dir, capsys)[0] == 0
    env = {**os.environ, "PYTHONPATH": str(TREE)}
    killed = subprocess.run(
        [sys.executable, str(FAULTS), "kill_after_rows", str(n), "eval-rm", *args, "--save_dir", str(save_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]

    code, err = metrics(save_dir, capsys)
    assert code == 2
    if n > GREEDY_ROWS or earlier_run:  # it had started writing: the folder says it is unfinished
        assert (save_dir / "rm" / manifest.IN_PROGRESS).exists() and not (save_dir / "rm" / manifest.MANIFEST).exists()
        assert "eval-rm output folder is incomplete (an interrupted or running `goalrm eval-rm" in err
    else:  # killed before its first file: nothing was written but the writer's lock, which SIGKILL leaves
        assert sorted(p.name for p in save_dir.iterdir()) == [lock_path(save_dir / "rm").name]
        assert "is missing" in err
    assert lock_path(save_dir / "rm").is_file()  # stale now: its PID is gone

    capsys.readouterr()
    assert cli.main(["eval-rm", *args, "--save_dir", str(save_dir)]) == 0  # the rerun takes the stale lock over
    assert "a stale lock of a run that is gone" in capsys.readouterr().err
    assert not lock_path(save_dir / "rm").exists()
    assert metrics(save_dir, capsys)[0] == 0
    rerun = save_dir / "rm"
    assert (
        json.loads((rerun / manifest.MANIFEST).read_text())["outputs"].keys()
        == json.loads((uninterrupted / manifest.MANIFEST).read_text())["outputs"].keys()
    )
    for split in ("greedy", "all"):
        got = read_jsonl(rerun / "toy" / split / "output-metrics-dense.jsonl")
        want = read_jsonl(uninterrupted / "toy" / split / "output-metrics-dense.jsonl")
        assert [r["generated_solution"] for r in got] == [r["generated_solution"] for r in want]
        for key in ("reward", "partial_rewards", "cosine_sim"):
            np.testing.assert_allclose(
                np.hstack([r[key] for r in got]), np.hstack([r[key] for r in want]), rtol=0, atol=1e-6
            )
