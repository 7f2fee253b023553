"""Notebook 02's study layer: the profile's rm: block to the trainer's config by name, one max_len, and
every RM of every seed trained side by side."""

import dataclasses
import json
import shutil
from pathlib import Path

import papermill as pm
import pytest

from goalrm_core.data.io import write_jsonl
from goalrm_core.data.rundir import RunDir
from goalrm_core.model.reward_model import load_reward_model
from goalrm_core.paths import resolve_path
from goalrm_core.pipeline.profile_files import available_profiles, load_profile
from goalrm_core.study import training as tr
from goalrm_core.study.recipe import RM_KEYS, TRAINER_KEYS
from goalrm_core.study.training import rm_max_len
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.store import STORED_KEY, store_trained_rm

NOTEBOOKS = resolve_path("notebooks")
# Parameters of notebook 02 that are not about how one RM trains: where it runs, how many at once, which seeds,
# which RMs (prm_arm adds the step-verifier arm, whose own settings are rms.OVERRIDES).
NOT_RECIPE_KEYS = {
    "profile",
    "run_dir",
    "reports_dir",
    "torch_threads",
    "rm_seeds",
    "rm_processes",
    "rm_parallel",
    "rm_store",
    "max_new_tokens",
    "prm_arm",
}  # max_new_tokens becomes max_len through rm_max_len


