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
from pathlib import Path

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
        with pytest.raises(
            ArtifactError, match=r"--save_dir .*rm is being written by another run \(PID \d+: goalrm eval-rm first\)"
        ):
            with writer_lock(folder, "--save_dir", "goalrm eval-rm second"):
                pass
    assert not lock.exists() and not (tmp_path / "out").exists()  # nothing written: no lock, no empty folder


def test_a_lock_of_a_process_that_is_gone_is_stale(tmp_path, capsys):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
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
    with pytest.raises(
        ValueError, match=r"WORLD_SIZE=2 RANK=0 .* ask for 2 processes, and they did not all join within 2 s"
    ):
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
    argv = [
        f"--dataset-path={pairs}",
        f"--reward-model-path={rm}",
        f"--save-dir={tmp_path / 'goal'}",
        "--template=toymath",
    ]
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
    specs = {
        "grid": "sweep:\n  grid:\n    rm_seeds: [[0]]\n    rm_seeds: [[1]]\n",
        "oat": "sweep:\n  grid:\n    n_samples: [4]\n  one_at_a_time: 'false'\n",
        "seeds": "sweep:\n  grid:\n    n_samples: [4]\n  seeds: 3\n",
    }
    messages = {
        "grid": "key 'rm_seeds' is given twice",
        "oat": "'one_at_a_time' must be true or false",
        "seeds": "'seeds' must be a list of seeds",
    }
    for name, text in specs.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        with pytest.raises(ValueError, match=messages[name]):
            load_sweep_spec(name, tmp_path)


def test_a_report_folder_has_one_writer_and_a_killed_runs_leftovers_are_cleared(tmp_path):
    from goalrm_core.pipeline.runner import killed_run_cleared, run_report

    out = tmp_path / "reports" / "demo"
    out.mkdir(parents=True)
    with writer_lock(out, "goalrm report: the report folder", "goalrm report --profile demo"):
        with pytest.raises(
            ArtifactError, match=r"goalrm report: the report folder .*demo is being written by another run"
        ):
            run_report("demo", reports_root=tmp_path / "reports", only=["01_data"])
    assert sorted(p.name for p in out.iterdir()) == []  # refused before it wrote anything
    (out / ".01_data.abc.tmp.ipynb").write_text("{}")
    previous = killed_run_cleared(
        out,
        {"01_data": {"name": "01_data", "status": "running"}, "02_training": {"name": "02_training", "status": "ok"}},
    )
    assert previous["01_data"]["status"] == "interrupted" and previous["02_training"]["status"] == "ok"
    assert not (out / ".01_data.abc.tmp.ipynb").exists()


