"""Online pruning: stop a sample as soon as its Q-value falls below a threshold.

The rule (``PruneConfig``): the N samples of a question advance in lockstep, one response token per
step; at position t every sample still running whose Q is below ``threshold`` stops, never before
position ``skip_first``, except that with ``keep_last`` a question's last running sample is spared
(the highest Q, then the earlier sample), so every question still votes. Positions follow the RM's
view of the response (text + " " + EOS), as the offline scorer's ``cosine_sim`` does.

The rule exists twice, once per input, and the two are tested to agree:

* ``stop_now`` decides for a batch of tensors while the sampler generates (``sampler.sample``);
* ``simulate_pruning`` replays it on recorded Q-values (``Sample.q_values`` or a scored row's
  ``cosine_sim``), which is how a threshold is tuned without generating: ``choose_online_threshold``
  replays every candidate on validation questions and keeps the best vote, then the fewest tokens.

Unlike the offline filter's fallback (vote with all generations when all are dropped), this rule can
run while generating, so it is the one to tune an online threshold for.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from goalrm_core.evaluation import metrics
from goalrm_core.evaluation.thresholds import choose_threshold
from goalrm_core.evaluation.voting import SKIP_FIRST

#: Q is a cosine clamped to [-1, 1]: a threshold at or below this stops no sample, so pruning is off
#: and the sampler runs the policy alone, with no RM call at all (``PruneConfig.off``).
PRUNING_OFF = -1.0


@dataclass
class PruneConfig:
    """When online pruning stops a sample."""

    threshold: float = field(
        default=0.0, metadata={"help": "A sample stops at the first position whose Q is below this (the paper: 0)."}
    )
    skip_first: int = field(
        default=SKIP_FIRST,
        metadata={"help": "Never stop before this response position: Q of very short prefixes is noisy."},
    )
    keep_last: bool = field(
        default=True, metadata={"help": "Spare a question's last running sample, so that every question still votes."}
    )

    def __post_init__(self):
        if isinstance(self.skip_first, bool) or int(self.skip_first) != self.skip_first or self.skip_first < 0:
            raise ValueError(f"skip_first must be >= 0, got {self.skip_first}")
        if not isinstance(self.threshold, numbers.Real) or math.isnan(self.threshold):
            raise ValueError(f"threshold must be a number, got {self.threshold!r}")

    @property
    def off(self) -> bool:
        """The threshold stops nothing (at or below :data:`PRUNING_OFF`): pruning is off."""
        return self.threshold <= PRUNING_OFF


def stop_now(
    q: torch.Tensor, positions: torch.Tensor, question: torch.Tensor, alive: dict[int, int], rule: PruneConfig
) -> torch.Tensor:
    """Which of these running rows stop at this step (a bool mask over ``q``).

    ``q``, ``positions`` and ``question`` hold each row's Q-value, response position and question id;
    ``alive`` counts each question's running samples and is updated for the rows that stop.
    """
    stop = (positions >= rule.skip_first) & (q < rule.threshold)
    if not rule.keep_last or not bool(stop.any()):
        return stop
    for qid in question[stop].unique().tolist():
        rows = ((question == qid) & stop).nonzero().squeeze(1)
        if alive[qid] - rows.numel() <= 0:
            spare = rows[torch.argmax(q[rows])]  # argmax takes the first of equal values
            stop[spare] = False
            rows = rows[rows != spare]
        alive[qid] -= rows.numel()
    return stop


def simulate_pruning(q_values: Sequence[Sequence[float]], rule: PruneConfig) -> list[int | None]:
    """Where online pruning would stop each sample of ONE question, from its per-position Q-values:
    the response position of the stop, or None for a sample that runs to its end.

    >>> simulate_pruning([[0.9, 0.1, 0.1], [0.9, 0.2, 0.0], [0.5, 0.1]], PruneConfig(threshold=0.3, skip_first=1))
    [1, None, 1]
    >>> simulate_pruning(
    ...     [[0.9, 0.1, 0.1], [0.9, 0.2, 0.0], [0.5, 0.1]], PruneConfig(threshold=0.3, skip_first=1, keep_last=False)
    ... )
    [1, 1, 1]
    """
    stopped: list[int | None] = [None] * len(q_values)
    alive = len(q_values)
    for t in range(rule.skip_first, max((len(q) for q in q_values), default=0)):
        below = [i for i, q in enumerate(q_values) if stopped[i] is None and t < len(q) and q[t] < rule.threshold]
        if rule.keep_last and below and alive - len(below) <= 0:
            below.remove(max(below, key=lambda i: (q_values[i][t], -i)))
        for i in below:
            stopped[i] = t
        alive -= len(below)
    return stopped


def simulated_pruning_outcome(groups: Sequence[Sequence[dict]], rule: PruneConfig) -> dict:
    """Majority-vote accuracy and generated tokens of online pruning replayed on scored samples, one
    group of rows (cosine_sim, num_generated_tokens, is_correct, predicted_answer) per question. A
    stopped sample does not vote and costs the tokens up to its stop."""
    voted, tokens = [], 0
    for group in groups:
        stops = simulate_pruning([r["cosine_sim"] for r in group], rule)
        voted.append(
            [r if k is None else dict(r, is_correct=False, predicted_answer=None) for r, k in zip(group, stops)]
        )
        tokens += sum(
            r["num_generated_tokens"] if k is None else min(k + 1, r["num_generated_tokens"])
            for r, k in zip(group, stops)
        )
    acc = metrics.majority_vote_accuracy(voted)
    return {"threshold": float(rule.threshold), "n_correct": acc.n_correct, "accuracy": acc.accuracy, "tokens": tokens}


def choose_online_threshold(
    groups: Sequence[Sequence[dict]],
    candidates=metrics.DEFAULT_FILTER_THRESHOLDS,
    skip_first: int = SKIP_FIRST,
    keep_last: bool = True,
):
    """The threshold with the best replayed majority vote on ``groups`` (validation questions), ties
    broken by fewer generated tokens, then by the lower threshold (``thresholds.choose_threshold``).
    Returns it and one row per candidate."""
    return choose_threshold(
        candidates, lambda t: simulated_pruning_outcome(groups, PruneConfig(t, skip_first, keep_last))
    )
