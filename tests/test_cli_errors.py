"""Expected errors of every ``goalrm`` subcommand are one line on stderr and exit code 2; the
traceback appears only with --debug or GOALRM_DEBUG=1."""

import subprocess
import sys

import numpy as np
import pytest
from transformers import LlamaModel

from goalrm_core import cli
from goalrm_core.data.io import ArtifactError, write_jsonl
from goalrm_core.model.reward_model import RewardModel, save_reward_model


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_config, tokenizer, tiny_policy_dir):
    root = tmp_path_factory.mktemp("cli")
    rm = save_reward_model(RewardModel(LlamaModel(tiny_config)), root / "rm", tokenizer)
    np.save(root / "goal.npy", np.ones((1, tiny_config.hidden_size), dtype=np.float32))
    (root / "bad.jsonl").write_text('{"question": "1 +1", "correct": "1+1=2"}\n{"question": oops}\n')
    write_jsonl(
        root / "gens" / "toy" / "greedy.jsonl",
        [{"question": "1 +1", "generated_solution": "1+1=2\n#2", "is_correct": True}],
    )
    (root / "gens" / "toy" / "samples.jsonl").write_text("{not json\n")
    (root / "scored" / "rm" / "toy" / "greedy").mkdir(parents=True)
    (root / "scored" / "rm" / "toy" / "greedy" / "scored.jsonl").write_text("[1, 2]\n")
    return {"root": root, "rm": str(rm), "policy": str(tiny_policy_dir), "missing": str(root / "missing.jsonl")}


def commands(f):
    r = f["root"]
    train = [
        "train-rm",
        "--pretrain",
        f["policy"],
        "--save_path",
        str(r / "out-rm"),
        "--template",
        "toymath",
        "--zero_stage",
        "0",
    ]
    rep = ["get-representation", "--reward-model-path", f["rm"], "--save-dir", str(r / "rep"), "--template", "toymath"]
    ev = [
        "eval-rm",
        "--reward_model_path",
        f["rm"],
        "--save_dir",
        str(r / "eval"),
        "--goal_state_path",
        str(r / "goal.npy"),
        "--template",
        "toymath",
        "--benchmarks",
        "toy",
    ]
    met = ["metrics", "--model_name", "rm", "--benchmarks", "toy", "--n_boot", "10"]
    dec = [
        "decode",
        "beam",
        "--policy_path",
        f["policy"],
        "--reward_model_path",
        f["rm"],
        "--goal_state_path",
        str(r / "goal.npy"),
        "--save_path",
        str(r / "dec.jsonl"),
    ]
    return {
        "train-rm": (train + ["--dataset", f["missing"]], train + ["--dataset", str(r / "bad.jsonl")]),
        "get-representation": (rep + ["--dataset-path", f["missing"]], rep + ["--dataset-path", str(r / "bad.jsonl")]),
        "eval-rm": (
            ev + ["--completions_data_path", str(r / "nowhere")],
            ev + ["--completions_data_path", str(r / "gens")],
        ),
        "metrics": (met + ["--eval_results_dir", str(r / "nowhere")], met + ["--eval_results_dir", str(r / "scored")]),
        "decode": (dec + ["--questions_path", f["missing"]], dec + ["--questions_path", str(r / "bad.jsonl")]),
    }


@pytest.mark.parametrize("command", ["train-rm", "get-representation", "eval-rm", "metrics", "decode"])
@pytest.mark.parametrize("case", ["missing file", "malformed line"])
def test_expected_errors_are_one_line_and_exit_2(files, capsys, command, case):
    argv = commands(files)[command][case == "malformed line"]
    assert cli.main(argv) == 2
    stderr = capsys.readouterr().err
    errors = [line for line in stderr.splitlines() if ": error: " in line]  # progress bars of model loading aside
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    assert errors[0].startswith(f"goalrm {command}: error: ")
    if case == "malformed line":
        assert ":2" in errors[0] or ":1" in errors[0], errors[0]  # the file's line is named