def test_a_training_started_by_a_killed_process_dies_with_it(tmp_path):
    """(53) SIGKILL of the process that started a training (the report's kernel): the command run_streaming
    started, in a session of its own, gets SIGTERM from the kernel (PR_SET_PDEATHSIG) instead of running on."""
    import signal

    import psutil

    child_pid = tmp_path / "child.pid"
    child = f"import os, time; open({str(child_pid)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    parent = (
        "import sys; from goalrm_core.train.launch import run_streaming; "
        f"run_streaming([sys.executable, '-c', {child!r}], {str(tmp_path / 'log')!r}, show=lambda *a: None)"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], env={**os.environ, "PYTHONPATH": os.getcwd()})
    deadline = time.time() + 60
    while not (child_pid.exists() and child_pid.read_text()) and time.time() < deadline:
        time.sleep(0.05)
    pid = int(child_pid.read_text())
    assert psutil.pid_exists(pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        psutil.Process(pid).wait(timeout=10)
    except psutil.NoSuchProcess:
        pass
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_eval_rm_refuses_a_benchmark_it_would_score_as_nothing(tmp_path, tiny_config, tokenizer, capsys):
    """(53) a benchmark folder without a generation file it can read (empty, other names, a folder where the
    file goes) or whose files hold no rows: one line naming the benchmark and the folder, nothing written."""
    from goalrm_core import cli

    rm = save_reward_model(RewardModel(LlamaModel(tiny_config)).eval(), tmp_path / "rm", tokenizer)
    gens = tmp_path / "gens"
    write_jsonl(
        gens / "toy" / "greedy.jsonl", [{"question": "1 +1", "generated_solution": "1+1=2\n#2", "is_correct": True}]
    )
    (gens / "other").mkdir()
    argv = [
        "eval-rm",
        "--reward_model_path",
        str(rm),
        "--save_dir",
        str(tmp_path / "eval"),
        "--completions_data_path",
        str(gens),
        "--benchmarks",
        "toy",
        "other",
        "--template",
        "toymath",
        "--vanilla",
    ]
    cases = {
        "empty": ([], "holds no generation file"),
        "other names": (["greedy.json"], "it holds greedy.json"),
        "a folder": (["greedy.jsonl/"], "greedy.jsonl cannot be read (not a file)"),
        "no rows": (["greedy.jsonl"], "greedy.jsonl hold no rows"),
    }
    for case, (names, says) in cases.items():
        for p in list((gens / "other").iterdir()):
            p.rmdir() if p.is_dir() else p.unlink()
        for name in names:
            (gens / "other" / name.rstrip("/")).mkdir() if name.endswith("/") else (gens / "other" / name).write_text(
                ""
            )
        assert cli.main(argv) == 2, case
        errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
        assert len(errors) == 1 and "--benchmarks other: " in errors[0] and says in errors[0], (case, errors)
        assert not (tmp_path / "eval").exists(), case


def test_a_symlink_loop_or_a_file_as_the_output_folder_is_one_line(tmp_path, capsys):
    """(53) an output folder that is a symlink loop (every writer, the report and the sweep, dry runs included)
    or a reports folder that is a file: one line naming the link or the file, before any work."""
    from goalrm_core import cli
    from goalrm_core.data.io import check_output_dir
    from goalrm_core.flags import run_command

    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    (tmp_path / "afile").write_text("")
    with pytest.raises(ArtifactError, match=rf"--save_dir {loop}/rm: {loop} is a symbolic link loop"):
        check_output_dir(loop / "rm", "--save_dir")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(ArtifactError, match=r"dangling is a symbolic link to .*gone, which is not there"):
        check_output_dir(tmp_path / "dangling", "--save_dir")

    def resolves(argv):  # a symlink loop met anywhere else: pathlib's RuntimeError, said in one line
        return loop.resolve(strict=False)

    assert run_command(resolves, [], "goalrm x") == 2
    assert capsys.readouterr().err.startswith(f"goalrm x: error: '{loop}' is a symbolic link loop")
    eval_rm = [
        "eval-rm",
        "--reward_model_path",
        str(tmp_path),
        "--completions_data_path",
        str(tmp_path),
        "--benchmarks",
        "toy",
        "--save_dir",
        str(loop),
    ]
    for argv, culprit in [
        (eval_rm, f"{loop} is a symbolic link loop"),
        (["report", "--profile", "demo", "--dry-run", "--reports-dir", str(loop)], f"{loop} is a symbolic link loop"),
        (
            ["report", "--profile", "demo", "--dry-run", "--reports-dir", str(tmp_path / "afile")],
            f"lies under the file {tmp_path / 'afile'}",
        ),
        (
            ["sweep", "--grid", "rm.contrastive_loss_beta=0.1", "--dry-run", "--reports-dir", str(tmp_path / "afile")],
            f"lies under the file {tmp_path / 'afile'}",
        ),
    ]:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if ": error: " in line]
        assert len(errors) == 1 and culprit in errors[0] and "Traceback" not in err, (argv, err)


def test_pairs_whose_sides_are_identical_once_cut_to_max_len_are_refused(tokenizer):
    """(53) --encoding official with a --max_len the prompt fills: both sides are the prompt, so an RM would train
    on nothing (loss ln 2, exit 0). Refused naming max_len, the count, the first row and its prompt's length."""
    from goalrm_core.model.encoding import encode_preference_rows

    long_q = "1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9"
    rows = [
        {"question": long_q, "correct": "aaa #1", "incorrect": "bbb #2", "_source": f"pairs.jsonl:{n}"} for n in (1, 2)
    ]
    rows.append({"question": "1 +2", "correct": "aaa #1", "incorrect": "bbb #2", "_source": "pairs.jsonl:3"})
    with pytest.raises(
        ValueError,
        match=r"^2 of 3 pairs have identical chosen and rejected sides once cut to --max_len 16 "
        r"\(--encoding official; the first, pairs\.jsonl:1, has a prompt of \d+ tokens\)",
    ):
        encode_preference_rows(tokenizer, rows, "toymath", 16, encoding="official")
    items, stats = encode_preference_rows(tokenizer, rows, "toymath", 16, encoding="split")  # the response kept whole
    assert len(items) == 3 and stats.n_truncated == 2
    assert len(encode_preference_rows(tokenizer, rows, "toymath", 256, encoding="official")[0]) == 3


