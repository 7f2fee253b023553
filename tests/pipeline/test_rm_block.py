"""The profile's rm: block: the trainer's settings under TrainRMConfig's names, from the YAML to the config;
an old key refused in one line naming its new name, on a command line and in a sweep's folders alike."""

import json

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
    (tmp_path / "base.yaml").write_text("max_new_tokens: 48\nrm:\n  max_steps: 400\n  contrastive_loss_beta: 0.5\n"
                                        "  learning_rate: 0.0005\n")
    (tmp_path / "p.yaml").write_text("base: base\nrm:\n  max_steps: 7\n  encoding: split\n")
    settings = load_profile("p", tmp_path)
    assert {k: settings[k] for k in ("max_steps", "contrastive_loss_beta", "learning_rate", "encoding")} == {
        "max_steps": 7, "contrastive_loss_beta": 0.5, "learning_rate": 0.0005, "encoding": "split"}  # the base's, key by key
    cfg = notebook_recipe(settings)
    assert (cfg.max_steps, cfg.contrastive_loss_beta, cfg.learning_rate, cfg.encoding) == (7, 0.5, 0.0005, "split")
    assert cfg.contrastive_settings().contrastive_loss_beta == 0.5  # and the loss's settings, still by that name


def test_an_older_sweeps_folder_is_read_through_the_rename(tmp_path):
    old = tmp_path / "contrastive_beta=0.1"
    old.mkdir()
    (old / "point.json").write_text(json.dumps({"point": old.name, "values": {"contrastive_beta": 0.1},
                                                "overrides": {"rm_steps": 200, "contrastive_beta": 0.1,
                                                              "run_dir": "runs/demo-sweep-ablations/contrastive_beta=0.1"}}))
    assert renamed_point(old.name) == "contrastive_loss_beta=0.1"
    assert point_folder(tmp_path, "contrastive_loss_beta=0.1") == old
    record = renamed_record(json.loads((old / "point.json").read_text()))
    assert record["values"] == {"contrastive_loss_beta": 0.1} and record["point"] == "contrastive_loss_beta=0.1"
    assert record["overrides"] == {"max_steps": 200, "contrastive_loss_beta": 0.1,
                                   "run_dir": "runs/demo-sweep-ablations/contrastive_loss_beta=0.1"}
    plan = renamed_record({"grid": {"contrastive_beta": [0.1]}, "common": {"rm_steps": 200}, "base_values": {"contrastive_beta": 0.5},
                           "points": [{"name": old.name, "values": {"contrastive_beta": 0.1}}]}, names=False)
    assert plan["grid"] == {"contrastive_loss_beta": [0.1]} and plan["common"] == {"max_steps": 200}
    assert plan["points"] == [{"name": old.name, "values": {"contrastive_loss_beta": 0.1}}]  # the page links the folder as it is
