"""Decoding with a goal-conditioned RM: Q-guided beam search, online pruning and steering.

Three uses of the Q-value ``Q(prefix) = cos(last RM hidden state of the prefix, goal state)``:

* **Q-guided beam search** (``q_guided_decode``): a step is one solution line, sampled from the
  policy up to ``"\\n"`` or EOS. Every candidate prefix of a step is scored in ONE batched RM forward
  pass, ``score = (1 - conf_ratio) * Q + conf_ratio * mean token logprob (+ reward_weight * reward)``,
  and the ``beam_size`` best per question survive. The search itself (``beam_search``) takes the
  proposal and scoring functions as arguments, so its selection logic is tested with stubs.
* **Online pruning** (``sample``/``pruning_comparison``): N samples per question are drawn token by
  token with a KV cache over the policy, while the RM follows with its own KV cache, one token per
  step, so Q is known at every response token exactly as the offline scorer defines it
  (``forward.iter_scored``: response + ``" "`` + EOS). A sample stops as soon as Q falls below the
  threshold, never before response token ``skip_first``.
* **Steering** (``steering_policy``, ``attribute_goal_state``, ``steering_summary``): a goal state
  built from responses that carry an attribute (ToyMath's verbose style) pulls the beam search toward it.

Sampling draws Gumbel noise for every row of a batch at every step, whether the row is still running
or not, so the noise a sample sees does not depend on which other samples were stopped: pruning with
threshold -1 (a cosine is never below -1) reproduces unpruned sampling exactly, and a kept sample of a
pruned run is the unpruned one (up to float effects of a smaller batch on near-ties).
Command line: ``goalrm decode {beam,sample}``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import AutoTokenizer, DynamicCache

from goalrm_core.evaluation import metrics

from goalrm_core.tasks.toymath import problems as toymath
from goalrm_core.data.encoding import encode_prompt_response, left_pad
from goalrm_core.data.io import load_npy, read_jsonl, write_jsonl
from goalrm_core.model.reward_model import RewardModel, load_reward_model, position_ids_from_mask
from goalrm_core.inference.goal_state import check_goal_state, q_values
from goalrm_core.inference.scoring import check_tokenizer_matches
from goalrm_core.model.templates import TEMPLATES, apply_template

SKIP_FIRST = 5  # the offline filter's default: Q of very short prefixes is noisy

# ----------------------------------------------------------------------------------------------
# Checks that run before any generation
# ----------------------------------------------------------------------------------------------


def _vocab_rows(model) -> int:
    return int(model.get_input_embeddings().weight.shape[0])


def check_decoding_inputs(policy, rm: RewardModel | None, tokenizer, goal=None, policy_tokenizer=None) -> torch.Tensor | None:
    """Fail before any token is generated when policy, RM, tokenizer and goal do not belong together.

    The policy and the RM must share the tokenizer (the RM reads the policy's token ids as they are
    produced); the goal state must have the RM's hidden size. Returns the goal as a (hidden,) tensor.
    """
    policy_vocab = _vocab_rows(policy)
    if len(tokenizer) > policy_vocab:
        raise ValueError(f"tokenizer has {len(tokenizer)} tokens but the policy's embedding table has {policy_vocab}: they do not belong together")
    if policy_tokenizer is not None and policy_tokenizer.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"the policy's tokenizer ({len(policy_tokenizer)} tokens) differs from the reward model's ({len(tokenizer)} tokens): "
                         "Q-guided decoding needs one shared tokenizer")
    if rm is None:
        return None
    check_tokenizer_matches(rm, tokenizer)
    rm_vocab = _vocab_rows(rm.backbone)
    if rm_vocab != policy_vocab:
        raise ValueError(f"the policy's vocabulary ({policy_vocab} embeddings) differs from the reward model's ({rm_vocab}): "
                         "they must share one tokenizer")
    if goal is None:
        return None
    return check_goal_state(goal if not isinstance(goal, torch.Tensor) else goal.detach().cpu().numpy(), rm.config.hidden_size)


def _token_id(tokenizer, text: str) -> int:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise ValueError(f"{text!r} must be a single token of the tokenizer, got ids {ids}")
    return ids[0]


# ----------------------------------------------------------------------------------------------
# Incremental forward passes with a KV cache
# ----------------------------------------------------------------------------------------------


class _KVStream:
    """One model run incrementally over a left-padded batch whose rows can be dropped.

    ``last`` holds, for the current rows, the policy's next-token logits (``lm=True``) or the
    backbone's last hidden state (``lm=False``). ``rows`` maps cache rows to batch rows.
    """

    def __init__(self, model, ids: torch.Tensor, mask: torch.Tensor, lm: bool):
        self.model, self.lm = model, lm
        self.rows = torch.arange(ids.shape[0])
        self.mask = mask
        self.pos = position_ids_from_mask(mask)[:, -1]
        self.cache = DynamicCache(config=model.config)
        self.last = self._forward(ids, position_ids_from_mask(mask))

    def _forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        extra = {"logits_to_keep": 1} if self.lm else {}
        out = self.model(input_ids=ids, attention_mask=self.mask, position_ids=positions, cache=self.cache, use_cache=True, **extra)
        return (out.logits if self.lm else out.last_hidden_state)[:, -1].float()

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        self.pos = self.pos + 1
        self.last = self._forward(tokens[:, None], self.pos[:, None])
        return self.last

    def keep(self, keep: torch.Tensor) -> None:
        """Keep the current rows where ``keep`` is True (in order)."""
        if bool(keep.all()):
            return
        idx = keep.nonzero().squeeze(1)
        if idx.numel():
            self.cache.batch_select_indices(idx)
        self.rows, self.mask, self.pos, self.last = self.rows[idx], self.mask[idx], self.pos[idx], self.last[idx]


# ----------------------------------------------------------------------------------------------
# Sampling, with online Q-values and pruning
# ----------------------------------------------------------------------------------------------


@dataclass
class Sample:
    """One sampled response. ``q_values`` follow the RM's view of the response (text + " " + EOS)."""

    token_ids: list[int]  # generated tokens, the stop token (EOS, or a stop text) included
    logprobs: list[float]  # untempered policy log-probability of each generated token
    text: str  # decoded response, special tokens dropped
    finished: bool  # ended with EOS
    stopped_at: int | None = None  # response token index where Q fell below the threshold
    q_values: list[float] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def pruned(self) -> bool:
        return self.stopped_at is not None

    @property
    def mean_logprob(self) -> float:
        return float(np.mean(self.logprobs)) if self.logprobs else math.nan


@dataclass
class _OnlineQ:
    rm: RewardModel
    goal: torch.Tensor
    threshold: float | None
    skip_first: int
    keep_last: bool
    space_id: int


