"""Bad input must never become a number: labels, numeric flags, NaN weights and rewards, scored-row
shapes and degenerate goal states are rejected with an error naming where they came from."""

import copy
import importlib
import json

import numpy as np
import pytest
import torch
from huggingface_hub import save_torch_state_dict
from transformers import AutoModel

from goalrm_core import cli
from goalrm_core.cli import metrics as metrics_cli
from goalrm_core.cli.eval_rm import main as eval_rm_main
from goalrm_core.cli.get_representation import main as get_representation_main
from goalrm_core.cli.train_rm import parse_args as train_rm_args
from goalrm_core.data.adapters import read_generation_folder
from goalrm_core.data.io import ArtifactError, atomic_write_json, parse_label, read_jsonl, write_jsonl
from goalrm_core.evaluation import metrics
from goalrm_core.evaluation import tables as evaluation
from goalrm_core.inference.goal_state import check_goal_state, goal_state_from_pairs
from goalrm_core.inference.scoring import eval_rm
from goalrm_core.model.reward_model import RewardModel, load_reward_model, save_reward_model

GENS = [
    {
        "question": "1 +2",
        "generated_solution": "1+2=3\n#3",
        "predicted_answer": 3,
        "expected_answer": 3,
        "is_correct": True,
    },
    {
        "question": "9 -3",
        "generated_solution": "9-3=5\n#5",
        "predicted_answer": 5,
        "expected_answer": 6,
        "is_correct": False,
    },
    {"question": "7", "generated_solution": "#7", "predicted_answer": 7, "expected_answer": 7, "is_correct": True},
]


def scored(q, correct, n=4, **over):
    row = {
        "question": q,
        "is_correct": correct,
        "reward": 1.0 if correct else -1.0,
        "num_actions": n,
        "partial_rewards": [0.1] * n,
        "cosine_sim": [0.5] * n,
        "predicted_answer": 1 if correct else 2,
        "generated_solution": "x" * (n - 2),
    }
    return {**row, **over}


@pytest.fixture(scope="module")
def rm(tiny_config):
    torch.manual_seed(0)
    return RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear").eval()


@pytest.fixture
def layout(tmp_path, rm, tokenizer):
    """An RM, a goal state and one benchmark of generations, as eval-rm reads them."""
    rm_path = save_reward_model(rm, tmp_path / "rm", tokenizer)
    write_jsonl(tmp_path / "gens" / "toy" / "greedy.jsonl", GENS)
    goal = tmp_path / "goal_state.npy"
    np.save(goal, np.ones((1, rm.config.hidden_size), dtype=np.float32))
    args = [
        "--completions_data_path",
        str(tmp_path / "gens"),
        "--reward_model_path",
        str(rm_path),
        "--save_dir",
        str(tmp_path / "eval"),
        "--benchmarks",
        "toy",
        "--template",
        "toymath",
        "--goal_state_path",
        str(goal),
    ]
    return tmp_path, rm_path, args


def cli_error(capsys, run, argv) -> str:
    """Run a command expected to stop at argument parsing; return its one error line."""
    with pytest.raises(SystemExit) as exit_info:
        run(argv)
    assert exit_info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1
    return errors[0]


# ------------------------------------------------------------------- 1. is_correct labels


@pytest.mark.parametrize(
    "value, shown", [("false", "'false'"), (None, "None"), (2, "2"), (1.0, "1.0"), ("True", "'True'")]
)
def test_a_label_that_is_not_a_boolean_names_file_line_and_value(tmp_path, value, shown):
    rows = [scored("q1", True), scored("q2", value), scored("q3", False)]
    write_jsonl(tmp_path / "rm" / "toy" / "greedy" / "scored.jsonl", rows)
    message = f"scored.jsonl:2: field 'is_correct' must be true/false (or 0/1), got {shown}"
    with pytest.raises(ArtifactError) as err:
        evaluation.read_scored(tmp_path / "rm", "toy")
    assert str(err.value).endswith(message) and "\n" not in str(err.value)


