"""Reward-model training through a DeepSpeed engine (ZeRO 0-3), on GPUs or on CPU over gloo.

The seed's command lines keep working::

    python -m goalrm_core.train.trainer --pretrain PATH --dataset pairs.jsonl ...        # one process
    deepspeed --num_gpus 2 --module goalrm_core.train.trainer --pretrain PATH ...         # N processes
    goalrm train-rm --pretrain PATH ...                                              # CLI, main(argv)

Every run goes through ``deepspeed.initialize``; a plain ``python -m`` run sets up a one-process
group itself (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT with a free port). On CPU DeepSpeed uses its
CPU accelerator and gloo, and bf16 and ZeRO 0-3 all work. The optimiser is torch's AdamW, so no
optimiser op (CPU Adam) is compiled; DeepSpeed does compile its small CPU shared-memory comm op on
the first run on a machine (30-60 s, cached in ~/.cache/torch_extensions).

What a run writes:

* ``--save_path``: the RM in the HF layout (``save_reward_model``, atomic) + ``train_summary.json``;
* ``--metrics_path`` (default ``<save_path>.metrics.jsonl``): train rows every ``--logging_steps``,
  eval rows every ``--eval_steps`` and at the end;
* ``--ckpt_path`` (default ``<save_path>.checkpoints``, beside the RM, never inside it): DeepSpeed
  checkpoints every ``--save_steps``, with the data position and every rank's RNG states.

Resuming (``--load_checkpoint``) continues the same schedule: the data order of an epoch is a
function of (seed, epoch), the learning rate of (step, total steps), and the contrastive sampler's
generator state is restored, so stopping after a checkpoint and resuming ends with the weights of
an uninterrupted run. ``--stop_after_steps N`` simulates such a stop (a preemption): it checkpoints
after step N and exits without the final save, while ``--max_steps`` still sets the schedule.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from goalrm_core.train.config import TrainRMConfig, _help, build_parser
from goalrm_core.data.encoding import PreferenceCollator, encode_preference_rows
from goalrm_core.data.io import atomic_write_json, atomic_write_text, check_output_dir
from goalrm_core.model.reward_model import RewardModel, attention_implementation, describe_tensors, nonfinite_tensors, save_reward_model
from goalrm_core.model.objective import reward_model_loss
from goalrm_core.data.preferences import load_preference_rows, split_train_eval

SUMMARY_JSON = "train_summary.json"
LOSS_TERMS = ("preference_loss", "contrastive_loss", "loss")
# Fault injection for tests: "N" makes the preference loss NaN on the first micro-batch of step N.
INJECT_NAN_ENV = "GOALRM_INJECT_NAN_AT_STEP"


@dataclass
class TrainRunConfig(TrainRMConfig):
    """The seed's flags plus the run-control flags of this trainer."""

    stop_after_steps: int = _help(
        "Stop after N optimiser steps, writing a checkpoint, without the final save (simulates a "
        "preemption; --max_steps and the epochs still define the schedule). 0 = off.", 0)


class TrainingError(RuntimeError):
    """Training cannot continue (a non-finite loss, a checkpoint that does not match the run)."""


# ---------------------------------------------------------------------------------------------
# configuration helpers (no DeepSpeed needed: testable and used before any process group exists)
# ---------------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None = None) -> TrainRunConfig:
    parser = build_parser(TrainRunConfig, description="Train a (goal-conditioned) reward model with DeepSpeed.")
    args = parser.parse_args(argv)
    for name, value in vars(args).items():
        if isinstance(value, float) and not math.isfinite(value):
            parser.error(f"argument --{name}: must be a finite number, got {value}")
    if args.learning_rate <= 0:
        parser.error(f"argument --learning_rate: must be > 0, got {args.learning_rate}")
    if args.head_learning_rate < 0:
        parser.error(f"argument --head_learning_rate: must be >= 0 (0 = same as --learning_rate), got {args.head_learning_rate}")
    return TrainRunConfig(**vars(args))