def _gumbel(generator: torch.Generator, shape: tuple[int, int]) -> torch.Tensor:
    u = torch.rand(shape, generator=generator).clamp_(1e-10, 1.0 - 1e-7)
    return -torch.log(-torch.log(u))


def _prune_decision(q: torch.Tensor, positions: torch.Tensor, question: torch.Tensor, alive: dict[int, int], online: _OnlineQ) -> torch.Tensor:
    """Which of these rows stop now: Q below threshold at a position >= skip_first. With
    ``keep_last`` a question's last unstopped sample is spared (highest Q first), so it still votes."""
    stop = (positions >= online.skip_first) & (q < online.threshold)
    if not online.keep_last or not bool(stop.any()):
        return stop
    for qid in question[stop].unique().tolist():
        rows = ((question == qid) & stop).nonzero().squeeze(1)
        if alive[qid] - rows.numel() <= 0:
            spare = rows[torch.argmax(q[rows])]  # argmax takes the first of equal values
            stop[spare] = False
            rows = rows[rows != spare]
        alive[qid] -= rows.numel()
    return stop


@torch.inference_mode()
def _sample_batch(policy, prompt_ids: list[list[int]], question: list[int], *, temperature: float, max_new_tokens: int,
                  seed: int, stop_ids: set[int], eos_id: int, pad_id: int, online: _OnlineQ | None,
                  banned_ids: Sequence[int] = ()) -> list[Sample]:
    """The sampling loop for one batch (rows of one question are contiguous)."""
    n = len(prompt_ids)
    generator = torch.Generator().manual_seed(seed)
    ids, mask = left_pad(prompt_ids, pad_id)
    pol = _KVStream(policy, ids, mask, lm=True)
    rm = _KVStream(online.rm.backbone, ids, mask, lm=False) if online else None
    tokens: list[list[int]] = [[] for _ in range(n)]
    logprobs: list[list[float]] = [[] for _ in range(n)]
    qs: list[list[float]] = [[] for _ in range(n)]
    finished, stopped_at = [False] * n, [None] * n
    pending: dict[int, list[int]] = {}  # rows the policy is done with; tokens the RM still reads
    qids = torch.tensor(question)
    alive = {q: question.count(q) for q in set(question)}
    stop_tensor = torch.tensor(sorted(stop_ids))
    banned = torch.tensor(sorted(banned_ids), dtype=torch.long)
    vocab = pol.last.shape[-1]
    for _ in range(max_new_tokens + 2):
        if not pol.rows.numel() and (rm is None or not rm.rows.numel()):
            break
        noise = _gumbel(generator, (n, vocab)) if temperature > 0 else None  # every row, every step
        feed: dict[int, int] = {}
        done_now = torch.zeros(0, dtype=torch.bool)
        if pol.rows.numel():
            logits = pol.last
            allowed = logits.index_fill(-1, banned, -math.inf) if banned.numel() else logits
            choice = (allowed / temperature + noise[pol.rows]).argmax(-1) if temperature > 0 else allowed.argmax(-1)
            lp = logits.log_softmax(-1).gather(-1, choice[:, None]).squeeze(-1)
            for r, t, p in zip(pol.rows.tolist(), choice.tolist(), lp.tolist()):
                tokens[r].append(t)
                logprobs[r].append(p)
            done_now = torch.isin(choice, stop_tensor) | torch.tensor([len(tokens[r]) >= max_new_tokens for r in pol.rows.tolist()])
            for r, t, d in zip(pol.rows.tolist(), choice.tolist(), done_now.tolist()):
                finished[r] = t == eos_id
                if online is None:
                    continue
                # the RM reads the response as the offline scorer does: text + " " + EOS
                feed[r] = online.space_id if t == eos_id else t
                if d:
                    pending[r] = [eos_id] if t == eos_id else [online.space_id, eos_id]
        if rm is not None:
            for r in rm.rows.tolist():
                if r not in feed:
                    feed[r] = pending[r].pop(0)
            h = rm.step(torch.tensor([feed[r] for r in rm.rows.tolist()]))
            q = q_values(h, online.goal)
            positions = torch.tensor([len(qs[r]) for r in rm.rows.tolist()])
            for r, v in zip(rm.rows.tolist(), q.tolist()):
                qs[r].append(v)
            stop = torch.zeros_like(q, dtype=torch.bool)
            if online.threshold is not None:
                stop = _prune_decision(q, positions, qids[rm.rows], alive, online)
                for r in rm.rows[stop].tolist():
                    stopped_at[r] = len(qs[r]) - 1
            keep_rm = ~stop & torch.tensor([not (r in pending and not pending[r]) for r in rm.rows.tolist()])
            stopped_rows = set(rm.rows[stop].tolist())
            rm.keep(keep_rm)
        else:
            stopped_rows = set()
        if pol.rows.numel():
            keep_pol = ~done_now & torch.tensor([r not in stopped_rows for r in pol.rows.tolist()])
            next_tokens = choice[keep_pol]
            pol.keep(keep_pol)
            if pol.rows.numel():
                pol.step(next_tokens)
    return [Sample(tokens[r], logprobs[r], "", finished[r], stopped_at[r], qs[r]) for r in range(n)]