def test_labels_0_and_1_are_read_as_booleans(tmp_path):
    write_jsonl(tmp_path / "rm" / "toy" / "greedy" / "scored.jsonl", [scored("q1", 1), scored("q2", 0)])
    rows = evaluation.read_scored(tmp_path / "rm", "toy")
    assert [r["is_correct"] for r in rows] == [True, False]
    assert all(type(r["is_correct"]) is bool for r in rows)


def test_every_reader_of_is_correct_is_strict(tmp_path):
    rows = [scored("q1", True), scored("q1", "false")]
    with pytest.raises(ValueError, match=r"row 1: field 'is_correct' must be true/false \(or 0/1\), got 'false'"):
        evaluation.labels(rows)
    with pytest.raises(ValueError, match=r"question 0, generation 1: field 'is_correct'"):
        metrics.q_filtered_majority_vote([rows], threshold=0.0, skip_first=0)
    with pytest.raises(ValueError, match=r"question 0, generation 1: field 'is_correct'"):
        metrics.best_of_n_accuracy([[scored("q1", True, reward=0.0), scored("q1", None, reward=1.0)]], "reward")
    write_jsonl(tmp_path / "gens" / "toy" / "greedy.jsonl", [GENS[0], dict(GENS[1], is_correct="false")])
    with pytest.raises(ArtifactError, match=r"greedy\.jsonl:2: field 'is_correct' must be true/false"):
        read_generation_folder(tmp_path / "gens", "toy")
    assert parse_label(np.bool_(True)) is True and parse_label(np.int64(0)) is False


def test_eval_rm_rejects_a_string_label_before_scoring(layout):
    tmp_path, _, args = layout
    write_jsonl(tmp_path / "gens" / "toy" / "greedy.jsonl", [GENS[0], GENS[1], dict(GENS[2], is_correct="false")])
    with pytest.raises(
        ArtifactError, match=r"greedy\.jsonl:3: field 'is_correct' must be true/false \(or 0/1\), got 'false'"
    ):
        eval_rm_main(args)
    assert not (tmp_path / "eval").exists()


# ------------------------------------------------------------------- 2. batch size and sample counts


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        ("--batch_size", "-1", "argument --batch_size: must be an integer >= 1, got -1"),
        ("--batch_size", "0", "argument --batch_size: must be an integer >= 1, got 0"),
        ("--max_samples", "-1", "argument --max_samples: must be an integer >= 0, got -1"),
        ("--max_len", "-1", "argument --max_len: must be an integer >= 0, got -1"),  # 0: nothing cut
    ],
)
def test_eval_rm_rejects_bad_counts_before_any_work(layout, capsys, flag, value, expected):
    tmp_path, _, args = layout
    assert cli_error(capsys, lambda a: cli.main(["eval-rm", *a]), args + [flag, value]).endswith(expected)
    assert not (tmp_path / "eval").exists()


def test_eval_rm_function_rejects_bad_counts(layout):
    tmp_path, rm_path, _ = layout
    for bad in ({"batch_size": -1}, {"batch_size": 0}, {"max_samples": -1}):
        with pytest.raises(ValueError, match=f"--{next(iter(bad))} must be an integer >= "):
            eval_rm(
                tmp_path / "gens",
                rm_path,
                tmp_path / "eval",
                ["toy"],
                tmp_path / "goal_state.npy",
                template="toymath",
                encoding="split",
                readout="eos",
                **bad,
            )
    assert not (tmp_path / "eval").exists()


def test_get_representation_rejects_bad_batch_size(layout, capsys, rm, tokenizer):
    tmp_path, rm_path, _ = layout
    write_jsonl(
        tmp_path / "pairs.jsonl", [{"question": g["question"], "correct": g["generated_solution"]} for g in GENS]
    )
    argv = [
        "--dataset-path",
        str(tmp_path / "pairs.jsonl"),
        "--reward-model-path",
        str(rm_path),
        "--save-dir",
        str(tmp_path / "rep"),
        "--template",
        "toymath",
    ]
    for value in ("-1", "0"):
        line = cli_error(capsys, get_representation_main, argv + ["--batch_size", value])
        assert line.endswith(f"argument --batch_size: must be an integer >= 1, got {value}")
    assert not (tmp_path / "rep").exists()
    pairs = read_jsonl(tmp_path / "pairs.jsonl")
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got -1"):
        goal_state_from_pairs(rm, tokenizer, pairs, "toymath", batch_size=-1, encoding="split", readout="eos")


