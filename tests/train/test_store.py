"""The content-addressed RM store: an RM's key, a slot filled once under its lock, a killed fill's
leftovers cleared, and an RM trained elsewhere put in as if the store had trained it. The training
itself is a stand-in that writes the files a trained RM has; tests/study/test_training.py runs the
real trainer through the store."""

import dataclasses
import json
import shutil
import threading
from pathlib import Path

import pytest

from goalrm_core.data.io import atomic_write_json
from goalrm_core.data.rundir import rm_metrics_path
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.store import STORED_KEY, from_store, link_stored, rm_key, store_trained_rm


def _config(tmp_path: Path, save: str = "run/model", **fields) -> TrainRMConfig:
    data = tmp_path / "pairs.jsonl"
    if not data.exists():
        data.write_text('{"question": "1 +1", "correct": "#2", "incorrect": "#3"}\n')
    return TrainRMConfig(pretrain="tiny", dataset=str(data), save_path=str(tmp_path / save), **fields)


def _fake_training(calls: list):
    """A stand-in for the trainer: writes an RM folder, its metrics and its log, and counts its calls."""

    def train(cfg: TrainRMConfig, log: Path) -> None:
        calls.append(cfg.save_path)
        atomic_write_json(Path(cfg.save_path) / "config.json", {"seed": cfg.seed})
        (Path(cfg.metrics_path) if cfg.metrics_path else rm_metrics_path(cfg.save_path)).write_text('{"step": 1}\n')
        Path(log).write_text("trained\n")

    return train


def _files(root: Path) -> dict:
    return {f.relative_to(root): f.read_bytes() for f in root.rglob("*") if f.is_file()}


def test_rm_key_ignores_paths_and_a_baselines_contrastive_settings(tmp_path):
    data = tmp_path / "pairs.jsonl"
    data.write_text('{"question": "1 +1", "correct": "#2", "incorrect": "#3"}\n')
    copy = tmp_path / "elsewhere" / "pairs.jsonl"
    copy.parent.mkdir()
    shutil.copy(data, copy)

    def key(strategy, beta, dataset=data, save="a"):
        return rm_key(
            TrainRMConfig(
                pretrain="tiny",
                dataset=str(dataset),
                save_path=save,
                reward_model_strategy=strategy,
                contrastive_loss_beta=beta,
            )
        )

    assert key("vanilla", 0.1) == key("vanilla", 1.0, dataset=copy, save="b")
    assert key("contrastive", 0.1) != key("contrastive", 1.0)
    assert key("contrastive", 0.1) == key("contrastive", 0.1, dataset=copy, save="b")
    copy.write_text('{"question": "1 +1", "correct": "#2", "incorrect": "#4"}\n')
    assert key("vanilla", 0.1) != key("vanilla", 0.1, dataset=copy)


def test_an_rm_is_trained_into_its_slot_once_and_the_run_links_to_it(tmp_path):
    store, calls = tmp_path / "store", []
    cfg = _config(tmp_path)
    stored, already = from_store(cfg, store, _fake_training(calls))
    assert not already and calls == [str(store / rm_key(cfg))] and stored.save_path == calls[0]
    assert stored.metrics_path == str(rm_metrics_path(stored.save_path)) and stored.ckpt_path == ""
    assert (store / rm_key(cfg) / STORED_KEY).exists()

    elsewhere = _config(tmp_path, save="other/model", seed=cfg.seed)  # same training fields, another folder
    again, already = from_store(elsewhere, store, _fake_training(calls))
    assert already and len(calls) == 1
    assert again == dataclasses.replace(
        elsewhere, save_path=stored.save_path, metrics_path=stored.metrics_path, ckpt_path=""
    )

    log = tmp_path / "other" / "train.log"
    link_stored(elsewhere, again, log)
    assert Path(elsewhere.save_path).resolve() == Path(stored.save_path).resolve()
    assert rm_metrics_path(elsewhere.save_path).resolve() == Path(stored.metrics_path).resolve()
    assert log.read_text() == "trained\n" and log.is_symlink()

    other_seed, already = from_store(_config(tmp_path, seed=cfg.seed + 1), store, _fake_training(calls))
    assert not already and len(calls) == 2 and other_seed.save_path != stored.save_path


def test_a_killed_fill_is_cleared_and_filled_again(tmp_path):
    store, calls = tmp_path / "store", []
    cfg = _config(tmp_path)
    slot = store / rm_key(cfg)
    (slot / "half-written.bin").parent.mkdir(parents=True)
    (slot / "half-written.bin").write_bytes(b"\0")  # a folder without its key file: a fill that was killed
    stored, already = from_store(cfg, store, _fake_training(calls))
    assert not already and len(calls) == 1
    assert not (slot / "half-written.bin").exists() and (slot / STORED_KEY).exists()


def test_a_failed_training_leaves_the_slot_incomplete(tmp_path):
    store, calls = tmp_path / "store", []
    cfg = _config(tmp_path)

    def fails(c, log):
        Path(c.save_path).mkdir(parents=True)
        raise RuntimeError("trainer died")

    with pytest.raises(RuntimeError, match="trainer died"):
        from_store(cfg, store, fails)
    assert not (store / rm_key(cfg) / STORED_KEY).exists()
    _, already = from_store(cfg, store, _fake_training(calls))
    assert not already and len(calls) == 1