def sample(
    policy,
    tokenizer,
    prompts: Sequence[str],
    n: int = 1,
    temperature: float = 1.0,
    max_new_tokens: int = 96,
    seed: int = 0,
    batch_size: int = 256,
    stop_texts: Sequence[str] = (),
    rm: RewardModel | None = None,
    goal=None,
    prune_threshold: float | None = None,
    skip_first: int = SKIP_FIRST,
    keep_last: bool = True,
    progress: bool = False,
    desc: str = "sample",
    prompt_token_ids: Sequence[Sequence[int]] | None = None,
) -> list[list[Sample]]:
    """``n`` samples per prompt, token by token with a KV cache; deterministic given ``seed``.

    ``temperature`` 0 is greedy; special tokens other than EOS are never sampled (they would vanish
    from the decoded text, and the RM must read what the text says). Sampling stops at EOS, at any
    token of ``stop_texts`` (kept in the response) or after ``max_new_tokens``. With ``rm`` and ``goal`` the RM follows every sample
    with its own KV cache and records the Q-value at every response position (``Sample.q_values``,
    the offline ``cosine_sim``); with ``prune_threshold`` a sample stops at the first position
    ``>= skip_first`` whose Q is below it. ``keep_last`` spares the last unstopped sample of a
    question, the online stand-in for the offline filter's fallback to all generations.
    Batches hold whole questions, so ``batch_size`` is rounded down to a multiple of ``n``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if skip_first < 0:
        raise ValueError(f"skip_first must be >= 0, got {skip_first}")
    if prune_threshold is not None and (rm is None or goal is None):
        raise ValueError("prune_threshold needs both rm and goal")
    goal_t = check_decoding_inputs(policy, rm, tokenizer, goal)
    policy.eval()
    online = None
    if rm is not None and goal_t is not None:
        rm.eval()
        online = _OnlineQ(rm, goal_t, prune_threshold, skip_first, keep_last, _token_id(tokenizer, " "))
    eos = tokenizer.eos_token_id
    stop_ids = {eos} | {_token_id(tokenizer, s) for s in stop_texts}
    # special tokens other than EOS never appear in a response: the text would not re-tokenize to them
    banned = sorted(set(tokenizer.all_special_ids) - {eos})
    encoded = [list(p) for p in prompt_token_ids] if prompt_token_ids is not None else [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    flat = [(i, ids) for i, ids in enumerate(encoded) for _ in range(n)]
    per_batch = max(n, batch_size - batch_size % n)
    out: list[Sample] = []
    for start in tqdm(range(0, len(flat), per_batch), desc=desc, disable=not progress, mininterval=2):
        chunk = flat[start:start + per_batch]
        out += _sample_batch(policy, [ids for _, ids in chunk], [q for q, _ in chunk], temperature=temperature,
                             max_new_tokens=max_new_tokens, seed=seed * 1_000_003 + start, stop_ids=stop_ids,
                             eos_id=eos, pad_id=tokenizer.pad_token_id, online=online, banned_ids=banned)
    for s in out:
        s.text = tokenizer.decode(s.token_ids, skip_special_tokens=True)
    return [out[i * n:(i + 1) * n] for i in range(len(encoded))]


# ----------------------------------------------------------------------------------------------
# Step-level beam search
# ----------------------------------------------------------------------------------------------


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
        ranked = sorted(by_question[q], key=lambda ic: (-(ic[1].score if not math.isnan(ic[1].score) else -math.inf), ic[0]))
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


def beam_search(n_questions: int, propose: ProposeFn, score: ScoreFn, beam_size: int = 4, max_steps: int = 8) -> BeamSearchResult:
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

    def __init__(self, policy, tokenizer, prompts: Sequence[str], samples_per_step: int = 4, temperature: float = 0.7,
                 temperature_decay: float = 1.0, max_line_tokens: int = 32, max_new_tokens: int = 96, seed: int = 0,
                 batch_size: int = 512, line_end: str = "\n"):
        self.policy, self.tokenizer = policy, tokenizer
        self.prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        self.samples_per_step, self.temperature, self.decay = samples_per_step, temperature, temperature_decay
        self.max_line_tokens, self.max_new_tokens, self.seed, self.batch_size = max_line_tokens, max_new_tokens, seed, batch_size
        self.line_end = line_end

    def __call__(self, beams: list[Candidate], step: int) -> list[Candidate]:
        inputs = [self.prompt_ids[b.question] + b.token_ids for b in beams]
        room = min(self.max_line_tokens, max(1, self.max_new_tokens - min(len(b.token_ids) for b in beams)))
        lines = sample(self.policy, self.tokenizer, [], n=self.samples_per_step, temperature=self.temperature * self.decay ** step,
                       max_new_tokens=room, seed=self.seed * 7919 + step, batch_size=self.batch_size,
                       stop_texts=(self.line_end,), prompt_token_ids=inputs)
        out = []
        for b, samples in zip(beams, lines):
            # one sampling call serves beams of different lengths, so ``room`` fits the shortest:
            # each line is cut to its own beam's budget (the cut tokens were still generated: they count)
            keep = max(0, self.max_new_tokens - len(b.token_ids))
            for s in samples:
                ids = b.token_ids + s.token_ids[:keep]
                finished = (s.finished and len(s.token_ids) <= keep) or len(ids) >= self.max_new_tokens
                out.append(Candidate(b.question, ids, self.tokenizer.decode(ids, skip_special_tokens=True),
                                     b.logprob_sum + sum(s.logprobs[:keep]), finished, s.num_tokens))
        return out


class GoalScorer:
    """Scores candidates with ONE batched RM forward pass:
    ``(1 - conf_ratio) * Q + conf_ratio * mean logprob + reward_weight * reward``.

    Q is the cosine of the candidate's last RM hidden state to the goal. A finished candidate is
    read as in training (response + " " + EOS), an unfinished one as the bare prefix.
    """

    def __init__(self, rm: RewardModel, tokenizer, goal, prompts: Sequence[str], conf_ratio: float = 0.0,
                 reward_weight: float = 0.0, max_len: int = 512):
        if not 0.0 <= conf_ratio <= 1.0:
            raise ValueError(f"conf_ratio must lie in [0, 1], got {conf_ratio}")
        self.rm, self.tokenizer = rm.eval(), tokenizer
        self.goal = goal if isinstance(goal, torch.Tensor) else check_goal_state(goal, rm.config.hidden_size)
        self.prompts, self.conf_ratio, self.reward_weight, self.max_len = list(prompts), conf_ratio, reward_weight, max_len
        self.forward_passes = 0

    @torch.inference_mode()
    def __call__(self, candidates: list[Candidate]) -> np.ndarray:
        encoded = [encode_prompt_response(self.tokenizer, self.prompts[c.question], c.text, self.max_len, append_eos=c.finished)
                   for c in candidates]
        if any(e is None for e in encoded):
            raise ValueError(f"a candidate is longer than max_len={self.max_len}")
        ids, mask = left_pad([e.input_ids for e in encoded], self.tokenizer.pad_token_id)
        out = self.rm(ids, mask)
        self.forward_passes += 1
        q = q_values(out.hidden[:, -1].float(), self.goal)
        reward = out.reward.float()
        lp = torch.tensor([c.mean_logprob for c in candidates])
        score = (1 - self.conf_ratio) * q + self.conf_ratio * lp + self.reward_weight * reward
        for c, qv, rv in zip(candidates, q.tolist(), reward.tolist()):
            c.q, c.reward = qv, rv
        return score.numpy()


@dataclass
class DecodeConfig:
    """Settings of the Q-guided beam search."""

    beam_size: int = field(default=4, metadata={"help": "Beams kept per question after each step."})
    samples_per_step: int = field(default=4, metadata={"help": "Lines sampled from the policy per beam and step."})
    temperature: float = field(default=0.7, metadata={"help": "Sampling temperature of the first step."})
    temperature_decay: float = field(default=1.0, metadata={"help": "Temperature factor per step (temperature * decay**step)."})
    conf_ratio: float = field(default=0.0, metadata={"help": "Weight r of the policy's mean token logprob: (1-r)*Q + r*logprob."})
    reward_weight: float = field(default=0.0, metadata={"help": "Weight of the RM reward added to the score."})
    max_steps: int = field(default=8, metadata={"help": "Most lines per solution."})
    max_line_tokens: int = field(default=32, metadata={"help": "Most tokens per line."})
    max_new_tokens: int = field(default=96, metadata={"help": "Most tokens per solution."})
    seed: int = field(default=0, metadata={"help": "Sampling seed."})


def q_guided_decode(policy, rm: RewardModel, tokenizer, goal, questions: Sequence[str], cfg: DecodeConfig = DecodeConfig(),
                    template: str = "toymath", policy_tokenizer=None) -> tuple[list[dict], GoalScorer]:
    """Q-guided beam search on ``questions``; one row per question (question, generated_solution,
    tokens_generated, num_tokens, score, q, reward, mean_logprob, finished)."""
    goal_t = check_decoding_inputs(policy, rm, tokenizer, goal, policy_tokenizer)
    if goal_t is None:
        raise ValueError("q_guided_decode needs a goal state")
    prompts = [apply_template(template, q) for q in questions]
    propose = PolicyLineProposer(policy, tokenizer, prompts, cfg.samples_per_step, cfg.temperature, cfg.temperature_decay,
                                 cfg.max_line_tokens, cfg.max_new_tokens, cfg.seed)
    scorer = GoalScorer(rm, tokenizer, goal_t, prompts, cfg.conf_ratio, cfg.reward_weight, max_len=cfg.max_new_tokens + 2 + max(
        (len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts), default=0))
    result = beam_search(len(prompts), propose, scorer, cfg.beam_size, cfg.max_steps)
    rows = [{"question": q, "generated_solution": c.text, "tokens_generated": int(t), "num_tokens": len(c.token_ids),
             "score": c.score, "q": c.q, "reward": c.reward, "mean_logprob": c.mean_logprob, "finished": c.finished}
            for q, c, t in zip(questions, result.best, result.tokens_generated)]
    return rows, scorer


# ----------------------------------------------------------------------------------------------
# ToyMath bookkeeping: correctness, voting, budgets
# ----------------------------------------------------------------------------------------------


def judge(question: str, text: str, expected: int | None = None, modulus: int = 0) -> dict:
    """predicted_answer and is_correct of a ToyMath response (``first_error`` is None); ``modulus``
    as in ToyMathConfig (10 for digit chains)."""
    problem = toymath.problem_from_question(question, modulus)
    answer = toymath.parse_answer(text)
    return {"predicted_answer": answer, "is_correct": toymath.first_error(problem, text) is None
            and (expected is None or answer == expected)}


def sample_rows(questions: Sequence[str], samples: Sequence[Sequence[Sample]], modulus: int = 0) -> list[list[dict]]:
    """Per question, one row per sample; a stopped sample never votes (no answer, not correct)."""
    out = []
    for q, group in zip(questions, samples):
        rows = []
        for i, s in enumerate(group):
            verdict = {"predicted_answer": None, "is_correct": False} if s.pruned else judge(q, s.text, modulus=modulus)
            rows.append({"question": q, "sample_index": i, "generated_solution": s.text, **verdict, "num_generated_tokens": s.num_tokens,
                         "stopped_at": s.stopped_at, "finished": s.finished})
        out.append(rows)
    return out


def unique_questions(run_dir, bench: str, n: int) -> list[str]:
    """The first ``n`` distinct questions of a benchmark, in file order."""
    from goalrm_core.tasks.toymath.pipeline import read_benchmark

    return list(dict.fromkeys(r["question"] for r in read_benchmark(run_dir, bench)))[:n]


def _warm_up(policy, rm, tokenizer, goal) -> None:
    """One tiny run, so the first timed run does not pay for lazy initialisation."""
    sample(policy, tokenizer, ["1 +1\n"], n=2, max_new_tokens=8, rm=rm, goal=goal, prune_threshold=-1.0)


def pruning_comparison(policy, rm: RewardModel, tokenizer, goal, questions: Sequence[str], n: int = 8, threshold: float = 0.0,
                       temperature: float = 0.7, max_new_tokens: int = 96, seed: int = 0, skip_first: int = SKIP_FIRST,
                       keep_last: bool = True, batch_size: int = 256, template: str = "toymath", modulus: int = 0) -> tuple[dict, dict]:
    """Unpruned sampling vs online pruning on the same questions with the same seed.

    Returns deterministic metrics (tokens, majority-vote accuracy, counts) and wall times (seconds;
    the unpruned run uses the policy only, the pruned run pays for the RM as well).
    """
    check_decoding_inputs(policy, rm, tokenizer, goal)
    prompts = [apply_template(template, q) for q in questions]
    _warm_up(policy, rm, tokenizer, goal)
    kw = dict(n=n, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed, batch_size=batch_size)
    t0 = time.perf_counter()
    plain = sample(policy, tokenizer, prompts, **kw)
    t1 = time.perf_counter()
    pruned = sample(policy, tokenizer, prompts, rm=rm, goal=goal, prune_threshold=threshold, skip_first=skip_first, keep_last=keep_last, **kw)
    t2 = time.perf_counter()
    rows_plain, rows_pruned = sample_rows(questions, plain, modulus), sample_rows(questions, pruned, modulus)
    n_stopped = sum(s.pruned for g in pruned for s in g)
    out = {
        "threshold": threshold,
        "n_questions": len(questions),
        "n_samples": n,
        "tokens_generated": sum(s.num_tokens for g in pruned for s in g),
        "tokens_generated_unpruned": sum(s.num_tokens for g in plain for s in g),
        "accuracy": metrics.majority_vote_accuracy(rows_pruned).accuracy,
        "accuracy_unpruned": metrics.majority_vote_accuracy(rows_plain).accuracy,
        "samples_stopped_pct": 100.0 * n_stopped / max(1, len(questions) * n),
    }
    out["tokens_saved_pct"] = 100.0 * (1 - out["tokens_generated"] / max(1, out["tokens_generated_unpruned"]))
    return out, {"wall_s": t2 - t1, "wall_s_unpruned": t1 - t0}


def _groups_by_question(rows: Sequence[dict], questions: Sequence[str]) -> list[list[dict]]:
    by_q: dict[str, list[dict]] = {}
    for r in rows:
        by_q.setdefault(r["question"], []).append(r)
    missing = [q for q in questions if q not in by_q]
    if missing:
        raise ValueError(f"{len(missing)} questions have no scored generations, e.g. {missing[0]!r}")
    return [by_q[q] for q in questions]


def budget_sizes(n_max: int) -> list[int]:
    """1, 2, 4, ... up to ``n_max`` (``n_max`` itself included).

    >>> budget_sizes(12)
    [1, 2, 4, 8, 12]
    """
    sizes, k = [], 1
    while k < n_max:
        sizes.append(k)
        k *= 2
    return sizes + [n_max]


def sample_method_curves(greedy: Sequence[dict], scored: dict[str, Sequence[dict]], questions: Sequence[str]) -> pd.DataFrame:
    """Accuracy and mean generated tokens per question of greedy decoding and, for N = 1, 2, 4, ...,
    majority voting and best-of-N (by baseline reward, goal-conditioned reward, final Q-value),
    each over the first N samples of every question. ``scored`` maps "baseline" and
    "goal-conditioned" to the rows of ``eval/<rm>/<bench>/all/scored.jsonl``."""
    base = _groups_by_question(scored["baseline"], questions)
    goal = _groups_by_question(scored["goal-conditioned"], questions)
    g = [grp[0] for grp in _groups_by_question(greedy, questions)]
    records = [{"method": "greedy", "n": 1, "accuracy": float(np.mean([r["is_correct"] for r in g])),
                "tokens": float(np.mean([r["num_generated_tokens"] for r in g]))}]
    n_max = min(len(grp) for grp in base)
    for k in budget_sizes(n_max):
        b, q = [grp[:k] for grp in base], [grp[:k] for grp in goal]
        tokens = float(np.mean([sum(r["num_generated_tokens"] for r in grp) for grp in b]))
        accs = {"majority vote": metrics.majority_vote_accuracy(b).accuracy,
                "best-of-N baseline reward": metrics.best_of_n_accuracy(b, "reward").accuracy,
                "best-of-N goal-conditioned reward": metrics.best_of_n_accuracy(q, "reward").accuracy,
                "best-of-N final Q": metrics.best_of_n_accuracy(q, lambda r: r["cosine_sim"][-1]).accuracy}
        records += [{"method": m, "n": k, "accuracy": a, "tokens": tokens} for m, a in accs.items()]
    return pd.DataFrame(records)


def matched_budget(curves: pd.DataFrame, tokens: float) -> pd.DataFrame:
    """Per method, the row at the smallest N whose tokens reach ``tokens`` (else the largest N)."""
    picks = []
    for _, g in curves.groupby("method", sort=False):
        g = g.sort_values("n")
        reach = g[g["tokens"] >= tokens]
        picks.append(reach.iloc[0] if len(reach) else g.iloc[-1])
    return pd.DataFrame(picks).reset_index(drop=True)


def beam_rows_with_verdicts(rows: Sequence[dict], modulus: int = 0) -> list[dict]:
    return [dict(r, **judge(r["question"], r["generated_solution"], modulus=modulus)) for r in rows]


def methods_comparison(run_dir, bench: str, beam_rows: Sequence[dict], modulus: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Curves of the sample-based methods and the matched-budget table (Q-guided beam search
    included) on the questions the beam search decoded."""
    from goalrm_core.evaluation.tables import read_scored
    from goalrm_core.study.experiments import eval_dir

    questions = [r["question"] for r in beam_rows]
    scored = {rm: read_scored(eval_dir(run_dir, rm), bench, "all") for rm in ("baseline", "goal-conditioned")}
    greedy = read_scored(eval_dir(run_dir, "goal-conditioned"), bench, "greedy")
    curves = sample_method_curves(greedy, scored, questions)
    judged = beam_rows_with_verdicts(beam_rows, modulus)
    beam = {"method": "Q-guided beam search", "n": 1, "accuracy": float(np.mean([r["is_correct"] for r in judged])),
            "tokens": float(np.mean([r["tokens_generated"] for r in judged]))}
    curves = pd.concat([curves, pd.DataFrame([beam])], ignore_index=True).assign(benchmark=bench)
    return curves, matched_budget(curves, beam["tokens"])


