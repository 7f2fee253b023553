"""Process group, DeepSpeed config and engine, and RNG state: the plumbing under the trainer.

A plain ``python -m`` run gets a one-process group set up here (RANK/WORLD_SIZE/MASTER_ADDR and a
free MASTER_PORT); under the ``deepspeed`` launcher the environment already names them. Everything
that needs no process group (the config, the batch geometry, :func:`free_port`) is importable and
testable without DeepSpeed.
"""

from __future__ import annotations

import logging
import os
import pickle
import random
import re
import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from transformers import AutoModel

from goalrm_core.data.io import ArtifactError
from goalrm_core.flags import safe_path_part
from goalrm_core.model.reward_model import RewardModel, attention_implementation
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.optim import WarmupCosine, optimizer_param_groups


def checkpoint_globals() -> list:
    """The only classes a resumable checkpoint may name besides tensors and plain containers: the
    NumPy array of :func:`rng_states` and DeepSpeed's own optimizer bookkeeping. Anything else in a
    checkpoint file is refused by :func:`load_checkpoint_file`, so unpickling it can run no code."""
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    allowed = [
        np.ndarray,
        np.dtype,
        type(np.dtype(np.uint32)),
        LossScaler,
        DynamicLossScaler,
        ZeroStageEnum,
        fragment_address,
    ]
    for module in ("_core", "core"):  # NumPy 2 pickles arrays through numpy._core, NumPy 1 through numpy.core
        multiarray = getattr(getattr(np, module, None), "multiarray", None)
        if multiarray is not None and hasattr(multiarray, "_reconstruct"):
            allowed.append(multiarray._reconstruct)
    return allowed


def load_checkpoint_file(path: str | os.PathLike, map_location=None) -> Any:
    """A DeepSpeed checkpoint file read with ``torch.load(weights_only=True)``, allowing only
    :func:`checkpoint_globals`: a file that needs any other Python object (and so could run code
    when unpickled) or that is not a readable torch file is refused in one line naming it."""
    try:
        with torch.serialization.safe_globals(checkpoint_globals()):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        named = re.search(r"(?:Unsupported global|Unsupported operand|unsupported)[^\n]*", str(e))
        what = named.group(0).strip() if named else str(e).splitlines()[0][:200]
        raise ArtifactError(
            f"{path}: refusing to load this checkpoint file: it holds Python objects a goalrm checkpoint "
            f"never holds ({what}), and unpickling them could run code; delete it or resume from another "
            f"checkpoint"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError) as e:
        raise ArtifactError(
            f"{path}: the checkpoint file is damaged or truncated ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:200] if str(e) else 'no detail'}); resume from another checkpoint "
            f"or start without --load_checkpoint"
        ) from None


def checkpoint_tag(ckpt_dir: str | os.PathLike) -> str:
    """The step folder ``ckpt_dir/latest`` names, checked to be a plain folder of ``ckpt_dir`` that exists."""
    latest = Path(ckpt_dir) / "latest"
    tag = latest.read_text().strip()
    try:
        safe_path_part(tag, "the step folder")
    except ValueError as e:
        raise ArtifactError(f"{latest}: {e}; a checkpoint's tag is a folder of {ckpt_dir}") from None
    if not (Path(ckpt_dir) / tag).is_dir():
        raise ArtifactError(
            f"{latest} names {tag!r}, but {Path(ckpt_dir) / tag} is not there; "
            f"restore it, write an existing step folder into {latest}, or start without --load_checkpoint"
        )
    return tag


