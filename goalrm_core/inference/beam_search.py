"""Step-level beam search guided by Q, with the proposal and the scoring as arguments.

``beam_search`` is the search alone: each step ``propose`` extends the unfinished beams, ``score``
scores every new candidate at once, and the ``beam_size`` best per question survive (finished beams
compete too). It is tested with stub functions. ``q_guided_decode`` plugs in the model pieces:

* ``PolicyLineProposer``: a step is one solution line, sampled from the policy with
  ``sampler.sample`` up to ``"\\n"`` or EOS;
* ``GoalScorer``: every candidate prefix of a step in ONE batched RM forward pass,
  ``score = (1 - conf_ratio) * Q + conf_ratio * mean token logprob (+ reward_weight * reward)``,
  Q being ``goal_state.q_values`` of the prefix's last hidden state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from goalrm_core.inference.decode_config import DecodeConfig
from goalrm_core.inference.goal_state import check_goal_state, q_values
from goalrm_core.inference.sampler import check_decoding_inputs, sample
from goalrm_core.model.encoding import encode_prompt_response, left_pad
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.model.templates import apply_template


@dataclass
class Candidate:
    """A response prefix of one question, as the beam search sees it."""

    question: int
    token_ids: list[int]
    text: str
    logprob_sum: float = 0.0
    finished: bool = False
    new_tokens: int = 0  # tokens sampled to make this candidate from its parent
    score: float = math.nan
    q: float = math.nan
    reward: float = math.nan

    @property
    def mean_logprob(self) -> float:
        return self.logprob_sum / len(self.token_ids) if self.token_ids else 0.0


@dataclass
class BeamSearchResult:
    best: list[Candidate]  # one per question
    tokens_generated: np.ndarray  # per question: every sampled token, discarded candidates included
    trace: list[list[Candidate]]  # the kept beams after each step (all questions)


ProposeFn = Callable[[list[Candidate], int], list[Candidate]]
ScoreFn = Callable[[list[Candidate]], np.ndarray]


def select_top(candidates: Sequence[Candidate], beam_size: int) -> list[Candidate]:
    """Per question, the ``beam_size`` highest-scoring candidates (ties: earlier first; NaN last).

    >>> cands = [Candidate(0, [], t, score=s) for t, s in (("a", 0.1), ("b", 0.9), ("c", 0.5))]
    >>> [c.text for c in select_top(cands, 2)]
    ['b', 'c']
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    by_question: dict[int, list[tuple[int, Candidate]]] = {}
    for i, c in enumerate(candidates):
        by_question.setdefault(c.question, []).append((i, c))
    kept = []
    for q in sorted(by_question):
        ranked = sorted(
            by_question[q], key=lambda ic: (-(ic[1].score if not math.isnan(ic[1].score) else -math.inf), ic[0])
        )
        kept += [c for _, c in ranked[:beam_size]]
    return kept


