"""Training only the top decoder layers of the backbone, from a cache of the frozen layers' output, the
levers that make a pretrained LM affordable on a CPU (``--train_top_layers N``, ``--feature_cache``).

With ``N`` of a backbone's ``L`` decoder layers trained, the embeddings and layers ``0 .. L-N-1`` are frozen
(:func:`freeze_lower_layers`); layers ``L-N .. L-1``, the final norm and the value head train. What the frozen
layers compute for a text never changes, so it is computed once, in eval mode, without gradients and in batches
of similar length (:meth:`FeatureCache.fill`): the hidden states entering layer ``L-N``, kept per text (its token
ids). A training step then runs only the top layers, the norm and the head on those states
(:func:`run_layers`, what :meth:`RewardModel.forward` does with ``features``), with the same causal and padding
mask, the same position ids (counted from each row's first real token) and the same rotary embeddings as the full
forward. Equal to the full forward up to float rounding: ``tests/model/test_top_layers.py`` checks it on the tiny
SmolLM2 twin, and :meth:`FeatureCache.fill` checks it again on its first batch of every run (a backbone whose
forward is not the Llama-style loop this mirrors is refused there in one line).

The same pass gives the base LM's log-prob of every text's tokens (``logprobs=True``; the LM head is the
embedding matrix of a backbone with tied embeddings, SmolLM2's, else ``lm_head.weight`` of ``--pretrain``'s
safetensors): :meth:`FeatureCache.mean_logprob`. Those log-probs are the top layers' of the model that filled the
cache, which for an RM that trained them is not the base LM, so they stay in memory: a kept file holds the frozen
layers' states only, the part every RM of one backbone shares (:func:`cached_token_logprobs` gives the base LM's
from them).

Scoring reads the same cache (``eval-rm`` and ``get-representation --feature_cache_dir``,
:func:`goalrm_core.inference.forward.open_feature_cache`): a saved RM records its first trained layer
(``feature_layer`` in ``goalrm.json``), and the file it reads is the one of its own frozen weights' identity, so
every RM of one backbone shares one pass of the frozen layers. A text that begins a cached one reads its states
(:meth:`FeatureCache.lookup`); :func:`cached_token_logprobs` gives the base LM's log-probs from them through its
own top layers, norm and head.

Llama-style backbones only: ``embed_tokens``, ``layers``, ``norm`` and ``rotary_emb`` (Llama, SmolLM2, Mistral,
Qwen2 …); any other is refused in one line.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import torch
from torch import nn

from goalrm_core.model.encoding import left_pad, position_ids_from_mask

if TYPE_CHECKING:  # the reward model imports this module
    from goalrm_core.model.reward_model import RewardModel

#: The parts of a Llama-style backbone the top-layer forward reads.
LLAMA_PARTS = ("embed_tokens", "layers", "norm", "rotary_emb")
#: How far the cached path's hidden states may be from the full forward's on the cache pass's first batch
#: (both float32 in the same kernels today, so they agree to about 1e-6; bf16 rounds to about 1e-2 of a value).
SELF_CHECK_TOL = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 5e-2}
#: Texts per batch of the cache pass (sorted by length, so little padding).
CACHE_BATCH = 16


def decoder_layers(backbone: nn.Module) -> nn.ModuleList:
    """The backbone's decoder layers; a backbone that is not Llama-style (:data:`LLAMA_PARTS`) is a one-line error."""
    missing = [part for part in LLAMA_PARTS if not hasattr(backbone, part)]
    if missing or not isinstance(backbone.layers, nn.ModuleList):
        raise ValueError(
            f"--train_top_layers: the backbone {type(backbone).__name__} is not a Llama-style decoder stack "
            f"(it lacks {', '.join(missing) or 'a layers list'}); train every layer (--train_top_layers 0)"
        )
    return backbone.layers


def first_trained_layer(backbone: nn.Module, top: int) -> int:
    """The index of the lowest trained layer when the top ``top`` layers train; 1 to L, else a one-line error."""
    n = len(decoder_layers(backbone))
    if not 1 <= top <= n:
        raise ValueError(
            f"--train_top_layers {top}: the backbone has {n} decoder layers; give 1 to {n}, or 0 to train all"
        )
    return n - top