def free_port() -> int:
    """A TCP port free on this host now (for MASTER_PORT or the launcher's ``--master_port``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launched_world_size() -> int:
    """The world size the launcher set (1 for a plain ``python -m`` run), before any group exists."""
    return int(os.environ.get("WORLD_SIZE", "1"))


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
    """The DeepSpeed config of a run: ZeRO stage, bf16, clipping and the batch geometry, with the official
    code's engine flags: ``--adam_offload`` (the optimizer state in CPU memory), ``--zpg`` (ZeRO++
    hierarchical partitions), ``--grad_accum_dtype`` and ``--disable_trace_cache`` (no ZeRO-3 prefetching)."""
    zero: dict[str, Any] = {"stage": cfg.zero_stage}
    if cfg.adam_offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}  # pinning needs CUDA
    if cfg.zpg != 1:
        zero["zero_hpz_partition_size"] = cfg.zpg
    if cfg.zero_stage >= 2:
        zero.update(contiguous_gradients=True, overlap_comm=False, reduce_bucket_size=int(5e8))
    if cfg.zero_stage == 3:
        zero.update(
            stage3_param_persistence_threshold=int(1e4),
            stage3_max_live_parameters=int(1e9),
            stage3_prefetch_bucket_size=int(5e7),
            stage3_gather_16bit_weights_on_model_save=True,
        )
        if cfg.disable_trace_cache:
            zero.update(stage3_prefetch_bucket_size=0, stage3_max_live_parameters=0, stage3_max_reuse_distance=0)
    config = {
        "train_batch_size": cfg.train_batch_size,
        "train_micro_batch_size_per_gpu": cfg.micro_train_batch_size,
        "gradient_accumulation_steps": gradient_accumulation_steps(
            cfg.train_batch_size, cfg.micro_train_batch_size, world_size
        ),
        "gradient_clipping": cfg.max_norm,
        "zero_optimization": zero,
        "bf16": {"enabled": bool(cfg.bf16)},
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": False,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    if cfg.grad_accum_dtype:
        config["data_types"] = {"grad_accum_dtype": cfg.grad_accum_dtype}
    elif cfg.bf16 and cfg.zero_stage >= 1:
        # fp32 gradient accumulation (ZeRO's bf16 optimiser keeps fp32 master weights); stage 0
        # supports only matching dtypes.
        config["data_types"] = {"grad_accum_dtype": "fp32"}
    return config


def own_extensions_dir() -> str:
    """Point torch's C++ extension cache (``TORCH_EXTENSIONS_DIR``, where DeepSpeed builds its CPU communication op)
    at a folder of this Python environment's own, unless the variable is set: two environments sharing
    ``~/.cache/torch_extensions`` rebuild the op (one to two minutes) every time they alternate, since each build
    names its own include paths. Returns the folder."""
    import hashlib

    if not os.environ.get("TORCH_EXTENSIONS_DIR"):
        key = hashlib.sha256(os.path.abspath(sys.prefix).encode()).hexdigest()[:12]  # as seen: a linked venv is its own
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        os.environ["TORCH_EXTENSIONS_DIR"] = str(base / "torch_extensions" / f"env-{key}")
    return os.environ["TORCH_EXTENSIONS_DIR"]


def quiet_deepspeed_logs() -> None:
    """DeepSpeed's INFO records (config dumps, timers) out of the run's log; warnings stay."""
    import deepspeed  # lazy: importing it costs seconds and pulls in its accelerator detection

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    deepspeed.utils.logger.setLevel(logging.WARNING)


#: how long a process waits for the other processes of its group (torch's default is 30 minutes)
RENDEZVOUS_TIMEOUT_S = 60.0
LAUNCHER_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def _launcher_settings() -> str:
    return " ".join(f"{k}={os.environ[k]}" for k in LAUNCHER_VARIABLES if k in os.environ)


_UNSET = f"in a plain shell, `unset {' '.join(LAUNCHER_VARIABLES)}` (variables a launcher left behind)"


def launcher_world() -> int:
    """The world size the environment asks for (1 without a launcher). ``WORLD_SIZE`` and ``RANK``
    must be integers with ``0 <= RANK < WORLD_SIZE``, and a group of several processes needs
    ``MASTER_ADDR`` and ``MASTER_PORT``; anything else is refused in one line naming the variables."""
    if "WORLD_SIZE" not in os.environ:
        return 1
    try:
        world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ.get("RANK", "0"))
    except ValueError:
        raise ValueError(
            f"launcher variables {_launcher_settings()}: WORLD_SIZE and RANK must be integers; {_UNSET}"
        ) from None
    if world < 1 or not 0 <= rank < world:
        raise ValueError(
            f"launcher variables {_launcher_settings()}: need WORLD_SIZE >= 1 and 0 <= RANK < WORLD_SIZE; {_UNSET}"
        )
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if world > 1 and not os.environ.get(k)]
    if missing:
        raise ValueError(
            f"launcher variables {_launcher_settings()} ask for a group of {world} processes, but "
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: start the command with "
            f"torchrun or deepspeed, or, {_UNSET}"
        )
    return world


def join_process_group(init, backend: str | None = None, timeout_s: float | None = None) -> None:
    """``init(backend, timeout=...)`` (``dist.init_process_group`` or ``deepspeed.init_distributed``)
    with a rendezvous of ``timeout_s`` (default :data:`RENDEZVOUS_TIMEOUT_S`) instead of torch's 30
    minutes: when the other processes never come (a shell that still exports a launcher's
    ``WORLD_SIZE=2``), one line names the variables instead of a silent wait."""
    import datetime

    world = launcher_world()
    timeout_s = RENDEZVOUS_TIMEOUT_S if timeout_s is None else timeout_s
    settings = _launcher_settings()
    try:
        if backend is None:
            init(timeout=datetime.timedelta(seconds=timeout_s))
        else:
            init(backend, timeout=datetime.timedelta(seconds=timeout_s))
    except (RuntimeError, ValueError) as e:  # DistStoreError (a timeout) and DistNetworkError are RuntimeErrors
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"no process group: {settings} ask for {world} processes, and they did not all join within "
            f"{timeout_s:.0f} s ({first}); start every process with torchrun or deepspeed, or, {_UNSET}"
        ) from None
    # the short timeout was for joining; collectives (a barrier while another rank saves) get torch's default back
    from torch.distributed import distributed_c10d as c10d

    c10d._set_pg_timeout(c10d.default_pg_timeout)
    c10d._get_default_store().set_timeout(c10d.default_pg_timeout)


def init_distributed() -> tuple[int, int, int]:
    """(rank, local rank, world size), creating a one-process group when no launcher set one up."""
    own_extensions_dir()  # before DeepSpeed builds its communication op
    import deepspeed  # lazy: importing it costs seconds and pulls in its accelerator detection

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_SIZE="1")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(free_port())
    if not dist.is_initialized():
        join_process_group(lambda timeout: deepspeed.init_distributed(verbose=False, timeout=timeout))
    return dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0")), dist.get_world_size()


def release_shared_memory() -> None:
    """Unlink this run's DeepSpeed CPU all-reduce buffers: its CPU backend maps one ``/dev/shm`` file
    (~69 MB) per rank and buffer and never removes them, so runs add up until the RAM-backed
    ``/dev/shm`` is full. Unlinking only removes the names; a rank still mapping one keeps it."""
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if addr and port:
        for leftover in Path("/dev/shm").glob(f"deepspeed_allreduce_buffer_*_{addr}_{port}_*"):
            leftover.unlink(missing_ok=True)


def teardown() -> None:
    """The end of a run, finished or not: the process group goes, and with it the shared memory."""
    if dist.is_initialized():
        dist.destroy_process_group()
    release_shared_memory()


def set_cpu_threads() -> None:
    """On CPU, split the cores between the local processes unless OMP_NUM_THREADS says otherwise."""
    if torch.cuda.is_available() or os.environ.get("OMP_NUM_THREADS"):
        return
    local = max(1, int(os.environ.get("LOCAL_SIZE", "1")))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local))


def all_reduce(t: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """Sum (or ``op="max"``) ``t`` over every rank, in place; returns it."""
    dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
    return t


def build_model(cfg: TrainRMConfig, ds_config: dict) -> RewardModel:
    """The backbone from --pretrain plus a seeded value head (identical on every rank).

    Under ZeRO-3 the backbone is built partitioned through ``transformers``' own integration
    (an ``HfDeepSpeedConfig`` kept alive on the model, so ``from_pretrained`` runs under zero.Init;
    it needs ``accelerate``, a pinned dependency). The head is
    created afterwards, outside zero.Init, so its normal(0, 1/(hidden+1)) initialisation is real;
    ``deepspeed.initialize`` then partitions it. With ``--load_in_4bit`` the backbone loads in 4-bit NF4
    (:func:`goalrm_core.train.lora.nf4_config`) on this process's GPU, LoRA on top.
    """
    dtype = torch.bfloat16 if cfg.bf16 else torch.float32
    attn = attention_implementation(cfg.flash_attn)
    hf_ds_config = None
    if cfg.zero_stage == 3:
        from transformers.integrations import HfDeepSpeedConfig  # lazy: it imports deepspeed

        hf_ds_config = HfDeepSpeedConfig(ds_config)  # a weakref is what from_pretrained consults
    quantized = {}
    if cfg.load_in_4bit:  # 4-bit NF4 through bitsandbytes, on this process's GPU (the config refuses ZeRO-3)
        from goalrm_core.train.lora import nf4_config

        quantized = {"quantization_config": nf4_config(), "device_map": {"": int(os.environ.get("LOCAL_RANK", "0"))}}
    backbone = AutoModel.from_pretrained(cfg.pretrain, dtype=dtype, attn_implementation=attn, **quantized)
    backbone.config.use_cache = False
    if cfg.aux_loss_coef > 0 and "output_router_logits" in backbone.config.to_dict():
        backbone.config.output_router_logits = True  # a mixture of experts returns what --aux_loss_coef weighs
    if (
        cfg.lora_rank > 0
    ):  # the backbone frozen, adapters beside its --target_modules layers; the head (built next) trains whole
        from goalrm_core.train.lora import add_lora

        backbone = add_lora(backbone, cfg.lora_rank, cfg.lora_alpha, cfg.target_modules)
        if cfg.load_in_4bit:
            from goalrm_core.train.lora import four_bit_dtypes

            four_bit_dtypes(backbone)
    torch.manual_seed(cfg.seed)
    model = RewardModel(backbone, cfg.value_head_strategy, cfg.mlp_head, cfg.reward_pool)
    model.head.to(dtype)
    if cfg.train_top_layers:  # before the optimiser's groups are made: the frozen parameters are in none of them
        from goalrm_core.model.top_layers import freeze_lower_layers

        freeze_lower_layers(model, cfg.train_top_layers)
    model._hf_deepspeed_config = hf_ds_config  # keep it alive as long as the model
    if cfg.gradient_checkpointing:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs(cfg))
    return model


def gradient_checkpointing_kwargs(cfg: TrainRMConfig) -> dict:
    """What ``--gradient_checkpointing`` passes to the backbone: the reentrant form with
    ``--gradient_checkpointing_use_reentrant``, else the non-reentrant one.

    >>> gradient_checkpointing_kwargs(TrainRMConfig(pretrain="p", gradient_checkpointing_use_reentrant=True))
    {'use_reentrant': True}
    """
    return {"use_reentrant": bool(cfg.gradient_checkpointing_use_reentrant)}


def build_engine(cfg: TrainRMConfig, ds_config: dict, total_steps: int):
    """The DeepSpeed engine of a run: the model, torch's AdamW (betas 0.9/0.95; no optimiser op to
    compile) and the warm-up + cosine schedule, stepped once per optimiser step."""
    import deepspeed  # lazy: see quiet_deepspeed_logs

    model = build_model(cfg, ds_config)
    if cfg.torch_compile:
        model.compile(dynamic=True)  # in place: the state dict keeps its names, DeepSpeed calls the compiled forward
    optimizer = torch.optim.AdamW(
        optimizer_param_groups(model, cfg), lr=cfg.learning_rate, betas=(0.9, 0.95), weight_decay=cfg.l2
    )
    schedule = WarmupCosine(total_steps, cfg.lr_warmup_ratio)
    engine, *_ = deepspeed.initialize(
        model=model,
        optimizer=optimizer,
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, schedule),
        config=ds_config,
        dist_init_required=False,
    )
    return engine


def device_name() -> str:
    """The accelerator DeepSpeed runs on (``cuda``, ``cpu``)."""
    import deepspeed  # lazy: see quiet_deepspeed_logs

    return deepspeed.get_accelerator().device_name()


def rng_states(generator: torch.Generator) -> dict:
    """Every RNG a resumed run must continue: Python, NumPy, torch (CPU, CUDA) and the contrastive sampler's."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "contrastive": generator.get_state(),
    }