def default_paths(cfg: TrainRMConfig) -> tuple[Path, Path]:
    """(checkpoint dir, metrics jsonl): beside the final RM directory, which a save replaces whole."""
    save = Path(cfg.save_path.rstrip("/") or ".")
    ckpt = Path(cfg.ckpt_path) if cfg.ckpt_path else save.parent / f"{save.name}.checkpoints"
    metrics = Path(cfg.metrics_path) if cfg.metrics_path else save.parent / f"{save.name}.metrics.jsonl"
    return ckpt, metrics


def gradient_accumulation_steps(train_batch_size: int, micro_batch_size: int, world_size: int) -> int:
    """``train_batch_size / (micro_batch_size × world_size)``; anything else is an error.

    >>> gradient_accumulation_steps(64, 1, 2)
    32
    """
    per_pass = micro_batch_size * world_size
    if train_batch_size % per_pass:
        raise ValueError(
            f"--train_batch_size {train_batch_size} is not divisible by --micro_train_batch_size "
            f"{micro_batch_size} x world size {world_size} (= {per_pass} pairs per forward pass); "
            f"choose a train_batch_size that is a multiple of {per_pass}"
        )
    return train_batch_size // per_pass


def deepspeed_config(cfg: TrainRMConfig, world_size: int) -> dict:
    """The DeepSpeed config of a run: ZeRO stage, bf16, clipping and the batch geometry."""
    zero: dict[str, Any] = {"stage": cfg.zero_stage}
    if cfg.zero_stage >= 2:
        zero.update(contiguous_gradients=True, overlap_comm=False, reduce_bucket_size=int(5e8))
    if cfg.zero_stage == 3:
        zero.update(
            stage3_param_persistence_threshold=int(1e4),
            stage3_max_live_parameters=int(1e9),
            stage3_prefetch_bucket_size=int(5e7),
            stage3_gather_16bit_weights_on_model_save=True,
        )
    config = {
        "train_batch_size": cfg.train_batch_size,
        "train_micro_batch_size_per_gpu": cfg.micro_train_batch_size,
        "gradient_accumulation_steps": gradient_accumulation_steps(cfg.train_batch_size, cfg.micro_train_batch_size, world_size),
        "gradient_clipping": cfg.max_norm,
        "zero_optimization": zero,
        "bf16": {"enabled": bool(cfg.bf16)},
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": False,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    if cfg.bf16 and cfg.zero_stage >= 1:
        # fp32 gradient accumulation (ZeRO's bf16 optimiser keeps fp32 master weights); stage 0
        # supports only matching dtypes.
        config["data_types"] = {"grad_accum_dtype": "fp32"}
    return config


class WarmupCosine:
    """LR factor: linear warm-up over ``ceil(ratio × total)`` steps, then cosine decay to 0.

    An object rather than a closure so ``LambdaLR.state_dict`` (and so a checkpoint) records it.

    >>> f = WarmupCosine(total_steps=10, warmup_ratio=0.2)
    >>> f.warmup_steps, f(0), f(1), f(2), f(6), f(10)
    (2, 0.0, 0.5, 1.0, 0.5, 0.0)
    """

    def __init__(self, total_steps: int, warmup_ratio: float):
        self.total_steps = max(1, int(total_steps))
        self.warmup_steps = int(math.ceil(warmup_ratio * self.total_steps))

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return step / self.warmup_steps
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return 0.5 * (1.0 + math.cos(math.pi * progress))


def optimizer_param_groups(model: RewardModel, cfg: TrainRMConfig) -> list[dict]:
    """AdamW groups: weight decay ``--l2`` except on biases and norms; the value head may get its
    own ``--head_learning_rate``."""
    head_ids = {id(p) for p in model.head.parameters()}
    head_lr = cfg.head_learning_rate or cfg.learning_rate
    groups: dict[tuple[bool, bool], list] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        shape = getattr(param, "ds_shape", param.shape)  # ZeRO-3 partitions leave param.shape empty
        no_decay = len(shape) < 2 or name.endswith(".bias") or "norm" in name.lower()
        groups.setdefault((id(param) in head_ids, no_decay), []).append(param)
    return [
        {"params": params, "lr": head_lr if is_head else cfg.learning_rate, "weight_decay": 0.0 if no_decay else cfg.l2}
        for (is_head, no_decay), params in sorted(groups.items())
    ]


def item_length(item: dict) -> int:
    return max(len(item["chosen_ids"]), len(item["rejected_ids"]))


def epoch_batches(
    lengths: Sequence[int], epoch: int, seed: int, per_pass: int, n_passes: int, group_by_length: bool
) -> list[list[int]]:
    """The data order of one epoch: ``n_passes`` global micro-batches of ``per_pass`` item indices
    (rank r takes slice ``[r*micro:(r+1)*micro]`` of each). A function of (seed, epoch) only.

    With ``group_by_length`` the shuffled order is cut into chunks of 50 passes, each chunk sorted by
    length and cut into passes, and the passes of a chunk shuffled: similar lengths share a padded
    batch (across ranks too), while the order stays random at the chunk scale.

    >>> lengths = [1, 9, 2, 8, 3, 7]
    >>> batches = epoch_batches(lengths, epoch=0, seed=0, per_pass=2, n_passes=3, group_by_length=True)
    >>> sorted(sorted(lengths[i] for i in b) for b in batches)
    [[1, 2], [3, 7], [8, 9]]
    """
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))[: per_pass * n_passes].tolist()
    if not group_by_length:
        return [order[i * per_pass:(i + 1) * per_pass] for i in range(n_passes)]
    chunk = 50 * per_pass
    batches = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: -lengths[i])
        passes = [part[i:i + per_pass] for i in range(0, len(part), per_pass)]
        batches.extend(passes[j] for j in rng.permutation(len(passes)).tolist())
    return batches


