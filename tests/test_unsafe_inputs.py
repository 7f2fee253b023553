"""What a user types or a file holds never runs code nor reaches outside the folders named, and an
output folder never replaces what it should not: the checks behind the corpus cases of
``tests/bad_inputs/cases.yaml`` that a case cannot express (a pickle that would run code, the report
and sweep commands, HTML pages, the folders an output may replace)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from goalrm_core.data.io import ArtifactError, check_not_an_input, check_replaceable
from goalrm_core.data.rundir import rm_name
from goalrm_core.flags import safe_path_part
from goalrm_core.model.reward_model import check_weights_folder
from goalrm_core.train.distributed import checkpoint_tag, load_checkpoint_file, rng_states


class Planted:
    """Unpickled, it writes a marker file: what a planted checkpoint would do to the user."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "code ran"))


# ---------------------------------------------------------------- pickles


def test_a_planted_checkpoint_file_is_refused_and_runs_no_code(tmp_path):
    marker = tmp_path / "marker"
    planted = tmp_path / "mp_rank_00_model_states.pt"
    torch.save({"module": {"w": torch.zeros(2)}, "client": Planted(marker)}, planted)
    with pytest.raises(
        ArtifactError, match=r"mp_rank_00_model_states\.pt: refusing to load this checkpoint file"
    ) as info:
        load_checkpoint_file(planted)
    assert "\n" not in str(info.value)
    assert not marker.exists()


def test_what_goalrm_and_deepspeed_put_in_a_checkpoint_loads_weights_only(tmp_path):
    from deepspeed.runtime.fp16.loss_scaler import LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum

    state = {
        "module": {"w": torch.ones(3)},
        "rng": [rng_states(torch.Generator().manual_seed(0))],
        "step": 3,
        "loss_scaler": LossScaler(1.0),
        "zero_stage": ZeroStageEnum.gradients,
    }
    path = tmp_path / "state.pt"
    torch.save(state, path)
    loaded = load_checkpoint_file(path)
    assert loaded["step"] == 3 and torch.equal(loaded["module"]["w"], torch.ones(3))
    assert (loaded["rng"][0]["numpy"][1] == state["rng"][0]["numpy"][1]).all()


def test_a_truncated_checkpoint_file_is_named(tmp_path):
    path = tmp_path / "state.pt"
    torch.save({"w": torch.ones(100)}, path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ArtifactError, match=r"state\.pt: the checkpoint file is damaged or truncated"):
        load_checkpoint_file(path)


def test_the_checkpoint_tag_is_a_step_folder_of_the_checkpoint_folder(tmp_path):
    (tmp_path / "global_step2").mkdir()
    (tmp_path / "latest").write_text("global_step2\n")
    assert checkpoint_tag(tmp_path) == "global_step2"
    for tag in ("../global_step2", str(tmp_path / "global_step2"), ".."):
        (tmp_path / "latest").write_text(tag)
        with pytest.raises(ArtifactError, match="is not a plain name"):
            checkpoint_tag(tmp_path)


def test_a_folder_of_only_pickled_weights_is_refused_before_anything_opens_it(tmp_path):
    marker = tmp_path / "marker"
    folder = tmp_path / "policy"
    folder.mkdir()
    torch.save(Planted(marker), folder / "pytorch_model.bin")
    with pytest.raises(
        ArtifactError, match=r"--pretrain .*policy: its weights are only pickled \(pytorch_model\.bin\)"
    ):
        check_weights_folder(folder, "--pretrain")
    assert not marker.exists()
    (folder / "model.safetensors").write_bytes(b"")
    check_weights_folder(folder, "--pretrain")  # safetensors present: the loader reads those
    check_weights_folder("org/hub-model", "--pretrain")  # a Hub name is from_pretrained's


# ---------------------------------------------------------------- names that become path parts


@pytest.mark.parametrize("name", ["..", "../x", "a/b", "a\\b", "/abs", "", ".", "x..y", "C:evil"])
def test_names_that_would_reach_outside_are_refused(name):
    with pytest.raises(ValueError, match="is not a plain name"):
        safe_path_part(name, "benchmark")


@pytest.mark.parametrize("name", ["gsm8k", "toy-id", "math_500", "rm.v2", "baseline seed 0"])
def test_plain_names_pass(name):
    assert safe_path_part(name, "benchmark") == name


def test_the_rm_name_of_a_path_ending_in_dots_is_its_folder(tmp_path):
    (tmp_path / "rm" / "sub").mkdir(parents=True)
    assert rm_name(tmp_path / "rm" / "sub" / "..") == "rm"
    assert rm_name(str(tmp_path / "rm") + "/") == "rm"
    with pytest.raises(ValueError, match="is not a plain name"):
        rm_name("/")