def test_debug_shows_the_traceback(files, monkeypatch):
    argv = commands(files)["metrics"][0]
    with pytest.raises(ArtifactError):
        cli.main(argv + ["--debug"])
    with pytest.raises(ArtifactError):
        cli.main(["--debug", *argv])
    monkeypatch.setenv("GOALRM_DEBUG", "1")
    with pytest.raises(ArtifactError):
        cli.main(argv)


def test_python_m_train_rm_is_one_line_too(files):
    argv = commands(files)["train-rm"][0][1:]
    done = subprocess.run([sys.executable, "-m", "goalrm_core.train.trainer", *argv], capture_output=True, text=True)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if "goalrm train-rm: error:" in line]
    assert len(lines) == 1 and "missing.jsonl" in lines[0] and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "pretrain, dataset, says",
    [
        (
            "nowhere",
            "{missing}",
            "--pretrain nowhere: no such folder, and the Hub (huggingface.co) is switched off (HF_HUB_OFFLINE) "
            "to fetch it: give the folder of a saved model",
        ),
        ("./nowhere", "{missing}", "--pretrain ./nowhere: no such folder"),
        ("a/b/c", "{missing}", "--pretrain a/b/c: no such folder"),
        ("{policy}", "{missing}", "--dataset {missing}: no such file or folder"),
        ("{policy}", "x.jsonl", "--dataset x.jsonl: no such file or folder"),
    ],
)
def test_a_mistyped_model_or_data_argument_fails_at_once_naming_the_flag(
    files, tmp_path, monkeypatch, capsys, pretrain, dataset, says
):
    """No model loads, no Hub retries, no folder is made: one line naming the flag and the value."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)

    def fill(text):
        return text.format(missing=files["missing"], policy=files["policy"])

    argv = ["train-rm", "--pretrain", fill(pretrain), "--dataset", fill(dataset), "--save_path", str(tmp_path / "rm")]
    assert cli.main(argv) == 2
    stderr = capsys.readouterr().err
    assert stderr.strip() == f"goalrm train-rm: error: {fill(says)} (--debug for the traceback)", stderr
    assert list(tmp_path.iterdir()) == []  # neither the RM folder nor a ckpt/ beside it


def test_an_over_long_value_is_cut_in_the_error_line(capsys):
    from goalrm_core.flags import one_line

    assert one_line("unknown encoding 'ab'; valid: a, b") == "unknown encoding 'ab'; valid: a, b"
    long = "x" * 5000
    assert (
        one_line(f"unknown encoding '{long}'; valid:\n a")
        == f"unknown encoding '{'x' * 59}…(5,003 characters)'; valid: a"
    )
    from goalrm_core.pipeline.runner import main as report_main

    assert report_main(["--profile", "smoke", "--dry-run", "--set", f"rm.encoding={long}"]) == 2
    err = capsys.readouterr().err
    assert len(err) < 300 and "(5,003 characters)'; valid: official, split" in err


def test_a_model_folder_without_its_tokenizer_is_named(files, tmp_path, capsys):
    import shutil

    from goalrm_core.model.reward_model import TOKENIZER_FILES

    policy = tmp_path / "policy"
    shutil.copytree(files["policy"], policy)
    for name in TOKENIZER_FILES:
        (policy / name).unlink(missing_ok=True)
    r = files["root"]
    for argv, flag in (
        (
            [
                "train-rm",
                "--pretrain",
                str(policy),
                "--dataset",
                str(r / "bad.jsonl"),
                "--save_path",
                str(tmp_path / "rm"),
            ],
            "--pretrain",
        ),
        (
            [
                "decode",
                "beam",
                "--policy_path",
                str(policy),
                "--reward_model_path",
                files["rm"],
                "--goal_state_path",
                str(r / "goal.npy"),
                "--questions_path",
                str(r / "bad.jsonl"),
                "--save_path",
                str(tmp_path / "d.jsonl"),
            ],
            "--policy_path",
        ),
    ):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"error: {flag} {policy}: no tokenizer there" in err, err
    assert not (tmp_path / "rm").exists() and not (tmp_path / "d.jsonl").exists()