# ---------------------------------------------------------------------------------------------
# distributed plumbing
# ---------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launched_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def init_distributed() -> tuple[int, int, int]:
    """(rank, local rank, world size), creating a one-process group when no launcher set one up."""
    import deepspeed

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_SIZE="1")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(free_port())
    import torch.distributed as dist

    if not dist.is_initialized():
        deepspeed.init_distributed(verbose=False)
    return dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0")), dist.get_world_size()


def _set_cpu_threads() -> None:
    """On CPU, split the cores between the local processes unless OMP_NUM_THREADS says otherwise."""
    if torch.cuda.is_available() or os.environ.get("OMP_NUM_THREADS"):
        return
    local = max(1, int(os.environ.get("LOCAL_SIZE", "1")))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local))


def _all_reduce(t: torch.Tensor, op: str = "sum") -> torch.Tensor:
    import torch.distributed as dist

    dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
    return t


def rng_states(generator: torch.Generator) -> dict:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "contrastive": generator.get_state(),
    }


def set_rng_states(state: dict, generator: torch.Generator) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    generator.set_state(state["contrastive"])


# ---------------------------------------------------------------------------------------------
# logging sinks
# ---------------------------------------------------------------------------------------------

def _wandb_online(timeout: float = 3.0) -> bool:
    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("//")[-1].split("/")[0].split(":")[0]
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


class MetricSinks:
    """The metrics JSONL plus optional tensorboard and wandb, on rank 0 only."""

    def __init__(self, cfg: TrainRunConfig, metrics_path: Path, enabled: bool, resume: bool):
        self.enabled = enabled
        self.path = metrics_path
        self.tb = None
        self.wandb = None
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not resume:
            self.path.write_text("")
        if cfg.use_tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # checked in preflight

            self.tb = SummaryWriter(cfg.use_tensorboard)
        if cfg.use_wandb:
            self.wandb = self._start_wandb(cfg)

    @staticmethod
    def _start_wandb(cfg: TrainRunConfig):
        try:
            import wandb
        except ImportError:
            print("warning: --use_wandb given but wandb is not installed; logging to the metrics JSONL only", file=sys.stderr)
            return None
        offline = cfg.use_wandb.lower() == "offline" or os.environ.get("WANDB_MODE") in ("offline", "disabled") or not _wandb_online()
        try:
            if not offline:
                wandb.login(key=cfg.use_wandb, relogin=True, timeout=10)
            return wandb.init(
                project=cfg.wandb_project, group=cfg.wandb_group or None, entity=cfg.wandb_org or None,
                config=cfg.to_dict(), mode="offline" if offline else "online",
            )
        except Exception as e:  # wandb must never stop a training run
            print(f"warning: wandb could not start ({type(e).__name__}: {e}); continuing without it", file=sys.stderr)
            return None

    def drop_rows_after(self, step: int) -> None:
        """On resume, forget rows the interrupted run logged after its last checkpoint."""
        if not self.path.is_file():
            return
        kept = [line for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip() and json.loads(line)["step"] <= step]
        atomic_write_text(self.path, "".join(line + "\n" for line in kept))

    def log(self, row: dict) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}) + "\n")
        numbers = {f"{row['split']}/{k}": v for k, v in row.items() if k not in ("step", "split") and isinstance(v, (int, float))}
        if self.tb is not None:
            for key, value in numbers.items():
                self.tb.add_scalar(key, value, row["step"])
        if self.wandb is not None:
            self.wandb.log(numbers, step=row["step"])

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------