@pytest.mark.parametrize(
    "flags", [["--profile", "../demo"], ["--profile", "/etc/x"], ["--name", "../elsewhere"], ["--name", "/tmp/report"]]
)
def test_report_refuses_profile_and_report_names_outside_its_folders(flags, tmp_path, monkeypatch, capsys):
    from goalrm_core.pipeline.runner import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main([*flags, "--reports-dir", str(tmp_path / "reports")])
    assert stop.value.code == 2
    assert "is not a plain name" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "flags",
    [["--spec", "../x"], ["--profile", "../demo", "--grid", "seed=0,1"], ["--name", "a/b", "--grid", "seed=0,1"]],
)
def test_sweep_refuses_names_outside_its_folders(flags, tmp_path, monkeypatch, capsys):
    from goalrm_core.pipeline.sweep import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(flags)
    assert stop.value.code == 2
    assert "is not a plain name" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_profile_name_is_checked_by_the_profile_reader_too(tmp_path):
    from goalrm_core.pipeline.profile_files import load_profile

    (tmp_path / "params").mkdir()
    (tmp_path / "outside.yaml").write_text("seed: 0\n")
    with pytest.raises(ValueError, match="profile '../outside' is not a plain name"):
        load_profile("../outside", tmp_path / "params")


# ---------------------------------------------------------------- HTML


def test_names_from_metrics_json_are_escaped_on_the_index_page(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent / "report"))
    try:
        from test_frontpage import schema2_tree
    finally:
        sys.path.pop(0)
    from goalrm_core.report.index_page import render_index

    hostile = {"toy-id": "<script>bench()</script>", "toy-unseen": "<img src=x onerror=u()>"}
    text = json.dumps(schema2_tree())
    for old, new in hostile.items():
        text = text.replace(json.dumps(old), json.dumps(new))
    tree = json.loads(text)
    tree["evaluation"]["<b>rm</b>"] = tree["evaluation"]["baseline"]
    stages = [{"name": "<i>01</i>", "status": "<u>failed</u>", "error": {"evalue": "<s>boom</s>"}}]
    page = render_index("<em>profile</em>", "<tt>now</tt>", stages, tree, tmp_path)
    for raw in [*hostile.values(), "<b>rm</b>", "<i>01</i>", "<u>failed", "<s>boom", "<em>profile", "<tt>now"]:
        assert raw not in page
    assert "&lt;script&gt;bench()&lt;/script&gt;" in page and "&lt;img src=x onerror=u()&gt;" in page


# ---------------------------------------------------------------- output folders


def test_an_output_folder_may_be_new_empty_or_an_earlier_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inputs = [("--pretrain", tmp_path / "policy"), ("--dataset", "org/hub-dataset")]
    (tmp_path / "policy").mkdir()
    check_replaceable(tmp_path / "new" / "rm", "--save_path", inputs=inputs, marks=("goalrm.json",))
    (tmp_path / "empty").mkdir()
    check_replaceable(tmp_path / "empty", "--save_path", inputs=inputs, marks=("goalrm.json",))
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "goalrm.json").write_text("{}")
    (earlier / "model.safetensors").write_bytes(b"")
    check_replaceable(earlier, "--save_path", inputs=inputs, marks=("goalrm.json",))
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("x")
    with pytest.raises(ArtifactError, match=r"already holds files .*\(thesis\.tex; no goalrm\.json\).*--overwrite"):
        check_replaceable(other, "--save_path", inputs=inputs, marks=("goalrm.json",))
    check_replaceable(other, "--save_path", inputs=inputs, marks=("goalrm.json",), overwrite=True)
    assert (other / "thesis.tex").exists()  # the check itself never deletes


def test_inputs_and_the_working_folder_are_never_an_output(tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "data" / "pairs.jsonl").write_text("{}\n")
    monkeypatch.chdir(work)
    inputs = [("--dataset", "data/pairs.jsonl")]
    for path, message in (
        (".", "is the working folder"),
        ("..", "a folder holding the working folder"),
        ("data", "holds the input --dataset data/pairs.jsonl"),
        ("data/pairs.jsonl", "is the input --dataset data/pairs.jsonl"),
    ):
        with pytest.raises(ArtifactError, match=message):
            check_not_an_input(path, "--save_path", inputs)
    check_not_an_input(".", "--save-dir", [], here=False)  # a command that only adds files may write here
    check_not_an_input("data/out", "--save_path", inputs)
    assert os.listdir(work) == ["data"]
