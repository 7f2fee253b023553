"""``goalrm sweep``: grids become points, bad keys and values stop it before any stage runs, the
comparison page says what the numbers say, and (under the smoke profile) a 2x1 sweep runs, resumes
after a kill, trains an unchanged RM once and reproduces the plain report's numbers."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import profile_file

from goalrm_core.data.rundir import RunDir
from goalrm_core.paths import resolve_path
from goalrm_core.pipeline.profile_files import available_profiles, load_profile
from goalrm_core.pipeline.sweep import load_sweep_spec, main, parse_grid_flag, plan_sweep, point_name
from goalrm_core.report.sweep_page import render_comparison, verdict, write_comparison

NOTEBOOKS = resolve_path("notebooks")


def smoke_params(root: Path) -> Path:
    """params/smoke.yaml with its run in ``root`` and one thread (identical numbers need it)."""
    params = root / "params"
    params.mkdir(parents=True, exist_ok=True)
    profile = load_profile("smoke") | {"run_dir": str(root / "run"), "torch_threads": 1}
    (params / "smoke.yaml").write_text(yaml.safe_dump(profile_file(profile)))
    return params


# ------------------------------------------------------------------------------------------ plans


def test_grid_flags_and_point_names():
    assert parse_grid_flag("rm.contrastive_loss_beta=0,0.1, 1") == ("contrastive_loss_beta", [0, 0.1, 1])
    assert parse_grid_flag("contrastive_strategy=cosine_avg") == ("contrastive_strategy", ["cosine_avg"])
    assert (
        point_name({"contrastive_loss_beta": 0.5, "goal_method": "random_token"})
        == "contrastive_loss_beta=0.5__goal_method=random_token"
    )
    assert point_name({}) == "base"
    for bad in (
        "rm.contrastive_loss_beta",
        "=1",
        "rm.contrastive_loss_beta=",
        "rm.contrastive_loss_beta=0,,1",
        "rm.contrastive_loss_beta=nan",
        "contrastive_beta=0.1",
        "rm.contrastive_beta=0.1",
        "rm.contrastive_loss_bta=0.1",
    ):
        with pytest.raises(ValueError):
            parse_grid_flag(bad)


def test_cartesian_and_one_at_a_time_points(tmp_path):
    params = smoke_params(tmp_path)
    plan = plan_sweep(
        "smoke",
        {"contrastive_loss_beta": [0, 0.5], "goal_state_percentile": [0, 0.5]},
        params_dir=params,
        reports_root=tmp_path / "reports",
    )
    assert [p.name for p in plan.points] == [
        "contrastive_loss_beta=0__goal_state_percentile=0",
        "contrastive_loss_beta=0__goal_state_percentile=0.5",
        "contrastive_loss_beta=0.5__goal_state_percentile=0",
        "contrastive_loss_beta=0.5__goal_state_percentile=0.5",
    ]
    assert plan.points[0].values == {
        "contrastive_loss_beta": 0.0,
        "goal_state_percentile": 0.0,
    }  # ints become the declared floats
    assert (plan.stages, plan.shared) == (["02_training", "03_representations", "04_evaluation"], ["01_data"])
    # smoke's beta is 0.5 and notebook 02's goal_state_percentile default is 0.0
    assert plan.default_point == "contrastive_loss_beta=0.5__goal_state_percentile=0"
    assert plan.title == "smoke-sweep-contrastive_loss_beta-goal_state_percentile"
    assert plan.run_root == tmp_path / "smoke-sweep-contrastive_loss_beta-goal_state_percentile"
    over = plan.overrides(plan.points[1])
    assert over["run_dir"] == str(plan.run_root / plan.points[1].name) and over["rm_store"] == str(
        tmp_path / "run" / "rm-store"
    )

    one = plan_sweep(
        "smoke",
        {"contrastive_loss_beta": [0.1, 0.5, 1.0], "goal_method": ["random_token"]},
        one_at_a_time=True,
        seeds=[0, 1],
        params_dir=params,
        reports_root=tmp_path / "reports",
        name="ab",
    )
    assert [p.name for p in one.points] == [
        "base",
        "contrastive_loss_beta=0.1",
        "contrastive_loss_beta=1",
        "goal_method=random_token",
    ]
    assert one.default_point == "base" and one.common == {"rm_seeds": [0, 1]}


@pytest.mark.parametrize(
    "grid, message",
    [
        (
            {"contrastive_loss_bta": [0.1]},
            r"'contrastive_loss_bta' is not a parameter of any notebook; did you mean contrastive_loss_beta",
        ),
        (
            {"rm.contrastive_loss_bta": [0.1]},
            r"^--grid: key 'rm.contrastive_loss_bta' is no setting of the trainer .*did you mean contrastive_loss_beta",
        ),
        ({"contrastive_beta": [0.1]}, r"^--grid: key 'contrastive_beta' is now rm.contrastive_loss_beta$"),
        ({"rm.rm_steps": [10]}, r"^--grid: key 'rm.rm_steps' is now rm.max_steps$"),
        ({"n_samples": [2]}, r"'n_samples' is read by 01_data, which the sweep shares"),
        ({"run_dir": ["x"]}, r"'run_dir' is set by the sweep itself"),
        ({"rm.contrastive_loss_beta": ["high"]}, r"key 'contrastive_loss_beta' expects float .* got str"),
        (
            {"rm.contrastive_loss_beta": [-1]},
            r"contrastive_loss_beta=-1: --contrastive_loss_beta must be a finite number >= 0",
        ),
        ({"rm.contrastive_strategy": ["cosine", "dot"]}, r"unknown contrastive_strategy 'dot'"),
        ({"rm.value_head_strategy": ["deep"]}, r"unknown value_head_strategy 'deep'"),
        (
            {"rm.source_state_percentile": [1.5]},
            r"--source_state_percentile must be a finite number in \[0, 1\), got 1.5",
        ),
        ({"goal_method": ["mean_last", "median"]}, r"unknown goal_method 'median'"),
        ({"rm.sim_samples": [0]}, r"--sim_samples must be an integer >= 1, got 0"),
        ({"rm.contrastive_loss_beta": [0.1, 0.1]}, r"repeats a value"),
    ],
)
def test_a_bad_grid_key_or_value_fails_before_any_stage_runs(tmp_path, capsys, grid, message):
    params = smoke_params(tmp_path)
    argv = ["--profile", "smoke", "--params-dir", str(params), "--reports-dir", str(tmp_path / "reports")]
    argv += [f"--grid={k}={','.join(map(str, v))}" for k, v in grid.items()]
    with pytest.raises(ValueError, match=message):
        main(argv)
    assert not (tmp_path / "reports").exists() and not (tmp_path / "run").exists()
    assert not list(tmp_path.glob("smoke-sweep-*"))


def test_stages_must_be_contiguous_and_grid_keys_read_by_them(tmp_path):
    params = smoke_params(tmp_path)
    with pytest.raises(ValueError, match="skips 03_representations"):
        plan_sweep("smoke", {"contrastive_loss_beta": [0.1]}, stages="02,04", params_dir=params)
    with pytest.raises(ValueError, match="is read by 02_training, which the sweep shares"):
        plan_sweep("smoke", {"contrastive_loss_beta": [0.1]}, stages="03-04", params_dir=params)
    with pytest.raises(
        ValueError, match="read only by 04_evaluation, which --stages 02_training-03_representations does not run"
    ):
        plan_sweep("smoke", {"headline": ["greedy"]}, stages="02-03", params_dir=params)
    with pytest.raises(ValueError, match="unknown stage '07'"):
        plan_sweep("smoke", {"contrastive_loss_beta": [0.1]}, stages="02-07", params_dir=params)


def test_the_ablations_spec_is_a_sweep_not_a_profile():
    assert "ablations" not in available_profiles()
    with pytest.raises(ValueError, match="sweep spec, not a profile"):
        load_profile("ablations")
    spec = load_sweep_spec("ablations")
    assert spec["one_at_a_time"] and spec["profile"] == "demo" and spec["seeds"] == [0]
    assert set(spec["grid"]) == {
        "contrastive_loss_beta",
        "source_state_percentile",
        "goal_state_percentile",
        "sim_samples",
        "unsim_samples",
        "contrastive_strategy",
        "value_head_strategy",
        "goal_method",
    }
    assert set(spec["grid"]["goal_method"]) == {"random_token", "mean_all_tokens", "random_response"}
    plan = plan_sweep(
        spec["profile"],
        spec["grid"],
        one_at_a_time=True,
        stages=spec["stages"],
        seeds=spec["seeds"],
        common=spec["common"],
        name=spec["name"],
    )  # every point passes every check
    assert plan.points[0].name == "base" and plan.title == "demo-sweep-ablations"
    assert len(plan.points) == 1 + sum(len(v) for v in spec["grid"].values())


def test_the_committed_ablation_sweep_counts_every_point_complete_from_committed_files(tmp_path):
    """The page counts a point complete by its manifest: the committed sweep must carry its manifests (they
    were once ignored, and a re-render from a clean clone said no point had finished)."""
    from goalrm_core.pipeline.sweep import point_complete
    from goalrm_core.report.sweep_layout import POINT_MANIFEST

    spec = load_sweep_spec("ablations")
    plan = plan_sweep(
        spec["profile"],
        spec["grid"],
        one_at_a_time=True,
        stages=spec["stages"],
        seeds=spec["seeds"],
        common=spec["common"],
        name=spec["name"],
        reports_root=resolve_path("reports"),
    )
    # the sweep ran before the rm: block: its contrastive_beta=0.1 is the point contrastive_loss_beta=0.1, found in its
    # folder
    committed = [p for p in plan.points if (plan.report_folder(p.name) / "metrics.json").exists()]
    assert len(committed) == len(plan.points)
    assert any(plan.report_folder(p.name).name != p.name for p in committed)  # read through the rename
    assert all(point_complete(plan, p) for p in committed), [p.name for p in committed if not point_complete(plan, p)]
    manifest = plan.report_folder(plan.points[0].name) / POINT_MANIFEST
    ignored = subprocess.run(["git", "check-ignore", "-q", str(manifest)], cwd=resolve_path("."))
    if ignored.returncode == 128:
        pytest.skip("no git here to ask what is committed")
    assert ignored.returncode == 1, f"{manifest} is git-ignored: a clean clone would render a page with no point"
    n = len(plan.points)
    assert f"{n} of {n} points complete" in (plan.report_dir / "index.html").read_text(encoding="utf-8")


def test_restoring_manifests_refuses_a_point_whose_recorded_parameters_differ(tmp_path):
    import shutil

    spec = load_sweep_spec("ablations")
    src = resolve_path("reports") / f"{spec['profile']}-sweep-{spec['name']}"
    dst = tmp_path / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("index.html"))
    for manifest in dst.glob("*/point.json"):
        manifest.unlink()
    changed = next(p for p in dst.iterdir() if p.is_dir() and "=" in p.name)
    metrics = json.loads((changed / "metrics.json").read_text())
    key = changed.name.split("=")[0]
    metrics["provenance"]["profile"]["parameters"][key] = "something else"
    (changed / "metrics.json").write_text(json.dumps(metrics))
    script = [
        sys.executable,
        str(resolve_path("scripts/restore_sweep_manifests.py")),
        "--spec",
        "ablations",
        "--reports-dir",
        str(tmp_path),
    ]
    run = subprocess.run(script, cwd=resolve_path("."), capture_output=True, text=True)
    assert run.returncode == 2 and changed.name in run.stderr and "something else" in run.stderr
    assert not list(dst.glob("*/point.json"))  # nothing written when one point fails
    (changed / "metrics.json").write_text((src / changed.name / "metrics.json").read_text())
    run = subprocess.run(script, cwd=resolve_path("."), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert len(list(dst.glob("*/point.json"))) == len(json.loads((dst / "sweep.json").read_text())["points"])


# --------------------------------------------------------------------------------- comparison page


def _metrics(goal, goal_ci, base=0.6, acc=0.8, saved=12.5):
    ev = {
        "goal-conditioned": {
            "toy-id": {
                "auroc": goal,
                "auroc_ci_low": goal_ci[0],
                "auroc_ci_high": goal_ci[1],
                "filter_validation": {
                    "tokens_saved_pct": saved,
                    "tokens_saved_ci_low": saved - 2,
                    "tokens_saved_ci_high": saved + 2,
                    "accuracy": 0.9,
                },
            },
            "toy-zero": {"auroc": 0.55, "auroc_ci_low": 0.5, "auroc_ci_high": 0.6},
        },
        "baseline": {"toy-id": {"auroc": base, "auroc_ci_low": base - 0.05, "auroc_ci_high": base + 0.05}},
        "delta_auroc": {"toy-id": {"mean": goal - base, "ci_low": goal - base - 0.05, "ci_high": goal - base + 0.05}},
    }
    training = {
        rm: {"eval_accuracy": acc, "eval_accuracy_ci": [float("nan"), float("nan")], "n_seeds": 1, "steps": 6}
        for rm in ("baseline", "goal-conditioned")
    }
    return {"evaluation": ev, "training": training}


def _write_sweep(root: Path, scores: dict, default="base", key="contrastive_loss_beta"):
    """A one-key sweep of ``key`` (``contrastive_beta``: as a sweep before the rm: block wrote it) whose points
    ``scores`` names."""
    plan = {
        "profile": "demo",
        "name": "t",
        "grid": {key: [0.1, 1.0]},
        "one_at_a_time": True,
        "stages": ["02_training"],
        "shared": ["01_data"],
        "common": {},
        "base_values": {key: 0.5},
        "default_point": default,
        "n_eval_pairs": 100,
        "points": [{"name": n, "values": {} if n == "base" else {key: float(n.split("=")[1])}} for n in scores],
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "sweep.json").write_text(json.dumps(plan))
    for name, (goal, ci) in scores.items():
        (root / name).mkdir()
        (root / name / "metrics.json").write_text(json.dumps(_metrics(goal, ci)))
        (root / name / "point.json").write_text("{}")
    return plan


def _paired(root: Path, point: str, delta: float, low: float, high: float, p: float) -> None:
    (root / point / "paired_vs_base.json").write_text(
        json.dumps(
            {
                "base_point": "base",
                "rm": "goal-conditioned",
                "benchmark": "toy-id",
                "delta": delta,
                "ci_low": low,
                "ci_high": high,
                "p_value": p,
            }
        )
    )


def test_the_verdict_judges_by_the_paired_delta_against_the_base_point_with_holm(tmp_path):
    from goalrm_core.report.sweep_page import point_rows

    scores = {
        "base": (0.70, (0.66, 0.74)),
        "contrastive_loss_beta=0.1": (0.80, (0.76, 0.84)),
        "contrastive_loss_beta=1": (0.80, (0.75, 0.85)),
    }
    unpaired = _write_sweep(tmp_path / "a", scores)
    text = verdict(unpaired, point_rows(unpaired, tmp_path / "a"))
    assert (
        "highest, 0.80, at contrastive_loss_beta=0.1, contrastive_loss_beta=1 (tied at two decimals)" in text
    )  # both tied points named
    assert "No paired Δ against the base point is recorded" in text and "compares no points" in text
    assert "The base point “base” (the demo profile's values; 6 RM steps, 1 RM seed) scores 0.70 [0.66, 0.74]" in text
    paired = _write_sweep(tmp_path / "b", scores)
    _paired(tmp_path / "b", "contrastive_loss_beta=0.1", 0.10, 0.05, 0.15, 0.002)
    _paired(tmp_path / "b", "contrastive_loss_beta=1", 0.10, -0.01, 0.20, 0.04)
    text = verdict(paired, point_rows(paired, tmp_path / "b"))
    assert "2 comparisons, p-values Holm-corrected over the 2" in text
    # 0.002 * 2 = 0.004 survives; 0.04 (the larger, times 1) does not reach 0.05 either way: both survive here
    assert "contrastive_loss_beta=0.1 +0.10 [+0.05, +0.15] (Holm p 0.004)" in text
    _paired(tmp_path / "b", "contrastive_loss_beta=1", 0.02, -0.01, 0.05, 0.30)
    text = verdict(paired, point_rows(paired, tmp_path / "b"))
    assert "no detectable difference at the other 1" in text
    page = render_comparison(paired, tmp_path / "b")
    assert page.index("<h2>Results</h2>") < page.index("<h2>Configuration of each point</h2>")  # results first
    assert "(base point)" in page and "(default)" not in page


@pytest.mark.parametrize(
    "key", ["contrastive_loss_beta", "contrastive_beta"]
)  # a sweep of today, one before the rm: block
def test_the_comparison_page_links_only_files_that_are_there(tmp_path, key):
    root = tmp_path / "demo-sweep-t"
    _write_sweep(root, {"base": (0.70, (0.66, 0.74)), f"{key}=0.1": (0.80, (0.76, 0.84))}, key=key)
    (root / "base" / "index.html").write_text("<html></html>")
    page = write_comparison(root).read_text()
    assert 'href="base/index.html"' in page and f'href="{key}=0.1/metrics.json"' in page  # the folder as it is named
    assert f'href="{key}=0.1/index.html"' not in page  # not there: not linked
    assert "<h3>contrastive_loss_beta</h3>" in page and "data:image/png;base64," in page  # the key under today's name
    assert "contrastive_loss_beta=0.1" in page and "2 of 2 points complete" in page  # its point, found in its folder
    assert "0.80 [0.71, 0.87]" in page  # one seed: the Wilson interval over the 100 held-out pairs
    assert "12.5 [10.5, 14.5] %" in page and "toy-zero" in page
    committed = render_comparison(json.loads((root / "sweep.json").read_text()), root, report_links=False)
    assert "index.html" not in committed.replace("<html", "")


# ------------------------------------------------------------------------------ the smoke sweep


def _kill_tree(pid: int) -> None:
    """Freeze the process and every descendant (until no new one appears), then kill them all: a
    crash, not a polite stop."""
    frozen: dict[int, psutil.Process] = {}
    while True:
        try:
            procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        new = [p for p in procs if p.pid not in frozen]
        if not new:
            break
        for p in new:
            try:
                p.suspend()
                frozen[p.pid] = p
            except psutil.NoSuchProcess:
                pass
    for p in frozen.values():
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(list(frozen.values()), timeout=30)


@pytest.mark.notebook
def test_smoke_sweep_runs_resumes_after_a_kill_and_reproduces_the_report(tmp_path, request, capsys):
    params = smoke_params(tmp_path)
    argv = [
        "sweep",
        "--profile",
        "smoke",
        "--params-dir",
        str(params),
        "--reports-dir",
        str(tmp_path / "reports"),
        "--grid",
        "rm.contrastive_loss_beta=0.1,0.5",
        "--grid",
        "goal_method=mean_last",
        "--name",
        "t",
    ]
    reports = tmp_path / "reports" / "smoke-sweep-t"
    first, second = (
        "contrastive_loss_beta=0.1__goal_method=mean_last",
        "contrastive_loss_beta=0.5__goal_method=mean_last",
    )
    log = (tmp_path / "sweep.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "goalrm_core.cli", *argv],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=resolve_path("."),
        env={**os.environ, "PYTHONPATH": str(resolve_path("."))},
    )
    deadline = time.monotonic() + 1800  # a guard against a hang, not a timing assertion
    while not (reports / first / "point.json").exists():
        assert proc.poll() is None, (tmp_path / "sweep.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "the first point never finished"
        time.sleep(1)
    _kill_tree(proc.pid)  # the second point has started: kill it mid-way
    assert not (reports / second / "point.json").exists()
    manifest = (reports / first / "point.json").read_text()
    run = tmp_path / "run"
    data_record = RunDir(run).stage_record("01_data").read_text()

    from goalrm_core.cli import main as cli_main

    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert f"[{first}] complete: skipped" in out and "shared stage(s) 01_data: current" in out
    assert (reports / first / "point.json").read_text() == manifest  # not run again
    assert RunDir(run).stage_record("01_data").read_text() == data_record  # one data stage served both points
    points = {p: RunDir(tmp_path / "smoke-sweep-t" / p) for p in (first, second)}
    for point in points.values():
        assert (point.root / "data").is_symlink() and point.data.resolve() == (run / "data").resolve()
    seed = load_profile("smoke")["rm_seeds"][0]
    assert (
        points[first].model("baseline", seed).resolve() == points[second].model("baseline", seed).resolve()
    )  # beta: baseline trained once
    assert (
        points[first].model("goal-conditioned", seed).resolve()
        != points[second].model("goal-conditioned", seed).resolve()
    )

    # beta 0.5 with the paper's goal is the smoke profile itself: the same numbers as the plain report
    plain = json.loads(
        (request.getfixturevalue("smoke_report")[1] / "metrics.json").read_text()
    )  # the shared one, asked for last
    swept = json.loads((reports / second / "metrics.json").read_text())
    for section in ("training", "representations", "evaluation"):
        assert swept[section] == plain[section], section

    page = (reports / "index.html").read_text()
    assert f'href="{first}/index.html"' in page and f'href="{second}/metrics.json"' in page
    assert "<h3>contrastive_loss_beta</h3>" in page and "<h3>goal_method</h3>" not in page  # one value: no figure
    assert "(base point)" in page and "2 of 2 points complete" in page
    assert (reports / first / "paired_vs_base.json").exists()  # the paired Δ against the base point (beta 0.5)


def test_the_page_names_the_code_its_points_ran_on_and_the_profile_reports(tmp_path):
    root = tmp_path / "demo-sweep-t"
    plan = _write_sweep(root, {"base": (0.70, (0.66, 0.74)), "contrastive_loss_beta=0.1": (0.80, (0.76, 0.84))})
    page = render_comparison(plan, root)
    assert "Code:" not in page  # no provenance recorded: nothing claimed
    for name, date in (
        ("base", "2026-12-01T10:00:00+00:00"),
        ("contrastive_loss_beta=0.1", "2026-12-02T10:00:00+00:00"),
    ):
        m = json.loads((root / name / "metrics.json").read_text())
        m["provenance"] = {"git": {"commit": "b1166d23" + "0" * 32, "dirty": True}, "date": date}
        (root / name / "metrics.json").write_text(json.dumps(m))
    page = render_comparison(plan, root)
    assert "Code: every point ran at b1166d2 with uncommitted changes (2026-12-01 to 2026-12-02)." in page
    (root.parent / "demo").mkdir()
    (root.parent / "demo" / "metrics.json").write_text(
        json.dumps({"provenance": {"git": {"commit": "e4d05a06" + "0" * 32, "dirty": False}}})
    )
    page = render_comparison(plan, root)
    assert "The demo report beside this sweep ran at e4d05a0: its numbers come from other code" in page
    assert "max-width: 86rem" not in page  # a reading column like every other page


def test_ctrl_c_in_a_sweep_is_one_line_saying_what_is_kept_and_how_to_resume(tmp_path, monkeypatch, capsys):
    """(53) Ctrl-C while a stage runs: no traceback, exit 130, one line with the points kept and the command."""
    from goalrm_core import cli
    from goalrm_core.pipeline import sweep

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_report", interrupted)
    params = smoke_params(tmp_path)
    argv = [
        "sweep",
        "--profile",
        "smoke",
        "--params-dir",
        str(params),
        "--reports-dir",
        str(tmp_path / "reports"),
        "--grid=rm.contrastive_loss_beta=0.1,0.5",
    ]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("goalrm sweep: interrupted: 0 of 2 point(s) complete in ")
    assert lines[0].endswith("resume with: goalrm sweep " + " ".join(argv[1:]))