# --------------------------------------------------------------- 3. NaN and inf: learning rates, weights, rewards, JSON


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        (
            "--head_learning_rate",
            "nan",
            "argument --head_learning_rate: must be a finite number >= 0 (0 = same as --learning_rate), got nan",
        ),
        ("--learning_rate", "inf", "argument --learning_rate: must be a finite number > 0, got inf"),
        ("--learning_rate", "-1e-5", "argument --learning_rate: must be a finite number > 0, got -1e-5"),
        ("--head_learning_rate", "-0.1", "argument --head_learning_rate: must be a finite number >= 0"),
        ("--max_norm", "nan", "argument --max_norm: must be a finite number >= 0 (0 = no clipping), got nan"),
    ],
)
def test_train_rm_rejects_non_finite_and_negative_learning_rates(capsys, flag, value, expected):
    assert expected in cli_error(capsys, train_rm_args, ["--pretrain", "p", f"{flag}={value}"])


def test_nan_weights_are_never_saved_and_never_loaded(tmp_path, rm, tokenizer):
    broken = copy.deepcopy(rm)
    with torch.no_grad():
        broken.score.weight[0, 0] = float("nan")
    with pytest.raises(
        ValueError,
        match=r"refusing to save the reward model to .*rm: NaN or inf weights in 1 tensor\(s\): score.weight",
    ):
        save_reward_model(broken, tmp_path / "rm", tokenizer)
    assert list(tmp_path.iterdir()) == []  # no folder, no temp dir
    # an earlier good RM at the same path is left as it was
    good = save_reward_model(rm, tmp_path / "rm", tokenizer)
    before = sorted(p.name for p in good.iterdir())
    with pytest.raises(ValueError, match="NaN or inf weights"):
        save_reward_model(broken, good, tokenizer)
    assert sorted(p.name for p in good.iterdir()) == before and sorted(p.name for p in tmp_path.iterdir()) == ["rm"]
    # weights damaged after saving: loading refuses them
    weights = {k: v.contiguous() for k, v in broken.state_dict().items()}
    for f in good.glob("*.safetensors"):
        f.unlink()
    save_torch_state_dict(weights, good)
    with pytest.raises(
        ArtifactError, match=r"rm: NaN or inf weights in 1 tensor\(s\): score.weight; the reward model is broken"
    ):
        load_reward_model(good)


def test_eval_rm_refuses_inf_rewards_naming_the_rm(tmp_path, rm, tokenizer):
    overflowing = copy.deepcopy(rm)
    with torch.no_grad():
        overflowing.score.weight.fill_(3e38)  # finite weights, but the reward overflows float32
    rm_path = save_reward_model(overflowing, tmp_path / "huge-rm", tokenizer)
    write_jsonl(tmp_path / "gens" / "toy" / "greedy.jsonl", GENS)
    args = [
        "--completions_data_path",
        str(tmp_path / "gens"),
        "--reward_model_path",
        str(rm_path),
        "--save_dir",
        str(tmp_path / "eval"),
        "--benchmarks",
        "toy",
        "--template",
        "toymath",
        "--vanilla",
    ]
    with pytest.raises(ValueError, match=r"reward model .*huge-rm, toy/greedy: generation 1 got a NaN or inf reward"):
        eval_rm_main(args)
    assert not (tmp_path / "eval").exists()


