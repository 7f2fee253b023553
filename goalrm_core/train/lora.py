"""LoRA for ``train-rm`` (``--lora_rank``, ``--lora_alpha``, ``--target_modules``), through peft.

With ``--lora_rank r > 0`` the backbone's weights are frozen and peft puts a rank-``r`` adapter
(``lora_alpha / r`` scaling, no dropout, no bias) beside each linear layer named by
``--target_modules`` (every linear layer of the backbone when it is empty, as the official code's
default). The value head is not wrapped: it trains fully, as without LoRA.

The final save merges each adapter into its layer's weight (:func:`merged_state_dict`), so the saved
RM is an ordinary checkpoint, with the keys and shapes of one trained without LoRA: ``eval-rm``,
``get-representation`` and ``load_reward_model`` read it as they read any other. DeepSpeed's resume
checkpoints (``--save_steps``) keep the adapters unmerged, since a resumed run rebuilds them.

peft is imported only here and only when LoRA is on (:func:`import_peft`), so the rest of goalrm runs
without it.

``--load_in_4bit`` (QLoRA, the official code's settings) loads the frozen backbone in 4-bit NF4 through
bitsandbytes (:func:`nf4_config`: double quantisation, bf16 compute) under the adapters. It needs a CUDA GPU
and bitsandbytes (:func:`four_bit_unavailable`); bitsandbytes is imported only on that path. The final save
dequantises each 4-bit weight (:func:`dequantized_state_dict`) before merging the adapters, so that RM too is an
ordinary (bf16) checkpoint.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads with the model, not with the flags (the command line is checked before torch imports)
    import torch
    from torch import nn

ADAPTER = "default"  # peft's name for the one adapter
# What a LoRA layer adds beside its base layer in a state dict; no key of a merged one holds it.
LORA_KEY = re.compile(r"\.lora_(A|B|embedding_A|embedding_B|magnitude_vector)\b")
# what bitsandbytes adds beside a 4-bit layer's packed weight in a state dict (its quantisation state)
QUANT_KEY = re.compile(r"\.weight\.(absmax|quant_map|nested_absmax|nested_quant_map|quant_state\.)")
# peft's own prefix inside a wrapped backbone (PeftModel.base_model = LoraModel, whose .model is the backbone)
PEFT_PREFIX = "base_model.model."
ALL_LINEAR = ("", "all-linear")  # --target_modules values that mean every linear layer


def target_names(text: str) -> list[str]:
    """``--target_modules`` as a list of module names: names separated by commas or spaces; empty (or
    ``all-linear``) is ``[]``, every linear layer. A name is a module's name or a dotted tail of it.

    >>> target_names("q_proj,v_proj"), target_names(" q_proj  v_proj "), target_names("")
    (['q_proj', 'v_proj'], ['q_proj', 'v_proj'], [])
    """
    if text.strip() in ALL_LINEAR:
        return []
    return [name for name in re.split(r"[,\s]+", text.strip()) if name]


def check_target_names(text: str) -> None:
    """A one-line ``ValueError`` for a ``--target_modules`` that is no list of module names."""
    for name in target_names(text):
        if name in ALL_LINEAR or not re.fullmatch(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*", name):
            raise ValueError(
                f"--target_modules {text!r}: {name!r} is no module name (names such as q_proj or "
                f"layers.0.mlp.up_proj, separated by commas or spaces; empty = every linear layer)"
            )


def peft_missing() -> bool:
    """Whether peft cannot be imported here (checked without importing it)."""
    return importlib.util.find_spec("peft") is None


def missing_peft_message(lora_rank: int) -> str:
    return (
        f"--lora_rank {lora_rank} needs peft, which is not installed here: install goalrm's dependencies "
        f"(pip install -e ., or peft at the version pyproject.toml pins)"
    )


def import_peft(lora_rank: int):
    """The peft module, or the one-line ``ValueError`` of :func:`missing_peft_message`."""
    try:
        import peft
    except ImportError:
        raise ValueError(missing_peft_message(lora_rank)) from None
    return peft


def _is_linear(module: nn.Module) -> bool:
    from torch import nn
    from transformers.pytorch_utils import Conv1D  # GPT-2's transposed linear layer, which peft also wraps

    return isinstance(module, (nn.Linear, Conv1D))


def linear_layer_names(backbone: nn.Module) -> list[str]:
    """The distinct last names of the backbone's linear layers (``q_proj``, ``up_proj`` …): the default
    targets. A language-model head, if the backbone has one, is left out."""
    names = {name.rsplit(".", 1)[-1] for name, module in backbone.named_modules() if name and _is_linear(module)}
    names.discard("lm_head")
    return sorted(names)


def resolve_targets(backbone: nn.Module, text: str) -> list[str]:
    """The module names peft wraps for ``--target_modules text``: every linear layer's name when
    ``text`` is empty, else the names given, each of which must name at least one linear layer of the
    backbone (a one-line ``ValueError`` naming it and the valid names otherwise)."""
    check_target_names(text)
    valid = linear_layer_names(backbone)
    given = target_names(text)
    if not given:
        if not valid:
            raise ValueError(
                f"--lora_rank: the backbone {type(backbone).__name__} has no linear layer for LoRA to wrap"
            )
        return valid
    modules = dict(backbone.named_modules())
    for name in given:
        hits = [m for full, m in modules.items() if full == name or full.endswith("." + name)]
        if not hits:
            raise ValueError(
                f"--target_modules {text!r}: the backbone {type(backbone).__name__} has no module {name!r}; "
                f"its linear layers: {', '.join(valid)}"
            )
        if not all(_is_linear(m) for m in hits):
            kinds = sorted({type(m).__name__ for m in hits if not _is_linear(m)})
            raise ValueError(
                f"--target_modules {text!r}: {name!r} names a {'/'.join(kinds)}, not a linear layer; LoRA wraps "
                f"linear layers: {', '.join(valid)}"
            )
    return given


def check_targets_on_meta(pretrain: str, text: str) -> None:
    """:func:`resolve_targets` on the backbone of ``pretrain`` built on the meta device (its config only,
    no weights read, no memory): bad ``--target_modules`` stop before any data or weights load."""
    import torch
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(pretrain)
    with torch.device("meta"):
        backbone = AutoModel.from_config(config)
    resolve_targets(backbone, text)


def add_lora(backbone: nn.Module, lora_rank: int, lora_alpha: int, target_modules: str) -> nn.Module:
    """``backbone`` wrapped by peft with one LoRA adapter: every weight of it frozen but the adapters'."""
    peft = import_peft(lora_rank)
    targets = resolve_targets(backbone, target_modules)
    # with its embeddings frozen, the backbone's inputs need a gradient for a checkpointed (reentrant) layer to have one
    backbone.enable_input_require_grads()
    config = peft.LoraConfig(r=lora_rank, lora_alpha=lora_alpha, target_modules=targets, lora_dropout=0.0, bias="none")
    return peft.get_peft_model(backbone, config)


