"""The profile's rm: block: the trainer's settings under TrainRMConfig's names, from the YAML to the config;
an old key refused in one line naming its new name, on a command line and in a sweep's folders alike."""

import json
from pathlib import Path

import pytest

from goalrm_core.pipeline.profile_files import load_profile
from goalrm_core.pipeline.profile_values import parse_set_flags
from goalrm_core.report.sweep_layout import point_folder, renamed_point, renamed_record
from goalrm_core.study.recipe import OLD_KEYS, notebook_recipe


@pytest.mark.parametrize("old, new", OLD_KEYS.items())
def test_an_old_key_is_refused_in_one_line_naming_its_new_name(tmp_path, old, new):
    (tmp_path / "p.yaml").write_text(f"run_dir: runs/p\n{old}: 1\n")
    with pytest.raises(ValueError) as e:
        load_profile("p", tmp_path)
    assert str(e.value) == f"{tmp_path / 'p.yaml'}: key {old!r} is now rm.{new}" and "\n" not in str(e.value)


def test_the_demo_example_of_the_issue(tmp_path):
    (tmp_path / "demo.yaml").write_text("contrastive_beta: 0.5\n")
    with pytest.raises(ValueError, match=r"demo.yaml: key 'contrastive_beta' is now rm.contrastive_loss_beta$"):
        load_profile("demo", tmp_path)


def test_a_trainer_key_outside_the_block_and_an_old_key_inside_it_are_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("sim_samples: 4\n")
    with pytest.raises(ValueError, match=r"key 'sim_samples' is now rm.sim_samples"):
        load_profile("a", tmp_path)
    (tmp_path / "b.yaml").write_text("rm:\n  rm_steps: 4\n")
    with pytest.raises(ValueError, match=r"key 'rm.rm_steps' is now rm.max_steps$"):
        load_profile("b", tmp_path)
    (tmp_path / "c.yaml").write_text("rm:\n  max_stepz: 4\n")
    with pytest.raises(ValueError, match=r"key 'rm.max_stepz' is no setting of the trainer.*did you mean max_steps"):
        load_profile("c", tmp_path)


def test_set_and_grid_read_through_the_same_rule():
    assert parse_set_flags(["rm.max_steps=200", "sim_samples=4"]) == {"max_steps": 200, "sim_samples": 4}
    with pytest.raises(ValueError, match=r"^--set: key 'rm_steps' is now rm.max_steps$"):
        parse_set_flags(["rm_steps=200"])
    from goalrm_core.pipeline.sweep import parse_grid_flag

    assert parse_grid_flag("rm.contrastive_loss_beta=0,0.5") == ("contrastive_loss_beta", [0, 0.5])
    with pytest.raises(ValueError, match=r"^--grid: key 'contrastive_beta' is now rm.contrastive_loss_beta$"):
        parse_grid_flag("contrastive_beta=0,0.5")


def test_the_rm_block_values_reach_the_trainer_config_by_name(tmp_path):
    (tmp_path / "base.yaml").write_text(
        "max_new_tokens: 48\nrm:\n  max_steps: 400\n  contrastive_loss_beta: 0.5\n  learning_rate: 0.0005\n"
    )
    (tmp_path / "p.yaml").write_text("base: base\nrm:\n  max_steps: 7\n  encoding: split\n")
    settings = load_profile("p", tmp_path)
    assert {k: settings[k] for k in ("max_steps", "contrastive_loss_beta", "learning_rate", "encoding")} == {
        "max_steps": 7,
        "contrastive_loss_beta": 0.5,
        "learning_rate": 0.0005,
        "encoding": "split",
    }  # the base's, key by key
    cfg = notebook_recipe(settings)
    assert (cfg.max_steps, cfg.contrastive_loss_beta, cfg.learning_rate, cfg.encoding) == (7, 0.5, 0.0005, "split")
    assert cfg.contrastive_settings().contrastive_loss_beta == 0.5  # and the loss's settings, still by that name