def freeze_lower_layers(model: "RewardModel", top: int) -> int:
    """Freeze the embeddings and every decoder layer below the top ``top`` (and anything else of the backbone
    outside the top layers and the final norm); the value head is left as it is. Sets ``model.feature_layer``,
    the first trained layer, which it returns."""
    backbone = model.backbone
    start = first_trained_layer(backbone, top)
    trained = {id(p) for module in (*decoder_layers(backbone)[start:], backbone.norm) for p in module.parameters()}
    for p in backbone.parameters():
        if id(p) not in trained:
            p.requires_grad_(False)
    model.feature_layer = start
    return start


def run_layers(
    backbone: nn.Module,
    hidden: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    start: int,
    stop: int | None = None,
) -> torch.Tensor:
    """Decoder layers ``start .. stop-1`` on ``hidden`` (the states entering layer ``start``), as the backbone's own
    forward runs them: its causal + padding mask and its rotary embeddings of ``position_ids``. No final norm."""
    from transformers.masking_utils import create_causal_mask

    mask = create_causal_mask(backbone.config, hidden, attention_mask, None, position_ids=position_ids)
    rotary = backbone.rotary_emb(hidden, position_ids=position_ids)
    for layer in decoder_layers(backbone)[start:stop]:
        hidden = layer(hidden, attention_mask=mask, position_embeddings=rotary, position_ids=position_ids)
    return hidden


def lm_head_weight(backbone: nn.Module, pretrain: str | Path | None = None) -> torch.Tensor | None:
    """The LM head's weight: the embeddings of a backbone with tied embeddings, else ``lm_head.weight`` from the
    safetensors of the ``pretrain`` folder; None when neither is there."""
    if getattr(backbone.config, "tie_word_embeddings", False):
        return backbone.embed_tokens.weight
    if pretrain is None or not Path(pretrain).is_dir():
        return None
    from safetensors import safe_open

    for file in sorted(Path(pretrain).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            if "lm_head.weight" in f.keys():
                return f.get_tensor("lm_head.weight").to(backbone.embed_tokens.weight)
    return None


def token_logprobs(hidden: torch.Tensor, weight: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """(batch, seq) log-prob of each token given the ones before it (float32; 0 at position 0), from the final
    normed ``hidden`` states and the LM head ``weight``."""
    logits = hidden[:, :-1].float() @ weight.float().T
    picked = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)


#: Config fields that do not change what the frozen layers compute (where the model came from, the RM's own
#: fields, the cache flag; the pad id, which a saved RM sets to its tokenizer's and the forward never reads; the
#: config's dtype, when the weights' own dtypes are hashed): left out of :func:`backbone_identity`, so the same
#: weights read from two folders match (the backbone a run trains from and the RM it saves).
IDENTITY_IGNORES = (
    "_name_or_path",
    "architectures",
    "transformers_version",
    "use_cache",
    "pad_token_id",
    "dtype",
    "torch_dtype",
    "num_labels",
    "id2label",
    "label2id",
    "reward_mean",
    "reward_std",
    "normalize_reward",
    "value_head_strategy",
    "output_router_logits",
)


def backbone_identity(backbone: nn.Module, start: int) -> str:
    """A sha256 of what decides the states entering layer ``start``: the backbone's class and config (but
    :data:`IDENTITY_IGNORES`), its attention kernel, the layer index and the bytes, dtypes and shapes of every frozen
    tensor (the embeddings and the layers below ``start``). What a :class:`FeatureCache` is keyed by: another model,
    dtype or layer never reads it (each text is keyed by its token ids, which covers the tokenizer, template and
    --max_len)."""
    config = {k: v for k, v in backbone.config.to_dict().items() if k not in IDENTITY_IGNORES}
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {
                "class": type(backbone).__name__,
                "config": config,
                "layer": start,
                "attn": getattr(backbone.config, "_attn_implementation", None),
            },
            sort_keys=True,
            default=str,
        ).encode()
    )
    for module in (backbone.embed_tokens, *decoder_layers(backbone)[:start]):
        for name, t in sorted(module.state_dict().items()):
            h.update(f"{name} {t.dtype} {tuple(t.shape)}".encode())
            h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _text_key(text: tuple[int, ...]) -> str:
    return hashlib.sha256(torch.tensor(text, dtype=torch.int64).numpy().tobytes()).hexdigest()[:32]


