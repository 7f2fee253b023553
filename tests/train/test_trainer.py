"""The DeepSpeed reward-model trainer, end to end on a tiny local Llama (CPU, gloo).

Runs go through the real entry points (``python -m goalrm_core.train.trainer`` and the ``deepspeed``
launcher) as subprocesses, built from a ``TrainRMConfig`` with ``goalrm_core.train.launch``. The first DeepSpeed run on
a machine compiles its CPU shared-memory comm op once (about a minute; cached in ~/.cache/torch_extensions).
"""

import json
import math
import os
import random
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from goalrm_core.cli.train_rm import main, parse_args
from goalrm_core.data.preferences import PreferenceDataError
from goalrm_core.model.reward_model import load_reward_model
from goalrm_core.train.batching import epoch_batches
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.distributed import deepspeed_config, gradient_accumulation_steps
from goalrm_core.train.launch import LaunchError, run_streaming, train_command
from goalrm_core.train.optim import WarmupCosine, optimizer_param_groups
from goalrm_core.train.trainer import default_paths

RUN_TIMEOUT_S = 400
FAULTS = Path(__file__).resolve().parents[1] / "faults.py"
# One thread per process: the tiny model gains nothing from more, and on a shared 2-core machine
# OpenMP threads competing with other processes slow a run down tenfold.
RUN_ENV = {"OMP_NUM_THREADS": "1"}
TIMING_KEYS = {"tokens_per_s", "eval_s"}


