import copy
import json

import numpy as np
import pytest
import torch
from transformers import AutoModel

from goalrm_core.cli.eval_rm import main as eval_rm_main
from goalrm_core.cli.get_representation import main as get_representation_main
from goalrm_core.data.io import ArtifactError, read_jsonl, write_jsonl
from goalrm_core.inference.goal_state import GOAL_METHODS, check_goal_state, goal_state_from_pairs
from goalrm_core.inference.scoring import score_generations
from goalrm_core.model.reward_model import RewardModel, save_reward_model
from goalrm_core.model.templates import apply_template

ROWS = [
    {"question": "1 +2", "generated_solution": "1+2=3\n#3", "is_correct": True},
    {"question": "4 *5 -1", "generated_solution": "4*5=20\n20-1=19\n#19", "is_correct": True},
    {"question": "9 -3", "generated_solution": "9-3=5\n#5", "is_correct": False},
    {"question": "2 +2 +2 +2", "generated_solution": "2+2=4\n4+2=6\n6+2=9\n#9", "is_correct": False},
    {"question": "7", "generated_solution": "#7", "is_correct": True},
]


@pytest.fixture(scope="module")
def rm(tiny_config):
    torch.manual_seed(0)
    return RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear").eval()


def test_bucketed_and_batch1_scoring_agree(rm, tokenizer):
    goal = torch.randn(rm.config.hidden_size)
    batched = score_generations(
        rm, tokenizer, ROWS, "toymath", goal, batch_size=4, progress=False, encoding="split", readout="eos"
    )
    single = score_generations(
        rm,
        tokenizer,
        ROWS,
        "toymath",
        goal,
        batch_size=1,
        bucket=False,
        progress=False,
        encoding="split",
        readout="eos",
    )
    for a, b, row in zip(batched, single, ROWS):
        assert a["question"] == row["question"]
        assert a["num_actions"] == len(row["generated_solution"]) + 2  # " " and EOS
        assert len(a["partial_rewards"]) == len(a["cosine_sim"]) == a["num_actions"]
        assert a["reward"] == pytest.approx(b["reward"], abs=1e-5)
        np.testing.assert_allclose(a["partial_rewards"], b["partial_rewards"], atol=1e-5)
        np.testing.assert_allclose(a["cosine_sim"], b["cosine_sim"], atol=1e-5)
        assert a["partial_rewards"][-1] == pytest.approx(a["reward"], abs=1e-6)


def test_a_mean_pooled_rm_is_scored_as_the_mean_of_its_partial_rewards(rm, tokenizer):
    """reward_pool mean: every reader gets the response mean, whatever the batch (padding) around a row."""
    pooled = copy.deepcopy(rm)
    pooled.reward_pool = "mean"
    goal = torch.randn(rm.config.hidden_size)
    for batch_size in (1, 4):
        scored = score_generations(
            pooled,
            tokenizer,
            ROWS,
            "toymath",
            goal,
            batch_size=batch_size,
            progress=False,
            encoding="split",
            readout="eos",
        )
        for row in scored:
            assert row["reward"] == pytest.approx(float(np.mean(row["partial_rewards"])), abs=1e-5)


def test_goal_state_checks():
    assert check_goal_state(np.ones((1, 4)), 4).shape == (4,)
    with pytest.raises(ValueError, match=r"shape \(1, 3\).*hidden size is 4"):
        check_goal_state(np.ones((1, 3)), 4)
    with pytest.raises(ValueError, match="NaN or inf"):
        check_goal_state(np.array([[1.0, np.nan, 0.0, 0.0]]), 4)


@pytest.mark.parametrize("method", GOAL_METHODS)
def test_goal_methods_give_one_hidden_vector(rm, tokenizer, method):
    pairs = [{"question": r["question"], "correct": r["generated_solution"]} for r in ROWS]
    goal = goal_state_from_pairs(rm, tokenizer, pairs, "toymath", method, encoding="split", readout="eos")
    assert goal.shape == (1, rm.config.hidden_size) and np.isfinite(goal).all()