def preflight(cfg: TrainRunConfig) -> None:
    """Errors that need no model, data or process group, raised before anything slow starts."""
    attention_implementation(cfg.flash_attn)
    gradient_accumulation_steps(cfg.train_batch_size, cfg.micro_train_batch_size, launched_world_size())
    if cfg.bf16 and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        raise ValueError("--bf16 was given but this GPU does not support bfloat16; drop --bf16")
    if not cfg.dataset:
        raise ValueError("--dataset is required: a .jsonl/.json/.parquet file, a save_to_disk dir or a Hub name")
    check_output_dir(cfg.save_path, "--save_path")
    if cfg.use_tensorboard:
        try:
            import tensorboard  # noqa: F401  (torch.utils.tensorboard needs it)
        except ImportError:
            raise ValueError("--use_tensorboard needs the tensorboard package: pip install tensorboard") from None


def _load_items(cfg: TrainRunConfig, tokenizer, say) -> tuple[list[dict], list[dict], dict]:
    reports: list = []
    rows = load_preference_rows(cfg.dataset, cfg.dataset_probs, cfg.seed, cfg.max_samples, reports=reports)
    if cfg.eval_dataset:
        train_rows = rows
        eval_rows = load_preference_rows(cfg.eval_dataset, "", cfg.seed, 0, split="eval", reports=reports)
    else:
        train_rows, eval_rows = split_train_eval(rows, cfg.eval_split, cfg.seed)
    for report in reports:
        say(f"data: {report.summary()}")
    if cfg.template == "math" and all(set(r.shapes) == {"hh_dialogue"} for r in reports):
        # The seed's HH script passes no template: a whole dialogue already holds its prompt.
        cfg.template = "hh"
        say("data: every row is an HH-RLHF dialogue; using --template hh (the dialogue is the prompt)")
    train_items, train_stats = encode_preference_rows(tokenizer, train_rows, cfg.template, cfg.max_len)
    eval_items, eval_stats = encode_preference_rows(tokenizer, eval_rows, cfg.template, cfg.max_len) if eval_rows else ([], None)
    say(f"tokenised train: {train_stats.summary()}")
    if eval_stats is not None:
        say(f"tokenised eval: {eval_stats.summary()}")
    if not train_items:
        raise ValueError(f"no training pairs left after tokenisation with --max_len {cfg.max_len}: {train_stats.summary()}")
    stats = {
        "train_pairs": len(train_items), "eval_pairs": len(eval_items),
        "train_truncated": train_stats.n_truncated, "train_dropped": train_stats.n_dropped,
        "eval_truncated": eval_stats.n_truncated if eval_stats else 0, "eval_dropped": eval_stats.n_dropped if eval_stats else 0,
        "skipped_rows": sum(r.n_skipped for r in reports),
    }
    return train_items, eval_items, stats


def _to_device(batch: dict, device) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


def build_model(cfg: TrainRunConfig, ds_config: dict) -> RewardModel:
    """The backbone from --pretrain plus a seeded value head (identical on every rank).

    Under ZeRO-3 the backbone is built partitioned through ``transformers``' own integration
    (an ``HfDeepSpeedConfig`` kept alive on the model, so ``from_pretrained`` runs under zero.Init;
    it needs ``accelerate``, a pinned dependency). The head is
    created afterwards, outside zero.Init, so its normal(0, 1/(hidden+1)) initialisation is real;
    ``deepspeed.initialize`` then partitions it.
    """
    from transformers import AutoModel

    dtype = torch.bfloat16 if cfg.bf16 else torch.float32
    attn = attention_implementation(cfg.flash_attn)
    hf_ds_config = None
    if cfg.zero_stage == 3:
        from transformers.integrations import HfDeepSpeedConfig

        hf_ds_config = HfDeepSpeedConfig(ds_config)  # a weakref is what from_pretrained consults
    backbone = AutoModel.from_pretrained(cfg.pretrain, dtype=dtype, attn_implementation=attn)
    backbone.config.use_cache = False
    torch.manual_seed(cfg.seed)
    model = RewardModel(backbone, cfg.value_head_strategy)
    model.head.to(dtype)
    model._hf_deepspeed_config = hf_ds_config  # keep it alive as long as the model
    if cfg.gradient_checkpointing:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


