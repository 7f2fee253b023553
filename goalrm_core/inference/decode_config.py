"""The settings of Q-guided beam search, defined once: :class:`DecodeConfig` (torch-free, so a profile
or a command line is checked against it without loading a model).

Each field's metadata is the setting's one definition: its help and its valid range. ``goalrm decode``'s
flags are generated from it (``study.decode_cli``), the profiles' decoding keys take their rules from it
(``pipeline.profile_rules``), and a config built in Python is checked against it:

>>> DecodeConfig(beam_size=0)
Traceback (most recent call last):
ValueError: beam_size must be an integer >= 1, got 0
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from goalrm_core.flags import Range

_COUNT = Range(int, ">= 1")


def _setting(default, text: str, valid: Range):
    return field(default=default, metadata={"help": text, "range": valid})


@dataclass
class DecodeConfig:
    """Settings of the Q-guided beam search."""

    beam_size: int = _setting(4, "Beams kept per question after each step.", _COUNT)
    samples_per_step: int = _setting(4, "Lines sampled from the policy per beam and step.", _COUNT)
    temperature: float = _setting(
        0.7, "Sampling temperature (beam search: of the first step).", Range(float, ">= 0", note="0 = greedy")
    )
    temperature_decay: float = _setting(
        1.0, "Temperature factor per step (temperature * decay**step).", Range(float, "> 0")
    )
    conf_ratio: float = _setting(
        0.0, "Weight r of the policy's mean token logprob: (1-r)*Q + r*logprob.", Range(float, "[0, 1]")
    )
    reward_weight: float = _setting(0.0, "Weight of the RM reward added to the score.", Range(float))
    max_steps: int = _setting(8, "Most lines per solution.", _COUNT)
    max_line_tokens: int = _setting(32, "Most tokens per line.", _COUNT)
    max_new_tokens: int = _setting(96, "Most tokens per solution.", _COUNT)
    seed: int = _setting(0, "Sampling seed.", Range(int, ">= 0"))

    def __post_init__(self):
        for f in dataclasses.fields(self):
            f.metadata["range"].check(getattr(self, f.name), f.name)