def test_mean_last_goal_is_the_mean_of_last_states(rm, tokenizer):
    pairs = [{"question": r["question"], "correct": r["generated_solution"]} for r in ROWS[:2]]
    goal = goal_state_from_pairs(rm, tokenizer, pairs, "toymath", encoding="split", readout="eos")
    singles = [goal_state_from_pairs(rm, tokenizer, [p], "toymath", encoding="split", readout="eos") for p in pairs]
    np.testing.assert_allclose(goal, (singles[0] + singles[1]) / 2, atol=1e-5)


def test_cli_in_the_seed_layout(tmp_path, rm, tokenizer):
    rm_path = save_reward_model(rm, tmp_path / "rm", tokenizer)
    gens = tmp_path / "gens"
    write_jsonl(gens / "toy-id" / "greedy.jsonl", ROWS)
    write_jsonl(gens / "toy-id" / "samples.jsonl", ROWS * 2)
    write_jsonl(
        tmp_path / "pairs.jsonl",
        [{"question": r["question"], "correct": r["generated_solution"], "incorrect": "x"} for r in ROWS],
    )
    assert (
        get_representation_main(
            [
                "--dataset-path",
                str(tmp_path / "pairs.jsonl"),
                "--reward-model-path",
                str(rm_path),
                "--save-dir",
                str(tmp_path / "rep"),
                "--template",
                "toymath",
            ]
        )
        == 0
    )
    goal = np.load(tmp_path / "rep" / "goal_state.npy")
    assert goal.shape == (1, rm.config.hidden_size)
    args = [
        "--completions_data_path",
        str(gens),
        "--reward_model_path",
        str(rm_path),
        "--save_dir",
        str(tmp_path / "eval"),
        "--filter_threshold",
        "0.0",
        "--benchmarks",
        "toy-id",
        "--template",
        "toymath",
    ]
    assert eval_rm_main(args + ["--goal_state_path", str(tmp_path / "rep" / "goal_state.npy")]) == 0
    greedy = read_jsonl(tmp_path / "eval" / "rm" / "toy-id" / "greedy" / "output-metrics-dense.jsonl")
    assert len(greedy) == 5 and "cosine_sim" in greedy[0]
    assert (
        len(read_jsonl(tmp_path / "eval" / "rm" / "toy-id" / "all" / "output-metrics-dense.jsonl")) == 15
    )  # the official layout: greedy + samples
    # --filter_threshold is the metrics step's (as in the official code's eval_rm.py): recorded, never applied to the
    # scores
    settings = json.loads((tmp_path / "eval" / "rm" / "eval_rm.json").read_text())
    assert settings["filter_threshold"] == 0.0 and "goalrm metrics" in settings["filter_threshold_applied_by"]
    assert settings["scored"] == {"toy-id": {"greedy": 5, "all": 10}} and settings["template"] == "toymath"
    strict = [a if a != str(tmp_path / "eval") else str(tmp_path / "strict") for a in args]
    strict[strict.index("--filter_threshold") + 1] = "0.9"
    assert eval_rm_main(strict + ["--goal_state_path", str(tmp_path / "rep" / "goal_state.npy")]) == 0
    assert json.loads((tmp_path / "strict" / "rm" / "eval_rm.json").read_text())["filter_threshold"] == 0.9
    assert read_jsonl(tmp_path / "strict" / "rm" / "toy-id" / "all" / "output-metrics-dense.jsonl") == read_jsonl(
        tmp_path / "eval" / "rm" / "toy-id" / "all" / "output-metrics-dense.jsonl"
    )
    assert eval_rm_main(args[:-2] + ["--template", "toymath", "--vanilla", "--save_dir", str(tmp_path / "van")]) == 0
    assert (
        "cosine_sim" not in read_jsonl(tmp_path / "van" / "rm" / "toy-id" / "greedy" / "output-metrics-dense.jsonl")[0]
    )
    with pytest.raises(ArtifactError, match="benchmarks in .*: toy-id"):
        eval_rm_main(args[:-3] + ["gsm8k", "--template", "toymath", "--vanilla"])
    bad_goal = tmp_path / "bad.npy"
    np.save(bad_goal, np.ones((1, 7)))
    with pytest.raises(ValueError, match="hidden size"):
        eval_rm_main(args + ["--goal_state_path", str(bad_goal)])


