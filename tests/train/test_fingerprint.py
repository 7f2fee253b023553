"""A checkpoint's run fingerprint: what makes a run that run, and the one line that refuses resuming another's."""

import shutil

from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.fingerprint import (
    FINGERPRINT_FILE,
    read_fingerprint,
    refusal,
    run_fingerprint,
    write_fingerprint,
)


def setup(tmp_path):
    model = tmp_path / "policy"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 8}')
    (model / "model.safetensors").write_bytes(bytes(range(256)) * 40)
    (tmp_path / "pairs.jsonl").write_text('{"question": "1 +1", "correct": "2", "incorrect": "3"}\n')
    return model, tmp_path / "pairs.jsonl"


def cfg(model, data, **over):
    return TrainRMConfig(pretrain=str(model), dataset=str(data), **over)


def test_the_same_run_is_the_same_wherever_its_files_are_and_however_it_logs(tmp_path):
    model, data = setup(tmp_path)
    ours = run_fingerprint(cfg(model, data, learning_rate=1e-3))
    # outputs, logging, engine and schedule settings are not the run's identity (the schedule is checked apart)
    again = run_fingerprint(
        cfg(
            model,
            data,
            learning_rate=1e-3,
            save_path=str(tmp_path / "elsewhere"),
            eval_steps=5,
            logging_steps=3,
            zero_stage=3,
            micro_train_batch_size=4,
            stop_after_steps=2,
        )
    )
    assert refusal("ckpt/global_step1", ours, again) is None
    moved, copied = tmp_path / "moved", tmp_path / "copied.jsonl"
    shutil.copytree(model, moved)
    shutil.copyfile(data, copied)  # a copy or a byte-identical rewrite keeps the identity (a new mtime does not matter)
    assert refusal("ckpt/global_step1", ours, run_fingerprint(cfg(moved, copied, learning_rate=1e-3))) is None
    write_fingerprint(tmp_path / "ckpt" / "global_step1", ours)
    assert read_fingerprint(tmp_path / "ckpt" / "global_step1") == ours
    assert read_fingerprint(tmp_path / "ckpt" / "global_step2") is None  # written before fingerprints: the caller warns


def test_another_strategy_learning_rate_or_seed_is_refused_in_one_line_naming_both(tmp_path):
    model, data = setup(tmp_path)
    saved = run_fingerprint(cfg(model, data, contrastive_loss=True, learning_rate=1e-3, loss="logexp"))
    line = refusal("ckpt/checkpoints_rm/global_step4", saved, run_fingerprint(cfg(model, data, learning_rate=2e-3)))
    assert line == (
        "--load_checkpoint: ckpt/checkpoints_rm/global_step4 was written by a run with strategy=contrastive, "
        "loss=logexp, lr=0.001; this run has strategy=vanilla, loss=sigmoid, lr=0.002; use another --ckpt_path "
        "or drop --load_checkpoint"
    )
    beta = refusal(
        "c",
        saved,
        run_fingerprint(
            cfg(model, data, contrastive_loss=True, learning_rate=1e-3, loss="logexp", contrastive_loss_beta=1.0)
        ),
    )
    assert "contrastive_loss_beta=0.5; this run has contrastive_loss_beta=1.0;" in beta
    seed = refusal("c", run_fingerprint(cfg(model, data, seed=1)), run_fingerprint(cfg(model, data, seed=2)))
    assert "with seed=1; this run has seed=2;" in seed
    lora = refusal("c", run_fingerprint(cfg(model, data)), run_fingerprint(cfg(model, data, lora_rank=4)))
    assert "lora_rank=0; this run has lora_rank=4;" in lora  # before DeepSpeed's load_state_dict would fail on it


def test_another_dataset_content_or_backbone_is_refused_even_at_the_same_path(tmp_path):
    model, data = setup(tmp_path)
    saved = run_fingerprint(cfg(model, data))
    data.write_text('{"question": "1 +1", "correct": "2", "incorrect": "4"}\n')  # same size, same path, other pairs
    line = refusal("c", saved, run_fingerprint(cfg(model, data)))
    assert (
        line.startswith(f"--load_checkpoint: c was written by a run with dataset={data} (sha256 ")
        and "; this run has dataset=" in line
    )
    data.write_text('{"question": "1 +1", "correct": "2", "incorrect": "3"}\n')
    assert refusal("c", saved, run_fingerprint(cfg(model, data))) is None
    (model / "model.safetensors").write_bytes(
        bytes(reversed(range(256))) * 40
    )  # a fine-tune: same sizes, other weights
    line = refusal("c", saved, run_fingerprint(cfg(model, data)))
    assert f"with pretrain={model} (sign " in line and f"this run has pretrain={model} (sign " in line


def test_a_damaged_fingerprint_is_named(tmp_path):
    step = tmp_path / "global_step1"
    step.mkdir()
    (step / FINGERPRINT_FILE).write_text("{not json")
    try:
        read_fingerprint(step)
    except ValueError as e:
        assert str(e).startswith(f"{step / FINGERPRINT_FILE}: damaged") and "--load_checkpoint" in str(e)
    else:
        raise AssertionError("a damaged fingerprint was read")
