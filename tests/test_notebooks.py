"""The notebooks, executed through papermill under the smoke profile, record sane metrics."""

import json

import pytest

from goalrm_core.report import run_report

pytestmark = pytest.mark.notebook


@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory):
    reports = tmp_path_factory.mktemp("reports")
    run_dir = tmp_path_factory.mktemp("runs") / "smoke"
    # The smoke profile's run_dir is redirected into tmp so tests never touch runs/.
    import yaml

    from goalrm_core.profiles import load_profile, resolve_path

    params = tmp_path_factory.mktemp("params")
    profile = load_profile("smoke")
    profile["run_dir"] = str(run_dir)
    (params / "smoke.yaml").write_text(yaml.safe_dump(profile))
    code = run_report("smoke", params_dir=params, reports_root=reports, notebooks_dir=resolve_path("notebooks"))
    return code, reports / "smoke", run_dir


def test_report_succeeds(smoke_report):
    code, reports, _ = smoke_report
    status = json.loads((reports / "status.json").read_text())
    assert code == 0, status
    assert (reports / "index.html").exists()
    assert (reports / "01_data.html").exists()


def test_data_metrics(smoke_report):
    _, reports, run_dir = smoke_report
    metrics = json.loads((reports / "metrics.json").read_text())
    benches = metrics["data"]["benchmarks"]
    assert set(benches) == {"toy-id", "toy-long", "toy-big", "toy-mixed"}
    for row in benches.values():
        assert row["n_questions"] == 12 and row["n_samples"] == 48
        assert 0.0 <= row["sample_accuracy"] <= 1.0
    # the smoke policy is tiny but must still be right sometimes, or no pairs can be formed
    assert benches["toy-id"]["sample_accuracy"] > 0
    pref = metrics["data"]["preference"]
    assert pref["n_pairs"] > 10 and pref["n_pairs"] == pref["n_train"] + pref["n_eval"]
    assert (run_dir / "data" / "preference" / "train.jsonl").exists()
    assert "wall_s" in metrics["timings"]["data"]