def methods_metrics(tables: dict[str, pd.DataFrame]) -> dict:
    """``{bench: {method: {accuracy, tokens, n}}}`` with method names as metric keys."""
    return {bench: {_key(r["method"]): {"accuracy": float(r["accuracy"]), "tokens": float(r["tokens"]), "n": int(r["n"])}
                    for _, r in t.iterrows()} for bench, t in tables.items()}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower().replace("best-of-n", "best_of_n")).strip("_")


def accuracy_vs_tokens_figure(curves: pd.DataFrame, title: str = "Accuracy vs generated tokens per question"):
    """One panel per benchmark: a line per sample-based method over N, a point each for greedy and
    the Q-guided beam search (star); log-scaled token axis."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    from goalrm_core.study import plots  # noqa: F401  (the project's seaborn theme)

    benches = list(dict.fromkeys(curves["benchmark"]))
    fig, axes = plt.subplots(1, len(benches), figsize=(3.6 * len(benches), 3.6), sharey=True, squeeze=False)
    methods = list(dict.fromkeys(curves["method"]))
    colours = dict(zip(methods, plt.get_cmap("tab10").colors))
    for ax, bench in zip(axes[0], benches):
        data = curves[curves["benchmark"] == bench]
        for m in methods:
            g = data[data["method"] == m].sort_values("tokens")
            beam = "beam" in m
            ax.plot(g["tokens"], g["accuracy"], marker="*" if beam else "o", ms=13 if beam else 4,
                    ls="-" if len(g) > 1 else "none", c=colours[m], label=m)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(bench)
        ax.set_xlabel("generated tokens per question")
    axes[0][0].set_ylabel("accuracy")
    axes[0][0].set_ylim(0, 1.02)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


# ----------------------------------------------------------------------------------------------
# Steering toward an attribute: ToyMath's verbose style
# ----------------------------------------------------------------------------------------------

_VERBOSE_LINE = re.compile(r"^-?[0-9]+[+*-]-?[0-9]+=-?[0-9]+ [a-z]+\s*$")
_OPERATION_LINE = re.compile(r"^-?[0-9]+[+*-]-?[0-9]+=")


def is_verbose(text: str) -> bool:
    """True when the response has an operation line and every one carries an explanation word.

    >>> is_verbose("9*7=63 multiply\\n63-1=62 subtract\\n#62"), is_verbose("9*7=63\\n#63")
    (True, False)
    """
    ops = [line for line in text.split("\n") if _OPERATION_LINE.match(line)]
    return bool(ops) and all(_VERBOSE_LINE.match(line) for line in ops)


@dataclass
class SteerConfig:
    """The short style SFT that makes a copy of the policy produce both styles."""

    steps: int = field(default=300, metadata={"help": "SFT steps on the terse/verbose mix."})
    batch_size: int = field(default=32, metadata={"help": "Sequences per step."})
    learning_rate: float = field(default=1e-3, metadata={"help": "Peak AdamW learning rate."})
    n_problems: int = field(default=2000, metadata={"help": "Training problems in the mix (never benchmark questions)."})
    verbose_fraction: float = field(default=0.5, metadata={"help": "Share of verbose solutions in the mix."})
    seed: int = field(default=0, metadata={"help": "Data and order seed."})


def steering_dir(run_dir) -> Path:
    return Path(run_dir) / "decoding" / "steer_policy"


def steering_policy(run_dir, train_cfg: toymath.ToyMathConfig, cfg: SteerConfig = SteerConfig(), progress: bool = False):
    """A copy of ``data/policy`` fine-tuned on a terse/verbose mix, cached in ``decoding/steer_policy``
    (reused while its settings are unchanged). Returns (model, tokenizer, sft history)."""
    from transformers import LlamaForCausalLM

    from goalrm_core.data.io import atomic_write_json
    from goalrm_core.tasks.toymath.policy import PolicyConfig, train_sft
    from goalrm_core.tasks.toymath.pipeline import TEMPLATE, load_policy, training_problems

    out = steering_dir(run_dir)
    settings = {"steer": asdict(cfg), "toymath": asdict(train_cfg)}
    meta = out / "steer.json"
    if meta.exists() and json.loads(meta.read_text()).get("settings") == settings:
        history = json.loads(meta.read_text())["history"]
    else:
        model, tokenizer = load_policy(run_dir)
        problems = training_problems(run_dir, train_cfg, cfg.n_problems, cfg.seed + 7)
        rng = random.Random(cfg.seed)
        examples = [(apply_template(TEMPLATE, p.question), p.solution("verbose" if rng.random() < cfg.verbose_fraction else "terse"))
                    for p in problems]
        sft = PolicyConfig(steps=cfg.steps, batch_size=cfg.batch_size, learning_rate=cfg.learning_rate,
                           warmup_steps=max(1, cfg.steps // 10), seed=cfg.seed)
        history = train_sft(model, tokenizer, examples, sft, progress=progress)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        atomic_write_json(meta, {"settings": settings, "history": history})
    return LlamaForCausalLM.from_pretrained(out).eval(), AutoTokenizer.from_pretrained(out), history


def attribute_goal_state(rm: RewardModel, tokenizer, run_dir, train_cfg: toymath.ToyMathConfig, n: int = 200, seed: int = 0,
                         style: str = "verbose") -> np.ndarray:
    """(1, hidden) goal: the mean last-token RM state of ``n`` correct solutions written in ``style``
    (training problems, never benchmark questions)."""
    from goalrm_core.inference.goal_state import goal_state
    from goalrm_core.tasks.toymath.pipeline import TEMPLATE, training_problems

    problems = training_problems(run_dir, train_cfg, n, seed + 11)
    return goal_state(rm, tokenizer, [apply_template(TEMPLATE, p.question) for p in problems], [p.solution(style) for p in problems],
                      max_len=512, batch_size=64)


def steering_summary(guided: Sequence[dict], unguided: Sequence[dict], modulus: int = 0) -> dict:
    """Attribute rate and accuracy of steered vs unguided decoding (rows with generated_solution)."""
    def rates(rows):
        judged = [judge(r["question"], r["generated_solution"], modulus=modulus) for r in rows]
        return (float(np.mean([is_verbose(r["generated_solution"]) for r in rows])),
                float(np.mean([j["is_correct"] for j in judged])))

    (attr, acc), (attr_u, acc_u) = rates(guided), rates(unguided)
    return {"attribute_rate": attr, "attribute_rate_unguided": attr_u, "accuracy": acc, "accuracy_unguided": acc_u,
            "n_questions": len(guided)}


def steering_examples(guided: Sequence[dict], unguided: Sequence[dict], k: int = 4) -> pd.DataFrame:
    return pd.DataFrame({"question": [r["question"] for r in guided[:k]],
                         "steered": [r["generated_solution"] for r in guided[:k]],
                         "unguided": [r["generated_solution"] for r in unguided[:k]]})


def samples_as_rows(questions: Sequence[str], samples: Sequence[Sequence[Sample]]) -> list[dict]:
    """The first sample of each question as a row (question, generated_solution, tokens_generated)."""
    return [{"question": q, "generated_solution": g[0].text, "tokens_generated": g[0].num_tokens} for q, g in zip(questions, samples)]


# ----------------------------------------------------------------------------------------------
# The notebook's experiments, one call each
# ----------------------------------------------------------------------------------------------


def compare_methods(run_dir, policy, rm: RewardModel, tokenizer, goal, benchmarks: Sequence[str], n_questions: int,
                    cfg: DecodeConfig = DecodeConfig(), policy_tokenizer=None, progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Q-guided beam search on the first ``n_questions`` of each benchmark, against greedy, majority
    voting and best-of-N over the scored samples of notebook 04. Returns the accuracy-vs-tokens
    curves, the matched-budget table (one row per benchmark and method) and the beam rows."""
    from goalrm_core.tasks.toymath.pipeline import task_config

    check_decoding_inputs(policy, rm, tokenizer, goal, policy_tokenizer)
    modulus = task_config(run_dir).modulus  # read once, not per benchmark
    curves, tables, beams = [], [], {}
    for bench in tqdm(benchmarks, desc="beam search", disable=not progress):
        beams[bench], _ = q_guided_decode(policy, rm, tokenizer, goal, unique_questions(run_dir, bench, n_questions), cfg)
        c, t = methods_comparison(run_dir, bench, beams[bench], modulus)
        curves.append(c)
        tables.append(t.assign(benchmark=bench))
    matched = pd.concat(tables, ignore_index=True)
    matched.attrs["n_questions"] = min(len(rows) for rows in beams.values())
    return pd.concat(curves, ignore_index=True), matched, beams


