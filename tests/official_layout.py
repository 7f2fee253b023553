"""The official code's reward model, built by hand from its source (``openrlhf/models/model.py``,
``get_llm_for_sequence_regression`` and ``_get_reward_model``) without importing it: the backbone under
the architecture's ``base_model_prefix``, the head ``value_head`` (bias-free ``Linear(h, 1)``, or the MLP
whose last layer is bias-free), ``mean``/``std``/``normalize_reward``/``_value_head_strategy`` read from
``config.json``, the reward read at the last attended token and normalised in eval mode. It loads
weights strictly, so a missing head (the official loader would initialise a random one) fails here."""

import json

from safetensors.torch import load_file
from torch import nn
from transformers import AutoConfig, LlamaModel


def official_head(hidden: int, strategy: str) -> nn.Module:
    if strategy == "linear":
        return nn.Linear(hidden, 1, bias=False)
    return nn.Sequential(
        nn.Linear(hidden, hidden // 2), nn.ReLU(),
        nn.Linear(hidden // 2, hidden // 2), nn.ReLU(),
        nn.Linear(hidden // 2, hidden), nn.ReLU(),
        nn.Linear(hidden, 1, bias=False),
    )


class OfficialRM(nn.Module):
    def __init__(self, config, strategy: str):
        super().__init__()
        self.model = LlamaModel(config)  # LlamaModel.base_model_prefix == "model"
        self.value_head = official_head(config.hidden_size, strategy)
        self.normalize_reward = getattr(config, "normalize_reward", False)
        self.mean = float(getattr(config, "mean", 0.0))
        self.std = float(getattr(config, "std", 1.0))

    @classmethod
    def from_folder(cls, path):
        config = AutoConfig.from_pretrained(path)
        model = cls(config, json.loads((path / "config.json").read_text())["_value_head_strategy"])
        weights = {}
        for file in sorted(path.glob("*.safetensors")):
            weights.update(load_file(str(file)))
        model.load_state_dict(weights, strict=True)
        return model.eval()

    def forward(self, input_ids, attention_mask):
        hidden = self.model(input_ids, attention_mask=attention_mask)["last_hidden_state"]
        values = self.value_head(hidden).squeeze(-1)
        eos = attention_mask.size(1) - 1 - attention_mask.long().fliplr().argmax(dim=1, keepdim=True)
        reward = values.gather(dim=1, index=eos).squeeze(1)
        return (reward - self.mean) / self.std if self.normalize_reward else reward