@dataclass(frozen=True)
class FillProgress:
    """How far a cache pass is: texts and tokens done of all it computes, and when it started
    (``time.perf_counter``), for a progress line with a rate and an ETA (the trainer's)."""

    texts: int
    total_texts: int
    tokens: int
    total_tokens: int
    started: float


class FeatureCache:
    """The hidden states entering decoder layer ``layer`` of one backbone, per text (a tuple of token ids), and,
    when asked for, the base LM's per-token log-probs. :meth:`fill` computes what is missing; :meth:`padded`
    lays them out as a left-padded batch; :class:`FeatureCollator` adds them to a training batch."""

    def __init__(self, layer: int, identity: str | None = None):
        self.layer = layer
        self.identity = identity  # the backbone_identity of the model it holds the states of; set by the first fill
        self.read = 0  # texts read from a file (load)
        self.states: dict[tuple[int, ...], torch.Tensor] = {}
        self.logprobs: dict[tuple[int, ...], torch.Tensor] = {}
        self.tokens = 0  # tokens run through the frozen layers
        self.seconds = 0.0
        self._sorted: list[tuple[int, ...]] | None = None  # the cached texts in order, for lookup; None: stale

    def __len__(self) -> int:
        return len(self.states)

    def lookup(self, text: Sequence[int]) -> torch.Tensor | None:
        """The cached states of ``text``, or of a cached text it begins (a causal backbone's states of a prefix are
        the prefix's own, its positions counted from its first token as here); None when neither is cached."""
        key = tuple(text)
        hit = self.states.get(key)
        if hit is not None:
            return hit
        if self._sorted is None:
            self._sorted = sorted(self.states)
        at = bisect.bisect_left(self._sorted, key)  # the first cached text >= key begins with key if any does
        if at < len(self._sorted) and self._sorted[at][: len(key)] == key:
            return self.states[self._sorted[at]][: len(key)]
        return None

    def fill(
        self,
        model: "RewardModel",
        texts: Iterable[Sequence[int]],
        pad_id: int,
        logprobs: bool = False,
        pretrain: str | Path | None = None,
        batch_size: int = CACHE_BATCH,
        progress: Callable[[FillProgress], None] | None = None,
    ) -> "FeatureCache":
        """:meth:`fill_backbone` with the RM's backbone, which must be frozen below this cache's layer
        (:func:`freeze_lower_layers`, or the ``feature_layer`` its checkpoint records)."""
        if model.feature_layer != self.layer:
            raise ValueError(
                f"a feature cache of the states entering layer {self.layer} filled from a model that trains from "
                f"layer {model.feature_layer}: freeze_lower_layers the model to match"
            )
        return self.fill_backbone(model.backbone, texts, pad_id, logprobs, pretrain, batch_size, progress)

    @torch.no_grad()
    def fill_backbone(
        self,
        backbone: nn.Module,
        texts: Iterable[Sequence[int]],
        pad_id: int,
        logprobs: bool = False,
        pretrain: str | Path | None = None,
        batch_size: int = CACHE_BATCH,
        progress: Callable[[FillProgress], None] | None = None,
    ) -> "FeatureCache":
        """Run the frozen layers once (eval mode, no gradients) over each text not yet cached (:meth:`lookup`),
        longest first in batches of ``batch_size``, and keep its states. The first batch of a fill is checked
        against the backbone's full forward (:data:`SELF_CHECK_TOL`); a mismatch is a one-line error. With
        ``logprobs`` the same pass continues through the top layers and the norm (the backbone as loaded) to the
        LM head. ``progress`` is called after every batch with what is done so far (:class:`FillProgress`)."""
        import time

        t0 = time.perf_counter()
        self.claim(backbone)
        if logprobs:
            todo = {tuple(t) for t in texts if tuple(t) not in self.logprobs}
        else:
            todo = {tuple(t) for t in texts if self.lookup(t) is None}
        todo = sorted(todo, key=lambda t: (-len(t), t))
        total_tokens = sum(map(len, todo))
        weight = lm_head_weight(backbone, pretrain) if logprobs else None
        if logprobs and weight is None:
            raise ValueError(
                "the base LM's log-probs need its LM head: the backbone has no tied embeddings and --pretrain "
                "holds no lm_head.weight"
            )
        was_training = backbone.training
        backbone.eval()
        try:
            for b in range(0, len(todo), batch_size):
                chunk = todo[b : b + batch_size]
                ids, mask = left_pad(chunk, pad_id)
                device = backbone.embed_tokens.weight.device
                ids, mask = ids.to(device), mask.to(device)
                positions = position_ids_from_mask(mask)
                states = run_layers(backbone, backbone.embed_tokens(ids), mask, positions, 0, self.layer)
                if b == 0:
                    self._check(backbone, ids, mask, states)
                if weight is not None:
                    final = backbone.norm(run_layers(backbone, states, mask, positions, self.layer))
                    lp = token_logprobs(final, weight, ids).cpu()
                states = states.cpu()
                width = ids.shape[1]
                for row, text in enumerate(chunk):
                    self.states[text] = states[row, width - len(text) :].clone()
                    if weight is not None:
                        self.logprobs[text] = lp[row, width - len(text) :].clone()
                self._sorted = None
                self.tokens += int(mask.sum())
                if progress is not None:
                    done = b + len(chunk)
                    progress(FillProgress(done, len(todo), sum(map(len, todo[:done])), total_tokens, t0))
        finally:
            backbone.train(was_training)
        self.seconds += time.perf_counter() - t0
        return self

    def claim(self, backbone: nn.Module) -> None:
        """Record ``backbone``'s identity as this cache's, or refuse a backbone of another (one line)."""
        identity = backbone_identity(backbone, self.layer)
        if self.identity not in (None, identity):
            raise ValueError(
                "this feature cache holds the states of another backbone, dtype or layer (identity "
                f"{self.identity[:12]}, this model's {identity[:12]} at layer {self.layer}): start a new cache"
            )
        self.identity = identity

    def _check(self, backbone: nn.Module, ids: torch.Tensor, mask: torch.Tensor, states: torch.Tensor) -> None:
        positions = position_ids_from_mask(mask)
        full = backbone(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False).last_hidden_state
        cached = backbone.norm(run_layers(backbone, states, mask, positions, self.layer))
        real = mask.bool()
        diff = (full[real].float() - cached[real].float()).abs().max().item()
        tol = SELF_CHECK_TOL.get(full.dtype, 5e-2)
        if not diff <= tol:
            raise ValueError(
                f"--train_top_layers: the top layers run from cached states differ from the backbone's own forward "
                f"by {diff:.3g} (> {tol:g}) on {type(backbone).__name__}: its forward is not the Llama-style "
                f"loop goalrm mirrors; train every layer (--train_top_layers 0)"
            )

    def path(self, folder: str | Path) -> Path:
        """The file of this cache in ``folder``: one per backbone identity (which holds the layer)."""
        return Path(folder) / f"features-{self.identity[:24]}.safetensors"

    def save(self, folder: str | Path) -> Path:
        """Write every cached text (its ids, states and any log-probs) to :meth:`path` in ``folder``, atomically
        (a temporary file renamed into place: two runs writing at once leave one whole file)."""
        import os
        import tempfile

        from safetensors.torch import save_file

        if self.identity is None:
            raise ValueError("an empty feature cache has no identity yet: fill it before saving")
        tensors = {}
        for text, states in self.states.items():
            key = _text_key(text)
            tensors[f"{key}.ids"] = torch.tensor(text, dtype=torch.int64)
            tensors[f"{key}.states"] = states.contiguous()  # never log-probs: they depend on the top layers
        target = self.path(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)
        try:
            save_file(tensors, tmp, metadata={"identity": self.identity, "layer": str(self.layer)})
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return target

    @classmethod
    def load(cls, folder: str | Path, model: "RewardModel", layer: int) -> "FeatureCache":
        """The cache of ``model``'s states entering ``layer`` kept in ``folder`` (:meth:`load_backbone`)."""
        return cls.load_backbone(folder, model.backbone, layer)

    @classmethod
    def load_backbone(cls, folder: str | Path, backbone: nn.Module, layer: int) -> "FeatureCache":
        """The cache of ``backbone``'s states entering ``layer`` kept in ``folder`` (:meth:`save`); an empty one with
        that identity when the folder holds none. A file whose recorded identity is not the backbone's is a
        one-line error."""
        from safetensors import safe_open

        cache = cls(layer, backbone_identity(backbone, layer))
        path = cache.path(folder)
        if not path.is_file():
            return cache
        try:
            with safe_open(str(path), framework="pt") as f:
                recorded = (f.metadata() or {}).get("identity")
                if recorded != cache.identity:
                    raise ValueError(
                        f"{path}: a feature cache of another backbone or layer (identity {str(recorded)[:12]}, "
                        f"this model's {cache.identity[:12]}): remove it, or give another folder"
                    )
                for name in sorted(n for n in f.keys() if n.endswith(".ids")):
                    key = name[: -len(".ids")]
                    text = tuple(f.get_tensor(name).tolist())
                    cache.states[text] = f.get_tensor(f"{key}.states")
        except ValueError:
            raise
        except Exception as e:  # a truncated or foreign file: safetensors raises its own error types
            raise ValueError(
                f"{path}: not a readable feature cache ({type(e).__name__}); remove it and run again"
            ) from None
        cache.read = len(cache.states)
        return cache

    def padded(self, texts: Sequence[Sequence[int]]) -> torch.Tensor:
        """The cached states of ``texts`` (:meth:`lookup`) as one left-padded (rows, longest, hidden) tensor, zeros at
        the padding, laid out as :func:`left_pad` lays out their ids. A text not cached is a KeyError naming its
        length."""
        rows = []
        for text in texts:
            states = self.lookup(text)
            if states is None:
                raise KeyError(f"a text of {len(text)} tokens is not in the feature cache (fill it first)")
            rows.append(states)
        width = max(len(r) for r in rows)
        out = rows[0].new_zeros((len(rows), width, rows[0].shape[-1]))
        for i, r in enumerate(rows):
            out[i, width - len(r) :] = r
        return out

    def mean_logprob(self, text: Sequence[int], last: int | None = None) -> float:
        """The base LM's mean log-prob of the text's tokens after its first (of its ``last`` tokens only, e.g. a
        response's ``num_actions``); needs a fill with ``logprobs``."""
        lp = self.logprobs[tuple(text)][1:]
        lp = lp if last is None else lp[-last:]
        return float(lp.mean())


