"""The reward model: any Hugging Face causal-LM backbone plus a value head.

The module names follow ``<Arch>ForSequenceClassification`` (backbone under the architecture's
``base_model_prefix``, a linear head called ``score``), so a saved linear-head RM loads as is with
``AutoModelForSequenceClassification`` in TRL or OpenRLHF.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, LlamaConfig, PretrainedConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

from goalrm_core.choices import VALUE_HEAD_STRATEGIES
from goalrm_core.data.io import UMASK, ArtifactError, atomic_write_json
from goalrm_core.flags import check_choice

GOALRM_JSON = "goalrm.json"


def build_value_head(hidden_size: int, strategy: str) -> nn.Module:
    """``linear``: one bias-free projection; ``mlp``: h -> h/2 -> h/2 -> h -> 1 with ReLUs."""
    check_choice("value_head_strategy", strategy, VALUE_HEAD_STRATEGIES)
    if strategy == "linear":
        head = nn.Linear(hidden_size, 1, bias=False)
        nn.init.normal_(head.weight, std=1.0 / (hidden_size + 1))
        return head
    half = hidden_size // 2
    return nn.Sequential(
        nn.Linear(hidden_size, half), nn.ReLU(),
        nn.Linear(half, half), nn.ReLU(),
        nn.Linear(half, hidden_size), nn.ReLU(),
        nn.Linear(hidden_size, 1),
    )


def attention_implementation(flash_attn: bool) -> str:
    """flash-attn when asked for and usable, else PyTorch SDPA; asking for it without it is an error."""
    if not flash_attn:
        return "sdpa"
    if importlib.util.find_spec("flash_attn") is None:
        raise RuntimeError(
            "--flash_attn was given but the flash-attn package is not installed. "
            "On a CUDA machine: pip install 'goalrm[flash]'; otherwise drop --flash_attn (SDPA is used)."
        )
    if not torch.cuda.is_available():
        raise RuntimeError("--flash_attn needs a CUDA GPU; none is visible. Drop --flash_attn to use SDPA.")
    return "flash_attention_2"


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index of the last attended token per row: right for left and right padding, even if pad == eos."""
    positions = torch.arange(attention_mask.shape[-1], device=attention_mask.device)
    return (positions * attention_mask.long()).argmax(dim=-1)


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that start at 0 on the first real token, so left padding does not shift them."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


@dataclass
class RewardOutput:
    reward: torch.Tensor  # (batch,) value at the last non-pad token
    values: torch.Tensor  # (batch, seq) value at every token: the "partial rewards"
    hidden: torch.Tensor  # (batch, seq, hidden) last hidden states of the backbone


class RewardModel(nn.Module):
    """Backbone + value head. ``forward`` returns the reward, per-token values and hidden states."""

    def __init__(self, backbone: nn.Module, value_head_strategy: str = "linear"):
        super().__init__()
        self.config: PretrainedConfig = backbone.config
        self.prefix = getattr(backbone, "base_model_prefix", "model") or "model"
        self.add_module(self.prefix, backbone)
        self.value_head_strategy = value_head_strategy
        head = build_value_head(self.config.hidden_size, value_head_strategy)
        # "score" for the linear head is the name AutoModelForSequenceClassification expects.
        self.add_module("score" if value_head_strategy == "linear" else "value_head", head)

    @property
    def backbone(self) -> nn.Module:
        return getattr(self, self.prefix)

    @property
    def head(self) -> nn.Module:
        return self.score if self.value_head_strategy == "linear" else self.value_head

    @classmethod
    def from_backbone(
        cls,
        name_or_path: str,
        value_head_strategy: str = "linear",
        dtype: torch.dtype | None = None,
        flash_attn: bool = False,
    ) -> "RewardModel":
        """Start an RM from a pretrained causal LM (the paper initialises from the SFT policy)."""
        check_choice("value_head_strategy", value_head_strategy, VALUE_HEAD_STRATEGIES)
        backbone = AutoModel.from_pretrained(
            name_or_path, dtype=dtype, attn_implementation=attention_implementation(flash_attn)
        )
        return cls(backbone, value_head_strategy)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> RewardOutput:
        out = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids_from_mask(attention_mask),
            use_cache=False,
        )
        hidden = out.last_hidden_state
        values = self.head(hidden).squeeze(-1)
        if not self.training and getattr(self.config, "normalize_reward", False):
            values = (values - self.config.reward_mean) / self.config.reward_std
        rows = torch.arange(values.shape[0], device=values.device)
        reward = values[rows, last_token_index(attention_mask)]
        return RewardOutput(reward=reward, values=values, hidden=hidden)

    def set_reward_normalization(self, mean: float, std: float, enabled: bool = True) -> None:
        """Store reward statistics in the config; applied at inference when ``enabled``."""
        self.config.reward_mean = float(mean)
        self.config.reward_std = float(std) if std > 0 else 1.0
        self.config.normalize_reward = bool(enabled)