def test_two_trainings_into_one_checkpoint_folder_the_second_is_refused(tmp_path, tiny_policy_dir, capsys):
    """(53) the official entry point's shared ./ckpt/checkpoints_rm: a second training (another --save_path) into the
    checkpoint folder a first one is writing would rotate away its checkpoints; refused naming the first's PID."""
    from goalrm_core import cli

    pairs = tmp_path / "pairs.jsonl"
    write_jsonl(pairs, [{"question": "1 +2", "correct": "1+2=3\n#3", "incorrect": "1+2=4\n#4"}] * 4)
    ckpt = tmp_path / "ckpt" / "checkpoints_rm"
    with writer_lock(ckpt, "--ckpt_path", "goalrm train-rm --save_path first"):
        argv = [
            "train-rm",
            "--pretrain",
            str(tiny_policy_dir),
            "--dataset",
            str(pairs),
            "--save_path",
            str(tmp_path / "second"),
            "--ckpt_path",
            str(ckpt),
            "--template",
            "toymath",
            "--zero_stage",
            "0",
            "--save_steps",
            "1",
        ]
        assert cli.main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith(
        f"goalrm train-rm: error: --ckpt_path {ckpt} is being written by another run "
        f"(PID {os.getpid()}: goalrm train-rm --save_path first)"
    )
    assert not (tmp_path / "second").exists() and not lock_path(tmp_path / "second").exists()


def test_a_run_folder_records_its_profile_and_refuses_another(tmp_path, capsys):
    """(53) two profiles that share a run folder would mix their data: the first report run records its profile
    in <run_dir>/profile.json, and another profile's run (a dry run too) is refused in one line naming both."""
    from goalrm_core import cli
    from goalrm_core.pipeline.runner import RUN_DIR_OWNER, check_run_dir_owner, claim_run_dir

    run = tmp_path / "run"
    claim_run_dir(run, "smoke")
    assert json.loads((run / RUN_DIR_OWNER).read_text()) == {"profile": "smoke"}
    claim_run_dir(run, "smoke")  # its own: fine, again and again
    with pytest.raises(
        ValueError, match=r"run_dir .*run holds the run of profile 'smoke' \(.*profile\.json\), not of 'demo'"
    ):
        check_run_dir_owner(run, "demo")
    argv = [
        "report",
        "--profile",
        "demo",
        "--set",
        f"run_dir={run}",
        "--reports-dir",
        str(tmp_path / "reports"),
        "--dry-run",
    ]
    assert cli.main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and "holds the run of profile 'smoke'" in errors[0] and "not of 'demo'" in errors[0], errors
    assert sorted(p.name for p in run.iterdir()) == [RUN_DIR_OWNER]


@pytest.mark.parametrize(
    "command",
    [
        ["report", "--profile", "demo", "--dry-run"],
        ["eval-rm", "--reward_model_path", "rm", "--completions_data_path", "g", "--benchmarks", "toy"],
    ],
)
def test_a_working_folder_deleted_under_the_shell_is_goalrms_one_line(tmp_path, command):
    """(53) the shell's folder deleted: goalrm's line naming it, before torch (which cannot load there) or any relative
    path."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"cd {gone} && rmdir {gone} && exec {sys.executable} -m goalrm_core.cli {' '.join(command)}"
    done = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == (
        f"goalrm {command[0]}: error: the working folder {gone} no longer exists (deleted or moved under "
        f"the shell): cd to an existing folder and run again"
    )


def test_an_error_on_a_read_only_torch_extensions_cache_says_that_deepspeed_builds_there(tmp_path, monkeypatch):
    """(53) DeepSpeed builds its ops into the torch extensions folder on first use: when that folder is not writable,
    the error of the build says so, naming the folder and TORCH_EXTENSIONS_DIR."""
    from goalrm_core.train import distributed
    from goalrm_core.train.trainer import TrainingError, _op_build_named

    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(cache / "torch_extensions"))
    assert distributed.extensions_dir_hint() is None
    with pytest.raises(OSError, match="unrelated"):  # a writable cache: the error as it is
        with _op_build_named():
            raise OSError(errno.EIO, "unrelated")
    monkeypatch.setattr(
        distributed.os, "access", lambda path, mode: str(path) != str(cache)
    )  # read-only (root ignores chmod)
    with pytest.raises(
        TrainingError,
        match=rf"OSError: \[Errno 30\] Read-only file system: .*; DeepSpeed builds its ops on first "
        rf"use into {cache}/torch_extensions \(TORCH_EXTENSIONS_DIR.*{cache} is not writable",
    ):
        with _op_build_named():
            raise OSError(errno.EROFS, "Read-only file system", str(cache / "torch_extensions"))
