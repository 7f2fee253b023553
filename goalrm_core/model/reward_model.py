"""The reward model: any Hugging Face causal-LM backbone plus a value head.

Two checkpoint layouts, both read by :func:`load_reward_model` (the format is detected):

* ``goalrm`` (the default): the module names of ``<Arch>ForSequenceClassification`` (backbone under
  the architecture's ``base_model_prefix``, a linear head called ``score``), so a saved linear-head RM
  loads as is with ``transformers.AutoModelForSequenceClassification`` (and TRL); the reward
  statistics are ``reward_mean``/``reward_std`` in ``config.json``; ``goalrm.json`` says how it was built.
* ``official``: the layout of the official code's ``get_llm_for_sequence_regression`` (its fork of
  OpenRLHF): the head is ``value_head`` (``value_head.weight``, or ``value_head.{0,2,4,6}`` for the MLP
  head, whose last layer has no bias), the statistics are ``mean``/``std``/``normalize_reward`` and the
  head is ``_value_head_strategy`` in ``config.json``. ``save_reward_model(..., save_format="official")``
  writes it; the official loader then reads the trained head rather than initialising a new one.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, LlamaConfig, PretrainedConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

from goalrm_core.choices import CHECKPOINT_FORMATS, MLP_HEADS, REWARD_POOLS, VALUE_HEAD_STRATEGIES
from goalrm_core.data.io import UMASK, ArtifactError, atomic_write_json
from goalrm_core.flags import check_choice
from goalrm_core.model.encoding import (
    position_ids_from_mask,
)  # defined beside left_pad; readers import it from here too
from goalrm_core.model.pretrained import PACKAGED_MODELS
from goalrm_core.model.top_layers import run_layers

GOALRM_JSON = "goalrm.json"
OFFICIAL_HEAD = "value_head"  # the official code's name for the head, whatever its strategy


def build_value_head(hidden_size: int, strategy: str, mlp_head: str = "goalrm") -> nn.Module:
    """``linear``: one bias-free projection, N(0, 1/(h+1)); ``mlp``: h -> h/2 -> h/2 -> h -> 1 with
    ReLUs, its bias and init chosen by ``mlp_head`` (see :data:`MLP_HEADS`)."""
    check_choice("value_head_strategy", strategy, VALUE_HEAD_STRATEGIES)
    check_choice("mlp_head", mlp_head, MLP_HEADS)
    if strategy == "linear":
        head = nn.Linear(hidden_size, 1, bias=False)
        nn.init.normal_(head.weight, std=1.0 / (hidden_size + 1))
        return head
    half = hidden_size // 2
    official = mlp_head == "official"
    head = nn.Sequential(
        nn.Linear(hidden_size, half),
        nn.ReLU(),
        nn.Linear(half, half),
        nn.ReLU(),
        nn.Linear(half, hidden_size),
        nn.ReLU(),
        nn.Linear(hidden_size, 1, bias=not official),
    )
    if official:  # the same draws, in the same order, as the official init_value_head
        for index, fan in ((0, hidden_size), (2, half), (4, half), (6, hidden_size)):
            head[index].weight.data.normal_(mean=0.0, std=1 / (fan + 1))
    return head


class FeatureUnavailable(RuntimeError):
    """An asked-for feature this machine cannot run (flash-attn without the package or a GPU): the
    commands print its one line and exit 2."""


def attention_implementation(flash_attn: bool) -> str:
    """flash-attn when asked for and usable, else PyTorch SDPA; asking for it without it is an error."""
    if not flash_attn:
        return "sdpa"
    if importlib.util.find_spec("flash_attn") is None:
        raise FeatureUnavailable(
            "--flash_attn was given but the flash-attn package is not installed. "
            "On a CUDA machine: pip install 'goalrm[flash]'; otherwise drop --flash_attn (SDPA is used)."
        )
    if not torch.cuda.is_available():
        raise FeatureUnavailable("--flash_attn needs a CUDA GPU; none is visible. Drop --flash_attn to use SDPA.")
    return "flash_attention_2"


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index of the last attended token per row: right for left and right padding, even if pad == eos."""
    positions = torch.arange(attention_mask.shape[-1], device=attention_mask.device)
    return (positions * attention_mask.long()).argmax(dim=-1)