def matched_table(matched: pd.DataFrame) -> pd.DataFrame:
    """Methods as rows, benchmarks as columns, cells ``accuracy (tokens per question, N)``."""
    cells = matched.assign(cell=[f"{r.accuracy:.2f} ({r.tokens:.0f} tok, N={r.n})" for r in matched.itertuples()])
    return cells.pivot(index="method", columns="benchmark", values="cell").reindex(list(dict.fromkeys(matched["method"])))


def methods_reading(matched: pd.DataFrame) -> str:
    """A plain-words summary generated from the numbers, so it cannot drift from them."""
    lines = []
    for bench, g in matched.groupby("benchmark", sort=False):
        g = g.set_index("method")
        beam = g.loc["Q-guided beam search"]
        others = g.drop(index="Q-guided beam search")
        best = others["accuracy"].idxmax()
        verdict = "above" if beam["accuracy"] > others["accuracy"].max() else "below" if beam["accuracy"] < others["accuracy"].max() else "level with"
        lines.append(f"On {bench}, Q-guided beam search reaches {beam['accuracy']:.2f} with {beam['tokens']:.0f} generated tokens per question, "
                     f"{verdict} the best other method ({best}: {others.loc[best, 'accuracy']:.2f} at {others.loc[best, 'tokens']:.0f} tokens).")
    n = int(matched.attrs.get("n_questions", 0))
    if n:
        lines.append(f"Each accuracy is over {n} questions: a difference of one question is {1 / n:.3f}.")
    return " ".join(lines)


