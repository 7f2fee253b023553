"""The official README's command sequence, end to end on tiny local fixtures (local paths for the
Hub names; the wandb, GPU and flash-attn flags dropped): train the baseline and the goal-conditioned
RM, build the goal state, score both RMs into one --save_dir, print the metrics of each."""

import os
import subprocess
import sys
from pathlib import Path

import datasets
import numpy as np
import pytest

from goalrm_core.data.io import read_jsonl, write_jsonl

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def goalrm(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "goalrm_core.cli", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"goalrm {' '.join(map(str, args))}\n{done.stderr[-3000:]}"
    return done.stdout


def train_rm(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "goalrm_core.train_rm", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_seed_readme_sequence_runs_and_keeps_both_rms_apart(tmp_path, tiny_policy_dir, tiny_config):
    # the preference ranking dataset, as the official data_setup.sh leaves it: a save_to_disk folder
    pairs = [
        {
            "question": f"{a} +{b}",
            "correct": f"{a}+{b}={(a + b) % 10}\n#{(a + b) % 10}",
            "incorrect": f"{a}+{b}={(a + b + 1) % 10}\n#{(a + b + 1) % 10}",
        }
        for a in range(1, 9)
        for b in range(1, 5)
    ]
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(pairs[:28]), "test": datasets.Dataset.from_list(pairs[28:])}
    ).save_to_disk(str(tmp_path / "preference_ranking_dataset"))
    # the base model's generations in the Nemo-Skills layout
    gens = [
        {
            "question": p["question"],
            "generated_solution": s,
            "predicted_answer": int(s[-1]),
            "expected_answer": int(p["correct"][-1]),
            "is_correct": s == p["correct"],
        }
        for p in pairs[:12]
        for s in (p["correct"], p["incorrect"])
    ]
    for bench in ("gsm8k", "math"):
        write_jsonl(tmp_path / "generations" / bench / "output-greedy.jsonl", gens[::2] + gens[1::4])
        write_jsonl(tmp_path / "generations" / bench / "output-rs0.jsonl", gens)
    common = [
        "--save_steps",
        -1,
        "--logging_steps",
        1,
        "--eval_steps",
        -1,
        "--train_batch_size",
        4,
        "--micro_train_batch_size",
        1,
        "--pretrain",
        tiny_policy_dir,
        "--max_epochs",
        1,
        "--max_len",
        256,
        "--zero_stage",
        3,
        "--learning_rate",
        1e-3,
        "--dataset",
        "preference_ranking_dataset",
        "--dataset_probs",
        1.0,
        "--contrastive_loss_beta",
        0.5,
        "--unsim_samples",
        16,
    ]
    train_rm("--save_path", "./ckpt/baseline_reward_model", *common, "--reward_model_strategy", "vanilla", cwd=tmp_path)
    train_rm(
        "--save_path",
        "./ckpt/contrastive_reward_model",
        *common,
        "--reward_model_strategy",
        "contrastive",
        "--contrastive_strategy",
        "cosine",
        "--value_head_strategy",
        "linear",
        "--source_state_percentile",
        0,
        "--goal_state_percentile",
        0,
        cwd=tmp_path,
    )
    goalrm(
        "get-representation",
        "--dataset-path",
        "preference_ranking_dataset",
        "--reward-model-path",
        "ckpt/contrastive_reward_model",
        "--save-dir",
        "goal",
        cwd=tmp_path,
    )
    goal = np.load(tmp_path / "goal" / "contrastive_reward_model_goal_state_embedding.npy")
    assert (
        goal.shape == (tiny_config.hidden_size,) and np.isfinite(goal).all()
    )  # (hidden,), as the official script saves it
    evaluate = [
        "--completions_data_path",
        "generations",
        "--save_dir",
        "./examples/data/rm_eval_data",
        "--filter_threshold",
        0.0,
        "--benchmarks",
        "gsm8k",
        "math",
    ]
    goalrm("eval-rm", *evaluate, "--reward_model_path", "ckpt/baseline_reward_model", "--vanilla", cwd=tmp_path)
    goalrm(
        "eval-rm",
        *evaluate,
        "--goal_state_path",
        "goal/contrastive_reward_model_goal_state_embedding.npy",
        "--reward_model_path",
        "ckpt/contrastive_reward_model",
        cwd=tmp_path,
    )
    out = tmp_path / "examples" / "data" / "rm_eval_data"
    base = read_jsonl(out / "baseline_reward_model" / "gsm8k" / "greedy" / "output-metrics-dense.jsonl")
    goal_rm = read_jsonl(out / "contrastive_reward_model" / "gsm8k" / "greedy" / "output-metrics-dense.jsonl")
    assert len(base) == len(goal_rm) == 18 and "cosine_sim" in goal_rm[0] and "cosine_sim" not in base[0]
    assert [r["reward"] for r in base] != [r["reward"] for r in goal_rm]  # two RMs, two files: nothing overwritten
    for model, extra in (("contrastive_reward_model", []), ("baseline_reward_model", ["--vanilla"])):
        printed = goalrm(
            "metrics",
            "--model_name",
            model,
            "--eval_results_dir",
            "./examples/data/rm_eval_data",
            "--benchmarks",
            "gsm8k",
            "math",
            "--n_boot",
            50,
            *extra,
            cwd=tmp_path,
        )
        assert f"[{model}] gsm8k: greedy n=18 AUROC" in printed and f"[{model}] math" in printed
        assert ("(the official figures)" in printed) == (not extra)