def test_two_callers_asking_for_the_same_rm_train_it_once(tmp_path):
    """The second caller waits on the key's lock while the first trains, then finds the slot complete."""
    store, calls = tmp_path / "store", []
    cfg = _config(tmp_path)
    second_waiting = threading.Event()
    train = _fake_training(calls)

    def slow_training(c, log):
        second_waiting.wait(timeout=30)  # the other caller is on its way to the lock
        train(c, log)

    results = {}

    def first():
        results["first"] = from_store(cfg, store, slow_training)

    def second():
        second_waiting.set()
        results["second"] = from_store(cfg, store, train)

    one = threading.Thread(target=first)
    one.start()
    for _ in range(3000):  # the first caller reaches the lock before the second starts
        if any(store.glob("*.lock")):
            break
        threading.Event().wait(0.01)
    two = threading.Thread(target=second)
    two.start()
    one.join()
    two.join()
    assert len(calls) == 1
    assert sorted(already for _, already in results.values()) == [False, True]


def test_an_rm_trained_elsewhere_is_put_in_the_store_as_if_it_had_trained_it(tmp_path):
    store = tmp_path / "store"
    cfg = _config(tmp_path)
    with pytest.raises(FileNotFoundError, match="no trained RM"):
        store_trained_rm(cfg, store)
    log = tmp_path / "run" / "train.log"
    _fake_training([])(cfg, log)
    key, already = store_trained_rm(cfg, store, log=log)
    assert not already and key == rm_key(cfg) and store_trained_rm(cfg, store) == (key, True)
    assert (store / key / STORED_KEY).exists() and Path(str(store / key) + ".log").read_text() == "trained\n"
    assert {k: v for k, v in _files(store / key).items() if k.name != STORED_KEY} == _files(Path(cfg.save_path))
    assert rm_metrics_path(store / key).read_text() == '{"step": 1}\n'
    calls = []
    stored, already = from_store(cfg, store, _fake_training(calls))  # a rerun takes it instead of training
    assert already and not calls and stored.save_path == str(store / key)


def test_a_slot_is_complete_only_with_the_files_its_key_vouches_for(tmp_path):
    """A key file beside no RM (a fill killed after copying it, a folder emptied by hand) is refilled;
    an RM taken from another store never brings that store's key file along before its own files."""
    store, calls = tmp_path / "store", []
    cfg = _config(tmp_path)
    stored, _ = from_store(cfg, store, _fake_training(calls))
    (Path(stored.save_path) / "config.json").unlink()
    again, already = from_store(cfg, store, _fake_training(calls))
    assert not already and len(calls) == 2 and (Path(again.save_path) / "config.json").is_file()
    Path(again.metrics_path).unlink()
    assert not from_store(cfg, store, _fake_training(calls))[1] and len(calls) == 3

    source = _config(tmp_path, save="elsewhere/model", seed=7)
    _fake_training([])(source, tmp_path / "elsewhere.log")
    atomic_write_json(Path(source.save_path) / STORED_KEY, {"key": "another store's"})
    other = tmp_path / "other-store"
    copied = shutil.copytree
    seen = []

    def watching(src, dst, ignore=None, **kw):  # what the copy writes, in order
        out = copied(src, dst, ignore=ignore, **kw)
        seen.extend(sorted(p.name for p in Path(dst).iterdir()))
        return out

    shutil.copytree = watching
    try:
        key, already = store_trained_rm(source, other)
    finally:
        shutil.copytree = copied
    assert not already and STORED_KEY not in seen
    assert json.loads((other / key / STORED_KEY).read_text())["key"] == key


def test_a_slot_filled_by_another_run_is_refused_in_one_line(tmp_path):
    """The store hands out an RM only when its slot's key file and the RM's own goalrm.json say it is the RM asked
    for: a slot copied by hand under another key, or an RM trained with another seed, is refused."""
    store, calls = tmp_path / "store", []
    first, second = _config(tmp_path, seed=1), _config(tmp_path, seed=2)
    stored, _ = from_store(first, store, _fake_training(calls))
    slot = store / rm_key(second)
    shutil.copytree(stored.save_path, slot)  # someone filed the seed-1 RM under the seed-2 key
    shutil.copyfile(stored.metrics_path, rm_metrics_path(slot))
    with pytest.raises(ValueError) as refused:
        from_store(second, store, _fake_training(calls))
    line = str(refused.value)
    assert "\n" not in line and line == (
        f"{slot}: this store slot was filled by another run ({STORED_KEY} records seed=1; this run "
        f"asks for seed=2); remove {slot} (the store trains it again)"
    )
    assert len(calls) == 1

    # the key file agrees but the RM beside it was trained otherwise (goalrm.json): refused too
    atomic_write_json(slot / STORED_KEY, {"key": rm_key(second), "training_fields": second.training_fields()})
    atomic_write_json(slot / "goalrm.json", {"training_args": {**second.to_dict(), "learning_rate": 0.5}})
    with pytest.raises(
        ValueError, match=rf"^{slot}: the stored RM was trained with lr=0.5; this run asks for lr=9e-06; remove "
    ):
        from_store(second, store, _fake_training(calls))
    atomic_write_json(slot / "goalrm.json", {"training_args": second.to_dict()})
    assert from_store(second, store, _fake_training(calls))[1] and len(calls) == 1


def test_an_rm_trained_otherwise_is_never_filed_under_this_configs_key(tmp_path):
    store = tmp_path / "store"
    cfg = _config(tmp_path, contrastive_loss=True)
    _fake_training([])(cfg, tmp_path / "train.log")
    atomic_write_json(
        Path(cfg.save_path) / "goalrm.json", {"training_args": {**cfg.to_dict(), "reward_model_strategy": "vanilla"}}
    )
    with pytest.raises(
        ValueError,
        match=r"its goalrm.json says it was trained with strategy=vanilla, but it is being stored as "
        r"strategy=contrastive; store it with the config it was trained with",
    ):
        store_trained_rm(cfg, store)
    assert not (store / rm_key(cfg) / STORED_KEY).exists()