def write_pairs(path, n, seed=0):
    """Separable synthetic pairs: preferred responses are runs of 'a', dispreferred ones of 'b'."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            q = " + ".join(str(rng.randint(1, 9)) for _ in range(3))
            k = rng.randint(2, 8)
            f.write(json.dumps({"question": q, "correct": "a" * k + " #1", "incorrect": "b" * k + " #2"}) + "\n")
    return path


def run(args, log_path, num_processes=1, env=None, fault=None):
    """Train through the real command line; returns the log text (raises LaunchError on failure).
    ``fault`` (name, value): one process with that fault put in (``tests/faults.py``)."""
    cmd = train_command(TrainRMConfig.from_dict(args), num_processes=num_processes)
    if fault is not None:
        cmd = [sys.executable, str(FAULTS), *map(str, fault), "train-rm", *cmd[3:]]
    run_streaming(
        cmd, log_path, env={**RUN_ENV, **(env or {})}, timeout_s=RUN_TIMEOUT_S, show=lambda lines, final: None
    )
    return log_path.read_text()


def metrics(path):
    return [json.loads(line) for line in open(path)]


def without_timing(rows):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


def max_weight_diff(a, b):
    sa, sb = load_reward_model(a).state_dict(), load_reward_model(b).state_dict()
    assert sa.keys() == sb.keys()
    return max((sa[k].float() - sb[k].float()).abs().max().item() for k in sa)


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    return write_pairs(tmp_path_factory.mktemp("pairs") / "pairs.jsonl", 48)


@pytest.fixture(scope="module")
def base_args(tiny_policy_dir, pairs_file):
    """48 pairs -> 38 train / 10 eval; batch 4 = micro 2 x accumulation 2; 6 steps, contrastive."""
    return {
        "pretrain": str(tiny_policy_dir),
        "dataset": str(pairs_file),
        "template": "toymath",
        "max_len": 64,
        "eval_split": 0.2,
        "train_batch_size": 4,
        "micro_train_batch_size": 2,
        "max_steps": 6,
        "save_steps": 3,
        "eval_steps": 3,
        "logging_steps": 1,
        "learning_rate": 1e-3,
        "zero_stage": 2,
        "reward_model_strategy": "contrastive",
        "sim_samples": 4,
        "unsim_samples": 4,
        "seed": 7,
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, base_args):
    out = tmp_path_factory.mktemp("uninterrupted")
    args = {**base_args, "save_path": str(out / "rm")}
    log = run(args, out / "train.log")
    return out, args, log


# ---------------------------------------------------------------------------------------------
# single process
# ---------------------------------------------------------------------------------------------


def test_single_process_run_saves_a_loadable_rm_with_metrics_and_summary(uninterrupted, tiny_policy_dir):
    out, args, log = uninterrupted
    rm_dir = out / "rm"
    model = load_reward_model(rm_dir)
    rows = metrics(out / "rm.metrics.jsonl")
    assert [r["step"] for r in rows if r["split"] == "train"] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in rows if r["split"] == "eval"] == [3, 6]
    expected_keys = {
        "step",
        "split",
        "loss",
        "preference_loss",
        "contrastive_loss",
        "accuracy",
        "chosen_reward",
        "rejected_reward",
        "lr",
        "tokens_per_s",
    }
    assert all(expected_keys <= r.keys() for r in rows)
    final_eval = rows[-1]
    # the eval loss is a mean over batches (5 here), not a running sum
    assert final_eval["loss"] == pytest.approx(final_eval["preference_loss"] + final_eval["contrastive_loss"])
    assert final_eval["loss"] < 2.5
    summary = json.loads((rm_dir / "train_summary.json").read_text())
    assert summary["steps"] == 6 and summary["strategy"] == "contrastive" and summary["zero_stage"] == 2
    assert summary["eval_accuracy"] == final_eval["accuracy"] and summary["eval_loss"] == final_eval["loss"]
    assert summary["tokens_per_s"] > 0 and summary["train_pairs"] == 38 and summary["eval_pairs"] == 10
    assert model.config.reward_mean == pytest.approx(summary["reward_mean"]) and model.config.normalize_reward is False
    assert json.loads((rm_dir / "goalrm.json").read_text())["training_args"]["zero_stage"] == 2
    # the backbone trained: compare with the policy it started from
    policy = load_file(tiny_policy_dir / "model.safetensors")
    trained = model.state_dict()
    assert not torch.equal(policy["model.layers.0.mlp.up_proj.weight"], trained["model.layers.0.mlp.up_proj.weight"])
    # checkpoints live beside the RM directory, never inside it (a final save replaces it whole)
    assert (out / "rm.checkpoints" / "global_step3").is_dir() and (
        out / "rm.checkpoints" / "latest"
    ).read_text() == "global_step6"
    assert "tokenised train: 38 rows: 0 truncated" in log


def test_save_format_official_is_what_the_official_loader_reads(base_args, tmp_path):
    from official_layout import OfficialRM  # the official reward model, built by hand from its source

    args = {
        **base_args,
        "save_path": str(tmp_path / "rm-vhs-mlp"),
        "reward_model_strategy": "vanilla",
        "max_steps": 2,
        "save_steps": -1,
        "eval_steps": 2,
        "value_head_strategy": "mlp",
        "mlp_head": "official",
        "save_format": "official",
    }
    run(args, tmp_path / "train.log")
    folder = tmp_path / "rm-vhs-mlp"
    fields = json.loads((folder / "config.json").read_text())
    assert fields["_value_head_strategy"] == "mlp" and {"mean", "std", "normalize_reward"} <= fields.keys()
    assert json.loads((folder / "goalrm.json").read_text())["checkpoint_format"] == "official"
    ids = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    mask = (torch.arange(5) < torch.tensor([[5], [3]])).long()
    with torch.no_grad():
        theirs = OfficialRM.from_folder(folder)(ids, mask)
        ours = load_reward_model(folder)(ids, mask).reward
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-6)


def test_a_mean_pooled_rm_trains_through_the_command_line_and_keeps_its_pool(base_args, tmp_path):
    """--reward_pool mean reaches the model (the pool is in goalrm.json) and the trainer's rewards are response
    means."""
    args = {
        **base_args,
        "save_path": str(tmp_path / "rm"),
        "reward_model_strategy": "vanilla",
        "max_steps": 2,
        "save_steps": -1,
        "eval_steps": 2,
        "reward_pool": "mean",
    }
    run(args, tmp_path / "train.log")
    assert json.loads((tmp_path / "rm" / "goalrm.json").read_text())["reward_pool"] == "mean"
    model = load_reward_model(tmp_path / "rm")
    assert model.reward_pool == "mean"
    rows = metrics(tmp_path / "rm.metrics.jsonl")
    assert [r["step"] for r in rows if r["split"] == "train"] == [1, 2] and all(math.isfinite(r["loss"]) for r in rows)


def test_stop_and_resume_ends_with_the_weights_of_an_uninterrupted_run(uninterrupted, tmp_path):
    out, args, _ = uninterrupted
    resumed = {**args, "save_path": str(tmp_path / "rm")}
    log = run({**resumed, "stop_after_steps": 3}, tmp_path / "first.log")
    assert "stopped after step 3" in log and not (tmp_path / "rm").exists()
    assert (tmp_path / "rm.checkpoints" / "latest").read_text() == "global_step3"
    log = run({**resumed, "load_checkpoint": True}, tmp_path / "second.log")
    assert "at step 3" in log
    assert max_weight_diff(out / "rm", tmp_path / "rm") < 1e-6
    assert without_timing(metrics(tmp_path / "rm.metrics.jsonl")) == without_timing(metrics(out / "rm.metrics.jsonl"))


def test_a_compiled_run_trains_the_eager_runs_rm_to_rounding(uninterrupted, tmp_path):
    """--torch_compile changes how the step runs, not what it computes: the same 6 steps (checkpoints and
    evaluations included) end with the eager run's weights and metrics up to float rounding, under the same
    parameter names (the state dict of an in-place compiled module keeps them)."""
    out, args, _ = uninterrupted
    run({**args, "save_path": str(tmp_path / "rm"), "torch_compile": True}, tmp_path / "train.log")
    assert json.loads((tmp_path / "rm" / "goalrm.json").read_text())["training_args"]["torch_compile"] is True
    assert max_weight_diff(out / "rm", tmp_path / "rm") < 1e-4
    compiled, eager = metrics(tmp_path / "rm.metrics.jsonl"), metrics(out / "rm.metrics.jsonl")
    assert [(r["step"], r["split"]) for r in compiled] == [(r["step"], r["split"]) for r in eager]
    for c, e in zip(compiled, eager):
        assert c["loss"] == pytest.approx(e["loss"], rel=1e-4, abs=1e-5), (c["step"], c["split"])


HIDDEN_STATS = ("hidden_norm", "hidden_effective_rank")


def same_weights(a, b) -> bool:
    """Every tensor of two saved RMs equal bit for bit."""
    sa, sb = load_file(Path(a) / "model.safetensors"), load_file(Path(b) / "model.safetensors")
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_hidden_stats_are_in_every_train_row_and_change_no_weight(uninterrupted, tmp_path):
    """--log_hidden_stats (on by default) adds the chosen responses' state norm and effective rank to each train
    row, computed without gradients: the run without them trains the same weights bit for bit and logs the same
    rows otherwise (the 6 steps, checkpoints and evaluations of the shared run)."""
    out, args, _ = uninterrupted
    run({**args, "save_path": str(tmp_path / "rm"), "log_hidden_stats": False}, tmp_path / "train.log")
    assert same_weights(out / "rm", tmp_path / "rm")
    on, off = without_timing(metrics(out / "rm.metrics.jsonl")), without_timing(metrics(tmp_path / "rm.metrics.jsonl"))
    train = [r for r in on if r["split"] == "train"]
    assert len(train) == 6 and all(math.isfinite(r[k]) and r[k] > 0 for r in train for k in HIDDEN_STATS)
    assert all(r["hidden_effective_rank"] <= 32 for r in train)  # the tiny policy's hidden size
    assert not any(k in r for r in off for k in HIDDEN_STATS) and all(r["contrastive_beta"] == 0.5 for r in train)
    assert [{k: v for k, v in r.items() if k not in HIDDEN_STATS} for r in on] == off


@pytest.mark.parametrize(
    "stabiliser", [{"contrastive_warmup_steps": 4}, {"contrastive_stop_gradient": "goal"}], ids=["warmup", "stopgrad"]
)
def test_a_stabiliser_starts_from_the_same_forward_pass_and_trains_another_rm(uninterrupted, tmp_path, stabiliser):
    """On, each stabiliser changes the run from its first update, not its first forward pass: the warm-up weighs the
    contrastive term by β·k/4 at the step after k steps (0 at the first), the stop-gradient keeps every value of the
    first step and only cuts the goal states' gradient."""
    out, args, _ = uninterrupted
    run({**args, "save_path": str(tmp_path / "rm"), **stabiliser}, tmp_path / "train.log")
    assert not same_weights(out / "rm", tmp_path / "rm")
    plain = [r for r in without_timing(metrics(out / "rm.metrics.jsonl")) if r["split"] == "train"]
    stabilised = [r for r in without_timing(metrics(tmp_path / "rm.metrics.jsonl")) if r["split"] == "train"]
    settings = json.loads((tmp_path / "rm" / "goalrm.json").read_text())["training_args"]
    assert all(settings[k] == v for k, v in stabiliser.items())
    if "contrastive_warmup_steps" in stabiliser:
        assert [r["contrastive_beta"] for r in stabilised] == [0.0, 0.125, 0.25, 0.375, 0.5, 0.5]
        assert stabilised[0]["contrastive_loss"] == 0.0 and plain[0]["contrastive_loss"] > 0
        assert stabilised[0]["preference_loss"] == plain[0]["preference_loss"]
    else:
        assert stabilised[0] == plain[0]
    assert stabilised[-1]["loss"] != plain[-1]["loss"]


