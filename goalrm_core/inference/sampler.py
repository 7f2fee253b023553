"""Sampling from the policy: one module, two entry points that share their pieces.

* ``sample`` draws token by token with a KV cache and Gumbel-max noise from its own generator. With
  an RM and a goal state, the RM follows every sample with its own KV cache and records the Q-value
  at every response position, exactly as the offline scorer defines it (``forward.iter_scored``:
  response + " " + EOS), reading the policy's tokens a few steps at a time in one forward
  (``rm_every``); with a ``pruning.PruneConfig`` a sample stops at the first position where its Q
  falls below the threshold. The beam search's line proposals, online pruning, steering and ``goalrm decode``
  use it.
* ``sample_completions`` samples with Hugging Face ``generate`` (multinomial draws from the global
  torch RNG). The data stage drew the policy's benchmark generations and its preference pairs with
  it, and every later number (scores, AUROCs, filters) rests on those draws. ``sample`` cannot
  reproduce them: it uses other random numbers, never draws a special token other than EOS, and drops
  finished rows from its batch (``generate`` keeps them), which changes float rounding. So both stay,
  and the data stage keeps its draws.

Shared by both: the result type ``Sample``, the prompt encoding, the per-batch seed
(``seed * 1_000_003 + start``, so a batch's draws depend on its seed and position only) and the
token log-probabilities under the untempered policy, which the evaluation's reference scorers read.

``sample`` draws noise for every row of a batch at every step, whether the row is still running or
not, so the noise a sample sees does not depend on which other samples were stopped: pruning with
threshold -1 (a Q-value is never below -1) reproduces unpruned sampling exactly (it runs as pruning
off, without the RM), and a kept sample of a pruned run is the unpruned one (up to float effects of a
smaller batch on near-ties).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm
from transformers import DynamicCache

from goalrm_core.inference.goal_state import check_goal_state, q_values
from goalrm_core.inference.pruning import PruneConfig, stop_now
from goalrm_core.model.encoding import left_pad
from goalrm_core.model.reward_model import RewardModel, check_tokenizer_matches, position_ids_from_mask

# ----------------------------------------------------------------------------------------------
# Shared pieces
# ----------------------------------------------------------------------------------------------


@dataclass
class Sample:
    """One sampled response. ``q_values`` follow the RM's view of the response (text + " " + EOS)."""

    token_ids: list[int]  # generated tokens, the stop token (EOS, or a stop text) included
    logprobs: list[float]  # untempered policy log-probability of each generated token
    text: str  # decoded response, special tokens dropped
    finished: bool  # ended with EOS
    stopped_at: int | None = None  # response position where Q fell below the pruning threshold
    q_values: list[float] = field(default_factory=list)
    overrun: int = (
        0  # tokens the policy drew past ``stopped_at`` before the RM read them (``sample``'s ``rm_every``), then cut
    )

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def pruned(self) -> bool:
        return self.stopped_at is not None

    @property
    def mean_logprob(self) -> float:
        return torch.tensor(self.logprobs, dtype=torch.float32).mean().item() if self.logprobs else math.nan

    @property
    def min_logprob(self) -> float:
        return torch.tensor(self.logprobs, dtype=torch.float32).min().item() if self.logprobs else math.nan


def _encode(tokenizer, prompts: Sequence[str]) -> list[list[int]]:
    return [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]


def _seeded_batches(n_rows: int, batch_size: int, seed: int, desc: str, progress: bool) -> Iterator[tuple[int, int]]:
    """``(start, seed of the batch)`` for each batch of ``batch_size`` rows."""
    for start in tqdm(range(0, n_rows, batch_size), desc=desc, disable=not progress, mininterval=2):
        yield start, seed * 1_000_003 + start