@torch.no_grad()
def evaluate(engine, items: list[dict], collate, cfg: TrainRunConfig, rank: int, world: int) -> dict:
    """Accuracy, losses (the MEAN of per-batch losses) and reward mean/std over ``items``.

    Every rank runs the same number of forward passes (ZeRO-3 gathers parameters collectively): a
    rank whose shard is shorter repeats a batch and discards it.
    """
    engine.eval()
    micro = cfg.micro_train_batch_size
    mine = items[rank::world]
    n_batches = math.ceil(math.ceil(len(items) / world) / micro)
    generator = torch.Generator().manual_seed(cfg.seed + 7919 * (rank + 1))  # fixed: eval never moves training RNG
    # loss, preference, contrastive, real batches, correct pairs, pairs, chosen sum, rejected sum, reward sum, reward sq sum
    sums = torch.zeros(10, dtype=torch.float64)
    for b in range(n_batches):
        chunk = mine[b * micro:(b + 1) * micro]
        out = reward_model_loss(engine, _to_device(collate(chunk or items[:1]), engine.device), cfg, generator)
        if not chunk:
            continue
        chosen, rejected = out.chosen_reward.double().cpu(), out.rejected_reward.double().cpu()
        rewards = torch.cat([chosen, rejected])
        sums += torch.tensor([
            out.loss.item(), out.preference_loss.item(), out.contrastive_loss.item(), 1.0,
            (chosen > rejected).sum().item(), len(chunk), chosen.sum().item(), rejected.sum().item(),
            rewards.sum().item(), (rewards ** 2).sum().item(),
        ], dtype=torch.float64)
    _all_reduce(sums)
    engine.train()
    n_b, n_pairs = max(sums[3].item(), 1.0), max(sums[5].item(), 1.0)
    mean = sums[8].item() / (2 * n_pairs)
    var = max(sums[9].item() / (2 * n_pairs) - mean ** 2, 0.0)
    return {
        "loss": sums[0].item() / n_b,
        "preference_loss": sums[1].item() / n_b,
        "contrastive_loss": sums[2].item() / n_b,
        "accuracy": sums[4].item() / n_pairs,
        "chosen_reward": sums[6].item() / n_pairs,
        "rejected_reward": sums[7].item() / n_pairs,
        "reward_mean": mean,
        "reward_std": math.sqrt(var * (2 * n_pairs) / max(2 * n_pairs - 1, 1)),
        "pairs": int(sums[5].item()),
    }


def save_final(engine, cfg: TrainRunConfig, tokenizer, rank: int) -> None:
    """Gather the full weights (ZeRO-3: collectively, layer by layer) and save on rank 0 only."""
    import torch.distributed as dist

    if cfg.zero_stage == 3:
        state_dict = engine._zero3_consolidated_16bit_state_dict()
    else:
        # ZeRO 1-2 keep parameters as views of flat buffers: copy each, so they save as separate tensors.
        state_dict = {k: v.detach().cpu().clone() for k, v in engine.module.state_dict().items()} if rank == 0 else None
    bad = nonfinite_tensors(state_dict) if rank == 0 else []
    if _all_reduce(torch.tensor([float(bool(bad))], device=engine.device), "max").item():  # every rank stops together
        raise TrainingError(f"NaN or inf weights after training ({describe_tensors(bad) if bad else 'found on rank 0'}); "
                            f"nothing was saved to {cfg.save_path}. Lower --learning_rate / --head_learning_rate.")
    if rank == 0:
        save_reward_model(engine.module, cfg.save_path, tokenizer, training_args=cfg.to_dict(), state_dict=state_dict)
    dist.barrier()