def set_rng_states(state: dict, generator: torch.Generator) -> None:
    """Restore what :func:`rng_states` saved."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    generator.set_state(state["contrastive"])


def torch_extensions_dir() -> Path:
    """Where torch builds DeepSpeed's ops (the CPU shared-memory comm op, CPU Adam …) on their first use:
    ``TORCH_EXTENSIONS_DIR``, else ``$XDG_CACHE_HOME/torch_extensions`` (``~/.cache/torch_extensions``)."""
    if os.environ.get("TORCH_EXTENSIONS_DIR"):
        return Path(os.environ["TORCH_EXTENSIONS_DIR"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "torch_extensions"


def extensions_dir_hint() -> str | None:
    """A line saying that DeepSpeed's op build writes into :func:`torch_extensions_dir` when that folder (or, when it
    is not there yet, the nearest folder above it) is not writable; ``None`` when it is."""
    where = torch_extensions_dir()
    for folder in (where, *where.parents):
        if folder.exists():
            if os.access(folder, os.W_OK | os.X_OK):
                return None
            return (
                f"DeepSpeed builds its ops on first use into {where} (TORCH_EXTENSIONS_DIR, default "
                "~/.cache/torch_extensions), "
                f"and {folder} is not writable: set TORCH_EXTENSIONS_DIR to a writable folder (or XDG_CACHE_HOME)"
            )
    return None