class FeatureCollator:
    """A preference collator (chosen rows, then rejected rows) that adds each row's cached states as ``features``."""

    def __init__(self, collate, cache: FeatureCache):
        self.collate, self.cache = collate, cache

    def __call__(self, items: Sequence[dict]) -> dict[str, torch.Tensor]:
        batch = self.collate(items)
        batch["features"] = self.cache.padded([it["chosen_ids"] for it in items] + [it["rejected_ids"] for it in items])
        assert batch["features"].shape[:2] == batch["input_ids"].shape
        return batch


@torch.no_grad()
def cached_token_logprobs(
    backbone: nn.Module,
    weight: torch.Tensor,
    cache: FeatureCache,
    texts: Sequence[Sequence[int]],
    pad_id: int,
    batch_size: int = CACHE_BATCH,
) -> list[torch.Tensor]:
    """Each text's log-prob (float32) of every token after its first, under the LM of ``backbone`` and the LM head
    ``weight``, from the cached states of the text without its last token (computed first where the cache holds
    neither them nor a longer text they begin: :meth:`FeatureCache.fill_backbone`): only the layers from the
    cache's up, the final norm and the head run. ``cache`` must be of this backbone's frozen layers (one line if
    not)."""
    if any(len(t) < 2 for t in texts):
        raise ValueError("a text of fewer than 2 tokens has no token after its first to give the log-prob of")
    heads = [tuple(t[:-1]) for t in texts]
    cache.fill_backbone(backbone, heads, pad_id, batch_size=batch_size)
    device = backbone.embed_tokens.weight.device
    out: list[torch.Tensor] = [torch.empty(0)] * len(texts)
    order = sorted(range(len(texts)), key=lambda i: len(heads[i]))
    for b in range(0, len(order), batch_size):
        idx = order[b : b + batch_size]
        _, mask = left_pad([heads[i] for i in idx], pad_id)
        mask = mask.to(device)
        states = cache.padded([heads[i] for i in idx]).to(device)
        hidden = backbone.norm(run_layers(backbone, states, mask, position_ids_from_mask(mask), cache.layer))
        width = hidden.shape[1]
        for row, i in enumerate(idx):  # one row's logits at a time: (tokens, vocabulary) is large for a real LM
            real = hidden[row, width - len(heads[i]) :].float()
            logp = torch.log_softmax(real @ weight.float().T, dim=-1)
            targets = torch.tensor(texts[i][1:], device=device)
            out[i] = logp.gather(-1, targets[:, None]).squeeze(-1).cpu()
    return out