def lora_layers(model: nn.Module) -> dict[str, Any]:
    """``{module name: peft LoRA layer}`` of ``model`` (empty without LoRA, and without peft imported)."""
    if "peft" not in sys.modules:
        return {}
    from peft.tuners.lora import LoraLayer

    return {name: module for name, module in model.named_modules() if isinstance(module, LoraLayer)}


def merged_state_dict(model: nn.Module, state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state_dict`` (the full weights of ``model``, a reward model whose backbone carries LoRA) with each
    adapter merged into its layer: W + scaling · B·A (transposed for a Conv1D layer), computed in fp32 and
    stored in W's dtype, under the names the layer has without LoRA; a 4-bit W is dequantised first
    (:func:`dequantized_state_dict`). Works on gathered weights, so the same holds for every ZeRO stage;
    ``model`` itself is left as it is. Without LoRA, ``state_dict``."""
    layers = lora_layers(model)
    if not layers:
        return state_dict
    out = dequantized_state_dict(model, state_dict)
    for name, layer in layers.items():
        if ADAPTER not in layer.lora_A:
            continue
        base = out.pop(f"{name}.base_layer.weight")
        a = out.pop(f"{name}.lora_A.{ADAPTER}.weight").float()
        b = out.pop(f"{name}.lora_B.{ADAPTER}.weight").float()
        delta = (b @ a) * layer.scaling[ADAPTER]
        if layer.fan_in_fan_out:
            delta = delta.T
        out[f"{name}.weight"] = (base.float() + delta).to(base.dtype)
        if f"{name}.base_layer.bias" in out:
            out[f"{name}.bias"] = out.pop(f"{name}.base_layer.bias")
    renamed = {key.replace(f".{PEFT_PREFIX}", ".", 1): value for key, value in out.items()}
    left = [key for key in renamed if LORA_KEY.search(key) or QUANT_KEY.search(key) or ".base_layer." in key]
    if left:
        raise RuntimeError(f"merging the LoRA adapters left adapter weights unmerged: {left[:3]}")
    return renamed


def trainable_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, all) parameter counts of ``model`` (ZeRO-3's partitioned ones by their full shape)."""

    def numel(p):
        return getattr(p, "ds_numel", p.numel())

    params = list(model.parameters())
    return sum(numel(p) for p in params if p.requires_grad), sum(numel(p) for p in params)


# ---------------------------------------------------------------------------------------------
# --load_in_4bit: the backbone in 4-bit NF4 (bitsandbytes) under the adapters
# ---------------------------------------------------------------------------------------------


def four_bit_unavailable() -> str:
    """Why ``--load_in_4bit`` cannot run on this machine, or ``""`` when it can: bitsandbytes' 4-bit layers
    need a CUDA GPU and the bitsandbytes package (looked up, not imported)."""
    import torch

    if not torch.cuda.is_available():
        return "4-bit loading (bitsandbytes NF4) needs a CUDA GPU, and torch sees none here"
    if importlib.util.find_spec("bitsandbytes") is None:
        return "4-bit loading needs bitsandbytes, which is not installed here (pip install bitsandbytes)"
    return ""


def require_four_bit() -> None:
    """The one-line ``ValueError`` of ``--load_in_4bit`` on a machine where it cannot run
    (:func:`four_bit_unavailable`)."""
    why = four_bit_unavailable()
    if why:
        raise ValueError(
            f"--load_in_4bit (an official train_rm.py flag) cannot run here: {why}; drop it (the backbone then "
            f"loads in --bf16)"
        )


def nf4_config():
    """The ``transformers.BitsAndBytesConfig`` of ``--load_in_4bit``, the official code's: 4-bit NF4 weights,
    double quantisation (the quantisation constants quantised too), bf16 compute."""
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )


