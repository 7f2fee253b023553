"""An RM training's progress file (53, item 4): what the trainer writes, how often, and what readers make of it."""

import json
import os
import subprocess
import sys

from goalrm_core.train import progress_file as pf


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def test_the_writer_replaces_the_file_at_most_every_few_seconds_and_marks_the_end(tmp_path):
    clock = Clock()
    path = tmp_path / "progress" / "train-baseline-seed1.progress.json"
    writer = pf.ProgressWriter(path, total=2400, initial=0, label="baseline seed 1", every_s=2.0, clock=clock)
    writer.update(0, force=True)
    assert pf.read_progress(path)["step"] == 0
    clock.t += 1.0
    writer.update(1)  # within the interval: not written
    assert pf.read_progress(path)["step"] == 0
    clock.t += 1.5
    writer.update(2)
    record = pf.read_progress(path)
    assert (record["step"], record["total"], record["label"], record["done"]) == (2, 2400, "baseline seed 1", False)
    assert record["train_s"] == 2.5 and record["pid"] == os.getpid()
    writer.finish(2400)
    assert pf.read_progress(path)["done"] is True
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # replaced atomically: no temporary left


def test_no_file_without_a_path_and_a_failed_write_never_stops_the_training(tmp_path, monkeypatch):
    monkeypatch.delenv(pf.PROGRESS_FILE_VAR, raising=False)
    writer = pf.ProgressWriter.from_environment(10)
    writer.update(1, force=True)
    writer.finish(10)  # nothing to write to: nothing happens
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    pf.ProgressWriter(blocked / "x.progress.json", 10).update(1, force=True)  # its folder cannot be made: dropped


def test_the_path_is_beside_the_log_or_in_the_stage_folder(tmp_path):
    log = tmp_path / "logs" / "train-baseline-seed1.log"
    assert pf.progress_path(log, {}) == tmp_path / "logs" / "train-baseline-seed1.progress.json"
    assert (
        pf.progress_path(log, {pf.PROGRESS_DIR_VAR: str(tmp_path / "p")})
        == tmp_path / "p" / "train-baseline-seed1.progress.json"
    )
    assert pf.stage_progress_dir(tmp_path / "logs" / "02_training.log") == tmp_path / "logs" / "02_training.progress"


def test_readers_say_step_total_and_eta(tmp_path):
    record = {"label": "baseline seed 1", "step": 840, "total": 2400, "initial": 0, "train_s": 210.0, "updated": 5000.0}
    assert pf.eta_s(record) == 390.0  # 1560 steps at 0.25 s
    assert pf.describe(record, now=5030.0) == "baseline seed 1: step 840/2400, ETA 6m00s"
    assert pf.describe({**record, "step": 0}) == "baseline seed 1: step 0/2400, ETA unknown"
    assert pf.describe({**record, "step": 2400}) == "baseline seed 1: step 2400/2400, evaluating and saving"
    (tmp_path / "bad.progress.json").write_text('{"step": 3, "tot')  # half-written: skipped
    assert pf.read_progress(tmp_path / "bad.progress.json") is None and pf.read_progress(tmp_path / "absent") is None


def test_the_stage_folder_lists_the_running_trainings_and_counts_the_finished(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    base = {"total": 100, "initial": 0, "train_s": 10.0, "updated": 2000.0, "pid": os.getpid(), "done": False}
    files = {
        "a": {**base, "label": "baseline seed 0", "step": 50},
        "b": {**base, "label": "baseline seed 1", "step": 100, "done": True},
        "c": {**base, "label": "goal-conditioned seed 0", "step": 20, "pid": int(dead.stdout)},  # its trainer died
        "d": {**base, "label": "old", "step": 10, "updated": 10.0},
    }  # an earlier stage's
    for name, record in files.items():
        (tmp_path / f"{name}{pf.SUFFIX}").write_text(json.dumps(record))
    running, finished = pf.stage_progress(tmp_path, since=1000.0)
    assert [r["label"] for r in running] == ["baseline seed 0"] and finished == 1
    assert pf.running_lines(tmp_path, since=1000.0, now=2000.0) == "baseline seed 0: step 50/100, ETA 10s (1 RM done)"
    assert pf.running_lines(tmp_path / "absent") == "" and pf.running_lines(None) == ""
