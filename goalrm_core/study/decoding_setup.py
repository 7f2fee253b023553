"""What notebook 05's decoding study runs on: the run, the policy, the RM and its goal
(:class:`DecodingSetup`); the questions every method decodes; and sampled solutions as judged rows
(answers judged by ``tasks.toymath.verdicts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from goalrm_core.data.rundir import RunDir
from goalrm_core.inference.sampler import Sample
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.study.rms import GOAL_CONDITIONED as GOAL_RM
from goalrm_core.tasks.toymath import problems as toymath
from goalrm_core.tasks.toymath.pipeline import read_benchmark
from goalrm_core.tasks.toymath.verdicts import judge


@dataclass
class DecodingSetup:
    """What notebook 05 decodes with: the run, the models, the goal and the questions."""

    run: RunDir = field(metadata={"help": "The profile's run directory."})
    policy: Any = field(metadata={"help": "The causal LM that generates (the data stage's policy)."})
    rm: RewardModel = field(metadata={"help": f"The {GOAL_RM} RM; it shares the policy's tokenizer."})
    tokenizer: Any = field(metadata={"help": "The tokenizer the policy and the RM share."})
    goal: np.ndarray = field(metadata={"help": "(1, hidden) goal state of the RM."})
    task: toymath.ToyMathConfig = field(
        metadata={"help": "The data stage's ToyMath config (answers are judged mod its modulus)."}
    )
    benchmarks: list[str] = field(default_factory=list, metadata={"help": "Benchmarks to decode, in report order."})
    n_questions: int = field(default=32, metadata={"help": "First distinct questions decoded per benchmark."})
    rm_seed: int = field(
        default=0, metadata={"help": "The training seed of ``rm`` (whose scored samples tune the pruning threshold)."}
    )
    encoding: str = field(
        default="split", metadata={"help": "How the RM reads prompt + response (the profile's `encoding`)."}
    )
    readout: str = field(default="eos", metadata={"help": "Where the RM's reward is read (the profile's `readout`)."})

    def __post_init__(self):
        self.run = RunDir(self.run)
        if (self.encoding, self.readout) != ("split", "eos"):  # the KV-cached online scorers read this way only
            raise ValueError(
                f"decoding follows the RM with split encoding and the EOS read-out only, "
                f"got encoding={self.encoding!r}, readout={self.readout!r}"
            )


def unique_questions(run, bench: str, n: int) -> list[str]:
    """The first ``n`` distinct questions of a benchmark, in file order."""
    return list(dict.fromkeys(r["question"] for r in read_benchmark(run, bench)))[:n]


def decode_questions(setup: DecodingSetup) -> dict[str, list[str]]:
    """Per benchmark, the questions every method decodes: its first ``n_questions`` distinct ones."""
    return {bench: unique_questions(setup.run, bench, setup.n_questions) for bench in setup.benchmarks}


def sample_rows(questions: Sequence[str], samples: Sequence[Sequence[Sample]], modulus: int = 0) -> list[list[dict]]:
    """Per question, one row per sample; a stopped sample never votes (no answer, not correct)."""
    out = []
    for q, group in zip(questions, samples):
        rows = []
        for i, s in enumerate(group):
            verdict = {"predicted_answer": None, "is_correct": False} if s.pruned else judge(q, s.text, modulus=modulus)
            rows.append(
                {
                    "question": q,
                    "sample_index": i,
                    "generated_solution": s.text,
                    **verdict,
                    "num_generated_tokens": s.num_tokens,
                    "stopped_at": s.stopped_at,
                    "finished": s.finished,
                }
            )
        out.append(rows)
    return out


def samples_as_rows(questions: Sequence[str], samples: Sequence[Sequence[Sample]]) -> list[dict]:
    """The first sample of each question as a row (question, generated_solution, tokens_generated)."""
    return [
        {"question": q, "generated_solution": g[0].text, "tokens_generated": g[0].num_tokens}
        for q, g in zip(questions, samples)
    ]


def in_order(groups: dict[str, list[dict]], questions: Sequence[str]) -> list[list[dict]]:
    """The groups of ``questions`` (from ``adapters.group_by_question``), in that order."""
    missing = [q for q in questions if q not in groups]
    if missing:
        raise ValueError(f"{len(missing)} questions have no scored generations, e.g. {missing[0]!r}")
    return [groups[q] for q in questions]