def _token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Log-probability of each chosen token under the untempered logits (float32)."""
    return logits.float().log_softmax(-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def _per_prompt(flat: list[Sample], n: int) -> list[list[Sample]]:
    return [flat[i : i + n] for i in range(0, len(flat), n)]


# ----------------------------------------------------------------------------------------------
# Checks that run before any generation
# ----------------------------------------------------------------------------------------------


def _vocab_rows(model) -> int:
    return int(model.get_input_embeddings().weight.shape[0])


def check_decoding_inputs(
    policy, rm: RewardModel | None, tokenizer, goal=None, policy_tokenizer=None
) -> torch.Tensor | None:
    """Fail before any token is generated when policy, RM, tokenizer and goal do not belong together.

    The policy and the RM must share the tokenizer (the RM reads the policy's token ids as they are
    produced); the goal state must have the RM's hidden size. Returns the goal as a (hidden,) tensor.
    """
    policy_vocab = _vocab_rows(policy)
    if len(tokenizer) > policy_vocab:
        raise ValueError(
            f"tokenizer has {len(tokenizer)} tokens but the policy's embedding table has {policy_vocab}: they do not "
            "belong together"
        )
    if policy_tokenizer is not None and policy_tokenizer.get_vocab() != tokenizer.get_vocab():
        raise ValueError(
            f"the policy's tokenizer ({len(policy_tokenizer)} tokens) differs from the reward model's "
            f"({len(tokenizer)} tokens): "
            "Q-guided decoding needs one shared tokenizer"
        )
    if rm is None:
        return None
    check_tokenizer_matches(rm, tokenizer)
    rm_vocab = _vocab_rows(rm.backbone)
    if rm_vocab != policy_vocab:
        raise ValueError(
            f"the policy's vocabulary ({policy_vocab} embeddings) differs from the reward model's ({rm_vocab}): "
            "they must share one tokenizer"
        )
    if goal is None:
        return None
    return check_goal_state(
        goal if not isinstance(goal, torch.Tensor) else goal.detach().cpu().numpy(), rm.config.hidden_size
    )


def _token_id(tokenizer, text: str) -> int:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise ValueError(f"{text!r} must be a single token of the tokenizer, got ids {ids}")
    return ids[0]


# ----------------------------------------------------------------------------------------------
# The KV-cache sampler, with online Q-values and pruning
# ----------------------------------------------------------------------------------------------

#: How many of the policy's tokens the RM reads in one forward while it follows a sample
#: (``sample``'s ``rm_every``; benchmarks/ measures the choice).
RM_EVERY = 8


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
        out = self.model(
            input_ids=ids, attention_mask=self.mask, position_ids=positions, cache=self.cache, use_cache=True, **extra
        )
        return (out.logits if self.lm else out.last_hidden_state)[:, -1].float()

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        self.pos = self.pos + 1
        self.last = self._forward(tokens[:, None], self.pos[:, None])
        return self.last

    def extend(self, tokens: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """Read a (rows, width) chunk in one forward; ``real`` marks each row's tokens (a row's real
        tokens come first, padding after). Returns the backbone's hidden state at every column
        (``lm=False``); padded columns are masked out of the cache for every later token."""
        real = real.to(self.mask.dtype)
        positions = self.pos[:, None] + real.cumsum(1)
        self.mask = torch.cat([self.mask, real], dim=1)
        self.pos = positions[:, -1]
        out = self.model(
            input_ids=tokens, attention_mask=self.mask, position_ids=positions, cache=self.cache, use_cache=True
        )
        return out.last_hidden_state.float()

    def keep(self, keep: torch.Tensor) -> None:
        """Keep the current rows where ``keep`` is True (in order)."""
        if bool(keep.all()):
            return
        idx = keep.nonzero().squeeze(1)
        if idx.numel():
            self.cache.batch_select_indices(idx)
        self.rows, self.mask, self.pos, self.last = self.rows[idx], self.mask[idx], self.pos[idx], self.last[idx]


@dataclass
class _OnlineQ:  # what the RM needs to follow a batch
    rm: RewardModel
    goal: torch.Tensor
    prune: PruneConfig | None
    space_id: int
    eos_id: int


def _gumbel(generator: torch.Generator, shape: tuple[int, int]) -> torch.Tensor:
    u = torch.rand(shape, generator=generator).clamp_(1e-10, 1.0 - 1e-7)
    return -torch.log(-torch.log(u))


@torch.inference_mode()
def _sample_batch(
    policy,
    prompt_ids: list[list[int]],
    question: list[int],
    *,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    stop_ids: set[int],
    eos_id: int,
    pad_id: int,
    online: _OnlineQ | None,
    banned_ids: Sequence[int] = (),
    rm_every: int = 1,
) -> list[Sample]:
    """The sampling loop for one batch (rows of one question are contiguous).

    The policy draws one token per step for every running row. The RM (``online``) is fed the same
    tokens, one per row per step, but reads them ``rm_every`` steps at a time in one forward
    (``_RMChunk``); the pruning rule then runs over the chunk's positions in order, exactly as it
    would have run step by step, and a row it stops inside the chunk is cut back to its stop.
    """
    n = len(prompt_ids)
    generator = torch.Generator().manual_seed(seed)
    ids, mask = left_pad(prompt_ids, pad_id)
    pol = _KVStream(policy, ids, mask, lm=True)
    reader = _RMChunk(_KVStream(online.rm.backbone, ids, mask, lm=False), online, question, pad_id) if online else None
    tokens: list[list[int]] = [[] for _ in range(n)]
    logprobs: list[list[float]] = [[] for _ in range(n)]
    finished = [False] * n
    overrun = [0] * n
    stop_tensor = torch.tensor(sorted(stop_ids))
    banned = torch.tensor(sorted(banned_ids), dtype=torch.long)
    vocab = pol.last.shape[-1]
    for _ in range(max_new_tokens + 2):
        if not pol.rows.numel() and (reader is None or not reader.unread()):
            break
        noise = _gumbel(generator, (n, vocab)) if temperature > 0 else None  # every row, every step
        if pol.rows.numel():
            logits = pol.last
            allowed = logits.index_fill(-1, banned, -math.inf) if banned.numel() else logits
            choice = (allowed / temperature + noise[pol.rows]).argmax(-1) if temperature > 0 else allowed.argmax(-1)
            lp = _token_logprobs(logits, choice)
            for r, t, p in zip(pol.rows.tolist(), choice.tolist(), lp.tolist()):
                tokens[r].append(t)
                logprobs[r].append(p)
                finished[r] = t == eos_id
            done_now = torch.isin(choice, stop_tensor) | torch.tensor(
                [len(tokens[r]) >= max_new_tokens for r in pol.rows.tolist()]
            )
            if reader is not None:
                reader.feed(pol.rows.tolist(), choice.tolist(), done_now.tolist())
            keep_pol = ~done_now
            next_tokens = choice[keep_pol]
            pol.keep(keep_pol)
        elif reader is not None:
            reader.feed([], [], [])
        if reader is not None and (reader.width() >= rm_every or not pol.rows.numel()):
            stopped = reader.read()
            for r, at in stopped.items():  # the policy drew past the stop inside the chunk: cut back
                overrun[r] = max(0, len(tokens[r]) - (at + 1))
                del tokens[r][at + 1 :], logprobs[r][at + 1 :]
                finished[r] = bool(tokens[r]) and tokens[r][-1] == eos_id
            if stopped and pol.rows.numel():
                keep = torch.tensor([r not in stopped for r in pol.rows.tolist()])
                next_tokens = next_tokens[keep]
                pol.keep(keep)
        if pol.rows.numel():
            pol.step(next_tokens)
    if reader is not None:
        reader.read()
    qs = reader.qs if reader is not None else [[] for _ in range(n)]
    stopped_at = reader.stopped_at if reader is not None else [None] * n
    return [Sample(tokens[r], logprobs[r], "", finished[r], stopped_at[r], qs[r], overrun[r]) for r in range(n)]


class _RMChunk:
    """The RM following a batch: what each row has been fed but not read, read in one forward.

    A row is fed one token per step: the policy's token while it runs, then the rest of the offline
    scorer's view of the response (text + " " + EOS: EOS is read as " ", then EOS follows). Every row
    the RM still follows is fed at every step until its view is complete, so a chunk's column j is
    the same response position for every row that has a token there, and rows are read in lockstep.
    """

    def __init__(self, stream: _KVStream, online: _OnlineQ, question: list[int], pad_id: int):
        self.stream, self.online, self.pad_id = stream, online, pad_id
        n = len(question)
        self.qs: list[list[float]] = [[] for _ in range(n)]
        self.stopped_at: list[int | None] = [None] * n
        self.qids = torch.tensor(question)
        self.alive = {q: question.count(q) for q in set(question)}
        self.tail: dict[int, list[int]] = {}  # rows the policy is done with: the tokens of the view still to feed
        self.stopped: set[int] = set()
        self.chunk: list[dict[int, int]] = []  # per step: row -> token fed

    def unread(self) -> bool:
        """Whether any row followed has tokens still to be fed or read."""
        return bool(self.chunk) or any(self._fed_next(r) for r in self.stream.rows.tolist())

    def _fed_next(self, r: int) -> bool:
        return r not in self.stopped and (r not in self.tail or bool(self.tail[r]))

    def width(self) -> int:
        return len(self.chunk)

    def feed(self, rows: list[int], chosen: list[int], done: list[bool]) -> None:
        eos, space = self.online.eos_id, self.online.space_id
        step: dict[int, int] = {}
        for r, t, d in zip(rows, chosen, done):
            step[r] = space if t == eos else t
            if d:
                self.tail[r] = [eos] if t == eos else [space, eos]
        for r in self.stream.rows.tolist():
            if r not in step and r in self.tail and self.tail[r] and r not in self.stopped:
                step[r] = self.tail[r].pop(0)
        self.chunk.append(step)

    def read(self) -> dict[int, int]:
        """Read the chunk; apply the pruning rule position by position. Returns the rows stopped in it
        and their stop positions."""
        if not self.chunk:
            return {}
        rows = self.stream.rows.tolist()
        toks = torch.tensor([[step.get(r, self.pad_id) for step in self.chunk] for r in rows])
        real = torch.tensor([[r in step for step in self.chunk] for r in rows])
        q = q_values(self.stream.extend(toks, real), self.online.goal)  # (rows, width)
        stopped: dict[int, int] = {}
        for j, step in enumerate(self.chunk):
            at = [i for i, r in enumerate(rows) if r in step and r not in stopped]
            if not at:
                continue
            idx = torch.tensor(at)
            for i, v in zip(at, q[idx, j].tolist()):
                self.qs[rows[i]].append(v)
            if self.online.prune is None:
                continue
            positions = torch.tensor([len(self.qs[rows[i]]) - 1 for i in at])
            stop = stop_now(q[idx, j], positions, self.qids[[rows[i] for i in at]], self.alive, self.online.prune)
            for i in idx[stop].tolist():
                stopped[rows[i]] = self.stopped_at[rows[i]] = len(self.qs[rows[i]]) - 1
        self.chunk = []
        self.stopped |= set(stopped)
        self.stream.keep(torch.tensor([self._fed_next(r) for r in rows]))
        return stopped


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
    prune: PruneConfig | None = None,
    progress: bool = False,
    desc: str = "sample",
    prompt_token_ids: Sequence[Sequence[int]] | None = None,
    rm_every: int = RM_EVERY,
) -> list[list[Sample]]:
    """``n`` samples per prompt, token by token with a KV cache; deterministic given ``seed``.

    ``temperature`` 0 is greedy; special tokens other than EOS are never sampled (they would vanish
    from the decoded text, and the RM must read what the text says). Sampling stops at EOS, at any
    token of ``stop_texts`` (kept in the response) or after ``max_new_tokens``. With ``rm`` and
    ``goal`` the RM follows every sample with its own KV cache and records the Q-value at every
    response position (``Sample.q_values``, the offline ``cosine_sim``); with ``prune`` a sample
    stops by the rule of ``pruning.PruneConfig``. A ``prune`` whose threshold stops nothing
    (``PruneConfig.off``: at or below -1) is pruning off: the policy runs alone, the RM is never
    called and no Q-value is recorded, and the samples are the unpruned ones. Batches hold whole questions, so
    ``batch_size`` is
    rounded down to a multiple of ``n``. ``prompt_token_ids`` replaces ``prompts`` with token ids.

    ``rm_every``: the RM reads the tokens the policy has drawn ``rm_every`` steps at a time, in one
    forward, instead of one forward per token. The Q-values are the same (up to float rounding), and
    the pruning rule still runs at every position, in order, so it stops a sample where it would have
    stopped step by step; the policy's tokens drawn past that stop before the RM read them are cut
    (counted in ``Sample.overrun``). 1 reads every token as it is drawn.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if isinstance(rm_every, bool) or not isinstance(rm_every, int) or rm_every < 1:
        raise ValueError(f"rm_every must be an integer >= 1, got {rm_every!r}")
    if prune is not None and (rm is None or goal is None):
        raise ValueError("pruning needs both rm and goal")
    goal_t = check_decoding_inputs(policy, rm, tokenizer, goal)
    policy.eval()
    online = None
    if prune is not None and prune.off:  # no Q can be below the threshold: the RM's forward would buy nothing
        rm = goal_t = prune = None
    eos = tokenizer.eos_token_id
    if rm is not None and goal_t is not None:
        rm.eval()
        online = _OnlineQ(rm, goal_t, prune, _token_id(tokenizer, " "), eos)
    stop_ids = {eos} | {_token_id(tokenizer, s) for s in stop_texts}
    # special tokens other than EOS never appear in a response: the text would not re-tokenize to them
    banned = sorted(set(tokenizer.all_special_ids) - {eos})
    encoded = [list(p) for p in prompt_token_ids] if prompt_token_ids is not None else _encode(tokenizer, prompts)
    flat = [(i, ids) for i, ids in enumerate(encoded) for _ in range(n)]
    per_batch = max(n, batch_size - batch_size % n)
    out: list[Sample] = []
    for start, batch_seed in _seeded_batches(len(flat), per_batch, seed, desc, progress):
        chunk = flat[start : start + per_batch]
        out += _sample_batch(
            policy,
            [ids for _, ids in chunk],
            [q for q, _ in chunk],
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            seed=batch_seed,
            stop_ids=stop_ids,
            eos_id=eos,
            pad_id=tokenizer.pad_token_id,
            online=online,
            banned_ids=banned,
            rm_every=rm_every,
        )
    for s in out:
        s.text = tokenizer.decode(s.token_ids, skip_special_tokens=True)
    return _per_prompt(out, n)


