"""The report runner on three tiny notebooks: one records metrics, one fails on demand, one is last.

Kernel start-ups dominate the cost, so the notebooks are executed four times in all, by one
module-scoped fixture: a first run where stage 02 fails, then a resume from 02 once it is fixed.
The first run's files are copied aside before the resume so both states can be inspected.
"""

from __future__ import annotations

import json
import shutil
import warnings

import pytest
from conftest import write_notebook

from goalrm_core import cli
from goalrm_core.pipeline.profile_checks import check_profile_against_notebooks
from goalrm_core.pipeline.profile_files import load_profile
from goalrm_core.pipeline.records import record_metrics
from goalrm_core.pipeline.runner import main, run_report

pytestmark = pytest.mark.notebook

KERNEL = "python3"


def _write_profile(params_dir, name: str, text: str) -> None:
    params_dir.mkdir(exist_ok=True)
    (params_dir / f"{name}.yaml").write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    nbs = root / "notebooks"
    nbs.mkdir()
    write_notebook(
        nbs / "01_alpha.ipynb",
        'profile = "demo"\nreports_dir = "reports/demo"\nseed = 0\nlr = 0.5',
        'HIDDEN_CODE_MARKER = seed\nprint("VISIBLE_" + "OUTPUT", HIDDEN_CODE_MARKER)',
        'record_metrics("alpha", {"auroc": 0.75, "seed": seed, "lr": lr}, reports_dir, timings={"wall_s": 0.1})',
    )
    write_notebook(
        nbs / "02_beta.ipynb",
        'reports_dir = "reports/demo"\nfail = False',
        'if fail:\n    raise RuntimeError("beta exploded on purpose")',
        'record_metrics("beta", {"accuracy": 0.5}, reports_dir)',
    )
    write_notebook(nbs / "03_gamma.ipynb", 'profile = "demo"', 'print("gamma done")')
    params = root / "params"
    _write_profile(params, "tiny", "seed: 3\nlr: 1\nfail: true\nunused_knob: 7\nlrr: 2\ntorch_threads: 1\n")
    _write_profile(params, "other", "seed: 1\n")
    kwargs = dict(
        notebooks_dir=nbs, params_dir=params, reports_root=root / "reports", kernel_name=KERNEL, logs_dir=root / "logs"
    )
    out = root / "reports" / "tiny"

    first_log: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first_rc = run_report("tiny", log=first_log.append, **kwargs)
    shutil.copytree(out, root / "first")
    alpha_html_mtime = (out / "01_alpha.html").stat().st_mtime_ns

    _write_profile(params, "tiny", "seed: 3\nlr: 1\nfail: false\ntorch_threads: 1\n")
    second_log: list[str] = []
    second_rc = run_report("tiny", from_stage="02", log=second_log.append, **kwargs)
    return {
        "root": root,
        "kwargs": kwargs,
        "first": root / "first",
        "second": out,
        "first_rc": first_rc,
        "second_rc": second_rc,
        "first_log": first_log,
        "second_log": second_log,
        "warnings": [str(w.message) for w in caught],
        "alpha_html_mtime": alpha_html_mtime,
    }


def _status(folder) -> dict:
    data = json.loads((folder / "status.json").read_text())
    return {s["name"]: s for s in data["stages"]}


def test_failed_stage_gives_nonzero_and_stops_later_stages(project):
    assert project["first_rc"] != 0
    status = _status(project["first"])
    assert [status[n]["status"] for n in ("01_alpha", "02_beta", "03_gamma")] == ["ok", "failed", "not run"]
    error = status["02_beta"]["error"]
    assert error["ename"] == "RuntimeError" and "beta exploded on purpose" in error["evalue"]
    assert isinstance(error["cell_index"], int)
    assert not (project["first"] / "03_gamma.ipynb").exists()