def tiny_llama_config(
    vocab_size: int,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    max_position_embeddings: int = 512,
    intermediate_size: int | None = None,
    pad_token_id: int = 0,
    bos_token_id: int = 1,
    eos_token_id: int = 2,
) -> LlamaConfig:
    """A local Llama config, so tests and the embedded task never download a model."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 8 * hidden_size // 3,  # Llama's SwiGLU ratio
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=pad_token_id,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        tie_word_embeddings=False,
    )


def sequence_classification_architecture(config: PretrainedConfig) -> str:
    return MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES.get(config.model_type, "")


def nonfinite_tensors(weights: dict[str, torch.Tensor]) -> list[str]:
    """Names of the floating-point tensors holding a NaN or an inf."""
    return [name for name, t in weights.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]


def describe_tensors(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return f"{len(names)} tensor(s): {shown}" + (", ..." if len(names) > limit else "")


def save_reward_model(
    model: RewardModel,
    path: str | Path,
    tokenizer: Any = None,
    training_args: dict | None = None,
    state_dict: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write the HF layout plus ``goalrm.json``, into a temp directory renamed into place at the end.

    ``state_dict`` lets a ZeRO-3 trainer pass the gathered full weights. NaN or inf weights are an
    error, raised before anything is written (an existing RM at ``path`` is left as it is).
    """
    from huggingface_hub import save_torch_state_dict

    path = Path(path)
    weights = state_dict if state_dict is not None else model.state_dict()
    bad = nonfinite_tensors(weights)
    if bad:
        raise ValueError(f"refusing to save the reward model to {path}: NaN or inf weights in {describe_tensors(bad)} "
                         f"(training diverged; lower --learning_rate / --head_learning_rate)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~UMASK)  # mkdtemp makes 0700: an RM is meant to be shared
        config = model.config
        arch = sequence_classification_architecture(config)
        config.architectures = [arch] if arch else None
        config.num_labels = 1
        config.value_head_strategy = model.value_head_strategy
        if tokenizer is not None and config.pad_token_id is None:
            config.pad_token_id = tokenizer.pad_token_id
        config.save_pretrained(tmp)
        save_torch_state_dict({k: v.contiguous() for k, v in weights.items()}, tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        atomic_write_json(
            tmp / GOALRM_JSON,
            {
                "value_head_strategy": model.value_head_strategy,
                "head_module": "score" if model.value_head_strategy == "linear" else "value_head",
                "base_model_prefix": model.prefix,
                "hidden_size": config.hidden_size,
                "training_args": training_args or {},
            },
        )
        for file in tmp.iterdir():  # the weights writer makes 0600 files, like mkdtemp's folder
            os.chmod(file, 0o666 & ~UMASK)
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return path


def read_goalrm_json(path: str | Path) -> dict:
    meta_path = Path(path) / GOALRM_JSON
    if not meta_path.exists():
        raise ArtifactError(f"{path}: not a goalrm reward model ({GOALRM_JSON} missing); train one with `goalrm train-rm`")
    return json.loads(meta_path.read_text())


PICKLED_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


def check_weights_folder(path: str | os.PathLike, flag: str) -> None:
    """Refuse a local model folder whose weights are only pickles (``pytorch_model.bin`` …): goalrm
    loads weights from safetensors only, which hold tensors and nothing that runs. A Hub name (no
    such folder) is left to ``from_pretrained``."""
    folder = Path(path)
    if not folder.is_dir() or any(folder.glob("*.safetensors")):
        return
    pickled = sorted(p.name for pattern in PICKLED_WEIGHTS for p in folder.glob(pattern))
    if pickled:
        raise ArtifactError(f"{flag} {folder}: its weights are only pickled ({', '.join(pickled)}); goalrm loads safetensors "
                            f"only: convert them with save_pretrained(..., safe_serialization=True) where you trust the file")


def check_safetensors_file(path: Path) -> None:
    """A damaged weights file is named as such; never with a suggestion to load it unsafely."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            for key in f.keys():
                f.get_slice(key)
    except Exception as e:  # safetensors raises its own error types for truncated or foreign files
        raise ArtifactError(f"{path}: the weights file is damaged (truncated or not safetensors: "
                            f"{type(e).__name__}); the checkpoint cannot be used, save or train it again") from None


def load_reward_model(path: str | Path, dtype: torch.dtype | None = None, flash_attn: bool = False) -> RewardModel:
    """Load an RM saved by :func:`save_reward_model`; missing or partial checkpoints raise clearly."""
    from huggingface_hub import load_torch_model

    path = Path(path)
    meta = read_goalrm_json(path)
    if not (path / "config.json").exists():
        raise ArtifactError(f"{path}: config.json missing; the checkpoint is incomplete")
    if not any(path.glob("*.safetensors")):
        raise ArtifactError(f"{path}: no *.safetensors weights; the checkpoint is incomplete")
    config = AutoConfig.from_pretrained(path)
    backbone = AutoModel.from_config(config, attn_implementation=attention_implementation(flash_attn))
    model = RewardModel(backbone, meta["value_head_strategy"])
    for weights in path.glob("*.safetensors"):
        check_safetensors_file(weights)
    try:
        load_torch_model(model, path, strict=True)
    except (RuntimeError, OSError, ValueError) as e:
        raise ArtifactError(f"{path}: weights do not match the saved config ({str(e)[:300]})") from None
    bad = nonfinite_tensors(model.state_dict())
    if bad:
        raise ArtifactError(f"{path}: NaN or inf weights in {describe_tensors(bad)}; the reward model is broken")
    if dtype is not None:
        model = model.to(dtype)
    return model.eval()