# ----------------------------------------------------------------------------------------------
# Hugging Face generate: the data stage's sampler
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def sample_completions(
    model,
    tokenizer,
    prompts: list[str],
    n: int = 1,
    temperature: float = 1.0,
    greedy: bool = False,
    max_new_tokens: int = 96,
    batch_size: int = 256,
    seed: int = 0,
    progress: bool = True,
    desc: str = "generate",
) -> list[list[Sample]]:
    """``n`` completions per prompt with ``model.generate`` (prompts repeated in place), deterministic
    given ``seed``. A completion ends at its first EOS (kept in ``token_ids``, dropped from ``text``)."""
    model.eval()
    flat = [ids for ids in _encode(tokenizer, prompts) for _ in range(n)]
    eos = tokenizer.eos_token_id
    out: list[Sample] = []
    for start, batch_seed in _seeded_batches(len(flat), batch_size, seed, desc, progress):
        ids, mask = left_pad(flat[start : start + batch_size], tokenizer.pad_token_id)
        torch.manual_seed(batch_seed)
        gen = model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=not greedy,
            temperature=temperature if not greedy else None,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=eos,
            return_dict_in_generate=True,
            output_logits=True,
        )
        new_tokens = gen.sequences[:, ids.shape[1] :]
        token_lp = _token_logprobs(torch.stack(gen.logits, dim=1), new_tokens)
        for row in range(new_tokens.shape[0]):
            toks = new_tokens[row].tolist()
            length = toks.index(eos) + 1 if eos in toks else len(toks)
            text_ids = toks[: length - 1] if toks[length - 1] == eos else toks[:length]
            out.append(
                Sample(
                    toks[:length],
                    token_lp[row, :length].tolist(),
                    tokenizer.decode(text_ids, skip_special_tokens=True),
                    eos in toks,
                )
            )
    return _per_prompt(out, n)