def test_failed_run_keeps_earlier_outputs_and_shows_the_error(project):
    first = project["first"]
    for name in ("01_alpha", "02_beta"):  # the failed notebook is kept too, for its traceback
        assert (first / f"{name}.ipynb").exists() and (first / f"{name}.html").exists()
    assert "beta exploded on purpose" in (first / "02_beta.html").read_text()
    metrics = json.loads((first / "metrics.json").read_text())
    assert metrics["alpha"] == {"auroc": 0.75, "lr": 1, "seed": 3}  # profile values were injected
    assert "beta" not in metrics
    index = (first / "index.html").read_text()
    assert "RuntimeError: beta exploded on purpose" in index
    assert 'class="status failed"' in index and 'class="status not-run"' in index
    assert '<a href="01_alpha.html">01_alpha</a>' in index
    assert '<a href="03_gamma.html">' not in index


def test_html_hides_inputs_but_keeps_outputs(project):
    text = (project["first"] / "01_alpha.html").read_text()
    assert "VISIBLE_OUTPUT 3" in text
    assert "HIDDEN_CODE_MARKER" not in text
    assert "# Parameters" not in text  # the injected-parameters cell's input is hidden too


def test_index_lists_stages_with_durations_and_metrics(project):
    status = _status(project["first"])
    assert status["01_alpha"]["duration_s"] > 0 and status["01_alpha"]["started"]
    index = (project["first"] / "index.html").read_text()
    assert "profile tiny" in index and "Generated" in index
    assert f"{status['01_alpha']['duration_s']:.1f} s" in index
    assert "All metrics" in index and "alpha.auroc" in index and "0.75" in index
    assert "wall_s" not in index  # timings are not headline metrics


