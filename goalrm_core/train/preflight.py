"""What ``train-rm`` checks before anything slow starts (no model, data or process group): the
flags' consistency, the inputs (model folder or reachable Hub name, tokenizer, data files) and the
output paths the run will write, each refused in one line naming the flag."""

from __future__ import annotations

from pathlib import Path

import torch

from goalrm_core.data.io import (
    ArtifactError,
    check_data_source,
    check_model_source,
    check_not_an_input,
    check_output_dir,
    check_replaceable,
)
from goalrm_core.data.rundir import rm_checkpoint_dir, rm_metrics_path
from goalrm_core.model.reward_model import (
    GOALRM_JSON,
    attention_implementation,
    check_tokenizer_folder,
    check_weights_folder,
)
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.distributed import gradient_accumulation_steps, launched_world_size
from goalrm_core.train.lora import check_targets_on_meta, import_peft, require_four_bit
from goalrm_core.train.sinks import is_metrics_log


def default_paths(cfg: TrainRMConfig) -> tuple[Path, Path]:
    """(checkpoint dir, metrics jsonl): beside the final RM directory, which a save replaces whole."""
    ckpt = Path(cfg.ckpt_path) if cfg.ckpt_path else rm_checkpoint_dir(cfg.save_path)
    metrics = Path(cfg.metrics_path) if cfg.metrics_path else rm_metrics_path(cfg.save_path)
    return ckpt, metrics


def preflight(cfg: TrainRMConfig) -> None:
    """Errors that need no model, data or process group, raised before anything slow starts."""
    attention_implementation(cfg.flash_attn)
    gradient_accumulation_steps(cfg.train_batch_size, cfg.micro_train_batch_size, launched_world_size())
    if cfg.bf16 and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        raise ValueError("--bf16 was given but this GPU does not support bfloat16; drop --bf16")
    if not cfg.dataset:
        raise ValueError("--dataset is required: a .jsonl/.json/.parquet file, a save_to_disk dir or a Hub name")
    check_weights_folder(cfg.pretrain, "--pretrain")
    if cfg.lora_rank > 0:  # peft there, and --target_modules naming linear layers of this backbone (its config only)
        import_peft(cfg.lora_rank)
        check_targets_on_meta(cfg.pretrain, cfg.target_modules)
    if cfg.load_in_4bit:  # a CUDA GPU and bitsandbytes
        require_four_bit()
    inputs = [
        ("--pretrain", cfg.pretrain),
        *(
            (flag, part)
            for flag, value in (("--dataset", cfg.dataset), ("--eval_dataset", cfg.eval_dataset))
            for part in value.split(",")
            if part
        ),
    ]
    check_replaceable(cfg.save_path, "--save_path", inputs=inputs, marks=(GOALRM_JSON,), overwrite=cfg.overwrite)
    ckpt, metrics = default_paths(cfg)
    ours = [*inputs, ("--save_path", cfg.save_path)]
    for flag, path, kind in (("--ckpt_path", ckpt, "folder"), ("--metrics_path", metrics, "file")):
        check_output_dir(
            path if kind == "folder" else path.parent, flag if kind == "folder" else f"the folder of {flag}"
        )
        check_not_an_input(
            path, flag, ours + ([("--metrics_path", metrics)] if kind == "folder" else [("--ckpt_path", ckpt)])
        )
        if Path(cfg.save_path).resolve() in path.resolve().parents:
            raise ArtifactError(
                f"{flag} {path} lies inside --save_path {cfg.save_path}, which the final save replaces whole; "
                f"put it beside the RM folder (the default)"
            )
    if metrics.is_dir():
        raise ArtifactError(f"--metrics_path {metrics} is a folder: give the path of the JSONL to write")
    if metrics.is_file() and not cfg.load_checkpoint and not cfg.overwrite and not is_metrics_log(metrics):
        raise ArtifactError(
            f"--metrics_path {metrics} holds a file that is no train-rm metrics log: a run would empty it; "
            f"give another --metrics_path, or add --overwrite to replace it"
        )
    # the inputs, after the outputs: a missing folder, or a Hub name with no Hub, is one line at once
    check_model_source(cfg.pretrain, "--pretrain")
    check_tokenizer_folder(cfg.pretrain, "--pretrain")
    check_data_source(cfg.dataset, "--dataset")
    check_data_source(cfg.eval_dataset or "", "--eval_dataset")
    if cfg.use_tensorboard:
        try:
            import tensorboard  # noqa: F401  (optional; torch.utils.tensorboard needs it)
        except ImportError:
            raise ValueError("--use_tensorboard needs the tensorboard package: pip install tensorboard") from None