def test_an_older_sweeps_folder_is_read_through_the_rename(tmp_path):
    old = tmp_path / "contrastive_beta=0.1"
    old.mkdir()
    (old / "point.json").write_text(
        json.dumps(
            {
                "point": old.name,
                "values": {"contrastive_beta": 0.1},
                "overrides": {
                    "rm_steps": 200,
                    "contrastive_beta": 0.1,
                    "run_dir": "runs/demo-sweep-ablations/contrastive_beta=0.1",
                },
            }
        )
    )
    assert renamed_point(old.name) == "contrastive_loss_beta=0.1"
    assert point_folder(tmp_path, "contrastive_loss_beta=0.1") == old
    record = renamed_record(json.loads((old / "point.json").read_text()))
    assert record["values"] == {"contrastive_loss_beta": 0.1} and record["point"] == "contrastive_loss_beta=0.1"
    assert record["overrides"] == {
        "max_steps": 200,
        "contrastive_loss_beta": 0.1,
        "run_dir": "runs/demo-sweep-ablations/contrastive_loss_beta=0.1",
    }
    plan = renamed_record(
        {
            "grid": {"contrastive_beta": [0.1]},
            "common": {"rm_steps": 200},
            "base_values": {"contrastive_beta": 0.5},
            "points": [{"name": old.name, "values": {"contrastive_beta": 0.1}}],
        },
        names=False,
    )
    assert plan["grid"] == {"contrastive_loss_beta": [0.1]} and plan["common"] == {"max_steps": 200}
    assert plan["points"] == [
        {"name": old.name, "values": {"contrastive_loss_beta": 0.1}}
    ]  # the page links the folder as it is


# ------------------------------------------------------------------ a run folder or sweep from before the block

_BEFORE = {new: old for old, new in OLD_KEYS.items()}  # a key's name before the rm: block


def _as_before(parameters: dict) -> dict:
    """Parameters as a run before the rm: block recorded them (``max_steps`` was ``rm_steps``)."""
    return {_BEFORE.get(k, k): v for k, v in parameters.items()}


def _demo_params(tmp_path):
    """params/demo.yaml with its run in ``tmp_path / "run"``."""
    import yaml
    from conftest import profile_file

    params = tmp_path / "params"
    params.mkdir()
    (params / "demo.yaml").write_text(
        yaml.safe_dump(profile_file(load_profile("demo") | {"run_dir": str(tmp_path / "run")}))
    )
    return params


def test_a_run_folder_recorded_before_the_rm_block_is_current_with_the_same_values(tmp_path):
    """Stage records name the trainer's settings as notebook 02 now receives them (max_steps); a run folder
    recorded before the rm: block (rm_steps) is current where its values are the same, so neither a sweep
    sharing its stages nor anything else reruns a stage for the rename; another value is not current."""
    from goalrm_core.data.rundir import RunDir
    from goalrm_core.pipeline.records import record_stage, stage_is_current
    from goalrm_core.pipeline.runner import stage_parameters
    from goalrm_core.pipeline.sweep import _stale_shared_stages, plan_sweep

    plan = plan_sweep(
        "demo",
        {"goal_method": ["random_token"]},
        stages="03-04",
        params_dir=_demo_params(tmp_path),
        reports_root=tmp_path / "reports",
    )
    assert (
        plan.shared == ["01_data", "02_training"] and _stale_shared_stages(plan) == plan.shared
    )  # nothing recorded yet
    now = {s: stage_parameters(plan.profile, plan.settings, plan.declared[s], plan.report_dir, s) for s in plan.shared}
    for stage in plan.shared:
        record_stage(plan.base_run, stage, _as_before(now[stage]))
    recorded = json.loads(RunDir(plan.base_run).stage_record("02_training").read_text())["parameters"]
    assert {"rm_steps", "contrastive_beta", "rm_learning_rate"} <= set(recorded) and "max_steps" not in recorded
    assert _stale_shared_stages(plan) == []  # current: the same values under the names before the block
    training = now["02_training"]
    assert stage_is_current(plan.base_run, "02_training", training)
    assert not stage_is_current(plan.base_run, "02_training", {**training, "max_steps": training["max_steps"] + 1})
    record_stage(plan.base_run, "02_training", {**_as_before(training), "max_steps": training["max_steps"]})
    assert not stage_is_current(
        plan.base_run, "02_training", training
    )  # an old key beside its new name: neither is read
    assert _stale_shared_stages(plan) == ["02_training"]