def test_goal_rows_mean_averages_the_rows_as_the_official_eval_rm(tmp_path, rm, tokenizer):
    rows = np.array([[1.0, 2.0, 0.0, -4.0], [3.0, 0.0, 0.0, 2.0]], dtype=np.float32)
    with pytest.raises(ValueError, match=r"2 rows \(2, 4\).*--goal_rows mean"):
        check_goal_state(rows, 4)  # the default: one goal per file
    assert check_goal_state(rows, 4, rows="mean").tolist() == [2.0, 1.0, 0.0, -1.0]  # (row 0 + row 1) / 2 by hand
    # through eval-rm: a two-row file averaged gives the Q-values of a one-row file holding that mean
    rm_path = save_reward_model(rm, tmp_path / "rm", tokenizer)
    write_jsonl(tmp_path / "gens" / "toy-id" / "greedy.jsonl", ROWS)
    h = rm.config.hidden_size
    two = np.stack([np.linspace(-1, 1, h), np.linspace(2, 0, h)]).astype(np.float32)
    np.save(tmp_path / "two.npy", two)
    np.save(tmp_path / "mean.npy", ((two[0] + two[1]) / 2)[None])
    base = [
        "--completions_data_path",
        str(tmp_path / "gens"),
        "--reward_model_path",
        str(rm_path),
        "--benchmarks",
        "toy-id",
        "--template",
        "toymath",
    ]
    assert (
        eval_rm_main(
            base
            + ["--save_dir", str(tmp_path / "a"), "--goal_state_path", str(tmp_path / "two.npy"), "--goal_rows", "mean"]
        )
        == 0
    )
    assert (
        eval_rm_main(base + ["--save_dir", str(tmp_path / "b"), "--goal_state_path", str(tmp_path / "mean.npy")]) == 0
    )
    a, b = (read_jsonl(tmp_path / d / "rm" / "toy-id" / "greedy" / "output-metrics-dense.jsonl") for d in "ab")
    for x, y in zip(a, b):
        np.testing.assert_allclose(x["cosine_sim"], y["cosine_sim"], atol=1e-6)
    assert json.loads((tmp_path / "a" / "rm" / "eval_rm.json").read_text())["goal_rows"] == "mean"
    with pytest.raises(ValueError, match="--goal_rows mean"):
        eval_rm_main(base + ["--save_dir", str(tmp_path / "c"), "--goal_state_path", str(tmp_path / "two.npy")])


def test_max_len_0_reads_every_generation_whole(tmp_path, rm, tokenizer):
    long_row = {"question": "1 +1", "generated_solution": "1+1=2\n" * 20 + "#2", "is_correct": True}
    rm_path = save_reward_model(rm, tmp_path / "rm", tokenizer)
    write_jsonl(tmp_path / "gens" / "toy-id" / "greedy.jsonl", [long_row])
    base = [
        "--completions_data_path",
        str(tmp_path / "gens"),
        "--reward_model_path",
        str(rm_path),
        "--benchmarks",
        "toy-id",
        "--template",
        "toymath",
        "--vanilla",
    ]
    read = lambda d: read_jsonl(tmp_path / d / "rm" / "toy-id" / "greedy" / "output-metrics-dense.jsonl")[0]  # noqa: E731
    # by hand: the official scoring reads prompt + response in one tokenizer call (BOS first), one token per character
    # here
    whole = len(tokenizer("1 +1\n" + long_row["generated_solution"])["input_ids"])
    assert eval_rm_main(base + ["--save_dir", str(tmp_path / "whole"), "--max_len", "0"]) == 0
    assert eval_rm_main(base + ["--save_dir", str(tmp_path / "wide"), "--max_len", str(whole)]) == 0
    assert eval_rm_main(base + ["--save_dir", str(tmp_path / "cut"), "--max_len", "40"]) == 0
    assert read("whole")["num_actions"] == read("wide")["num_actions"] == len(long_row["generated_solution"]) == 122
    assert read("whole")["reward"] == read("wide")["reward"]
    # cut from the right: the response's values end at the cut, and only response tokens count (issue 23: the
    # official code's last 40 positions would include the prompt's); the row says it was cut
    prompt_len = len(tokenizer(apply_template("toymath", "1 +1"))["input_ids"])
    assert read("cut")["num_actions"] == 40 - prompt_len and read("cut")["truncated"] and not read("whole")["truncated"]
    assert json.loads((tmp_path / "whole" / "rm" / "eval_rm.json").read_text())["max_len"] == 0
