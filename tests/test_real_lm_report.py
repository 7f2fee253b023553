"""``goalrm report --profile real-lm`` end to end on the tiny SmolLM2 twin, packaged as the real model is: the
profile's own notebooks (``notebooks/real-lm``, named by its ``notebooks`` key) run as steps of the real-lm recipe,
and ``metrics.json`` holds ``evaluation.primary`` in the other reports' shape, one section per data set."""

import json

import pytest
import yaml
from conftest import profile_file
from test_real_lm import setting, write_data  # noqa: F401 (the fixture, and the data it writes)

from goalrm_core.evaluation import verdicts
from goalrm_core.paths import resolve_path
from goalrm_core.pipeline.notebook_params import NOTEBOOK_SOURCES, stage_notebooks
from goalrm_core.pipeline.profile_files import load_profile, notebook_profile, notebooks_folder
from goalrm_core.pipeline.runner import run_report

STAGES = ["01_data", "02_training", "03_representations", "04_evaluation", "05_decoding"]


def test_the_real_lm_profile_names_its_own_notebooks():
    settings = load_profile("real-lm")
    assert notebook_profile("real-lm") == "real-lm"  # a command-line profile with notebooks of its own
    folder = notebooks_folder(settings)
    assert NOTEBOOK_SOURCES[folder] == "real-lm"
    assert [p.stem for p in stage_notebooks(resolve_path(folder))] == STAGES
    assert notebooks_folder(load_profile("demo")) == "notebooks"
    with pytest.raises(ValueError, match="command-line profile, not a notebook one"):
        notebook_profile("real-cpu")


@pytest.mark.notebook
@pytest.mark.slow
def test_the_real_lm_report_runs_on_the_twin(setting, tmp_path):  # noqa: F811 (the imported fixture)
    profile = load_profile("real-lm") | setting | {"torch_threads": 1, "n_boot": 50, "report_split": "validation"}
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "real-lm.yaml").write_text(yaml.safe_dump(profile_file(profile)))
    code = run_report("real-lm", params_dir=tmp_path / "params", reports_root=tmp_path / "reports")
    out = tmp_path / "reports" / "real-lm"
    assert code == 0, (out / "status.json").read_text() if (out / "status.json").is_file() else "no status"
    for stage in STAGES:
        assert (out / f"{stage}.html").is_file(), stage
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["data"]["backbone"]["name"] == "smollm2-135m"
    assert {"gsm8k", "hh"} <= set(metrics["training"])
    primary = metrics["evaluation"]["primary"]
    assert primary["rm_seeds"] == [0, 1] and primary["split"] == "validation"
    known = {verdicts.HOLDS, verdicts.NOT_SHOWN, verdicts.REVERSED, verdicts.UNDEFINED}
    for data, key in (("gsm8k", "auroc"), ("hh", "accuracy")):
        for rm in ("baseline", "goal-conditioned"):
            summary = primary[data][rm][key]
            assert len(summary["per_seed"]) == 2 and summary["verdict"] in known, (data, rm)
        assert primary[data][f"delta_{key}"]["verdict"] in known
        assert set(primary[data]["reference"])  # the scorers that need no training
    assert metrics["decoding"]["split"] == "validation"


def _summary(mean: float, verdict: str) -> dict:
    return {"mean": mean, "ci_low": mean - 0.05, "ci_high": mean + 0.05, "mde": 0.07, "verdict": verdict}


def test_the_front_page_of_a_real_text_report_opens_on_its_designs(tmp_path):
    from goalrm_core.report.index_page import render_index

    primary = {"rm_seeds": [0, 1, 2], "split": "reported"}
    for data, key, items in (("gsm8k", "auroc", "questions"), ("hh", "accuracy", "dialogues")):
        primary[data] = {
            "baseline": {key: _summary(0.61, verdicts.HOLDS)},
            "goal-conditioned": {key: _summary(0.64, verdicts.HOLDS)},
            f"delta_{key}": _summary(0.03, verdicts.NOT_SHOWN),
            "reference": {"length only": {"estimate": 0.697, "ci_low": 0.6, "ci_high": 0.78}},
            items: 528,
        }
    page = render_index("real-lm", "now", [], {"evaluation": {"primary": primary}}, tmp_path)
    assert "GSM8K: AUROC of the reward on held-out model solutions, 3 paired RM seeds, 528 questions" in page
    assert "0.030 [-0.020, 0.080], MDE 0.070: not shown" in page and "length only 0.697" in page
    assert "HH-RLHF harmless: pairwise accuracy" in page and "says nothing about the paper" in page
    assert "ToyMath" not in page and "could not be drawn" not in page