class _Planted:
    """Unpickled, writes a marker: what a planted checkpoint file would do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "code ran"))


def test_resume_refuses_a_planted_checkpoint_file_and_runs_no_code(base_args, tmp_path):
    args = {**base_args, "save_path": str(tmp_path / "rm"), "max_steps": 2, "save_steps": 1, "eval_steps": -1}
    run({**args, "stop_after_steps": 1}, tmp_path / "first.log")
    planted = tmp_path / "rm.checkpoints" / "global_step1" / "mp_rank_00_model_states.pt"
    marker = tmp_path / "marker"
    torch.save({"module": {}, "client": _Planted(marker)}, planted)
    with pytest.raises(LaunchError):
        run({**args, "load_checkpoint": True}, tmp_path / "second.log")
    log = (tmp_path / "second.log").read_text()
    assert f"{planted}: refusing to load this checkpoint file" in log and "Traceback" not in log
    assert not marker.exists() and not (tmp_path / "rm").exists()


def test_nan_loss_stops_with_a_clear_error_and_keeps_the_last_checkpoint(base_args, tmp_path):
    args = {**base_args, "save_path": str(tmp_path / "rm"), "save_steps": 1, "eval_steps": -1}
    with pytest.raises(LaunchError, match=r"non-finite preference_loss and loss at optimiser step 3"):
        run(args, tmp_path / "train.log", fault=("nan_loss_at_step", 3))
    ckpt = tmp_path / "rm.checkpoints"
    assert (ckpt / "latest").read_text() == "global_step2" and not (ckpt / "global_step3").exists()
    state = torch.load(ckpt / "global_step2" / "mp_rank_00_model_states.pt", map_location="cpu", weights_only=False)
    assert state["step"] == 2 and all(torch.isfinite(v).all() for v in state["module"].values())
    assert "Last good checkpoint: " + str(ckpt / "global_step2") in (tmp_path / "train.log").read_text()
    assert not (tmp_path / "rm").exists()


def test_the_seeds_contrastive_command_line_runs(tiny_policy_dir, tmp_path):
    """Flags copied from the official code's train_contrastive_rm.sh; --flash_attn dropped (no CUDA), --bf16
    kept (DeepSpeed's CPU accelerator supports bf16), wandb offline, tiny model and data, 2 steps
    (the toy pairs' template keeps the 128 micro-batches short on 2 CPU cores)."""
    dataset = write_pairs(tmp_path / "pairs.jsonl", 140, seed=1)
    seed_flags = f"""
        --save_path {tmp_path / "contrastive_reward_model"} --save_steps -1 --logging_steps 1 --eval_steps -1
        --train_batch_size 64 --micro_train_batch_size 1 --pretrain {tiny_policy_dir} --bf16 --max_epochs 1
        --max_len 2048 --zero_stage 3 --learning_rate 9e-6 --dataset {dataset} --dataset_probs 1.0
        --contrastive_loss_beta 0.5 --unsim_samples 16 --gradient_checkpointing --use_wandb offline
        --wandb_project goalrm --wandb_group tests --wandb_org none --reward_model_strategy contrastive
        --contrastive_strategy cosine --value_head_strategy linear --source_state_percentile 0
        --goal_state_percentile 0 --max_steps 2 --template toymath
    """.split()
    run_streaming(
        [sys.executable, "-m", "goalrm_core.train.trainer", *seed_flags],
        tmp_path / "train.log",
        env=RUN_ENV,
        timeout_s=RUN_TIMEOUT_S,
        show=lambda lines, final: None,
    )
    summary = json.loads((tmp_path / "contrastive_reward_model" / "train_summary.json").read_text())
    assert summary["steps"] == 2 and summary["bf16"] and summary["zero_stage"] == 3
    rows = metrics(tmp_path / "contrastive_reward_model.metrics.jsonl")
    assert [r["step"] for r in rows if r["split"] == "train"] == [1, 2]
    assert all(r["contrastive_loss"] > 0 for r in rows)
    load_reward_model(tmp_path / "contrastive_reward_model")


# ---------------------------------------------------------------------------------------------
# two processes through the deepspeed launcher
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_process_runs(tmp_path_factory, base_args):
    out = tmp_path_factory.mktemp("two_process")
    args = {
        **base_args,
        "train_batch_size": 4,
        "micro_train_batch_size": 1,
        "max_steps": 4,
        "save_steps": 2,
        "eval_steps": 2,
    }
    for stage in (2, 3):
        run(
            {**args, "zero_stage": stage, "save_path": str(out / f"zero{stage}")},
            out / f"zero{stage}.log",
            num_processes=2,
        )
    return out


@pytest.mark.deepspeed
@pytest.mark.parametrize("stage", [2, 3])
def test_two_process_run_saves_a_loadable_rm(two_process_runs, stage):
    summary = json.loads((two_process_runs / f"zero{stage}" / "train_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["zero_stage"] == stage and summary["steps"] == 4
    model = load_reward_model(two_process_runs / f"zero{stage}")
    head = model.score.weight
    hidden = model.config.hidden_size
    # initialised normal(0, 1/(hidden+1)) and gathered whole from the ZeRO-3 partitions
    assert head.shape == (1, hidden) and head.abs().sum() > 0
    assert 0.5 / (hidden + 1) < head.std().item() < 2.0 / (hidden + 1)
    assert (two_process_runs / f"zero{stage}.checkpoints" / "global_step2").is_dir()


@pytest.mark.deepspeed
def test_zero2_and_zero3_train_the_same_weights(two_process_runs):
    assert max_weight_diff(two_process_runs / "zero2", two_process_runs / "zero3") < 1e-4


# ---------------------------------------------------------------------------------------------
# clear errors (raised before any process group exists, so they run in-process)
# ---------------------------------------------------------------------------------------------


def flags(base_args, tmp_path, **over):
    return TrainRMConfig.from_dict({**base_args, "save_path": str(tmp_path / "rm"), **over}).to_argv()


@pytest.mark.skipif(__import__("importlib").util.find_spec("flash_attn") is not None, reason="flash-attn installed")
def test_flash_attn_without_the_package_is_a_clear_error(base_args, tmp_path):
    with pytest.raises(RuntimeError, match="--flash_attn was given but the flash-attn package is not installed"):
        main(flags(base_args, tmp_path, flash_attn=True))


def test_batch_size_not_divisible_names_the_three_numbers(base_args, tmp_path, monkeypatch):
    with pytest.raises(
        ValueError, match=r"--train_batch_size 5 is not divisible by --micro_train_batch_size 2 x world size 1"
    ):
        main(flags(base_args, tmp_path, train_batch_size=5))
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(
        ValueError, match=r"--train_batch_size 6 is not divisible by --micro_train_batch_size 2 x world size 2"
    ):
        main(flags(base_args, tmp_path, train_batch_size=6))
    assert gradient_accumulation_steps(64, 1, 8) == 8


@pytest.mark.skipif(__import__("importlib").util.find_spec("tensorboard") is not None, reason="tensorboard installed")
def test_tensorboard_without_the_package_is_a_clear_error(base_args, tmp_path):
    with pytest.raises(ValueError, match="--use_tensorboard needs the tensorboard package"):
        main(flags(base_args, tmp_path, use_tensorboard=str(tmp_path / "tb")))


def test_rows_missing_keys_name_the_row(base_args, tmp_path):
    bad = write_pairs(tmp_path / "bad.jsonl", 6)
    with open(bad, "a") as f:
        f.write(json.dumps({"question": "1 + 2", "chosen": "aaa"}) + "\n")
    with pytest.raises(PreferenceDataError, match=r"bad\.jsonl:7: missing keys .*accepted shapes"):
        main(flags(base_args, tmp_path, dataset=str(bad)))


# ---------------------------------------------------------------------------------------------
# pieces
# ---------------------------------------------------------------------------------------------


def test_data_order_is_a_function_of_seed_and_epoch_and_grouping_cuts_padding():
    rng = random.Random(0)
    lengths = [rng.randint(5, 200) for _ in range(400)]
    a = epoch_batches(lengths, 0, seed=1, per_pass=4, n_passes=100, group_by_length=True)
    assert a == epoch_batches(lengths, 0, seed=1, per_pass=4, n_passes=100, group_by_length=True)
    assert a != epoch_batches(lengths, 1, seed=1, per_pass=4, n_passes=100, group_by_length=True)
    assert sorted(i for b in a for i in b) == list(range(400))
    plain = epoch_batches(lengths, 0, seed=1, per_pass=4, n_passes=100, group_by_length=False)

    def padding(batches):
        return sum(max(lengths[i] for i in b) * len(b) - sum(lengths[i] for i in b) for b in batches)

    assert padding(a) < 0.2 * padding(plain)


def test_schedule_config_and_paths(tmp_path):
    f = WarmupCosine(total_steps=10, warmup_ratio=0.03)
    assert f.warmup_steps == 1 and f(0) == 0.0 and f(1) == 1.0 and f(10) == 0.0
    assert all(f(s) >= f(s + 1) for s in range(1, 10))
    cfg = parse_args(
        [
            "--pretrain",
            "p",
            "--train_batch_size",
            "64",
            "--micro_train_batch_size",
            "2",
            "--zero_stage",
            "3",
            "--bf16",
            "--max_norm",
            "0.5",
            "--save_path",
            str(tmp_path / "rm"),
        ]
    )
    ds = deepspeed_config(cfg, world_size=4)
    assert ds["gradient_accumulation_steps"] == 8 and ds["gradient_clipping"] == 0.5
    assert ds["zero_optimization"]["stage"] == 3 and ds["bf16"]["enabled"]
    ckpt, metrics_path = default_paths(cfg)
    assert ckpt == tmp_path / "rm.checkpoints" and metrics_path == tmp_path / "rm.metrics.jsonl"


def test_optimizer_groups_give_the_head_its_own_learning_rate(tiny_config):
    import copy

    from transformers import AutoModel

    from goalrm_core.model.reward_model import RewardModel

    model = RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear")
    cfg = parse_args(["--pretrain", "p", "--learning_rate", "1e-5", "--head_learning_rate", "1e-3", "--l2", "0.1"])
    groups = optimizer_param_groups(model, cfg)
    head = [g for g in groups if any(p is model.score.weight for p in g["params"])]
    assert len(head) == 1 and head[0]["lr"] == 1e-3 and head[0]["weight_decay"] == 0.1
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    norms = [g for g in groups if any(p is model.model.norm.weight for p in g["params"])]
    assert norms[0]["weight_decay"] == 0.0 and norms[0]["lr"] == 1e-5


def test_train_command_shapes(monkeypatch):
    single = train_command(TrainRMConfig(pretrain="m", group_by_length=False))
    assert single[:3] == [sys.executable, "-m", "goalrm_core.train.trainer"] and "--no-group_by_length" in single
    assert parse_args(single[3:]) == TrainRMConfig(pretrain="m", group_by_length=False)
    multi = train_command(TrainRMConfig(pretrain="m"), num_processes=2)
    assert os.path.basename(multi[0]) == "deepspeed" and multi[1:3] == ["--num_gpus", "2"]
    assert multi[multi.index("--module") + 1] == "goalrm_core.train.trainer" and "--master_port" in multi
    nodes = train_command(TrainRMConfig(pretrain="m"), num_processes=8, hostfile="hosts", num_nodes=2)
    assert nodes[1:7] == ["--hostfile", "hosts", "--num_nodes", "2", "--num_gpus", "8"]
    with pytest.raises(ValueError, match="unknown train-rm argument"):
        train_command(TrainRMConfig.from_dict({"pretrian": "m"}))
    with pytest.raises(TypeError, match="train_command takes a TrainRMConfig"):
        train_command({"pretrain": "m"})


def test_sigkill_after_a_checkpoint_then_resume_matches_an_uninterrupted_run(uninterrupted, tmp_path):
    """A real crash: SIGKILL the trainer as soon as its first checkpoint lands, resume, compare."""
    import signal
    import subprocess
    import time

    out, args, _ = uninterrupted
    killed = {**args, "save_path": str(tmp_path / "rm")}
    latest = tmp_path / "rm.checkpoints" / "latest"
    proc = subprocess.Popen(
        train_command(TrainRMConfig.from_dict(killed)),
        env={**os.environ, **RUN_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + RUN_TIMEOUT_S
    while not (latest.exists() and latest.read_text().strip()) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (tmp_path / "rm").exists(), (
        "the run ended before it could be killed"
    )
    run({**killed, "load_checkpoint": True}, tmp_path / "resume.log")
    assert max_weight_diff(out / "rm", tmp_path / "rm") < 1e-6
    assert without_timing(metrics(tmp_path / "rm.metrics.jsonl")) == without_timing(metrics(out / "rm.metrics.jsonl"))
    assert not list(tmp_path.rglob("*.tmp*")), "a half-written artifact was left behind"


def test_ctrl_c_says_in_one_line_where_to_resume_and_that_command_finishes(base_args, tmp_path):
    """Ctrl-C in train-rm (53): no traceback; one line naming the last complete checkpoint and the command
    that resumes from it, which then trains to the end."""
    import shlex
    import subprocess

    args = {**base_args, "save_path": str(tmp_path / "rm"), "max_steps": 3, "save_steps": 1, "eval_steps": -1}
    cmd = [
        sys.executable,
        str(FAULTS),
        "sigint_at_step",
        "3",
        "train-rm",
        *train_command(TrainRMConfig.from_dict(args))[3:],
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **RUN_ENV}, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and lines[0].startswith("goalrm train-rm: interrupted: the last complete checkpoint is "), (
        lines
    )
    assert str(tmp_path / "rm.checkpoints" / "global_step2") in lines[0] and not (tmp_path / "rm").exists()
    resume = shlex.split(lines[0].split("resume with: ", 1)[1])
    assert resume[:2] == ["goalrm", "train-rm"] and "--load_checkpoint" in resume
    again = subprocess.run(
        [sys.executable, "-m", "goalrm_core.cli", *resume[1:]],
        capture_output=True,
        text=True,
        env={**os.environ, **RUN_ENV},
        timeout=RUN_TIMEOUT_S,
    )
    assert again.returncode == 0 and "at step 2" in again.stdout, again.stderr[-3000:]
    assert load_reward_model(tmp_path / "rm") is not None


def test_a_full_disk_at_the_final_save_is_one_line_and_keeps_the_earlier_rm_and_its_log(
    base_args, tmp_path, tiny_config, tokenizer
):
    """(53) --overwrite of an earlier RM on a full disk: one line naming --save_path and the last checkpoint; the
    earlier RM and its metrics log are as they were (the new log waits in <log>.partial until its RM is saved)."""
    import subprocess

    from transformers import LlamaModel

    from goalrm_core.model.reward_model import RewardModel, save_reward_model

    save_reward_model(RewardModel(LlamaModel(tiny_config)), tmp_path / "rm", tokenizer)
    log = tmp_path / "rm.metrics.jsonl"
    log.write_text('{"step": 1, "split": "train", "loss": 0.5}\n')
    before = {p.name: p.read_bytes() for p in (tmp_path / "rm").iterdir()}
    args = {
        **base_args,
        "save_path": str(tmp_path / "rm"),
        "max_steps": 2,
        "save_steps": 1,
        "eval_steps": -1,
        "overwrite": True,
    }
    cmd = [
        sys.executable,
        str(FAULTS),
        "disk_full_at_save",
        "1",
        "train-rm",
        *train_command(TrainRMConfig.from_dict(args))[3:],
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **RUN_ENV}, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith(
        f"goalrm train-rm: error: --save_path {tmp_path / 'rm'}: the RM could not be written (No space left on device"
    )
    assert (
        "the earlier RM there and its metrics log are kept" in errors[0]
        and str(tmp_path / "rm.checkpoints" / "global_step2") in errors[0]
    )
    assert {p.name: p.read_bytes() for p in (tmp_path / "rm").iterdir()} == before
    assert log.read_text() == '{"step": 1, "split": "train", "loss": 0.5}\n'
    rows = [json.loads(line) for line in (tmp_path / "rm.metrics.jsonl.partial").read_text().splitlines()]
    assert [(r["step"], r["split"]) for r in rows] == [
        (1, "train"),
        (2, "train"),
        (2, "eval"),
    ]  # the failed run's own log, beside