def test_unknown_profile_key_warns_once_with_did_you_mean(project):
    lines = [line for line in project["first_log"] if "lrr" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "did you mean lr?" in lines[0]
    assert "params/tiny.yaml" in lines[0] or "tiny.yaml" in lines[0]
    assert sum("unused_knob" in line for line in project["first_log"]) == 1
    assert not any("lrr" in w or "unused_knob" in w for w in project["warnings"])  # not a second time on stderr
    assert not any("torch_threads" in line for line in project["first_log"])  # the runner reads it


def test_each_stage_says_where_it_is_and_where_its_log_goes(project):
    first = [line for line in project["first_log"] if " running — " in line]
    assert [line.split("]")[0] for line in first] == ["[1/3 01_alpha", "[2/3 02_beta"]
    assert "log: " in first[0] and "01_alpha.log" in first[0] and "ETA unknown (no earlier run)" in first[0]
    assert any(line.startswith("[1/3 01_alpha] ok in ") for line in project["first_log"])
    assert any(line.startswith("[2/3 02_beta] FAILED after ") for line in project["first_log"])
    second = [line for line in project["second_log"] if " running — " in line]
    assert [line.split("]")[0] for line in second] == ["[1/2 02_beta", "[2/2 03_gamma"]
    assert "ETA unknown" in second[0]  # 02 failed last time: no duration to go by


def test_progress_line_uses_the_last_completed_run():
    from pathlib import Path

    from goalrm_core.pipeline.runner import last_durations, progress_line

    previous = {
        "01_a": {"status": "ok", "duration_s": 41.2},
        "02_b": {"status": "kept", "duration_s": 432.0},
        "03_c": {"status": "failed", "duration_s": 3.0},
        "04_d": {"status": "interrupted", "duration_s": 9.0},
    }
    durations = last_durations(previous)
    assert durations == {"01_a": 41.2, "02_b": 432.0}
    todo = ["01_a", "02_b", "03_c"]
    line = progress_line(1, todo, Path("runs/x/logs/01_a.log"), durations)
    assert line == (
        "[1/3 01_a] running — log: runs/x/logs/01_a.log, ETA ~41s (last run: 41.2 s), "
        "~7m53s for the 3 stages left (+ 1 without a last run)"
    )
    assert (
        progress_line(2, todo, None, durations)
        == "[2/3 02_b] running — ETA ~7m12s (last run: 432.0 s), ~7m12s for the 2 stages left (+ 1 without a last run)"
    )
    assert progress_line(3, todo, None, durations) == "[3/3 03_c] running — ETA unknown (no earlier run)"


def test_resume_from_failed_stage_after_fix(project):
    assert project["second_rc"] == 0
    second = project["second"]
    status = _status(second)
    assert [status[n]["status"] for n in ("01_alpha", "02_beta", "03_gamma")] == ["kept", "ok", "ok"]
    assert status["01_alpha"]["duration_s"] == _status(project["first"])["01_alpha"]["duration_s"]
    assert (second / "01_alpha.html").stat().st_mtime_ns == project["alpha_html_mtime"]
    assert "gamma done" in (second / "03_gamma.html").read_text()
    metrics = json.loads((second / "metrics.json").read_text())
    assert set(metrics) == {"alpha", "beta", "timings", "provenance", "schema_version"}
    assert metrics["schema_version"] == 2
    assert 'class="status kept"' in (second / "index.html").read_text()


def test_resume_refuses_when_earlier_stage_never_succeeded(project, tmp_path):
    kwargs = dict(project["kwargs"], reports_root=tmp_path)
    with pytest.raises(ValueError, match="01_alpha"):
        run_report("tiny", from_stage="02_beta", log=lambda _: None, **kwargs)
    with pytest.raises(ValueError, match="unknown stage '09'.*01_alpha"):
        run_report("tiny", only=["09"], log=lambda _: None, **kwargs)


def test_unknown_profile_lists_available(project, capsys):
    params = project["kwargs"]["params_dir"]
    with pytest.raises(ValueError, match="other, tiny"):
        load_profile("nope", params)
    assert main(["--profile", "nope", "--params-dir", str(params)]) == 2
    assert "other, tiny" in capsys.readouterr().err


def test_report_debug_shows_the_traceback(project, capsys, monkeypatch):
    """``goalrm report --debug`` (or GOALRM_DEBUG=1) raises the error instead of printing one line."""
    argv = ["report", "--profile", "nope", "--params-dir", str(project["kwargs"]["params_dir"])]
    monkeypatch.delenv("GOALRM_DEBUG", raising=False)
    assert cli.main(argv) == 2
    assert "goalrm report: error: " in capsys.readouterr().err
    for debug_argv in (argv + ["--debug"], ["--debug", *argv]):
        with pytest.raises(ValueError, match="other, tiny"):
            cli.main(debug_argv)
    monkeypatch.setenv("GOALRM_DEBUG", "1")
    with pytest.raises(ValueError, match="other, tiny"):
        cli.main(argv)


def test_profile_file_must_be_flat(tmp_path):
    _write_profile(tmp_path, "bad", "model:\n  size: 3\n")
    with pytest.raises(ValueError, match=r"bad\.yaml.*'model'.*scalar"):
        load_profile("bad", tmp_path)
    _write_profile(tmp_path, "seq", "- 1\n- 2\n")
    with pytest.raises(ValueError, match=r"seq\.yaml.*flat mapping"):
        load_profile("seq", tmp_path)


def _param(default: str, annotation: str = "None") -> dict:
    """What papermill.inspect_notebook reports: the default as source text."""
    return {"name": "x", "inferred_type_name": annotation, "default": default, "help": ""}


def test_profile_types_are_checked_against_notebook_defaults():
    declared = {
        "01_data": {"n": _param("2000"), "lr": _param("0.5"), "tag": _param('"a"'), "anything": _param("None")},
        "02_train": {"flag": _param("False"), "sizes": _param("[1, 2]"), "n": _param("2000")},
    }
    ok = {
        "n": 5,
        "lr": 1,
        "tag": "b",
        "anything": [1],
        "flag": True,
        "sizes": [3],
        "profile": "x",
        "stray": 1,
        "torch_threads": 1,
        "run_dir": "runs/x",
        "sizez": [1],
    }
    assert check_profile_against_notebooks(ok, declared) == [
        "profile: key 'stray' is not a parameter of any notebook",
        "profile: key 'sizez' is not a parameter of any notebook; did you mean sizes?",
    ]
    for key, value, expected in [("n", "5", "int"), ("flag", 1, "bool"), ("sizes", 3, "list"), ("lr", "1e-5", "float")]:
        with pytest.raises(ValueError, match=rf"p\.yaml: key '{key}' expects {expected} .*got .*{value!r}"):
            check_profile_against_notebooks({key: value}, declared, source="p.yaml")
    with pytest.raises(ValueError, match="expects int"):
        check_profile_against_notebooks({"n": True}, declared)


def test_record_metrics_merges_stages_and_keeps_timings_apart(tmp_path):
    path = record_metrics("b_stage", {"z": 1.0, "a": {"y": 2, "x": 1}}, tmp_path, timings={"s": 3.2})
    record_metrics("a_stage", {"auroc": 0.9}, tmp_path)
    record_metrics("b_stage", {"accuracy": 0.5}, tmp_path, timings={"s": 1.1})
    data = json.loads(path.read_text())
    assert data == {
        "a_stage": {"auroc": 0.9},
        "b_stage": {"accuracy": 0.5},
        "timings": {"b_stage": {"s": 1.1}},
        "schema_version": 2,
    }
    assert list(data) == sorted(data)
    before = path.read_text()
    record_metrics("b_stage", {"accuracy": 0.5}, tmp_path, timings={"s": 9.9})
    after = json.loads(path.read_text())
    assert {k: v for k, v in after.items() if k != "timings"} == {
        k: v for k, v in json.loads(before).items() if k != "timings"
    }
    with pytest.raises(ValueError, match="reserved"):
        record_metrics("timings", {}, tmp_path)
    with pytest.raises(ValueError, match="reserved"):
        record_metrics("schema_version", {}, tmp_path)


def test_metrics_json_records_its_schema_version(tmp_path):
    from goalrm_core.pipeline.records import record_provenance
    from goalrm_core.report.metrics_view import SCHEMA_VERSION, metrics_schema

    assert SCHEMA_VERSION == 2
    path = record_provenance({"date": "d"}, tmp_path)
    first = path.read_text()
    assert json.loads(first) == {"provenance": {"date": "d"}, "schema_version": 2}
    record_provenance({"date": "d"}, tmp_path)
    assert path.read_text() == first  # deterministic: same input, same bytes
    record_metrics("z", {"b": 1, "a": 2}, tmp_path)
    data = json.loads(path.read_text())
    assert list(data) == sorted(data) and list(data["z"]) == ["a", "b"] and metrics_schema(data) == 2
    assert metrics_schema({"alpha": {}}) == 1  # a file from before the key existed
    assert (
        metrics_schema({"schema_version": "2"}) is None and metrics_schema({"schema_version": True}) is None
    )  # unreadable: no guess
    path.write_text(json.dumps({"alpha": {"auroc": 0.5}}))  # an old file gains the key when written again
    record_metrics("beta", {}, tmp_path)
    assert json.loads(path.read_text())["schema_version"] == 2


# ------------------------------------------------------------------------ navigation and provenance


def test_stage_pages_link_the_index_and_their_neighbours(project):
    first, second = project["first"], project["second"]
    alpha = (first / "01_alpha.html").read_text()
    assert '<a href="index.html">' in alpha and '<a href="02_beta.html">02_beta' in alpha
    beta = (first / "02_beta.html").read_text()
    assert '<a href="01_alpha.html">' in beta
    # 03 never ran in the failed run: named, not linked (every link of a page resolves)
    assert '<a href="03_gamma.html">' not in beta and "03_gamma" in beta
    assert '<a href="03_gamma.html">03_gamma' in (second / "02_beta.html").read_text()
    assert '<a href="02_beta.html">' in (second / "03_gamma.html").read_text()


def test_stage_logs_and_provenance_are_recorded(project):
    log = (project["root"] / "logs" / "01_alpha.log").read_text()
    assert "papermill" in log and "cell/s" in log and "VISIBLE_OUTPUT 3" in log
    assert "cell/s" not in (project["first"] / "01_alpha.html").read_text()
    prov = json.loads((project["second"] / "metrics.json").read_text())["provenance"]
    assert prov["profile"] == {"name": "tiny", "parameters": {"seed": 3, "lr": 1, "fail": False, "torch_threads": 1}}
    assert prov["threads"] == {"torch_threads": 1, "used": 1, "rule": "as set"}
    assert {"torch", "transformers", "deepspeed", "papermill"} <= set(prov["versions"])
    assert set(prov["machine"]) == {"cpu", "cores", "gpu", "speed"} and prov["date"]
    # the machine's speed is measured with the threads the run used, so its seconds can be compared
    assert prov["machine"]["speed"]["threads"] == 1 and prov["machine"]["speed"]["matmul_gflops"] > 0


def test_provenance_without_git(tmp_path, monkeypatch):
    from goalrm_core.pipeline.runner import collect_provenance

    monkeypatch.setenv("PATH", str(tmp_path))  # no git on the PATH
    prov = collect_provenance("p", {"torch_threads": 3, "run_dir": "runs/p"}, root=tmp_path)
    assert prov["git"] == {"commit": None, "dirty": None, "dirty_excludes": "reports/"}
    assert prov["threads"] == {"torch_threads": 3, "used": 3, "rule": "as set"}
    assert prov["profile"]["parameters"] == {"torch_threads": 3, "run_dir": "runs/p"}


def test_provenance_html_is_escaped_and_empty_when_absent():
    from goalrm_core.report.provenance import provenance_html

    assert provenance_html({}) == "" and provenance_html({"provenance": None}) == ""
    prov = {
        "git": {"commit": "0123456789abcdef", "dirty": True},
        "profile": {"name": "<b>p</b>", "parameters": {"note": "<script>alert(1)</script>", "n": 2}},
        "versions": {"torch": "2.13.0", "deepspeed": None},
        "machine": {"cpu": "CPU & co", "cores": 2, "gpu": None, "speed": {"matmul_gflops": 66.6, "threads": 2}},
        "threads": {"torch_threads": 0, "used": 1, "rule": "idle cores"},
        "date": "2026-01-01T00:00:00+00:00",
    }
    text = provenance_html({"provenance": prov})
    assert "<script>" not in text and "&lt;script&gt;" in text and "&lt;b&gt;p&lt;/b&gt;" in text
    assert "0123456789ab" in text and "dirty" in text and "CPU &amp; co" in text and "deepspeed absent" in text
    assert text.startswith("<table") and "2026-01-01" in text and "fp32 matmul 67 GFLOP/s at 2 threads" in text
    del prov["machine"]["speed"]  # a report recorded before the speed was measured
    assert "GFLOP" not in provenance_html({"provenance": prov})


def test_navigation_is_replaced_not_repeated_and_pages_are_rewritten_only_on_change(tmp_path):
    from goalrm_core.report.pages import (
        NAV_BEGIN,
        navigation_html,
        refresh_navigation,
        table_of_contents,
        with_navigation,
    )

    page = (
        '<html><body class="jp-Notebook"><main><h1 id="T">Title<a class="anchor-link" href="#T">¶</a></h1>'
        '<h2 id="A-b">A &amp; b<a class="anchor-link" href="#A-b">¶</a></h2><h3 id="C">C</h3></main></body></html>'
    )
    assert table_of_contents(page) == [(2, "A-b", "A & b"), (3, "C", "C")]
    stages = ["01_a", "02_b", "03_c"]
    (tmp_path / "01_a.html").write_text(with_navigation(page, navigation_html("01_a", stages, tmp_path, page)))
    (tmp_path / "02_b.html").write_text(with_navigation(page, navigation_html("02_b", stages, tmp_path, page)))
    second = (tmp_path / "02_b.html").read_text()
    assert second.count(NAV_BEGIN) == 1 and '<a href="01_a.html">' in second and '<a href="03_c.html">' not in second
    assert second.index(NAV_BEGIN) > second.index("<main>") and 'href="#A-b"' in second and "https://" not in second
    before = (tmp_path / "02_b.html").stat().st_mtime_ns
    refresh_navigation(tmp_path, stages)  # 01_a gains its link to 02_b; 02_b has nothing new
    assert (tmp_path / "02_b.html").stat().st_mtime_ns == before
    assert '<a href="02_b.html">' in (tmp_path / "01_a.html").read_text()
    (tmp_path / "03_c.html").write_text(page)
    refresh_navigation(tmp_path, stages)
    second = (tmp_path / "02_b.html").read_text()
    assert second.count(NAV_BEGIN) == 1 and '<a href="03_c.html">' in second
    assert NAV_BEGIN in (tmp_path / "03_c.html").read_text()


def test_a_stage_page_names_the_code_it_ran_on_and_keeps_it_on_refresh(project, tmp_path):
    from goalrm_core.pipeline.provenance import code_version
    from goalrm_core.report.pages import navigation_html, page_code, refresh_navigation, with_navigation

    shown = page_code((project["first"] / "01_alpha.html").read_text())  # the runner's own page
    assert shown == code_version() and shown is not None  # the suite runs in a git checkout
    page = "<html><body><main><h2 id='x'>X</h2></main></body></html>"
    stages = ["01_a", "02_b"]
    (tmp_path / "01_a.html").write_text(
        with_navigation(page, navigation_html("01_a", stages, tmp_path, page, "abc1234 + <edits>"))
    )
    refresh_navigation(tmp_path, stages)  # a later stage's run (other code, maybe) does not relabel it
    first = (tmp_path / "01_a.html").read_text()
    assert page_code(first) == "abc1234 + <edits>" and "ran on abc1234 + &lt;edits&gt;" in first
    assert page_code(page) is None and 'class="code"' not in navigation_html("01_a", stages, tmp_path, page)
    assert code_version(tmp_path) is None  # no repository: nothing claimed


def test_index_only_rerenders_the_page_and_runs_nothing(project, tmp_path):
    out = tmp_path / "tiny"
    shutil.copytree(project["first"], out)
    status_before = (out / "status.json").read_text()
    (out / "index.html").write_text("stale")
    assert main(["--profile", "tiny", "--reports-dir", str(tmp_path), "--index-only"]) == 0
    page = (out / "index.html").read_text()
    assert "profile tiny" in page and "<h2>Stages</h2>" in page
    assert (out / "status.json").read_text() == status_before  # nothing ran, nothing else rewritten
    assert main(["--profile", "nope", "--reports-dir", str(tmp_path), "--index-only"]) == 2  # no report there


def test_executed_notebooks_record_project_relative_paths(tmp_path):
    from goalrm_core.paths import project_root
    from goalrm_core.pipeline.execute import project_relative, relative_papermill_paths

    root = project_root()
    nb = tmp_path / "x.ipynb"
    nb.write_text(
        json.dumps(
            {
                "metadata": {
                    "papermill": {
                        "input_path": str(root / "notebooks" / "01_data.ipynb"),
                        "output_path": str(root / "reports" / "demo" / ".01.tmp.ipynb"),
                    }
                }
            }
        )
    )
    relative_papermill_paths(nb, root / "notebooks" / "01_data.ipynb", root / "reports" / "demo" / "01_data.ipynb")
    meta = json.loads(nb.read_text())["metadata"]["papermill"]
    assert meta == {"input_path": "notebooks/01_data.ipynb", "output_path": "reports/demo/01_data.ipynb"}
    assert project_relative(tmp_path / "elsewhere") == str(tmp_path / "elsewhere")  # outside: as it is


def test_overrides_a_report_name_and_stage_records(tmp_path):
    """What a sweep point needs from the runner: profile values that win over the file's, a report
    folder of its own, and a note in the run directory of what each stage succeeded with."""
    from goalrm_core.pipeline.records import stage_is_current

    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    write_notebook(
        nbs / "01_alpha.ipynb",
        'profile = "demo"\nreports_dir = "reports/demo"\nrun_dir = "runs/demo"\nlr = 0.5',
        'record_metrics("alpha", {"lr": lr}, reports_dir)',
    )
    run = tmp_path / "run"
    _write_profile(tmp_path / "params", "tiny", f"run_dir: {json.dumps(str(run))}\nlr: 1.0\ntorch_threads: 1\n")
    kwargs = dict(
        notebooks_dir=nbs,
        params_dir=tmp_path / "params",
        reports_root=tmp_path / "reports",
        kernel_name=KERNEL,
        logs_dir=tmp_path / "logs",
        log=lambda _: None,
    )
    assert run_report("tiny", overrides={"lr": 0.25}, report_name="tiny-sweep/p", **kwargs) == 0
    metrics = json.loads((tmp_path / "reports" / "tiny-sweep" / "p" / "metrics.json").read_text())
    assert metrics["alpha"] == {"lr": 0.25} and metrics["provenance"]["profile"]["parameters"]["lr"] == 0.25
    assert metrics["provenance"]["profile"]["overrides"] == {"lr": 0.25}
    assert not (tmp_path / "reports" / "tiny").exists()
    assert stage_is_current(
        run, "01_alpha", {"profile": "x", "reports_dir": "elsewhere", "run_dir": str(run), "lr": 0.25}
    )
    assert not stage_is_current(run, "01_alpha", {"run_dir": str(run), "lr": 1.0})
    with pytest.raises(ValueError, match=r"^--set: key 'lr' expects float .*got str"):
        run_report("tiny", overrides={"lr": "fast"}, **kwargs)
    with pytest.raises(ValueError, match=r"^--set: key 'lrr' is not a parameter of any notebook; did you mean lr\?"):
        run_report("tiny", overrides={"lrr": 0.1}, **kwargs)


def test_stages_started_together_each_get_a_kernel_of_their_own(tmp_path):
    """Kernels started at once by separate stages must not share anything that one can take from
    another: over TCP, jupyter_client releases the ports it picked before the kernel binds them, and
    a kernel started beside it (another test worker) could bind one first and leave this stage waiting
    out its start timeout. On Unix the stage's kernel talks over sockets in a folder of its own,
    removed when the stage ends."""
    import os
    import socket
    import tempfile
    import threading

    from goalrm_core.pipeline.execute import execute_stage

    nb = tmp_path / "where.ipynb"
    write_notebook(
        nb,
        "out = ''",
        "from ipykernel.connect import get_connection_info\n"
        "info = get_connection_info(unpack=True)\n"
        "open(out, 'w').write(info['transport'] + ' ' + info['ip'])",
        head=__import__("nbformat").v4.new_code_cell("pass"),
    )
    before = set(os.listdir(tempfile.gettempdir()))
    results: dict[int, tuple] = {}

    def stage(i: int) -> None:
        results[i] = execute_stage(
            nb, tmp_path / f"out{i}.ipynb", {"out": str(tmp_path / f"where{i}.txt")}, KERNEL, tmp_path
        )

    threads = [threading.Thread(target=stage, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[i] == (None, True) for i in range(3)), results
    where = [(tmp_path / f"where{i}.txt").read_text().split() for i in range(3)]
    if hasattr(socket, "AF_UNIX") and len(tempfile.gettempdir()) < 50:
        assert {w[0] for w in where} == {"ipc"}
        assert len({w[1] for w in where}) == 3  # three folders, none shared
        assert not any(os.path.exists(os.path.dirname(w[1])) for w in where)  # and all removed
    leftover = {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("goalrm-kernel-")}
    assert not leftover