def response_mean(values: torch.Tensor, num_actions: torch.Tensor) -> torch.Tensor:
    """Each row's mean value over its last ``num_actions`` positions (the response of a left-padded row).

    >>> response_mean(torch.tensor([[9.0, 1.0, 3.0], [9.0, 9.0, 4.0]]), torch.tensor([2, 1]))
    tensor([2., 4.])
    """
    n = torch.as_tensor(num_actions, device=values.device).long()
    if n.shape != values.shape[:1] or bool((n < 1).any()) or bool((n > values.shape[1]).any()):
        raise ValueError(
            f"num_actions must give each of the {values.shape[0]} rows 1 to {values.shape[1]} response tokens, "
            f"got {n.tolist()}"
        )
    seq_len = values.shape[1]
    in_response = torch.arange(seq_len, device=values.device)[None, :] >= (seq_len - n)[:, None]
    return torch.where(in_response, values, torch.zeros_like(values)).sum(-1) / n.to(values.dtype)


@dataclass
class RewardOutput:
    reward: torch.Tensor  # (batch,) the value at the last non-pad token, or the response mean (``reward_pool``)
    values: torch.Tensor  # (batch, seq) value at every token: the "partial rewards"
    hidden: torch.Tensor  # (batch, seq, hidden) last hidden states of the backbone
    router_logits: tuple | None = None  # a mixture-of-experts backbone's per-layer router logits, when it returns them


class RewardModel(nn.Module):
    """Backbone + value head. ``forward`` returns the reward, per-token values and hidden states.

    ``reward_pool`` says what the reward is: ``last``, the value at the last token (the paper's), or
    ``mean``, the mean of the values over the response's last ``num_actions`` tokens, which ``forward``
    then needs (a read-out that sees the whole response; not in the paper, and with no official form).
    """

    def __init__(
        self,
        backbone: nn.Module,
        value_head_strategy: str = "linear",
        mlp_head: str = "goalrm",
        reward_pool: str = "last",
    ):
        super().__init__()
        check_choice("reward_pool", reward_pool, REWARD_POOLS)
        self.config: PretrainedConfig = backbone.config
        self.prefix = getattr(backbone, "base_model_prefix", "model") or "model"
        self.add_module(self.prefix, backbone)
        self.value_head_strategy = value_head_strategy
        self.mlp_head = mlp_head
        self.reward_pool = reward_pool
        self.feature_layer: int | None = (
            None  # the first trained layer under --train_top_layers (goalrm_core.model.top_layers)
        )
        head = build_value_head(self.config.hidden_size, value_head_strategy, mlp_head)
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
        mlp_head: str = "goalrm",
        reward_pool: str = "last",
    ) -> "RewardModel":
        """Start an RM from a pretrained causal LM (the paper initialises from the SFT policy)."""
        check_choice("value_head_strategy", value_head_strategy, VALUE_HEAD_STRATEGIES)
        backbone = AutoModel.from_pretrained(
            name_or_path, dtype=dtype, attn_implementation=attention_implementation(flash_attn)
        )
        return cls(backbone, value_head_strategy, mlp_head, reward_pool)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        num_actions: torch.Tensor | None = None,
        features: torch.Tensor | None = None,
    ) -> RewardOutput:
        """``features``: the hidden states entering decoder layer ``feature_layer`` (what
        :func:`~goalrm_core.model.top_layers.freeze_lower_layers` set), laid out as ``input_ids``; only the layers
        from there up, the final norm and the head then run (``--train_top_layers``,
        :mod:`goalrm_core.model.top_layers`)."""
        position_ids = position_ids_from_mask(attention_mask)
        if features is not None:
            if self.feature_layer is None:
                raise ValueError(
                    "features were given but no layer was frozen below them (freeze_lower_layers sets feature_layer)"
                )
            hidden = self.backbone.norm(
                run_layers(self.backbone, features, attention_mask, position_ids, self.feature_layer)
            )
            out = None
        else:
            out = self.backbone(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
            )
            hidden = out.last_hidden_state
        values = self.head(hidden).squeeze(-1)
        if not self.training and getattr(self.config, "normalize_reward", False):
            values = (values - self.config.reward_mean) / self.config.reward_std
        if self.reward_pool == "mean":
            if num_actions is None:
                raise ValueError(
                    "this reward model's reward is the mean over the response (reward_pool mean): "
                    "its readers must pass num_actions"
                )
            reward = response_mean(values, num_actions)
        else:
            rows = torch.arange(values.shape[0], device=values.device)
            reward = values[rows, last_token_index(attention_mask)]
        return RewardOutput(
            reward=reward, values=values, hidden=hidden, router_logits=getattr(out, "router_logits", None) or None
        )

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