def test_json_writers_never_write_nan(tmp_path):
    with pytest.raises(ArtifactError, match=r"gens\.jsonl: row 2 holds NaN or inf"):
        write_jsonl(tmp_path / "gens.jsonl", [{"reward": 1.0}, {"reward": float("nan")}])
    with pytest.raises(ArtifactError, match="row 1 holds NaN or inf"):
        write_jsonl(tmp_path / "gens.jsonl", [{"partial_rewards": np.array([0.5, np.inf])}])
    assert not (tmp_path / "gens.jsonl").exists()
    # undefined numbers in summaries (an AUROC of one class) are null, numpy ones too
    atomic_write_json(
        tmp_path / "m.json", {"auroc": float("nan"), "ci": np.array([np.nan, 0.5]), "n": np.float32("inf")}
    )
    text = (tmp_path / "m.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"auroc": None, "ci": [None, 0.5], "n": None}


# ------------------------------------------------------------------- 5. metrics: row shapes and thresholds


@pytest.mark.parametrize(
    "over, message",
    [
        (
            {"partial_rewards": [0.1] * 3},
            "field 'partial_rewards' must hold num_actions=4 values (one per response token), got 3 values",
        ),
        (
            {"cosine_sim": [0.5] * 5},
            "field 'cosine_sim' must hold num_actions=4 values (one per response token), got 5 values",
        ),
        (
            {"partial_rewards": None},
            "field 'partial_rewards' must hold num_actions=4 values (one per response token), got None",
        ),
        ({"reward": None}, "field 'reward' must be a finite number, got None"),
        ({"num_actions": 0}, "field 'num_actions' must be a positive integer, got 0"),
    ],
)
def test_metrics_rejects_rows_whose_lengths_do_not_match(tmp_path, over, message):
    write_jsonl(
        tmp_path / "rm" / "toy" / "greedy" / "scored.jsonl",
        [scored("q1", True), scored("q2", False), scored("q3", False, **over)],
    )
    with pytest.raises(ArtifactError) as err:
        metrics_cli.main(
            ["--model_name", "rm", "--eval_results_dir", str(tmp_path), "--benchmarks", "toy", "--n_boot", "10"]
        )
    assert str(err.value).endswith(f"scored.jsonl:3: {message}")


def test_metrics_rejects_non_finite_threshold(tmp_path, capsys):
    write_jsonl(tmp_path / "rm" / "toy" / "greedy" / "scored.jsonl", [scored("q1", True), scored("q2", False)])
    base = ["--model_name", "rm", "--eval_results_dir", str(tmp_path), "--benchmarks", "toy"]
    for value in ("nan", "inf", "-inf"):
        line = cli_error(capsys, metrics_cli.main, base + [f"--filter_threshold={value}"])
        assert line.endswith(f"argument --filter_threshold: must be a finite number, got {value}")
    assert cli_error(capsys, metrics_cli.main, base + ["--n_boot", "0"]).endswith(
        "argument --n_boot: must be an integer >= 1, got 0"
    )
    with pytest.raises(ValueError, match="filter threshold must be a finite number, got nan"):
        metrics.q_filtered_majority_vote([[scored("q1", True)]], threshold=float("nan"))


# ------------------------------------------------------------------- 6. degenerate goal states


def test_all_zero_goal_state_is_rejected(layout):
    with pytest.raises(ValueError, match="is all zeros: .*every Q-value would be 0"):
        check_goal_state(np.zeros((1, 4)), 4)
    tmp_path, _, args = layout
    np.save(tmp_path / "goal_state.npy", np.zeros((1, 32), dtype=np.float32))
    with pytest.raises(ValueError, match=r"goal_state\.npy is all zeros"):
        eval_rm_main(args)
    assert not (tmp_path / "eval").exists()


@pytest.mark.parametrize("command", ["get-representation", "eval-rm", "metrics", "decode"])
def test_every_numeric_flag_of_a_command_declares_its_range(command):
    """A plain int or float type accepts -3 and nan alike: every numeric flag is a ``flags.Range``."""
    parser = importlib.import_module(cli.COMMANDS[command][0]).build_parser()
    plain = [a.option_strings[0] for a in parser._actions if a.type in (int, float)]
    assert plain == [], f"goalrm {command}: {plain} declare no valid range"