def test_a_resumed_older_sweep_finds_its_points_folders_for_the_paired_delta_and_the_page(tmp_path, monkeypatch):
    """An older sweep's points ran under the names before the rm: block (contrastive_beta=0.1, in the report
    and the run folders); resumed, its complete points are found there, the paired Δ against the base point
    is computed from their run folders and written beside their reports, and the page links them as they are."""
    from goalrm_core.pipeline.sweep import plan_sweep, point_complete, record_paired_deltas
    from goalrm_core.report.sweep_layout import PAIRED_FILE, PLAN_FILE, POINT_MANIFEST
    from goalrm_core.report.sweep_page import point_rows, write_comparison
    from goalrm_core.study import artifacts

    plan = plan_sweep(
        "demo",
        {"contrastive_loss_beta": [0.1, 0.5]},
        seeds=[0],
        params_dir=_demo_params(tmp_path),
        reports_root=tmp_path / "reports",
        name="b",
    )
    assert [p.name for p in plan.points] == ["contrastive_loss_beta=0.1", "contrastive_loss_beta=0.5"]
    assert plan.default_point == "contrastive_loss_beta=0.5"  # the demo's beta
    rewards = {"contrastive_beta=0.1": [0.9, 0.1] * 10, "contrastive_beta=0.5": [0.6, 0.4, 0.3, 0.7] * 5}
    for p in plan.points:
        old = "contrastive_beta=" + p.name.split("=")[1]
        overrides = _as_before(plan.overrides(p))
        overrides["run_dir"] = str(Path(overrides["run_dir"]).parent / old)
        (plan.report_dir / old).mkdir(parents=True)
        (plan.report_dir / old / "metrics.json").write_text("{}")
        (plan.report_dir / old / POINT_MANIFEST).write_text(
            json.dumps({"point": old, "values": _as_before(p.values), "overrides": overrides, "stages": plan.stages})
        )
        (plan.run_root / old).mkdir(parents=True)
        (plan.run_root / old / "rows.json").write_text(
            json.dumps(
                [{"question": f"q{i}", "is_correct": i % 2 == 0, "reward": r} for i, r in enumerate(rewards[old])]
            )
        )
        assert point_complete(plan, p) and plan.run_folder(p.name) == plan.run_root / old

    def headline_rows(
        run_dir, rm, bench, headline="greedy", seed=0
    ):  # the point's scored generations, from its run folder
        return json.loads((Path(run_dir) / "rows.json").read_text())

    monkeypatch.setattr(artifacts, "headline_rows", headline_rows)
    assert record_paired_deltas(plan, n_boot=50) == ["contrastive_loss_beta=0.1"]
    paired = json.loads((plan.report_dir / "contrastive_beta=0.1" / PAIRED_FILE).read_text())
    assert paired["base_point"] == "contrastive_loss_beta=0.5" and paired["delta"] > 0
    assert not (plan.report_dir / "contrastive_loss_beta=0.1").exists()  # no folder under the new name

    (plan.report_dir / PLAN_FILE).write_text(json.dumps(plan.record()))  # as the resumed sweep writes it: today's names
    rows = {r["point"]: r for r in point_rows(plan.record(), plan.report_dir)}
    assert (
        rows["contrastive_loss_beta=0.1"]["status"] == "complete"
        and rows["contrastive_loss_beta=0.1"]["vs_base"] == paired
    )
    assert rows["contrastive_loss_beta=0.1"]["folder"] == "contrastive_beta=0.1"
    page = write_comparison(plan.report_dir).read_text()
    assert 'href="contrastive_beta=0.1/metrics.json"' in page and 'href="contrastive_loss_beta=0.1/' not in page
    assert "2 of 2 points complete" in page
