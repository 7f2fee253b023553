"""The RM's batched forward pass over (prompt, response) pairs, as in training.

Every dense reader of an RM goes through ``iter_read`` and its :class:`ReadSpec` (``iter_scored``: the
spec's fields as arguments): the scorer (``scoring``), the goal states (``goal_state``) and the
recipes. Sequences are sorted by length and run in buckets (never one at a time), and each comes
back with its input index. How the text becomes tokens is ``encoding`` (see ``model.encoding``) and
where the reward is read is ``readout``: ``eos`` reads it at the EOS after ``response + " "`` (the
training input), ``last_token`` at the response's last token (what the official eval_rm.py and
get_representation.py feed: template + response, nothing appended).

An RM trained with ``--train_top_layers N`` can read through a feature cache (``ReadSpec.feature_cache``,
:func:`open_feature_cache`; ``--feature_cache_dir`` of ``eval-rm`` and ``get-representation``): the states its
frozen layers give each text are computed once (or read from a cache another RM of the same frozen weights
filled) and only its top layers, norm and head run per RM, with the full forward's results to float rounding.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from goalrm_core.choices import READOUTS
from goalrm_core.flags import check_choice
from goalrm_core.model.encoding import encode_prompt_response, left_pad
from goalrm_core.model.reward_model import RewardModel, load_reward_model
from goalrm_core.model.top_layers import FeatureCache, decoder_layers

UNTRUNCATED = 2**62  # the token limit ``max_len`` 0 stands for: no sequence is cut


def resolve_device(device: str = "auto") -> torch.device:
    """``auto``: the GPU when there is one (scoring a 7B RM on a CPU is not an option), else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise ValueError(f"--device {device!r}: expected auto, cpu, cuda or cuda:N") from None
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"--device {device!r}: expected auto, cpu, cuda or cuda:N")
    if resolved.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(
                f"--device {device}: this machine has no CUDA GPU that torch can use; give --device cpu (or auto)"
            )
        if resolved.index is not None and resolved.index >= count:
            raise ValueError(f"--device {device}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    return resolved


def load_for_reading(path, bf16: bool = False, flash_attn: bool = False, device: str = "auto") -> RewardModel:
    """A saved RM in the dtype and on the device its reading flags ask for."""
    target = resolve_device(device)  # before the load: a device that is not there is refused at once
    return load_reward_model(path, torch.bfloat16 if bf16 else None, flash_attn).to(target)


@dataclass
class ScoredSequence:
    reward: float
    partial_rewards: np.ndarray  # (num_actions,) value at each response token
    response_hidden: torch.Tensor  # (num_actions, hidden) last hidden states of the response tokens
    num_actions: int
    truncated: bool = False  # the input was longer than max_len and cut (encoding official); see iter_read


@dataclass(frozen=True, kw_only=True)
class ReadSpec:
    """How the RM reads (prompt, response) pairs: everything ``iter_read`` takes but the model, the
    tokenizer and the texts.

    ``encoding`` and ``readout`` (see the module docstring); ``max_len`` the token limit (0: none);
    ``batch_size`` the sequences per forward pass; ``bucket`` batches similar lengths together;
    ``progress`` shows a bar named ``desc``; ``feature_cache`` (:func:`open_feature_cache`) the RM's frozen
    layers' states, filled with those of the texts it lacks, from which only the top layers run."""

    encoding: str
    readout: str
    max_len: int = 2048
    batch_size: int = 32
    bucket: bool = True
    progress: bool = False
    desc: str = "score"
    feature_cache: FeatureCache | None = None


def iter_scored(
    model: RewardModel,
    tokenizer,
    prompts: Sequence[str],
    responses: Sequence[str],
    max_len: int = 2048,
    batch_size: int = 32,
    bucket: bool = True,
    progress: bool = False,
    desc: str = "score",
    encoding: str = "split",
    readout: str = "eos",
    feature_cache: FeatureCache | None = None,
) -> Iterator[tuple[int, ScoredSequence]]:
    """:func:`iter_read` with the spec's fields as arguments."""
    yield from iter_read(
        model,
        tokenizer,
        prompts,
        responses,
        ReadSpec(
            encoding=encoding,
            readout=readout,
            max_len=max_len,
            batch_size=batch_size,
            bucket=bucket,
            progress=progress,
            desc=desc,
            feature_cache=feature_cache,
        ),
    )


@torch.no_grad()
def iter_read(
    model: RewardModel, tokenizer, prompts: Sequence[str], responses: Sequence[str], spec: ReadSpec
) -> Iterator[tuple[int, ScoredSequence]]:
    """Yield ``(input index, ScoredSequence)``, read as ``spec`` says; with ``spec.bucket`` the batches group
    similar lengths. ``spec.max_len`` 0 reads every sequence whole (the official scripts: the tokenizer's own limit)."""
    if spec.batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {spec.batch_size}")
    check_choice("readout", spec.readout, READOUTS)
    model.eval()
    encoded = []
    for i, (prompt, response) in enumerate(zip(prompts, responses)):
        enc = encode_prompt_response(
            tokenizer,
            prompt,
            response,
            spec.max_len or UNTRUNCATED,
            append_eos=spec.readout == "eos",
            encoding=spec.encoding,
        )
        if enc is None:
            raise ValueError(f"generation {i}: the response alone is longer than max_len={spec.max_len}")
        if enc.num_actions == 0:
            raise ValueError(
                f"generation {i}: the prompt alone fills max_len={spec.max_len}, so no response token is left to "
                "score; raise --max_len"
            )
        encoded.append(enc)
    cut = sum(e.truncated for e in encoded)
    if cut:
        print(
            f"notice: {spec.desc}: {cut} of {len(encoded)} inputs are longer than max_len={spec.max_len} and were cut "
            f"from the right (encoding {spec.encoding}); their rows are marked truncated, and their Q-values and "
            "reward stop at the cut",
            file=sys.stderr,
        )
    order = (
        sorted(range(len(encoded)), key=lambda i: len(encoded[i].input_ids))
        if spec.bucket
        else list(range(len(encoded)))
    )
    device = next(model.parameters()).device
    cache = spec.feature_cache
    if cache is not None:
        cache.fill(model, [e.input_ids for e in encoded], tokenizer.pad_token_id, batch_size=spec.batch_size)
    for start in tqdm(range(0, len(order), spec.batch_size), desc=spec.desc, disable=not spec.progress, mininterval=2):
        idx = order[start : start + spec.batch_size]
        texts = [encoded[i].input_ids for i in idx]
        ids, mask = left_pad(texts, tokenizer.pad_token_id)
        features = None if cache is None else cache.padded(texts).to(device)
        num_actions = torch.tensor([encoded[i].num_actions for i in idx], device=device)
        out = model(ids.to(device), mask.to(device), num_actions, features=features)
        values, hidden = out.values.float().cpu(), out.hidden.float().cpu()
        for row, i in enumerate(idx):
            n = encoded[i].num_actions
            yield (
                i,
                ScoredSequence(
                    out.reward[row].item(), values[row, -n:].numpy(), hidden[row, -n:], n, encoded[i].truncated
                ),
            )


def open_feature_cache(model: RewardModel, folder: str | Path | None, desc: str = "score") -> FeatureCache | None:
    """The feature cache in ``folder`` of ``model``'s frozen layers (:meth:`FeatureCache.load`: the file of its
    backbone identity, so a cache another backbone, dtype or layer filled is never read), with one line on stderr
    saying what it holds; None without a folder, or, with a notice, for an RM that trained every layer (scored by
    the full forward)."""
    if folder is None:
        return None
    if model.feature_layer is None:
        print(
            f"notice: {desc}: --feature_cache_dir {folder} is not used: this RM trained every layer (no "
            "--train_top_layers), so no frozen layers' states can be shared with another RM; scored by the full "
            "forward",
            file=sys.stderr,
        )
        return None
    cache = FeatureCache.load(folder, model, model.feature_layer)
    others = [f for f in Path(folder).glob("features-*.safetensors") if f != cache.path(folder)]
    held = (
        f"{cache.read} texts' states read from {cache.path(folder)}"
        if cache.read
        else f"no states of this backbone there yet ({len(others)} file(s) of other backbones, dtypes or layers "
        f"left alone); they are computed and kept in {cache.path(folder)}"
    )
    top = len(decoder_layers(model.backbone)) - cache.layer
    print(f"feature cache: {desc}: {held}; each batch runs the top {top} layers", file=sys.stderr)
    return cache


def keep_feature_cache(cache: FeatureCache | None, folder: str | Path | None, desc: str = "score") -> None:
    """Save ``cache`` into ``folder`` when its fills computed new texts (for the next RM of this backbone), with one
    line on stderr."""
    if cache is None or folder is None or not cache.tokens:
        return
    path = cache.save(folder)
    print(
        f"feature cache: {desc}: {len(cache) - cache.read} new texts, {cache.tokens} tokens through the frozen "
        f"layers in {cache.seconds:.1f} s; {len(cache)} texts kept in {path}",
        file=sys.stderr,
    )
