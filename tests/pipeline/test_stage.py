"""A notebook's start and end (pipeline/stage.Stage): threads recorded, and a run by hand records its stage."""

import json

from IPython.core.interactiveshell import InteractiveShell

from goalrm_core.pipeline.batch_run import BATCH_VAR
from goalrm_core.pipeline.notebook_params import interactive_defaults
from goalrm_core.pipeline.records import stage_is_current
from goalrm_core.pipeline.stage import Stage


def test_a_notebook_run_by_hand_records_its_stage_and_threads(tmp_path, monkeypatch):
    monkeypatch.delenv(BATCH_VAR, raising=False)
    shell = InteractiveShell.instance()
    try:
        params = {"seed": 3, "n_samples": 2, "torch_threads": 1, **interactive_defaults()}
        params |= {"run_dir": str(tmp_path / "run"), "reports_dir": str(tmp_path / "report")}
        shell.user_ns.update(params)
        stage = Stage.start("data", params["run_dir"], params["reports_dir"], torch_threads=1)
        stage.record({"answer": 42})
    finally:
        InteractiveShell.clear_instance()
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    assert metrics["data"] == {"answer": 42, "threads": 1}
    record = json.loads((tmp_path / "run" / "stages" / "01_data.json").read_text())
    assert (
        record["stage"] == "01_data" and record["parameters"]["seed"] == 3 and "reports_dir" not in record["parameters"]
    )
    # what the runner would compare before reusing the data stage
    notebook_keys = json.loads((tmp_path / "run" / "stages" / "01_data.json").read_text())["parameters"]
    assert stage_is_current(tmp_path / "run", "01_data", {**notebook_keys, "profile": "demo"})


def test_a_stage_started_by_hand_drops_its_old_record_until_it_finishes(tmp_path, monkeypatch):
    monkeypatch.delenv(BATCH_VAR, raising=False)
    record = tmp_path / "run" / "stages" / "01_data.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"stage": "01_data", "finished": "earlier", "parameters": {"seed": 0}}))
    InteractiveShell.instance()
    try:
        Stage.start("data", tmp_path / "run", tmp_path / "report", torch_threads=1)
        assert not record.exists()  # a stage stopped now leaves no earlier run's record vouching for its files
    finally:
        InteractiveShell.clear_instance()


def test_under_the_runner_the_stage_leaves_the_record_to_it(tmp_path, monkeypatch):
    monkeypatch.setenv(BATCH_VAR, "1")
    Stage.start("data", tmp_path / "run", tmp_path / "report", torch_threads=1).record({})
    assert not (tmp_path / "run" / "stages").exists()


def test_a_notebook_records_and_shows_the_gate_without_loading_the_runner():
    """Stage records through pipeline.records and the gate notice comes from index_page: a notebook
    that imports both does not load the report runner."""
    import subprocess
    import sys

    code = (
        "import sys, goalrm_core.pipeline.stage, goalrm_core.report.index_page; "
        "print('goalrm_core.pipeline.runner' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_parts_of_a_stage_are_timed_apart_from_its_metrics(tmp_path, monkeypatch):
    """``stage.part`` times named steps into the stage's timings (never its metrics, which identical runs
    share), adding up a part entered twice; the runner's line for the stage reads them back."""
    from goalrm_core.pipeline.runner import _stage_parts

    monkeypatch.setenv(BATCH_VAR, "1")
    stage = Stage.start("data", tmp_path / "run", tmp_path / "report", torch_threads=1)
    with stage.part("sft"):
        pass
    with stage.part("pairs"):
        pass
    with stage.part("sft"):
        pass
    stage.parts["greedy"] = 1.25  # what generate_for_benchmarks(timings=stage.parts) adds
    stage.record({"answer": 42})
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    assert metrics["data"] == {"answer": 42, "threads": 1}
    parts = metrics["timings"]["data"]["parts"]
    assert set(parts) == {"sft", "pairs", "greedy"} and all(v >= 0 for v in parts.values())
    assert parts["greedy"] == 1.25
    line = _stage_parts(tmp_path / "report", "01_data")
    assert "greedy 1.2 s" in line and {p.split()[0] for p in line.split(", ")} == {"sft", "pairs", "greedy"}
    assert (
        _stage_parts(tmp_path / "report", "02_training") == "" and _stage_parts(tmp_path / "nowhere", "01_data") == ""
    )