def main(argv: Sequence[str] | None = None) -> int:
    started = time.time()
    cfg = parse_args(argv)
    preflight(cfg)
    ckpt_dir, metrics_path = default_paths(cfg)

    from transformers import AutoTokenizer

    # Data first, before any process group exists: bad rows or paths fail fast and cheaply.
    launched_rank = int(os.environ.get("RANK", "0"))

    def say(msg: str) -> None:
        if launched_rank == 0:
            print(msg, flush=True)

    tokenizer = AutoTokenizer.from_pretrained(cfg.pretrain)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    train_items, eval_items, data_stats = _load_items(cfg, tokenizer, say)
    if len(train_items) < cfg.train_batch_size:
        raise ValueError(
            f"{len(train_items)} training pairs are fewer than one --train_batch_size {cfg.train_batch_size}; "
            f"lower --train_batch_size or add data"
        )

    import deepspeed
    import torch.distributed as dist

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    deepspeed.utils.logger.setLevel(logging.WARNING)
    _set_cpu_threads()
    rank, _local_rank, world = init_distributed()

    ds_config = deepspeed_config(cfg, world)
    gas = ds_config["gradient_accumulation_steps"]
    micro = cfg.micro_train_batch_size
    steps_per_epoch = len(train_items) // cfg.train_batch_size
    total_steps = steps_per_epoch * cfg.max_epochs
    if cfg.max_steps > 0:
        total_steps = min(total_steps, cfg.max_steps)
    say(
        f"train: {len(train_items)} pairs, {steps_per_epoch} steps/epoch, {total_steps} steps; "
        f"world {world} x micro {micro} x accumulation {gas} = batch {cfg.train_batch_size}; "
        f"ZeRO-{cfg.zero_stage}, {'bf16' if cfg.bf16 else 'fp32'}, device {deepspeed.get_accelerator().device_name()}"
    )

    model = build_model(cfg, ds_config)
    optimizer = torch.optim.AdamW(optimizer_param_groups(model, cfg), lr=cfg.learning_rate, betas=(0.9, 0.95), weight_decay=cfg.l2)
    schedule = WarmupCosine(total_steps, cfg.lr_warmup_ratio)
    engine, *_ = deepspeed.initialize(
        model=model,
        optimizer=optimizer,
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, schedule),
        config=ds_config,
        dist_init_required=False,
    )
    device = engine.device
    generator = torch.Generator().manual_seed(cfg.seed + rank)
    collate = PreferenceCollator(tokenizer.pad_token_id)
    lengths = [item_length(it) for it in train_items]

    # ---- resume ----------------------------------------------------------------------------
    start_step = 0
    resumed_from = None
    if cfg.load_checkpoint:
        if (ckpt_dir / "latest").is_file():
            path, client = engine.load_checkpoint(str(ckpt_dir), load_optimizer_states=True, load_lr_scheduler_states=True)
            if path is None:
                raise TrainingError(f"{ckpt_dir}: the latest checkpoint could not be loaded")
            expected = {"train_batch_size": cfg.train_batch_size, "total_steps": total_steps, "train_pairs": len(train_items)}
            saved = {k: client["schedule"].get(k) for k in expected}
            if saved != expected:
                raise TrainingError(
                    f"{path}: the checkpoint was written by a run with {saved}, this run has {expected}; "
                    f"resume with the same data, --train_batch_size, --max_epochs and --max_steps"
                )
            if client["schedule"]["world_size"] != world:
                say(f"warning: checkpoint written with world size {client['schedule']['world_size']}, resuming with {world}: the data order per step differs")
            start_step = int(client["step"])
            states = client["rng"]
            set_rng_states(states[rank % len(states)], generator)
            resumed_from = start_step
            say(f"resumed from {path} at step {start_step}")
        else:
            say(f"--load_checkpoint: no checkpoint in {ckpt_dir}; starting from scratch")

    def checkpoint(step: int) -> None:
        all_states = [None] * world
        dist.all_gather_object(all_states, rng_states(generator))
        client = {
            "step": step,
            "epoch": step // steps_per_epoch,
            "micro_batch_in_epoch": (step % steps_per_epoch) * gas,
            "rng": all_states,
            "schedule": {
                "train_batch_size": cfg.train_batch_size, "total_steps": total_steps,
                "train_pairs": len(train_items), "world_size": world, "seed": cfg.seed,
            },
        }
        engine.save_checkpoint(str(ckpt_dir), tag=f"global_step{step}", client_state=client)
        say(f"checkpoint: {ckpt_dir / f'global_step{step}'}")

    sinks = MetricSinks(cfg, metrics_path, enabled=rank == 0, resume=resumed_from is not None)
    if rank == 0 and resumed_from is not None:
        sinks.drop_rows_after(resumed_from)
    from tqdm.auto import tqdm

    bar = tqdm(total=total_steps, initial=start_step, disable=rank != 0, desc="train-rm", dynamic_ncols=True, mininterval=1.0)

    # loss, preference, contrastive, accuracy, chosen, rejected, micro-batches, tokens
    window = torch.zeros(8, dtype=torch.float64)
    window_time = 0.0  # seconds spent in training micro-steps since the last log (eval/checkpoints excluded)
    train_tokens, train_time = 0.0, 0.0
    last_eval: dict | None = None
    last_eval_step = -1
    step = start_step
    bad = torch.zeros(3)
    engine.train()
    stopped_early = False

    def run_eval(at_step: int) -> dict | None:
        if not eval_items:
            return None
        t0 = time.time()
        result = evaluate(engine, eval_items, collate, cfg, rank, world)
        row = {"step": at_step, "split": "eval", **{k: result[k] for k in ("loss", "preference_loss", "contrastive_loss", "accuracy", "chosen_reward", "rejected_reward")}}
        row.update(lr=engine.get_lr()[0], tokens_per_s=None, eval_s=round(time.time() - t0, 3))
        sinks.log(row)
        say(f"eval step {at_step}: accuracy {result['accuracy']:.3f}, loss {result['loss']:.4f}")
        return result

    inject_nan_step = int(os.environ.get(INJECT_NAN_ENV, "0") or 0)

    def first_of_step(done: int) -> int:
        return (done % steps_per_epoch) * gas

    epoch = start_step // steps_per_epoch
    while step < total_steps and not stopped_early:
        batches = epoch_batches(lengths, epoch, cfg.seed, micro * world, steps_per_epoch * gas, cfg.group_by_length)
        first = (step - epoch * steps_per_epoch) * gas
        for mb in range(first, len(batches)):
            t0 = time.time()
            chunk = batches[mb][rank * micro:(rank + 1) * micro]
            batch = _to_device(collate([train_items[i] for i in chunk]), device)
            out = reward_model_loss(engine, batch, cfg, generator)
            if inject_nan_step == step + 1 and mb == first_of_step(step):
                out.loss = out.loss * float("nan")
                out.preference_loss = out.preference_loss * float("nan")
            for i, term in enumerate(LOSS_TERMS):
                value = out.loss if term == "loss" else getattr(out, term)
                if not torch.isfinite(value).all():
                    bad[i] = 1.0
            engine.backward(out.loss)
            window += torch.stack([
                out.loss.detach().float(), out.preference_loss.float(), out.contrastive_loss.float(), out.accuracy.float(),
                out.chosen_reward.float().mean(), out.rejected_reward.float().mean(), torch.ones((), device=device),
                batch["attention_mask"].sum().float(),
            ]).double().cpu()  # one device sync per micro-batch
            boundary = engine.is_gradient_accumulation_boundary()
            if boundary:
                flags = _all_reduce(bad.clone(), "max")  # every rank stops together
                if flags.any():
                    terms = [t for t, f in zip(LOSS_TERMS, flags.tolist()) if f]
                    latest = (ckpt_dir / "latest").read_text().strip() if (ckpt_dir / "latest").is_file() else None
                    raise TrainingError(
                        f"non-finite {' and '.join(terms)} at optimiser step {step + 1} (epoch {epoch}); "
                        f"stopped before the update. Last good checkpoint: "
                        f"{ckpt_dir / latest if latest else 'none written'} (untouched). "
                        f"Lower --learning_rate or check the data."
                    )
                lr = engine.get_lr()[0]
            engine.step()
            train_time += time.time() - t0
            window_time += time.time() - t0
            if not boundary:
                continue
            if not engine.was_step_applied():
                latest = (ckpt_dir / "latest").read_text().strip() if (ckpt_dir / "latest").is_file() else None
                raise TrainingError(
                    f"non-finite gradients at optimiser step {step + 1} (the loss was finite): DeepSpeed skipped "
                    f"the update. Last good checkpoint: {ckpt_dir / latest if latest else 'none written'} "
                    f"(untouched). Lower --learning_rate or --max_norm."
                )
            step += 1
            bar.update(1)
            if step % max(cfg.logging_steps, 1) == 0 or step == total_steps:
                reduced = _all_reduce(window.clone())
                n = max(reduced[6].item(), 1.0)
                row = {
                    "step": step, "split": "train",
                    "loss": reduced[0].item() / n, "preference_loss": reduced[1].item() / n,
                    "contrastive_loss": reduced[2].item() / n, "accuracy": reduced[3].item() / n,
                    "chosen_reward": reduced[4].item() / n, "rejected_reward": reduced[5].item() / n,
                    "lr": lr, "tokens_per_s": reduced[7].item() / max(window_time, 1e-9),
                }
                train_tokens += reduced[7].item()
                sinks.log(row)
                bar.set_postfix(loss=f"{row['loss']:.4f}", acc=f"{row['accuracy']:.2f}")
                window.zero_()
                window_time = 0.0
            if cfg.eval_steps > 0 and step % cfg.eval_steps == 0:
                last_eval, last_eval_step = run_eval(step), step
            if cfg.save_steps > 0 and step % cfg.save_steps == 0:
                checkpoint(step)
            if cfg.stop_after_steps > 0 and step >= cfg.stop_after_steps and step < total_steps:
                if not (cfg.save_steps > 0 and step % cfg.save_steps == 0):
                    checkpoint(step)
                stopped_early = True
                break
            if step >= total_steps:
                break
        epoch += 1
    bar.close()

    if stopped_early:
        sinks.close()
        say(f"stopped after step {step} (--stop_after_steps); resume with --load_checkpoint --ckpt_path {ckpt_dir}")
        dist.destroy_process_group()
        return 0

    if last_eval_step != step:
        last_eval = run_eval(step)
    stats = last_eval
    if stats is None:  # no held-out pairs: reward statistics from a training sample
        stats = evaluate(engine, train_items[:256], collate, cfg, rank, world)
    engine.module.set_reward_normalization(stats["reward_mean"], stats["reward_std"], enabled=cfg.normalize_reward)
    save_final(engine, cfg, tokenizer, rank)
    sinks.close()

    if rank == 0:
        wall = time.time() - started
        summary = {
            "steps": step,
            "total_steps": total_steps,
            "resumed_from_step": resumed_from,
            "wall_s": round(wall, 3),
            "train_s": round(train_time, 3),
            "tokens_per_s": train_tokens / train_time if train_time > 0 else None,
            "eval_accuracy": last_eval["accuracy"] if last_eval else None,
            "eval_loss": last_eval["loss"] if last_eval else None,
            "eval_preference_loss": last_eval["preference_loss"] if last_eval else None,
            "eval_contrastive_loss": last_eval["contrastive_loss"] if last_eval else None,
            "reward_mean": stats["reward_mean"],
            "reward_std": stats["reward_std"],
            "strategy": cfg.reward_model_strategy,
            "contrastive_strategy": cfg.contrastive_strategy if cfg.contrastive else None,
            "value_head_strategy": cfg.value_head_strategy,
            "template": cfg.template,
            "zero_stage": cfg.zero_stage,
            "world_size": world,
            "bf16": bool(cfg.bf16),
            "device": deepspeed.get_accelerator().device_name(),
            **data_stats,
            "save_path": str(cfg.save_path),
            "metrics_path": str(metrics_path),
            "ckpt_path": str(ckpt_dir),
        }
        atomic_write_json(Path(cfg.save_path) / SUMMARY_JSON, summary)
        say(f"saved {cfg.save_path} ({step} steps, {wall:.1f} s)")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from goalrm_core.cli import run_command

    warnings.filterwarnings("ignore", category=FutureWarning)
    sys.exit(run_command(main, sys.argv[1:], "goalrm train-rm"))