def notebook_code(name: str) -> str:
    cells = json.loads((NOTEBOOKS / name).read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def other_value(f: dataclasses.Field):
    """A valid value of trainer field ``f`` other than its default."""
    if f.metadata.get("choices"):
        return next(c for c in f.metadata["choices"] if c != f.default)
    if isinstance(f.default, bool):
        return not f.default
    if isinstance(f.default, float):
        return f.default + 0.125  # inside every float flag's declared range (fractions in [0, 1) included)
    if isinstance(f.default, int):
        return f.default + 5
    if f.name == "input_template":
        return "Question: {}\nAnswer:"  # a format string with the one {} the trainer requires
    if f.name == "target_modules":
        return "q_proj v_proj"  # module names, as LoRA's flag takes them
    return f"{f.name}-value"


# Settings the trainer takes only together (one alone is a one-line error): each set with its companions.
COMPANIONS = {
    "prompt_key": {"chosen_key": "c", "rejected_key": "r"},
    "chosen_key": {"rejected_key": "r"},
    "rejected_key": {"chosen_key": "c"},
    "load_in_4bit": {"bf16": True, "lora_rank": 4},
}
FIELDS = {f.name: f for f in dataclasses.fields(TrainRMConfig)}
# what notebook 02 decides itself: the token budget, the epoch limit and the metrics rows (notebook_recipe), the
# backbone, the pairs and the template of the embedded task (rm_config)
NOTEBOOK_02_SETS = ("max_len", "max_epochs", "logging_steps", "pretrain", "dataset", "eval_dataset", "template")


@pytest.mark.parametrize("key", RM_KEYS)
def test_every_rm_key_reaches_the_trainer_under_its_own_name(key, tmp_path):
    """A key of the rm: block is the trainer's field of that name, from the profile file to the config notebook 02
    trains: no key is renamed or dropped on the way."""
    value = other_value(FIELDS[key])
    block = {key: value, **COMPANIONS.get(key, {})}
    (tmp_path / "p.yaml").write_text(
        "max_new_tokens: 40\nrm:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in block.items())
    )
    settings = load_profile("p", tmp_path)
    assert settings[key] == value
    cfg = tr.rm_config(tr.notebook_recipe(settings), tmp_path, "goal-conditioned", 3)
    assert getattr(cfg, key) == value or key in NOTEBOOK_02_SETS
    assert cfg.seed == 3


def test_the_recipe_covers_every_training_key_notebook_02_declares():
    """Every training key in notebook 02's parameters is a trainer field of the same name, and the recipe the
    notebook builds from its parameters carries it to the trainer: nothing can be dropped on the way."""
    declared = pm.inspect_notebook(str(NOTEBOOKS / "02_training.ipynb"))
    assert set(declared) - NOT_RECIPE_KEYS <= set(RM_KEYS), sorted(set(declared) - NOT_RECIPE_KEYS - set(RM_KEYS))
    assert "recipe = tr.notebook_recipe(globals())" in notebook_code("02_training.ipynb")
    params = {key: other_value(FIELDS[key]) if key in FIELDS else None for key in declared} | {"max_new_tokens": 40}
    cfg = tr.notebook_recipe(params)
    for key in set(declared) - NOT_RECIPE_KEYS:
        assert getattr(cfg, key) == params[key], f"notebook 02 declares {key} but its recipe drops it"
    assert cfg.max_len == rm_max_len(40)


@pytest.mark.parametrize("profile", available_profiles())
def test_every_profile_training_key_reaches_the_trainer(profile, tmp_path, monkeypatch):
    """Each training key of a profile is the config's field of that name; a packaged model's name (real-lm's
    ``pretrain: smollm2-135m``) becomes its converted folder, here the tiny twin's, packaged as the real one."""
    from smollm2_twin import fake_package, write_twin_gguf

    from goalrm_core.model import pretrained

    settings = load_profile(profile)
    packaged = settings.get("pretrain") in pretrained.PACKAGED_MODELS
    if packaged:
        write_twin_gguf(tmp_path / "twin.gguf")
        model = fake_package(tmp_path / "site", tmp_path / "twin.gguf")
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        monkeypatch.setitem(pretrained.PACKAGED_MODELS, settings["pretrain"], model)
        monkeypatch.setenv(pretrained.CACHE_ENV, str(tmp_path / "cache"))
    cfg = TrainRMConfig.from_dict({k: v for k, v in settings.items() if k in TRAINER_KEYS})
    for key in settings.keys() & set(TRAINER_KEYS):
        expected = pretrained.resolve_model(settings[key]) if key == "pretrain" and packaged else settings[key]
        assert getattr(cfg, key) == expected, key
    if packaged:
        assert cfg.pretrain == str(tmp_path / "cache" / settings["pretrain"])


def test_max_len_comes_from_one_function():
    assert rm_max_len(48) == 160 and rm_max_len(96) == 256
    for name in ("02_training.ipynb", "03_representations.ipynb", "04_evaluation.ipynb"):
        code = notebook_code(name)
        assert "rm_max_len(max_new_tokens)" in code or "tr.notebook_recipe(globals())" in code, name
        assert "* max_new_tokens" not in code, f"{name} derives max_len itself"
    study = resolve_path("goalrm_core") / "study"
    assert not [p.name for p in study.glob("*.py") if "* max_new_tokens" in p.read_text() and p.name != "recipe.py"]


def test_rm_config_places_the_rm_in_the_run_directory(tmp_path):
    recipe = TrainRMConfig(max_steps=7, zero_stage=0, logging_steps=5)
    cfg = tr.rm_config(recipe, tmp_path, "goal-conditioned", 2)
    run = RunDir(tmp_path)
    assert (
        cfg.save_path == str(run.model("goal-conditioned", 2)) and cfg.metrics_path == cfg.save_path + ".metrics.jsonl"
    )
    assert (cfg.pretrain, cfg.dataset) == (str(run.policy), str(run.preference_pairs("train")))
    assert cfg.contrastive and cfg.seed == 2 and cfg.max_steps == 7 and cfg.template == "toymath"
    assert tr.rm_config(recipe, tmp_path, "baseline", 0, out_root=tmp_path / "cal", max_steps=9).save_path == str(
        tmp_path / "cal" / "baseline-seed0"
    )
    with pytest.raises(ValueError, match="unknown train-rm argument"):
        tr.rm_config(recipe, tmp_path, "baseline", 0, rm_steps=9)


def _tiny_run(base: Path, policy_dir) -> Path:
    """A run folder with the tiny policy and 24 digit-chain preference pairs (20 train, 4 eval)."""
    shutil.copytree(policy_dir, base / "data" / "policy")
    pairs = [
        {
            "question": f"{a} +{b}",
            "correct": f"{a}+{b}={(a + b) % 10}\n#{(a + b) % 10}",
            "incorrect": f"{a}+{b}={(a + b + 1) % 10}\n#{(a + b + 1) % 10}",
        }
        for a in range(1, 9)
        for b in range(1, 4)
    ]
    write_jsonl(base / "data" / "preference" / "train.jsonl", pairs[:20])
    write_jsonl(base / "data" / "preference" / "eval.jsonl", pairs[20:])
    return base


def _tiny_recipe(**overrides) -> TrainRMConfig:
    """Two optimiser steps of a tiny RM: enough to write every file a trained RM has."""
    return TrainRMConfig(
        max_steps=2,
        train_batch_size=4,
        micro_train_batch_size=4,
        eval_steps=-1,
        zero_stage=0,
        max_len=64,
        max_epochs=10,
        sim_samples=2,
        unsim_samples=2,
        logging_steps=5,
        **overrides,
    )


def test_train_rms_side_by_side_trains_every_rm_and_seed(tmp_path, tiny_policy_dir):
    """The demo trains its six RMs two at a time: each run must end with its own saved RM and log."""
    run = _tiny_run(tmp_path / "run", tiny_policy_dir)
    recipe = _tiny_recipe()
    # notebook 02's order: one RM through the one call, then the multi-seed helper, which does not train it again
    first = tr.train_rm(
        tr.rm_config(recipe, run, "goal-conditioned", 0), RunDir(run).training_log("goal-conditioned", 0), live=False
    )
    model = RunDir(run).model("goal-conditioned", 0)
    trained_at = (model / "config.json").stat().st_mtime_ns
    runs = tr.train_rms(
        run, ["baseline", "goal-conditioned"], [0], recipe, parallel=2, done={("goal-conditioned", 0): first}
    )
    assert (model / "config.json").stat().st_mtime_ns == trained_at
    assert list(runs["rm"]) == ["baseline", "goal-conditioned"] and list(runs["steps"]) == [2, 2]
    for rm in ("baseline", "goal-conditioned"):
        load_reward_model(RunDir(run).model(rm, 0))
        assert (run / "logs" / f"train-{rm}-seed0.log").exists()
    assert {r["strategy"] for _, r in runs.iterrows()} == {"vanilla", "contrastive"}
    curves = tr.training_curves(run, ["baseline", "goal-conditioned"], [0])
    assert set(curves["rm"]) == {"baseline", "goal-conditioned"} and set(curves["split"]) == {"train", "eval"}
    with pytest.raises(ValueError, match="parallel must be >= 1"):
        tr.train_rms(run, ["baseline"], [0], recipe, parallel=0)


def test_the_runs_left_over_by_the_side_by_side_rounds_share_every_thread(tmp_path, tiny_policy_dir, monkeypatch):
    """Five jobs two at a time: four with half the threads each, then the fifth alone with all of them,
    fixed by the job order (so the floats do not depend on timing); the rows keep the job order."""
    run = _tiny_run(tmp_path / "run", tiny_policy_dir)
    calls = []

    def fake_train_rm(cfg, log, *, threads_per_process, desc, **_):  # the scheduling, not the trainer, is tested
        calls.append((desc, threads_per_process))
        return {"steps": 2, "eval_accuracy": 0.5}

    monkeypatch.setattr(tr, "train_rm", fake_train_rm)
    runs = tr.train_rms(run, ["baseline"], [0, 1, 2, 3, 4], _tiny_recipe(), parallel=2, threads=4)
    assert list(runs["seed"]) == [0, 1, 2, 3, 4]
    assert sorted(calls[:4]) == [(f"baseline seed {s}", 2) for s in range(4)] and calls[4] == ("baseline seed 4", 4)
    calls.clear()  # one of them trained already: four left, two rounds of two
    runs = tr.train_rms(
        run, ["baseline"], [0, 1, 2, 3, 4], _tiny_recipe(), parallel=2, threads=4, done={("baseline", 0): {"steps": 2}}
    )
    assert sorted(calls) == [(f"baseline seed {s}", 2) for s in range(1, 5)] and len(runs) == 5
    calls.clear()  # one still training in the background holds a place: three more beside it in pairs, one left over
    from concurrent.futures import Future

    running = Future()
    threading_timer = __import__("threading").Timer(0.3, running.set_result, args=({"steps": 2},))
    threading_timer.start()
    runs = tr.train_rms(
        run, ["baseline"], [0, 1, 2, 3, 4], _tiny_recipe(), parallel=2, threads=4, done={("baseline", 0): running}
    )
    assert list(runs["steps"]) == [2] * 5 and len(runs) == 5
    assert sorted(calls[:3]) == [(f"baseline seed {s}", 2) for s in range(1, 4)] and calls[3] == ("baseline seed 4", 4)
    calls.clear()  # three at a time: two left over, side by side with half the threads each
    tr.train_rms(run, ["baseline"], [0, 1, 2, 3, 4], _tiny_recipe(), parallel=3, threads=6)
    assert sorted(calls[:3]) == [(f"baseline seed {s}", 2) for s in range(3)]
    assert sorted(calls[3:]) == [("baseline seed 3", 3), ("baseline seed 4", 3)]


def test_an_rm_whose_config_did_not_change_is_not_trained_again(tmp_path, tiny_policy_dir):
    """Two sweep points that differ in beta share the baseline: the second links to the first's."""
    base = _tiny_run(tmp_path / "base", tiny_policy_dir)
    store = RunDir(base).rm_store
    runs = {}
    for beta in (0.1, 1.0):
        point = tmp_path / f"beta{beta}"
        point.mkdir()
        (point / "data").symlink_to(base / "data")
        recipe = _tiny_recipe(contrastive_loss_beta=beta)
        runs[beta] = tr.train_rms(point, ["baseline", "goal-conditioned"], [0], recipe, store=store).set_index("rm")
    assert not runs[0.1]["reused"].any()
    assert runs[1.0].loc["baseline", "reused"] and not runs[1.0].loc["goal-conditioned", "reused"]
    first, second = (RunDir(tmp_path / f"beta{b}") for b in (0.1, 1.0))
    assert second.model("baseline").resolve() == first.model("baseline").resolve()
    assert second.model("goal-conditioned").resolve() != first.model("goal-conditioned").resolve()
    for run in (first, second):  # what notebooks 02-04 read is where they read it
        assert (run.model("baseline") / "goalrm.json").exists()
        assert (
            Path(str(run.model("goal-conditioned")) + ".metrics.jsonl").exists()
            and run.training_log("baseline").exists()
        )
    assert len([p for p in store.iterdir() if p.is_dir() and not p.name.endswith(".checkpoints")]) == 3


def test_an_rm_trained_without_the_store_can_be_put_in_it_and_is_then_reused(tmp_path, tiny_policy_dir):
    """A finished run's RM, stored under its key (scripts/prefill_rm_store.py), is what a rerun on
    byte-identical inputs takes instead of training: the same files, its metrics and log beside it
    (the store's own bookkeeping: tests/train/test_store.py)."""
    base = _tiny_run(tmp_path / "base", tiny_policy_dir)
    recipe = _tiny_recipe()
    store = tmp_path / "store"
    tr.train_rms(base, ["baseline"], [0], recipe)  # trained without a store
    cfg = tr.rm_config(recipe, base, "baseline", 0)
    key, already = store_trained_rm(cfg, store, log=RunDir(base).training_log("baseline", 0))
    assert not already
    rerun = tmp_path / "rerun"
    rerun.mkdir()
    (rerun / "data").symlink_to(base / "data")
    assert tr.train_rms(rerun, ["baseline"], [0], recipe, store=store)["reused"].all()
    stored, original = RunDir(rerun).model("baseline").resolve(), RunDir(base).model("baseline")
    assert stored == (store / key).resolve()
    files = lambda root: {f.relative_to(root): f.read_bytes() for f in root.rglob("*") if f.is_file()}  # noqa: E731
    assert {k: v for k, v in files(stored).items() if k.name != STORED_KEY} == files(original)
    assert Path(str(RunDir(rerun).model("baseline")) + ".metrics.jsonl").exists()


def test_the_shown_training_command_carries_no_machine_path(tmp_path):
    import sys

    from goalrm_core.study.training import shown_command

    run = tmp_path / "runs" / "demo"
    text = shown_command(
        [sys.executable, "-m", "goalrm_core.train.trainer", "--pretrain", str(run / "data" / "policy")], run
    )
    assert text.startswith("python -m goalrm_core.train.trainer \\\n    ") and "run/data/policy" in text
    assert str(tmp_path) not in text and sys.executable not in text
    launcher = shown_command(["/opt/env/bin/deepspeed", "--num_gpus", "2", "--module", "m"], run)
    assert launcher.startswith("deepspeed --num_gpus 2") and "/opt/env" not in launcher


def test_a_training_writes_its_progress_file_where_the_report_runner_reads_it(tmp_path, tiny_policy_dir, monkeypatch):
    """(53, item 4) The trainer writes its step and total as it goes: in a report run into the stage's progress
    folder, which the runner's heartbeat reads; the file ends marked done with every step."""
    from goalrm_core.train import progress_file as pf

    run = _tiny_run(tmp_path / "run", tiny_policy_dir)
    folder = tmp_path / "logs" / "02_training.progress"
    monkeypatch.setenv(pf.PROGRESS_DIR_VAR, str(folder))
    log = RunDir(run).training_log("baseline", 0)
    tr.train_rm(tr.rm_config(_tiny_recipe(), run, "baseline", 0), log, live=False, desc="baseline seed 0")
    record = pf.read_progress(folder / "train-baseline-seed0.progress.json")
    assert (record["label"], record["step"], record["total"], record["done"]) == ("baseline seed 0", 2, 2, True)
    assert record["train_s"] > 0
    assert pf.stage_progress(folder) == ([], 1) and pf.running_lines(folder) == ""  # finished: no longer on the line
    assert not pf.progress_path(log, {}).exists()  # a report run's file is in the stage's folder only


def test_waiting_on_trainings_draws_a_bar_per_rm_by_hand_and_none_in_a_batch_run(tmp_path, monkeypatch):
    """In JupyterLab each RM's steps show as a tqdm.auto bar fed by its progress file; in a batch run (goalrm
    report) no bar is made, so none reaches the executed notebook or its page."""
    import threading
    import time
    from concurrent.futures import Future

    from goalrm_core.pipeline.batch_run import BATCH_VAR
    from goalrm_core.train.progress_file import ProgressWriter

    drawn = []

    class Bar:
        def __init__(self, total, initial, desc, unit):
            self.total, self.n, self.desc = total, initial, desc
            drawn.append(self)

        def refresh(self):
            pass

        def close(self):
            self.closed = True

    monkeypatch.setattr(tr, "tqdm", Bar)
    path = tmp_path / "train-baseline-seed0.progress.json"
    writer = ProgressWriter(path, total=10, label="baseline seed 0")
    future = Future()

    def train():
        for step in range(1, 11):
            writer.update(step, force=True)
            time.sleep(0.02)
        writer.finish(10)
        future.set_result({"steps": 10})

    threading.Thread(target=train).start()
    out = tr.wait_showing_steps(
        {("baseline", 0): future}, {("baseline", 0): (path, "baseline seed 0")}, poll_s=0.01, bars=True
    )
    assert out == {("baseline", 0): {"steps": 10}}
    assert [(b.desc, b.total, b.n, b.closed) for b in drawn] == [("baseline seed 0", 10, 10, True)]
    drawn.clear()
    monkeypatch.setenv(BATCH_VAR, "1")
    assert tr.show_step_bars() is False
    assert (
        tr.wait_showing_steps({("baseline", 0): future}, {("baseline", 0): (path, "baseline seed 0")}) == out
        and drawn == []
    )