def official_state_dict(model: RewardModel, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``weights`` under the official code's names: the linear head ``score.weight`` becomes
    ``value_head.weight``; the backbone and an official-style MLP head keep theirs. goalrm's own MLP
    head (a bias on its last layer) has no official form and is refused."""
    if model.value_head_strategy == "mlp" and model.mlp_head != "official":
        raise ValueError(
            "an MLP head with a bias on its last layer (--mlp_head goalrm) has no official layout (the official "
            "last layer is bias-free): train with --mlp_head official to save it in the official format"
        )
    if model.value_head_strategy == "mlp":
        return dict(weights)
    return {(f"{OFFICIAL_HEAD}.weight" if k == "score.weight" else k): v for k, v in weights.items()}


def official_config_fields(config: PretrainedConfig, value_head_strategy: str) -> dict:
    """The fields the official loader reads from ``config.json``: the head (``_value_head_strategy``)
    and, when goalrm stored reward statistics, ``mean``/``std`` and ``normalize_reward``."""
    fields: dict[str, Any] = {
        "_value_head_strategy": value_head_strategy,
        "normalize_reward": bool(getattr(config, "normalize_reward", False)),
    }
    if getattr(config, "reward_mean", None) is not None:
        fields.update(mean=float(config.reward_mean), std=float(config.reward_std))
    return fields


def _refuse_unsavable(model: RewardModel, weights: dict[str, torch.Tensor], path: Path, official: bool) -> None:
    """Raise before anything is written: NaN or inf weights, or a pooled reward asked for in the official layout."""
    bad = nonfinite_tensors(weights)
    if bad:
        raise ValueError(
            f"refusing to save the reward model to {path}: NaN or inf weights in {describe_tensors(bad)} "
            f"(training diverged; lower --learning_rate / --head_learning_rate)"
        )
    if official and model.reward_pool != "last":
        raise ValueError(
            f"a reward read as the {model.reward_pool} over the response (reward_pool {model.reward_pool}) has no "
            f"official layout (the official loader reads the last token): save it with --save_format goalrm"
        )


def _write_config(model: RewardModel, tokenizer: Any, folder: Path, official: bool) -> PretrainedConfig:
    """Set the model's config up as a one-label sequence classifier and write ``config.json`` into ``folder``
    (with the official loader's names in the official layout); returns the config."""
    config = model.config
    arch = sequence_classification_architecture(config)
    config.architectures = [arch] if arch else None
    config.num_labels = 1
    config.value_head_strategy = model.value_head_strategy
    if tokenizer is not None and tokenizer.pad_token_id is not None:  # HF's reader ends a sequence before this id
        config.pad_token_id = tokenizer.pad_token_id
    config.save_pretrained(folder)
    if official:  # the official loader's names; goalrm's own fields would only mislead it
        fields = json.loads((folder / "config.json").read_text())
        for key in ("value_head_strategy", "reward_mean", "reward_std"):
            fields.pop(key, None)
        fields.update(
            official_config_fields(config, model.value_head_strategy), architectures=["LLMForSequenceRegression"]
        )
        atomic_write_json(folder / "config.json", fields)
    return config


def _goalrm_record(
    model: RewardModel, config: PretrainedConfig, tokenizer: Any, save_format: str, training_args: dict | None
) -> dict:
    """What ``goalrm.json`` holds: the format, the head and how the reward is read, the first trained decoder layer
    (``--train_top_layers``; None when every layer trained), the tokenizer's hash and the training's arguments."""
    official = save_format == "official"
    return {
        "checkpoint_format": save_format,
        "value_head_strategy": model.value_head_strategy,
        "mlp_head": model.mlp_head,
        "reward_pool": model.reward_pool,
        "head_module": OFFICIAL_HEAD if official or model.value_head_strategy == "mlp" else "score",
        "base_model_prefix": model.prefix,
        "hidden_size": config.hidden_size,
        "feature_layer": model.feature_layer,
        "tokenizer_sha256": None if tokenizer is None else tokenizer_sha256(tokenizer),
        "training_args": training_args or {},
    }


def _note_official_head_path(model: RewardModel, path: Path) -> None:
    """Warn where an official checkpoint's path would make the official eval_rm.py build the other head: it picks
    its head from the folder's path ('vhs-mlp' anywhere in it: MLP), not from config.json."""
    path_says_mlp = "vhs-mlp" in str(path.absolute())
    if model.value_head_strategy == "mlp" and not path_says_mlp:
        print(
            "note: the official eval_rm.py builds a linear head unless the folder's path holds 'vhs-mlp'; rename "
            f"{path} (e.g. {path.name}-vhs-mlp) before scoring it there",
            file=sys.stderr,
        )
    elif model.value_head_strategy == "linear" and path_says_mlp:
        print(
            f"note: the official eval_rm.py builds an MLP head for any path holding 'vhs-mlp', and {path} holds it but "
            f"this head is linear: move it to a path without 'vhs-mlp' before scoring it there",
            file=sys.stderr,
        )


def save_reward_model(
    model: RewardModel,
    path: str | Path,
    tokenizer: Any = None,
    training_args: dict | None = None,
    state_dict: dict[str, torch.Tensor] | None = None,
    save_format: str = "goalrm",
) -> Path:
    """Write the HF layout plus ``goalrm.json``, into a temp directory renamed into place at the end.

    ``save_format``: ``goalrm`` or ``official`` (see the module docstring; ``goalrm.json`` is written
    in both, naming the format, and the official loader ignores it). ``state_dict`` lets a ZeRO-3
    trainer pass the gathered full weights. NaN or inf weights are an error, raised before anything
    is written (an existing RM at ``path`` is left as it is).
    """
    from huggingface_hub import save_torch_state_dict

    check_choice("save_format", save_format, CHECKPOINT_FORMATS)
    path = Path(path)
    weights = state_dict if state_dict is not None else model.state_dict()
    official = save_format == "official"
    _refuse_unsavable(model, weights, path, official)
    if official:
        weights = official_state_dict(model, weights)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~UMASK)  # mkdtemp makes 0700: an RM is meant to be shared
        config = _write_config(model, tokenizer, tmp, official)
        save_torch_state_dict({k: v.contiguous() for k, v in weights.items()}, tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        atomic_write_json(tmp / GOALRM_JSON, _goalrm_record(model, config, tokenizer, save_format, training_args))
        for file in tmp.iterdir():  # the weights writer makes 0600 files, like mkdtemp's folder
            os.chmod(file, 0o666 & ~UMASK)
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    if official:
        _note_official_head_path(model, path)
    return path


#: what ``goalrm.json`` must hold; ``tokenizer_sha256`` (absent from older checkpoints) is checked when present
GOALRM_JSON_FIELDS = ("value_head_strategy", "hidden_size")


def read_goalrm_json(path: str | Path) -> dict:
    """``goalrm.json`` of an RM folder; a damaged file or a missing field is named."""
    meta_path = Path(path) / GOALRM_JSON
    if not meta_path.exists():
        raise ArtifactError(
            f"{path}: not a goalrm reward model ({GOALRM_JSON} missing); train one with `goalrm train-rm`"
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ArtifactError(f"{meta_path}: damaged ({e}); save or train the RM again") from None
    if not isinstance(meta, dict):
        raise ArtifactError(f"{meta_path}: expected a JSON object, got {type(meta).__name__}")
    missing = [k for k in GOALRM_JSON_FIELDS if k not in meta]
    if missing:
        raise ArtifactError(
            f"{meta_path}: missing field(s) {missing}; expected {list(GOALRM_JSON_FIELDS)}; save or train the RM again"
        )
    try:
        check_choice("value_head_strategy", meta["value_head_strategy"], VALUE_HEAD_STRATEGIES)
    except ValueError as e:
        raise ArtifactError(f"{meta_path}: field 'value_head_strategy': {e}") from None
    try:
        check_choice("reward_pool", meta.get("reward_pool", "last"), REWARD_POOLS)  # absent: written before it existed
    except ValueError as e:
        raise ArtifactError(f"{meta_path}: field 'reward_pool': {e}") from None
    return meta


def recorded_feature_layer(meta: dict, config: PretrainedConfig, path: str | Path) -> int | None:
    """The first trained decoder layer of an RM saved by ``train-rm --train_top_layers N``: ``feature_layer`` of its
    ``goalrm.json`` or, in one saved before goalrm recorded it, ``L - N`` from its ``training_args``; None when every
    layer trained. Which states a feature cache may give it is decided by its frozen weights
    (:func:`~goalrm_core.model.top_layers.backbone_identity`), never by this number alone."""
    layers = getattr(config, "num_hidden_layers", None)
    if "feature_layer" in meta:
        layer = meta["feature_layer"]
    else:
        top = (meta.get("training_args") or {}).get("train_top_layers") or 0
        layer = layers - top if isinstance(top, int) and top > 0 and isinstance(layers, int) else None
    if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < (layers or 0)):
        raise ArtifactError(
            f"{Path(path) / GOALRM_JSON}: feature_layer {layer!r} is no layer of the backbone's {layers}; save or "
            f"train the RM again"
        )
    return layer


def tokenizer_sha256(tokenizer) -> str:
    """A fingerprint of what a tokenizer maps: every token and its id, and the special tokens. Two
    tokenizers with the same vocabulary size but other tokens differ."""
    import hashlib

    content = {
        "vocab": sorted(tokenizer.get_vocab().items(), key=lambda kv: (kv[1], kv[0])),
        "special": sorted(map(str, tokenizer.all_special_tokens)),
    }
    return hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()


def check_tokenizer_matches(model: "RewardModel", tokenizer) -> None:
    """A tokenizer with more ids than the RM's embedding table has rows is not the RM's tokenizer."""
    vocab = model.backbone.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > vocab:
        raise ValueError(
            f"tokenizer has {len(tokenizer)} tokens but the model's embedding table has {vocab}: they do not belong "
            "together"
        )


def load_rm_tokenizer(path: str | Path, model: "RewardModel"):
    """The tokenizer of the RM folder ``path``, checked to be the one it was trained with: the hash
    ``goalrm.json`` records (``tokenizer_sha256``) and the embedding's size. A folder that records no
    hash (saved before goalrm kept one) is read with a one-line notice."""
    import sys

    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:
        raise ArtifactError(f"{path}: its tokenizer cannot be loaded ({' '.join(str(e).split())[:200]})") from None
    check_tokenizer_matches(model, tokenizer)
    recorded = read_goalrm_json(path).get("tokenizer_sha256") if (Path(path) / GOALRM_JSON).is_file() else None
    if recorded is None:
        print(
            f"notice: {path}: no tokenizer hash recorded (an official-format folder, or saved by an older goalrm); "
            f"the tokenizer is not checked against the one the RM was trained with",
            file=sys.stderr,
        )
    elif recorded != tokenizer_sha256(tokenizer):
        raise ArtifactError(
            f"{path}: its tokenizer is not the one the RM was trained with ({GOALRM_JSON} records tokenizer "
            f"hash {recorded[:12]}, the folder's tokenizer has {tokenizer_sha256(tokenizer)[:12]}); "
            f"put the training tokenizer back, or train the RM again"
        )
    return tokenizer


def weight_names(path: Path) -> list[str]:
    """The tensor names of every ``*.safetensors`` file in ``path`` (headers only)."""
    from safetensors import safe_open

    names: list[str] = []
    for file in sorted(path.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            names += list(f.keys())
    return names


def checkpoint_format(path: str | Path) -> str:
    """``goalrm`` or ``official`` (see the module docstring); a folder that is neither is a one-line error.

    A folder with ``goalrm.json`` is goalrm's (which may have saved it in the official format); one
    without it is official when its ``config.json`` names ``_value_head_strategy`` or its weights hold
    ``value_head.*`` tensors (what the official ``train_rm.py`` saves)."""
    path = Path(path)
    if (path / GOALRM_JSON).is_file():
        return read_goalrm_json(path).get("checkpoint_format", "goalrm")
    config = path / "config.json"
    if config.is_file():
        try:
            fields = json.loads(config.read_text())
        except ValueError:
            fields = {}
        if "_value_head_strategy" in fields:
            return "official"
        try:
            if any(name.startswith(f"{OFFICIAL_HEAD}.") for name in weight_names(path)):
                return "official"
        except Exception:  # a damaged weights file: said as such below, where the format is known
            pass
    if not path.exists() and str(path) in PACKAGED_MODELS:  # --pretrain's name given where an RM goes
        raise ArtifactError(
            f"{path} names a packaged pretrained LM, not a reward model: train one from it "
            f"(goalrm train-rm --pretrain {path} ...) and give its --save_path here"
        )
    raise ArtifactError(
        f"{path}: neither a goalrm reward model ({GOALRM_JSON} missing) nor an official-format one (no config.json "
        f"with _value_head_strategy or {OFFICIAL_HEAD}.* weights); train one with `goalrm train-rm`"
    )


def official_head_strategy(path: Path, names: list[str], fields: dict) -> str:
    """The head of an official-format folder, read from its weights (what the official loader fills)
    and checked against ``_value_head_strategy`` when the config names it."""
    if f"{OFFICIAL_HEAD}.weight" in names:
        strategy = "linear"
    elif f"{OFFICIAL_HEAD}.0.weight" in names:
        strategy = "mlp"
    else:
        raise ArtifactError(
            f"{path}: an official-format reward model without {OFFICIAL_HEAD} weights; the official loader "
            f"would give it a random head, and goalrm refuses it"
        )
    stated = fields.get("_value_head_strategy")
    if stated is not None and stated != strategy:
        raise ArtifactError(
            f"{path}: config.json field _value_head_strategy is {stated!r} but the weights hold a {strategy} head"
        )
    return strategy


def _load_official(path: Path, backbone: nn.Module) -> RewardModel:
    """An official-format folder as a :class:`RewardModel` whose rewards are the official loader's."""
    from safetensors.torch import load_file

    fields = json.loads((path / "config.json").read_text())
    names = weight_names(path)
    model = RewardModel(backbone, official_head_strategy(path, names, fields), mlp_head="official")
    weights: dict[str, torch.Tensor] = {}
    for file in sorted(path.glob("*.safetensors")):
        weights.update(load_file(str(file)))
    if model.value_head_strategy == "linear":
        weights["score.weight"] = weights.pop(f"{OFFICIAL_HEAD}.weight")
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as e:
        raise ArtifactError(f"{path}: weights do not match the saved config ({str(e)[:300]})") from None
    if "mean" in fields:
        model.set_reward_normalization(
            fields["mean"], fields.get("std", 1.0), enabled=bool(fields.get("normalize_reward", False))
        )
    else:
        model.config.normalize_reward = bool(fields.get("normalize_reward", False))
        model.config.reward_mean, model.config.reward_std = 0.0, 1.0
    return model


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
        raise ArtifactError(
            f"{flag} {folder}: its weights are only pickled ({', '.join(pickled)}); goalrm loads safetensors "
            f"only: convert them with save_pretrained(..., safe_serialization=True) where you trust the file"
        )


#: Files one of which a saved tokenizer folder holds (fast, or a slow tokenizer's vocabulary).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "spiece.model")


def check_tokenizer_folder(path: str | os.PathLike, flag: str) -> None:
    """Refuse, naming the flag and the folder, a local model folder with no tokenizer file: the
    tokenizer library's own error would not say which folder. A Hub name is left to the loader."""
    folder = Path(path)
    if folder.is_dir() and not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ArtifactError(
            f"{flag} {folder}: no tokenizer there (none of {', '.join(TOKENIZER_FILES)}): save the "
            f"tokenizer beside the weights (tokenizer.save_pretrained)"
        )


def check_safetensors_file(path: Path) -> None:
    """A damaged weights file is named as such; never with a suggestion to load it unsafely."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            for key in f.keys():
                f.get_slice(key)
    except Exception as e:  # safetensors raises its own error types for truncated or foreign files
        raise ArtifactError(
            f"{path}: the weights file is damaged (truncated or not safetensors: "
            f"{type(e).__name__}); the checkpoint cannot be used, save or train it again"
        ) from None


def load_reward_model(path: str | Path, dtype: torch.dtype | None = None, flash_attn: bool = False) -> RewardModel:
    """Load an RM in either format (:func:`checkpoint_format`); missing or partial checkpoints raise
    clearly. An official-format folder the official code wrote (no ``goalrm.json``) is read with a
    one-line notice: its head is ``value_head`` and its reward statistics ``mean``/``std``. The model is
    float32 unless ``dtype`` is given, whatever dtype the weights were saved in."""
    from huggingface_hub import load_torch_model

    path = Path(path)
    fmt = checkpoint_format(path)
    if not (path / "config.json").exists():
        raise ArtifactError(f"{path}: config.json missing; the checkpoint is incomplete")
    check_weights_folder(path, "reward model")  # pickled weights only: said as such, never loaded
    if not any(path.glob("*.safetensors")):
        raise ArtifactError(f"{path}: no *.safetensors weights; the checkpoint is incomplete")
    config = AutoConfig.from_pretrained(path)
    # float32 whatever the config's dtype (a bf16 run records bfloat16, which from_config would follow while the
    # head is built in float32): one dtype for the whole model, and a bf16 checkpoint upcast exactly
    backbone = AutoModel.from_config(
        config, dtype=torch.float32, attn_implementation=attention_implementation(flash_attn)
    )
    for weights in path.glob("*.safetensors"):
        check_safetensors_file(weights)
    if fmt == "official":
        if not (path / GOALRM_JSON).exists():
            print(
                f"note: {path} is in the official code's format (value_head, mean/std in config.json): read as such",
                file=sys.stderr,
            )
        model = _load_official(path, backbone)
    else:
        meta = read_goalrm_json(path)
        model = RewardModel(
            backbone, meta["value_head_strategy"], meta.get("mlp_head", "goalrm"), meta.get("reward_pool", "last")
        )
        try:
            load_torch_model(model, path, strict=True)
        except (RuntimeError, OSError, ValueError) as e:
            raise ArtifactError(f"{path}: weights do not match the saved config ({str(e)[:300]})") from None
    if (path / GOALRM_JSON).is_file():  # an official-format folder the official code wrote records none
        model.feature_layer = recorded_feature_layer(read_goalrm_json(path), config, path)
    bad = nonfinite_tensors(model.state_dict())
    if bad:
        raise ArtifactError(f"{path}: NaN or inf weights in {describe_tensors(bad)}; the reward model is broken")
    if fmt == "goalrm" and getattr(model.config, "normalize_reward", False):
        stats = {k: getattr(model.config, k, None) for k in ("reward_mean", "reward_std")}
        bad = [
            f"{k}={v!r}"
            for k, v in stats.items()
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
        ]
        if not bad and stats["reward_std"] <= 0:
            bad = [f"reward_std={stats['reward_std']!r}"]
        if bad:
            raise ArtifactError(
                f"{path / 'config.json'}: normalize_reward is set but {', '.join(bad)}: a normalised reward needs "
                f"a finite reward_mean and a reward_std > 0; set normalize_reward to false or store both"
            )
    if dtype is not None:
        model = model.to(dtype)
    return model.eval()
