"""The official code's reward model, built by hand from its source (``openrlhf/models/model.py``,
``get_llm_for_sequence_regression`` and ``_get_reward_model``) without importing it: the backbone under
the architecture's ``base_model_prefix``, the head ``value_head`` (bias-free ``Linear(h, 1)``, or the MLP
whose last layer is bias-free), ``mean``/``std``/``normalize_reward`` read from ``config.json``, eager
attention, the reward read at the last attended token and normalised in eval mode.

What :meth:`OfficialRM.from_folder` takes from the official loader: the head comes from the caller, never
from ``config.json`` (``get_llm_for_sequence_regression`` overwrites ``_value_head_strategy`` with its
argument; its ``eval_rm.py`` passes ``mlp`` when the folder's path holds ``vhs-mlp`` and ``linear``
otherwise), and the model is built in the checkpoint's dtype (``torch_dtype="auto"``: the config's
``torch_dtype``, else the dtype of the first floating-point tensor in the weights), the ``mean``/``std``
buffers included, so a bf16 checkpoint runs in bf16 there. It loads weights strictly, so a missing head
(the official loader would initialise a random one) fails here."""

import json

import torch
from safetensors.torch import load_file
from torch import nn
from transformers import AutoConfig, LlamaModel

#: How far a reward computed in bf16 may sit from the same bf16 weights computed in float32 (atol and rtol
#: both): bf16 keeps 8 significant bits (unit roundoff 2**-8), and the tiny test models' hidden states and
#: rewards are of order 1, so after the dozens of rounded operations of a forward pass a few roundoffs are
#: expected; 2**-5 is eight of them. It is only used between bf16 and float32 computation: the same weights
#: computed in one dtype on both sides must agree to 1e-6.
BF16_REWARD_TOL = 2**-5


def official_head(hidden: int, strategy: str) -> nn.Module:
    if strategy == "linear":
        return nn.Linear(hidden, 1, bias=False)
    return nn.Sequential(
        nn.Linear(hidden, hidden // 2),
        nn.ReLU(),
        nn.Linear(hidden // 2, hidden // 2),
        nn.ReLU(),
        nn.Linear(hidden // 2, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1, bias=False),
    )


def eval_rm_head_strategy(path) -> str:
    """The official ``eval_rm.py``'s rule: an MLP head when the folder's path holds ``vhs-mlp``."""
    return "mlp" if "vhs-mlp" in str(path) else "linear"


def auto_dtype(fields: dict, weights: dict) -> torch.dtype:
    """``torch_dtype="auto"`` as the official code's transformers resolves it."""
    if fields.get("torch_dtype"):
        return getattr(torch, fields["torch_dtype"])
    return next(t.dtype for t in weights.values() if t.is_floating_point())


class OfficialRM(nn.Module):
    def __init__(self, config, strategy: str):
        super().__init__()
        config._attn_implementation = "eager"  # what get_llm_for_sequence_regression sets without flash-attn
        self.model = LlamaModel(config)  # LlamaModel.base_model_prefix == "model"
        self.value_head = official_head(config.hidden_size, strategy)
        self.normalize_reward = getattr(config, "normalize_reward", False)
        self.register_buffer("mean", torch.zeros(1), persistent=False)
        self.register_buffer("std", torch.ones(1), persistent=False)
        if hasattr(config, "mean"):
            self.mean[0] = config.mean
            self.std[0] = config.std

    @classmethod
    def from_folder(cls, path, value_head_strategy=None):
        """``value_head_strategy``: what the caller passes the official loader; None is eval_rm.py's path rule."""
        config = AutoConfig.from_pretrained(path)
        weights = {}
        for file in sorted(path.glob("*.safetensors")):
            weights.update(load_file(str(file)))
        previous = torch.get_default_dtype()
        torch.set_default_dtype(auto_dtype(json.loads((path / "config.json").read_text()), weights))
        try:
            model = cls(config, value_head_strategy or eval_rm_head_strategy(path))
        finally:
            torch.set_default_dtype(previous)
        model.load_state_dict(weights, strict=True)
        return model.eval()

    def forward(self, input_ids, attention_mask):
        hidden = self.model(input_ids, attention_mask=attention_mask)["last_hidden_state"]
        values = self.value_head(hidden).squeeze(-1)
        eos = attention_mask.size(1) - 1 - attention_mask.long().fliplr().argmax(dim=1, keepdim=True)
        reward = values.gather(dim=1, index=eos).squeeze(1)
        return (reward - self.mean) / self.std if self.normalize_reward else reward