def _dedupe(candidates: Sequence[Candidate]) -> list[Candidate]:
    seen, out = set(), []
    for c in candidates:
        key = (c.question, tuple(c.token_ids))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def beam_search(
    n_questions: int, propose: ProposeFn, score: ScoreFn, beam_size: int = 4, max_steps: int = 8
) -> BeamSearchResult:
    """Step-level beam search over ``n_questions`` at once.

    Each step, ``propose(live_beams, step)`` returns the extensions of the unfinished beams (each a
    Candidate with its ``new_tokens``); identical prefixes are merged; ``score(candidates)`` scores
    all new candidates at once; finished beams stay in the pool with their score; the
    ``beam_size`` best per question are kept. The search ends when every kept beam is finished or
    after ``max_steps``; the answer is the best finished beam (the best beam if none finished).
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    beams = [Candidate(q, [], "") for q in range(n_questions)]
    tokens = np.zeros(n_questions, dtype=np.int64)
    trace = []
    for step in range(max_steps):
        live = [b for b in beams if not b.finished]
        if not live:
            break
        new = propose(live, step)
        for c in new:
            tokens[c.question] += c.new_tokens
        new = _dedupe(new)
        if new:
            scores = np.asarray(score(new), dtype=np.float64)
            if scores.shape != (len(new),):
                raise ValueError(f"score returned shape {scores.shape} for {len(new)} candidates")
            for c, s in zip(new, scores):
                c.score = float(s)
        beams = select_top([b for b in beams if b.finished] + new, beam_size)
        trace.append(list(beams))
    best = []
    for q in range(n_questions):
        mine = [b for b in beams if b.question == q]
        done = [b for b in mine if b.finished]
        pick = select_top(done or mine, 1)
        best.append(pick[0] if pick else Candidate(q, [], ""))
    return BeamSearchResult(best, tokens, trace)


class PolicyLineProposer:
    """Extends each beam by one line sampled from the policy (``samples_per_step`` per beam), at
    temperature ``temperature * temperature_decay ** step``."""

    def __init__(
        self,
        policy,
        tokenizer,
        prompts: Sequence[str],
        samples_per_step: int = 4,
        temperature: float = 0.7,
        temperature_decay: float = 1.0,
        max_line_tokens: int = 32,
        max_new_tokens: int = 96,
        seed: int = 0,
        batch_size: int = 512,
        line_end: str = "\n",
    ):
        self.policy, self.tokenizer = policy, tokenizer
        self.prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        self.samples_per_step, self.temperature, self.decay = samples_per_step, temperature, temperature_decay
        self.max_line_tokens, self.max_new_tokens, self.seed, self.batch_size = (
            max_line_tokens,
            max_new_tokens,
            seed,
            batch_size,
        )
        self.line_end = line_end

    def __call__(self, beams: list[Candidate], step: int) -> list[Candidate]:
        inputs = [self.prompt_ids[b.question] + b.token_ids for b in beams]
        room = min(self.max_line_tokens, max(1, self.max_new_tokens - min(len(b.token_ids) for b in beams)))
        lines = sample(
            self.policy,
            self.tokenizer,
            [],
            n=self.samples_per_step,
            temperature=self.temperature * self.decay**step,
            max_new_tokens=room,
            seed=self.seed * 7919 + step,
            batch_size=self.batch_size,
            stop_texts=(self.line_end,),
            prompt_token_ids=inputs,
        )
        out = []
        for b, samples in zip(beams, lines):
            # one sampling call serves beams of different lengths, so ``room`` fits the shortest:
            # each line is cut to its own beam's budget (the cut tokens were still generated: they count)
            keep = max(0, self.max_new_tokens - len(b.token_ids))
            for s in samples:
                ids = b.token_ids + s.token_ids[:keep]
                finished = (s.finished and len(s.token_ids) <= keep) or len(ids) >= self.max_new_tokens
                out.append(
                    Candidate(
                        b.question,
                        ids,
                        self.tokenizer.decode(ids, skip_special_tokens=True),
                        b.logprob_sum + sum(s.logprobs[:keep]),
                        finished,
                        s.num_tokens,
                    )
                )
        return out


class GoalScorer:
    """Scores candidates with ONE batched RM forward pass:
    ``(1 - conf_ratio) * Q + conf_ratio * mean logprob + reward_weight * reward``.

    Q is the cosine of the candidate's last RM hidden state to the goal. A finished candidate is
    read as in training (response + " " + EOS), an unfinished one as the bare prefix.
    """

    def __init__(
        self,
        rm: RewardModel,
        tokenizer,
        goal,
        prompts: Sequence[str],
        conf_ratio: float = 0.0,
        reward_weight: float = 0.0,
        max_len: int = 512,
    ):
        if not 0.0 <= conf_ratio <= 1.0:
            raise ValueError(f"conf_ratio must lie in [0, 1], got {conf_ratio}")
        self.rm, self.tokenizer = rm.eval(), tokenizer
        self.goal = goal if isinstance(goal, torch.Tensor) else check_goal_state(goal, rm.config.hidden_size)
        self.prompts, self.conf_ratio, self.reward_weight, self.max_len = (
            list(prompts),
            conf_ratio,
            reward_weight,
            max_len,
        )
        self.forward_passes = 0

    @torch.inference_mode()
    def __call__(self, candidates: list[Candidate]) -> np.ndarray:
        encoded = [
            encode_prompt_response(
                self.tokenizer, self.prompts[c.question], c.text, self.max_len, append_eos=c.finished
            )
            for c in candidates
        ]
        if any(e is None for e in encoded):
            raise ValueError(f"a candidate is longer than max_len={self.max_len}")
        ids, mask = left_pad([e.input_ids for e in encoded], self.tokenizer.pad_token_id)
        out = self.rm(ids, mask, torch.tensor([e.num_actions for e in encoded]))
        self.forward_passes += 1
        q = q_values(out.hidden[:, -1].float(), self.goal)
        reward = out.reward.float()
        lp = torch.tensor([c.mean_logprob for c in candidates])
        score = (1 - self.conf_ratio) * q + self.conf_ratio * lp + self.reward_weight * reward
        for c, qv, rv in zip(candidates, q.tolist(), reward.tolist()):
            c.q, c.reward = qv, rv
        return score.numpy()


def q_guided_decode(
    policy,
    rm: RewardModel,
    tokenizer,
    goal,
    questions: Sequence[str],
    cfg: DecodeConfig | None = None,
    template: str = "toymath",
    policy_tokenizer=None,
) -> tuple[list[dict], GoalScorer]:
    """Q-guided beam search on ``questions``; one row per question (question, generated_solution,
    tokens_generated, num_tokens, score, q, reward, mean_logprob, finished). ``cfg`` defaults to ``DecodeConfig()``."""
    cfg = DecodeConfig() if cfg is None else cfg
    goal_t = check_decoding_inputs(policy, rm, tokenizer, goal, policy_tokenizer)
    if goal_t is None:
        raise ValueError("q_guided_decode needs a goal state")
    prompts = [apply_template(template, q) for q in questions]
    propose = PolicyLineProposer(
        policy,
        tokenizer,
        prompts,
        cfg.samples_per_step,
        cfg.temperature,
        cfg.temperature_decay,
        cfg.max_line_tokens,
        cfg.max_new_tokens,
        cfg.seed,
    )
    scorer = GoalScorer(
        rm,
        tokenizer,
        goal_t,
        prompts,
        cfg.conf_ratio,
        cfg.reward_weight,
        max_len=cfg.max_new_tokens
        + 2
        + max((len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts), default=0),
    )
    result = beam_search(len(prompts), propose, scorer, cfg.beam_size, cfg.max_steps)
    rows = [
        {
            "question": q,
            "generated_solution": c.text,
            "tokens_generated": int(t),
            "num_tokens": len(c.token_ids),
            "score": c.score,
            "q": c.q,
            "reward": c.reward,
            "mean_logprob": c.mean_logprob,
            "finished": c.finished,
        }
        for q, c, t in zip(questions, result.best, result.tokens_generated)
    ]
    return rows, scorer
