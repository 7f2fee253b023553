"""Bad input and faults: the checks behind the corpus cases that a case of
``tests/bad_inputs/cases.yaml`` cannot express: a lock held and a lock gone stale, a process group
whose peers never come, a full disk under a finished folder, truncation under the official
encoding, and the strict YAML of profiles and sweep specs."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch.distributed as dist
from transformers import LlamaModel

from goalrm_core.cli.get_representation import main as get_representation
from goalrm_core.data import manifest
from goalrm_core.data.io import ArtifactError, lock_path, write_jsonl, writer_lock
from goalrm_core.inference.forward import iter_scored
from goalrm_core.inference.goal_state import check_goal_state
from goalrm_core.model.encoding import encode_prompt_response
from goalrm_core.model.reward_model import RewardModel, save_reward_model
from goalrm_core.pipeline.profile_files import load_profile
from goalrm_core.pipeline.sweep import load_sweep_spec
from goalrm_core.train.distributed import join_process_group, launcher_world


def test_a_held_lock_refuses_a_second_writer_and_goes_with_the_first(tmp_path):
    folder = tmp_path / "out" / "rm"
    with writer_lock(folder, "--save_dir", "goalrm eval-rm first") as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        with pytest.raises(ArtifactError, match=r"--save_dir .*rm is being written by another run \(PID \d+: goalrm eval-rm first\)"):
            with writer_lock(folder, "--save_dir", "goalrm eval-rm second"):
                pass
    assert not lock.exists() and not (tmp_path / "out").exists()  # nothing written: no lock, no empty folder


def test_a_lock_of_a_process_that_is_gone_is_stale(tmp_path, capsys):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    lock = lock_path(tmp_path / "rm")
    lock.write_text(json.dumps({"pid": int(gone.stdout), "started": time.time() - 5, "command": "killed"}))
    with writer_lock(tmp_path / "rm", "--save_path"):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert "a stale lock of a run that is gone" in capsys.readouterr().err
    assert not lock.exists()


def test_peers_that_never_join_stop_in_one_line(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    assert launcher_world() == 2
    with pytest.raises(ValueError, match=r"WORLD_SIZE=2 RANK=0 .* ask for 2 processes, and they did not all join within 2 s"):
        join_process_group(dist.init_process_group, "gloo", timeout_s=2)
    assert not dist.is_initialized()
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="WORLD_SIZE and RANK must be integers"):
        launcher_world()


def _free_port() -> int:
    from goalrm_core.train.distributed import free_port

    return free_port()


def test_goal_states_are_real_and_not_negligible():
    with pytest.raises(ValueError, match="complex numbers"):
        check_goal_state(np.ones((1, 4), dtype=np.complex64), 4)
    with pytest.raises(ValueError, match="not numbers"):
        check_goal_state(np.array([["a"] * 4]), 4)
    with pytest.raises(ValueError, match="negligible"):
        check_goal_state(np.full((1, 4), 1e-29), 4)
    assert check_goal_state(np.full((1, 4), 1e-3), 4).shape == (4,)


def test_official_truncation_never_counts_prompt_tokens_as_response(tokenizer):
    prompt, response = "Q: " + "1+" * 20, "2=3\n" * 30
    enc = encode_prompt_response(tokenizer, prompt, response, 64, append_eos=True, encoding="official")
    prompt_len = len(tokenizer(prompt)["input_ids"])
    assert enc.truncated and len(enc.input_ids) == 64
    assert enc.num_actions <= len(enc.input_ids) - prompt_len


def test_official_truncation_is_noticed_and_a_full_prompt_refused(tiny_rm, tokenizer, capsys):
    scored = list(iter_scored(tiny_rm, tokenizer, ["Q: 1+1"], ["2=3\n" * 40], 48, encoding="official", readout="eos"))
    assert scored[0][1].truncated
    assert "1 of 1 inputs are longer than max_len=48 and were cut" in capsys.readouterr().err
    with pytest.raises(ValueError, match="the prompt alone fills max_len=8"):
        list(iter_scored(tiny_rm, tokenizer, ["Q: " + "1+" * 30], ["2"], 8, encoding="official", readout="eos"))


def test_a_full_disk_keeps_a_finished_goal_folder(tmp_path, tiny_config, tokenizer, monkeypatch):
    rm = save_reward_model(RewardModel(LlamaModel(tiny_config)).eval(), tmp_path / "rm", tokenizer)
    pairs = tmp_path / "pairs.jsonl"
    write_jsonl(pairs, [{"question": "1 +2", "correct": "1+2=3\n#3", "incorrect": "1+2=4\n#4"}])
    argv = [f"--dataset-path={pairs}", f"--reward-model-path={rm}", f"--save-dir={tmp_path / 'goal'}", "--template=toymath"]
    assert get_representation(argv) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "goal").iterdir()}

    def full(*args, **kwargs):  # the fault: the disk is full at the first byte written
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", full)
    with pytest.raises(OSError, match="No space left"):
        get_representation(argv)
    assert {p.name: p.read_bytes() for p in (tmp_path / "goal").iterdir()} == before  # manifest included, no temp file
    assert manifest.check(tmp_path / "goal", "get-representation output folder") is not None
    assert not lock_path(tmp_path / "goal").exists()


def test_yaml_keys_given_twice_and_sweep_values_of_the_wrong_kind(tmp_path):
    (tmp_path / "p.yaml").write_text("n_samples: 4\nseed: 1\nn_samples: 8\n")
    with pytest.raises(ValueError, match=r"p\.yaml:3: key 'n_samples' is given twice \(first on line 1\)"):
        load_profile("p", tmp_path)
    (tmp_path / "nan.yaml").write_text("rm:\n  learning_rate: .nan\n")
    with pytest.raises(ValueError, match="must be a finite number"):
        load_profile("nan", tmp_path)
    specs = {"grid": "sweep:\n  grid:\n    rm_seeds: [[0]]\n    rm_seeds: [[1]]\n",
             "oat": "sweep:\n  grid:\n    n_samples: [4]\n  one_at_a_time: 'false'\n",
             "seeds": "sweep:\n  grid:\n    n_samples: [4]\n  seeds: 3\n"}
    messages = {"grid": "key 'rm_seeds' is given twice", "oat": "'one_at_a_time' must be true or false",
                "seeds": "'seeds' must be a list of seeds"}
    for name, text in specs.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        with pytest.raises(ValueError, match=messages[name]):
            load_sweep_spec(name, tmp_path)


def test_a_report_folder_has_one_writer_and_a_killed_runs_leftovers_are_cleared(tmp_path):
    from goalrm_core.pipeline.runner import killed_run_cleared, run_report

    out = tmp_path / "reports" / "demo"
    out.mkdir(parents=True)
    with writer_lock(out, "goalrm report: the report folder", "goalrm report --profile demo"):
        with pytest.raises(ArtifactError, match=r"goalrm report: the report folder .*demo is being written by another run"):
            run_report("demo", reports_root=tmp_path / "reports", only=["01_data"])
    assert sorted(p.name for p in out.iterdir()) == []  # refused before it wrote anything
    (out / ".01_data.abc.tmp.ipynb").write_text("{}")
    previous = killed_run_cleared(out, {"01_data": {"name": "01_data", "status": "running"},
                                         "02_training": {"name": "02_training", "status": "ok"}})
    assert previous["01_data"]["status"] == "interrupted" and previous["02_training"]["status"] == "ok"
    assert not (out / ".01_data.abc.tmp.ipynb").exists()
