"""eval-rm in several processes (torchrun on CPU, gloo): each rank scores a shard, rank 0 merges the
shards in the input order, and the result equals one process's within float rounding."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from goalrm_core.data.io import read_jsonl, write_jsonl
from goalrm_core.data.rundir import samples_of_all
from goalrm_core.model.reward_model import RewardModel, save_reward_model
from goalrm_core.train.distributed import free_port

pytestmark = pytest.mark.deepspeed  # multi-process: run alone with -m deepspeed
ROOT = Path(__file__).resolve().parents[2]


def eval_rm(*args, processes, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if processes == 1:
        cmd = [sys.executable, "-m", "goalrm_core.cli", "eval-rm"]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(processes),
            "--master_port",
            str(free_port()),
            "-m",
            "goalrm_core.inference.scoring",
        ]
    done = subprocess.run([*cmd, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_two_processes_score_what_one_does(tmp_path, tiny_config, tokenizer):
    from transformers import AutoModel

    rm = RewardModel(AutoModel.from_config(tiny_config), "linear")
    save_reward_model(rm, tmp_path / "rm", tokenizer)
    rows = [
        {
            "question": f"{a} +{b}",
            "generated_solution": f"{a}+{b}={(a + b + k) % 10}\n#{(a + b + k) % 10}" + "x" * k,
            "is_correct": k == 0,
        }
        for a in range(1, 6)
        for b in range(1, 4)
        for k in range(2)
    ]
    write_jsonl(tmp_path / "gens" / "toy" / "greedy.jsonl", rows[::2])
    write_jsonl(tmp_path / "gens" / "toy" / "samples.jsonl", rows)  # 30 rows: the shards differ in size
    flags = [
        "--completions_data_path",
        "gens",
        "--reward_model_path",
        "rm",
        "--benchmarks",
        "toy",
        "--template",
        "toymath",
        "--vanilla",
        "--batch_size",
        4,
    ]
    eval_rm(*flags, "--save_dir", "one", processes=1, cwd=tmp_path)
    eval_rm(*flags, "--save_dir", "two", processes=2, cwd=tmp_path)
    for split, n in (("greedy", 15), ("all", 45)):  # all/: the greedy rows, then the samples (the official layout)
        one = read_jsonl(tmp_path / "one" / "rm" / "toy" / split / "output-metrics-dense.jsonl")
        two = read_jsonl(tmp_path / "two" / "rm" / "toy" / split / "output-metrics-dense.jsonl")
        assert len(one) == len(two) == n
        assert [r["generated_solution"] for r in one] == [r["generated_solution"] for r in two]  # the input order
        np.testing.assert_allclose([r["reward"] for r in two], [r["reward"] for r in one], rtol=0, atol=1e-6)
        for a, b in zip(one, two):
            np.testing.assert_allclose(b["partial_rewards"], a["partial_rewards"], rtol=0, atol=1e-6)
    assert not (tmp_path / "two" / "rm" / ".shards").exists()  # the shards go once merged
    assert (tmp_path / "two" / "rm" / "manifest.json").exists()
    # an interrupted run resumes: a shard already written is kept, not scored again
    two = samples_of_all(two)
    kept = [dict(r, reward=123.0) for r in two[1::2]]  # rank 1's rows of the sampled split, marked
    write_jsonl(tmp_path / "again" / "rm" / ".shards" / "toy" / "all" / "rank1-of-2.jsonl", kept)
    eval_rm(*flags, "--save_dir", "again", processes=2, cwd=tmp_path)
    again = samples_of_all(read_jsonl(tmp_path / "again" / "rm" / "toy" / "all" / "output-metrics-dense.jsonl"))
    assert [r["reward"] for r in again[1::2]] == [123.0] * 15 and [r["reward"] for r in again[::2]] == [
        r["reward"] for r in two[::2]
    ]
