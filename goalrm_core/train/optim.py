"""The optimiser's parameter groups and the learning-rate schedule (no DeepSpeed needed)."""

from __future__ import annotations

import math

from goalrm_core.model.reward_model import RewardModel
from goalrm_core.train.config import TrainRMConfig


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