def four_bit_dtypes(backbone: nn.Module) -> None:
    """The official code's dtypes for a 4-bit backbone under LoRA: the LoRA layers' float weights in bf16,
    the norms in fp32, the embeddings in bf16 (the packed 4-bit weights keep their type). DeepSpeed's bf16
    engine then casts every float parameter to bf16, as it did the official code's."""
    import torch

    loras = set(lora_layers(backbone))
    for name, module in backbone.named_modules():
        if name in loras:
            module.to(torch.bfloat16)
        if "norm" in name:
            module.to(torch.float32)
        if "embed_tokens" in name and hasattr(module, "weight"):
            module.to(torch.bfloat16)


def four_bit_layers(model: nn.Module) -> dict[str, nn.Module]:
    """``{module name: bitsandbytes Linear4bit}`` of ``model`` (empty without bitsandbytes imported)."""
    if "bitsandbytes" not in sys.modules:
        return {}
    from bitsandbytes.nn import Linear4bit

    return {name: module for name, module in model.named_modules() if isinstance(module, Linear4bit)}


def dequantized_state_dict(model: nn.Module, state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state_dict`` (the weights of ``model``) with each 4-bit layer's packed weight and quantisation state
    replaced by its weight dequantised by bitsandbytes (in the dtype the backbone loaded in: bf16), on CPU.
    Without 4-bit layers, a copy of ``state_dict``."""
    out = dict(state_dict)
    layers = four_bit_layers(model)
    if not layers:
        return out
    from bitsandbytes.functional import dequantize_4bit

    for name, layer in layers.items():
        for key in [k for k in out if k == f"{name}.weight" or k.startswith(f"{name}.weight.")]:
            del out[key]
        out[f"{name}.weight"] = dequantize_4bit(layer.weight.data, layer.weight.quant_state).detach().cpu().clone()
    return out