def simulate_pruning(q_values: Sequence[Sequence[float]], threshold: float, skip_first: int = SKIP_FIRST, keep_last: bool = True) -> list[int | None]:
    """Where online pruning would stop each sample of ONE question, from its per-position Q-values
    (``Sample.q_values`` or a scored row's ``cosine_sim``: text + " " + EOS).

    The samples advance in lockstep, as in ``sample``: at position t every sample still being read
    whose Q is below ``threshold`` (t >= ``skip_first``) stops, except that with ``keep_last`` the
    question's last unstopped sample is spared (highest Q, then the earlier sample). Unlike the
    offline filter's fallback (vote with all generations when all are dropped), this rule can be run
    while generating, so it is the one to tune a threshold for.

    >>> simulate_pruning([[0.9, 0.1, 0.1], [0.9, 0.2, 0.0], [0.5, 0.1]], threshold=0.3, skip_first=1)
    [1, None, 1]
    >>> simulate_pruning([[0.9, 0.1, 0.1], [0.9, 0.2, 0.0], [0.5, 0.1]], threshold=0.3, skip_first=1, keep_last=False)
    [1, 1, 1]
    """
    stopped: list[int | None] = [None] * len(q_values)
    alive = len(q_values)
    for t in range(skip_first, max((len(q) for q in q_values), default=0)):
        below = [i for i, q in enumerate(q_values) if stopped[i] is None and t < len(q) and q[t] < threshold]
        if keep_last and below and alive - len(below) <= 0:
            below.remove(max(below, key=lambda i: (q_values[i][t], -i)))
        for i in below:
            stopped[i] = t
        alive -= len(below)
    return stopped


def simulated_pruning_outcome(groups: Sequence[Sequence[dict]], threshold: float, skip_first: int = SKIP_FIRST, keep_last: bool = True) -> dict:
    """Majority-vote accuracy and generated tokens of online pruning replayed on scored samples
    (rows with cosine_sim, num_generated_tokens, is_correct, predicted_answer)."""
    voted, tokens = [], 0
    for group in groups:
        stops = simulate_pruning([r["cosine_sim"] for r in group], threshold, skip_first, keep_last)
        voted.append([r if k is None else dict(r, is_correct=False, predicted_answer=None) for r, k in zip(group, stops)])
        tokens += sum(r["num_generated_tokens"] if k is None else min(k + 1, r["num_generated_tokens"]) for r, k in zip(group, stops))
    acc = metrics.majority_vote_accuracy(voted)
    return {"threshold": float(threshold), "n_correct": acc.n_correct, "accuracy": acc.accuracy, "tokens": tokens}


def choose_online_threshold(groups: Sequence[Sequence[dict]], candidates=metrics.DEFAULT_FILTER_THRESHOLDS, skip_first: int = SKIP_FIRST,
                            keep_last: bool = True) -> tuple[float, pd.DataFrame]:
    """The threshold with the best replayed majority-vote accuracy, ties broken by fewer generated
    tokens, then by the lower threshold. Returns it and one row per candidate."""
    table = pd.DataFrame([simulated_pruning_outcome(groups, float(t), skip_first, keep_last) for t in candidates])
    best = table.sort_values(["n_correct", "tokens", "threshold"], ascending=[False, True, True], kind="stable").index[0]
    return float(table.loc[best, "threshold"]), table.assign(chosen=table.index == best)


def tuned_prune_threshold(run_dir, bench: str, exclude: Sequence[str], skip_first: int = SKIP_FIRST, rm: str = "goal-conditioned") -> float | None:
    """The online-pruning threshold chosen (``choose_online_threshold``) on the scored samples of the
    benchmark questions NOT in ``exclude``; None when no such question is left."""
    from goalrm_core.evaluation.tables import group_by_question, read_scored
    from goalrm_core.study.experiments import eval_dir

    held = set(exclude)
    groups = [g for g in group_by_question(read_scored(eval_dir(run_dir, rm), bench, "all")) if g[0]["question"] not in held]
    candidates = np.r_[-1.0, metrics.DEFAULT_FILTER_THRESHOLDS]  # -1: no pruning, when every threshold costs accuracy
    return choose_online_threshold(groups, candidates, skip_first=skip_first)[0] if groups else None


def pruning_experiment(run_dir, policy, rm: RewardModel, tokenizer, goal, benchmarks: Sequence[str], n_questions: int, n_samples: int = 8,
                       threshold: float = 0.0, temperature: float = 0.7, max_new_tokens: int = 96, seed: int = 0,
                       skip_first: int = SKIP_FIRST, tune: bool = False, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """``pruning_comparison`` on each benchmark: a table of the deterministic numbers, and the wall
    times. With ``tune`` each benchmark's threshold is chosen by replaying the online rule on the
    scored samples of its other questions (``tuned_prune_threshold``), falling back to
    ``threshold`` when none is left."""
    from goalrm_core.tasks.toymath.pipeline import task_config

    modulus = task_config(run_dir).modulus
    rows, timings = {}, {}
    for bench in tqdm(benchmarks, desc="pruning", disable=not progress):
        questions = unique_questions(run_dir, bench, n_questions)
        tuned = tuned_prune_threshold(run_dir, bench, questions, skip_first) if tune else None
        rows[bench], timings[bench] = pruning_comparison(policy, rm, tokenizer, goal, questions, n_samples, threshold if tuned is None else tuned,
                                                         temperature, max_new_tokens, seed, skip_first, modulus=modulus)
    return pd.DataFrame.from_dict(rows, orient="index"), timings


def pruning_view(table: pd.DataFrame, timings: dict) -> pd.DataFrame:
    """The pruning table with its wall times, for reading (wall times stay out of the metrics)."""
    cols = ["threshold", "tokens_generated", "tokens_generated_unpruned", "tokens_saved_pct", "samples_stopped_pct", "accuracy", "accuracy_unpruned"]
    return table[cols].join(pd.DataFrame.from_dict(timings, orient="index"))


def steering_experiment(run_dir, steer_policy, rm: RewardModel, tokenizer, train_cfg: toymath.ToyMathConfig, n_questions: int,
                        cfg: DecodeConfig = DecodeConfig(), n_goal: int = 200, bench: str = "toy-id",
                        control_goal=None) -> tuple[dict, list[dict], list[dict]]:
    """Steer toward the verbose style: goal from the RM's last-token states of verbose correct
    solutions, Q-guided beam search toward it, against one unguided sample per question from the
    same (style-mixed) policy at the same temperature and seed. With ``control_goal`` (the ordinary
    correctness goal) the same search runs toward it too, so the style effect of the search itself
    (e.g. the log-probability term favouring the predictable explanation words) is not credited to
    the verbose goal: ``attribute_rate_correctness_goal`` and ``accuracy_correctness_goal``."""
    check_decoding_inputs(steer_policy, rm, tokenizer, control_goal)
    goal = attribute_goal_state(rm, tokenizer, run_dir, train_cfg, n_goal, cfg.seed, style="verbose")
    separation = style_separation_auroc(rm, tokenizer, run_dir, train_cfg, goal, n_goal, cfg.seed)
    questions = unique_questions(run_dir, bench, n_questions)
    guided, _ = q_guided_decode(steer_policy, rm, tokenizer, goal, questions, cfg)
    prompts = [apply_template("toymath", q) for q in questions]
    unguided = samples_as_rows(questions, sample(steer_policy, tokenizer, prompts, n=1, temperature=cfg.temperature,
                                                 max_new_tokens=cfg.max_new_tokens, seed=cfg.seed))
    summary = steering_summary(guided, unguided, train_cfg.modulus) | {"goal_separation_auroc": separation}
    if control_goal is not None:
        control, _ = q_guided_decode(steer_policy, rm, tokenizer, control_goal, questions, cfg)
        rates = steering_summary(control, unguided, train_cfg.modulus)
        summary |= {"attribute_rate_correctness_goal": rates["attribute_rate"], "accuracy_correctness_goal": rates["accuracy"]}
    return summary, guided, unguided


def style_separation_auroc(rm: RewardModel, tokenizer, run_dir, train_cfg: toymath.ToyMathConfig, goal, n: int = 200, seed: int = 0) -> float:
    """Can the goal steer at all? AUROC of the final Q toward ``goal`` for telling the verbose from the
    terse reference solution of the same ``n`` training problems (other problems than the goal's).
    0.5: the cosine to this goal does not see the style, so the beam search cannot select for it."""
    from goalrm_core.inference.goal_state import last_token_states
    from goalrm_core.tasks.toymath.pipeline import TEMPLATE, training_problems

    problems = training_problems(run_dir, train_cfg, n, seed + 13)
    rows = [{"question": p.question, "generated_solution": p.solution(style)} for style in ("verbose", "terse") for p in problems]
    q = q_values(last_token_states(rm, tokenizer, rows, TEMPLATE, max_len=512), goal).numpy()
    return metrics.bootstrap_auroc(q, [1] * len(problems) + [0] * len(problems), n_boot=0).auroc


def decoding_metrics(matched: pd.DataFrame, pruning: pd.DataFrame, steering: dict) -> dict:
    """The ``decoding`` section of metrics.json (deterministic numbers only; wall times go to timings)."""
    methods = methods_metrics({b: g for b, g in matched.groupby("benchmark", sort=False)})
    keys = ("threshold", "tokens_generated", "tokens_generated_unpruned", "accuracy", "accuracy_unpruned", "samples_stopped_pct", "tokens_saved_pct")
    prune = {bench: {k: float(row[k]) for k in keys} for bench, row in pruning.iterrows()}
    return {"methods": methods, "pruning": prune, "steering": dict(steering)}


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="goalrm decode", description="Q-guided beam search, or sampling with online Q-pruning.")
    p.add_argument("mode", choices=("beam", "sample"), help="beam: Q-guided beam search; sample: N samples, pruned online by Q.")
    p.add_argument("--policy_path", required=True, help="Causal LM (HF layout) that generates.")
    p.add_argument("--reward_model_path", required=True, help="RM saved by goalrm train-rm (shares the policy's tokenizer).")
    p.add_argument("--goal_state_path", required=True, help="goal_state.npy from goalrm get-representation.")
    p.add_argument("--questions_path", required=True, help="jsonl with a 'question' field per row.")
    p.add_argument("--save_path", required=True, help="Output jsonl.")
    p.add_argument("--template", default="toymath", choices=tuple(TEMPLATES), help="Prompt template used in training.")
    p.add_argument("--max_questions", type=int, default=0, help="Decode at most this many questions (0 = all).")
    p.add_argument("--modulus", type=int, default=0, help="toymath: 10 for digit chains (results mod 10), 0 for exact results.")
    p.add_argument("--beam_size", type=int, default=4)
    p.add_argument("--samples_per_step", type=int, default=4)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--temperature_decay", type=float, default=1.0)
    p.add_argument("--conf_ratio", type=float, default=0.0, help="r in (1-r)*Q + r*mean logprob.")
    p.add_argument("--reward_weight", type=float, default=0.0)
    p.add_argument("--max_steps", type=int, default=8)
    p.add_argument("--max_line_tokens", type=int, default=32)
    p.add_argument("--max_new_tokens", type=int, default=96)
    p.add_argument("--n_samples", type=int, default=8, help="sample mode: samples per question.")
    p.add_argument("--prune_threshold", type=float, default=None, help="sample mode: stop a sample when Q falls below this.")
    p.add_argument("--skip_first", type=int, default=SKIP_FIRST, help="sample mode: never stop before this response token.")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from transformers import AutoModelForCausalLM

    rm = load_reward_model(args.reward_model_path)
    tokenizer = AutoTokenizer.from_pretrained(args.reward_model_path)
    policy = AutoModelForCausalLM.from_pretrained(args.policy_path).eval()
    goal = check_decoding_inputs(policy, rm, tokenizer, load_npy(args.goal_state_path), AutoTokenizer.from_pretrained(args.policy_path))
    rows = read_jsonl(args.questions_path, required=("question",))
    rows = rows[:args.max_questions] if args.max_questions else rows
    questions = [r["question"] for r in rows]
    if args.mode == "beam":
        cfg = DecodeConfig(args.beam_size, args.samples_per_step, args.temperature, args.temperature_decay, args.conf_ratio,
                           args.reward_weight, args.max_steps, args.max_line_tokens, args.max_new_tokens, args.seed)
        out, _ = q_guided_decode(policy, rm, tokenizer, goal, questions, cfg, args.template)
    else:
        prompts = [apply_template(args.template, q) for q in questions]
        samples = sample(policy, tokenizer, prompts, n=args.n_samples, temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                         seed=args.seed, rm=rm, goal=goal, prune_threshold=args.prune_threshold, skip_first=args.skip_first, progress=True)
        out = [{"question": q, "sample_index": i, "generated_solution": s.text, "num_generated_tokens": s.num_tokens,
                "stopped_at": s.stopped_at, "finished": s.finished, "cosine_sim": s.q_values}
               for q, group in zip(questions, samples) for i, s in enumerate(group)]
    if args.template == "toymath":
        for r, src in zip(out, [r for r in rows for _ in range(1 if args.mode == "beam" else args.n_samples)]):
            if r.get("stopped_at") is None:
                r.update(judge(r["question"], r["generated_solution"], src.get("expected_answer"), args.modulus))
    count = write_jsonl(args.save_path, out)
    print(f"{count} rows -> {args.save_path}; tokens generated: {sum(r.get('tokens_generated', r.get('num_generated_tokens', 0)) for r in out)}")
    return 0
