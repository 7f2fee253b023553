"""``--train_top_layers N`` (``goalrm_core.model.top_layers``): the top N decoder layers, the final norm and the
value head train on cached states of the frozen layers below. On the tiny SmolLM2 twin (``tests/smollm2_twin.py``:
Llama, grouped-query attention, tied embeddings, rope theta 100,000): the cached path gives the full forward's
rewards, values and hidden states to float rounding, on left-padded batches of mixed lengths; K optimiser steps
from the cache give the losses of K steps of the full forward with the lower layers frozen; the frozen weights
do not move; one seed gives one result; what cannot run is refused in one line."""

import copy

import pytest
import torch
from safetensors.torch import load_file, save_file
from smollm2_twin import CORPUS, write_twin_gguf
from torch import nn

from goalrm_core.model.encoding import PreferenceCollator
from goalrm_core.model.objective import reward_model_loss
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.model.top_layers import (
    FeatureCache,
    FeatureCollator,
    cached_token_logprobs,
    freeze_lower_layers,
    token_logprobs,
)
from goalrm_core.train.config import TrainRMConfig

#: The cached path against the full forward: the same float32 kernels on the same inputs, apart from the padding's
#: share of a batch (the cache pass batches texts by length, a training batch by pair), so they agree to ~1e-6.
FORWARD_TOL = 1e-5
#: K optimiser steps from the cache against K steps of the full forward with frozen lower layers: the same
#: updates from gradients equal to rounding; Adam's first steps scale each update to about the learning rate,
#: so a rounding difference in a gradient moves a weight by far less than this.
LOSS_TOL = 1e-5
STEPS = 6
PAD = 2  # the twin's pad (= eos) id


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    model, tokenizer = write_twin_gguf(tmp_path_factory.mktemp("twin") / "twin.gguf")
    return model, tokenizer


def reward_model(twin, seed=0, **kwargs) -> RewardModel:
    lm, _ = twin
    torch.manual_seed(seed)
    return RewardModel(copy.deepcopy(lm.model), **kwargs).float()


@pytest.fixture(scope="module")
def items(twin):
    """Pairs of the twin's sentences, cut to many lengths (padding of 0 to 30 tokens in a batch)."""
    _, tokenizer = twin
    texts = [tokenizer(t)["input_ids"] for t in CORPUS]
    pairs = []
    for i in range(16):
        a, b = texts[i % 4], texts[(i + 1) % 4]
        ca, cb = 8 + (3 * i) % 25, 6 + (5 * i) % 27
        pairs.append(
            {
                "chosen_ids": a[:ca],
                "rejected_ids": b[:cb],
                "chosen_num_actions": 1 + i % 5,
                "rejected_num_actions": 2 + i % 3,
            }
        )
    return pairs


def config(**kwargs) -> TrainRMConfig:
    return TrainRMConfig(pretrain="p", reward_model_strategy="contrastive", sim_samples=2, unsim_samples=2, **kwargs)


@pytest.mark.parametrize("top", [1, 2])
def test_the_cached_path_is_the_full_forward(twin, items, top):
    model = reward_model(twin, value_head_strategy="mlp")
    start = freeze_lower_layers(model, top)
    assert start == 2 - top
    collate = PreferenceCollator(PAD)
    cache = FeatureCache(start).fill(model, [t for it in items for t in (it["chosen_ids"], it["rejected_ids"])], PAD)
    cached_collate = FeatureCollator(collate, cache)
    for mode in ("eval", "train"):
        getattr(model, mode)()
        for b in range(0, len(items), 4):
            batch = cached_collate(items[b : b + 4])
            with torch.no_grad():
                full = model(batch["input_ids"], batch["attention_mask"], batch["num_actions"])
                cached = model(
                    batch["input_ids"], batch["attention_mask"], batch["num_actions"], features=batch["features"]
                )
            real = batch["attention_mask"].bool()
            assert (batch["attention_mask"] == 0).any()  # left padding in the batch
            assert (full.reward - cached.reward).abs().max() < FORWARD_TOL
            assert (full.values[real] - cached.values[real]).abs().max() < FORWARD_TOL
            assert (full.hidden[real] - cached.hidden[real]).abs().max() < FORWARD_TOL
            assert torch.isfinite(cached.hidden).all()


def train(model: RewardModel, items, collate, cfg, steps=STEPS, seed=3, lr=1e-3) -> list[float]:
    """A plain PyTorch loop: AdamW on the trainable parameters, 2 pairs per step, the trainer's objective."""
    generator = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, betas=(0.9, 0.95))
    model.train()
    losses = []
    for step in range(steps):
        batch = collate([items[(2 * step + k) % len(items)] for k in range(2)])
        out = reward_model_loss(model, batch, cfg, generator)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(out.loss.item())
    return losses


def test_training_from_the_cache_is_training_with_frozen_lower_layers(twin, items):
    cfg = config(train_top_layers=1)
    initial = reward_model(twin, seed=5)
    runs = {}
    for name in ("full", "cached", "cached again"):
        model = copy.deepcopy(initial)
        start = freeze_lower_layers(model, 1)
        collate = PreferenceCollator(PAD)
        if name != "full":
            texts = [t for it in items for t in (it["chosen_ids"], it["rejected_ids"])]
            collate = FeatureCollator(collate, FeatureCache(start).fill(model, texts, PAD))
        runs[name] = (train(model, items, collate, cfg), model)
    (full, full_model), (cached, cached_model), (again, again_model) = (
        runs["full"],
        runs["cached"],
        runs["cached again"],
    )
    assert max(abs(a - b) for a, b in zip(full, cached)) < LOSS_TOL, (full, cached)
    assert cached == again  # one seed, one result, bit for bit
    start_state, end_state = initial.state_dict(), cached_model.state_dict()
    frozen = [k for k in start_state if k.startswith("model.embed_tokens") or k.startswith("model.layers.0.")]
    trained = [k for k in start_state if k.startswith(("model.layers.1.", "model.norm", "score"))]
    assert frozen and trained and len(frozen) + len(trained) == len(start_state)
    assert all(torch.equal(start_state[k], end_state[k]) for k in frozen)
    assert all(torch.equal(start_state[k], full_model.state_dict()[k]) for k in frozen)
    assert all(not torch.equal(start_state[k], end_state[k]) for k in trained)
    assert all(torch.equal(end_state[k], again_model.state_dict()[k]) for k in end_state)
    weight_diff = max((end_state[k] - full_model.state_dict()[k]).abs().max().item() for k in trained)
    assert weight_diff < 1e-4


def test_the_cache_pass_gives_the_base_lms_log_probs(twin, items):
    lm, _ = twin
    model = reward_model(twin)
    start = freeze_lower_layers(model, 1)
    texts = [items[0]["chosen_ids"], items[3]["rejected_ids"]]
    cache = FeatureCache(start).fill(model, texts, PAD, logprobs=True)
    for text in texts:
        with torch.no_grad():
            logits = lm.eval()(torch.tensor([text])).logits[0, :-1]
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(text[1:])[:, None]).squeeze(-1)
        assert abs(cache.mean_logprob(text) - expected.mean().item()) < FORWARD_TOL
        assert abs(cache.mean_logprob(text, last=3) - expected[-3:].mean().item()) < FORWARD_TOL
    assert token_logprobs(torch.zeros(1, 3, 4), torch.zeros(5, 4), torch.tensor([[0, 1, 2]])).tolist()[0][0] == 0.0


def test_a_text_that_begins_a_cached_one_reads_its_states(twin, items):
    """A causal backbone's states of a prefix are the prefix's own: a cached text serves every text it begins, and a
    fill of such texts runs nothing."""
    model = reward_model(twin)
    start = freeze_lower_layers(model, 1)
    longer = [it["chosen_ids"] for it in items[:6]]
    cache = FeatureCache(start).fill(model, longer, PAD)
    heads = [t[: len(t) // 2 + 1] for t in longer]
    own = FeatureCache(start).fill(model, heads, PAD)
    for head in heads:
        assert tuple(head) not in cache.states
        assert (cache.lookup(head) - own.states[tuple(head)]).abs().max() < FORWARD_TOL
    before = cache.tokens
    cache.fill(model, heads, PAD)
    assert cache.tokens == before  # nothing computed
    assert cache.lookup(longer[0] + [5]) is None  # a longer text than any cached is not
    assert cache.padded(heads).shape[:2] == (len(heads), max(len(h) for h in heads))


def test_the_base_lms_log_probs_from_states_an_rm_cached(twin, items):
    """The base LM's log-probs from the states an RM of its frozen weights cached (of a longer text each begins):
    only the base LM's top layer, norm and head run; equal to its full forward."""
    lm, _ = twin
    model = reward_model(twin)
    start = freeze_lower_layers(model, 1)
    texts = [it["rejected_ids"] for it in items[:5]]
    cache = FeatureCache(start).fill(model, [t + [7, 8] for t in texts], PAD)
    filled = cache.tokens
    got = cached_token_logprobs(lm.model, lm.lm_head.weight, cache, texts, PAD, batch_size=2)
    assert cache.tokens == filled  # every text's states were read, none computed
    for text, lp in zip(texts, got):
        with torch.no_grad():
            logits = lm.eval()(torch.tensor([text])).logits[0, :-1]
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(text[1:])[:, None]).squeeze(-1)
        assert lp.shape == expected.shape and (lp - expected).abs().max() < FORWARD_TOL
    other = copy.deepcopy(lm.model)
    with torch.no_grad():
        other.layers[0].mlp.up_proj.weight[0, 0] += 1e-3  # another backbone's frozen layer
    with pytest.raises(ValueError, match="holds the states of another backbone"):
        cached_token_logprobs(other, lm.lm_head.weight, cache, texts, PAD)


def test_what_cannot_run_is_refused_in_one_line(twin):
    model = reward_model(twin)
    with pytest.raises(
        ValueError, match=r"--train_top_layers 3: the backbone has 2 decoder layers; give 1 to 2, or 0 to train all"
    ):
        freeze_lower_layers(model, 3)

    class NoLayers(nn.Module):
        config = model.config

    stack = RewardModel.__new__(RewardModel)
    nn.Module.__init__(stack)
    stack.prefix = "model"
    stack.add_module("model", NoLayers())
    with pytest.raises(
        ValueError, match=r"not a Llama-style decoder stack \(it lacks embed_tokens, layers, norm, rotary_emb\)"
    ) as e:
        freeze_lower_layers(stack, 1)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="no layer was frozen"):
        model(torch.tensor([[3, 4]]), torch.tensor([[1, 1]]), features=torch.zeros(1, 2, model.config.hidden_size))


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"lora_rank": 4}, r"--train_top_layers trains whole layers; LoRA \(--lora_rank\) is not combined with it"),
        ({"zero_stage": 3}, r"--train_top_layers needs --zero_stage 0, 1 or 2"),
        ({"gradient_checkpointing": True, "gradient_checkpointing_use_reentrant": True}, r"reentrant"),
        (
            {"feature_cache": "off", "feature_cache_dir": "f"},
            r"--feature_cache_dir f keeps the cache of --train_top_layers N > 0 with "
            r"--feature_cache memory",
        ),
    ],
)
def test_the_flags_it_does_not_combine_with_are_refused(flags, message):
    with pytest.raises(ValueError, match=message):
        TrainRMConfig(pretrain="p", train_top_layers=1, **flags)
    TrainRMConfig(pretrain="p", train_top_layers=1, zero_stage=0)
    with pytest.raises(ValueError, match="--feature_cache_dir f keeps the cache"):
        TrainRMConfig(pretrain="p", feature_cache_dir="f")


def test_a_cache_is_keyed_by_the_backbone_and_the_layer_and_kept_on_disk(twin, items, tmp_path):
    texts = [t for it in items for t in (it["chosen_ids"], it["rejected_ids"])]
    model = reward_model(twin)
    start = freeze_lower_layers(model, 1)
    cache = FeatureCache(start).fill(model, texts[:10], PAD, logprobs=True)
    path = cache.save(tmp_path)
    assert path.parent == tmp_path and cache.identity[:24] in path.name and list(tmp_path.iterdir()) == [path]

    again = FeatureCache.load(
        tmp_path, reward_model(twin, seed=9), start
    )  # the same backbone, another head: the same cache
    assert again.read == len(again) == len(cache) and again.identity == cache.identity
    assert all(torch.equal(again.states[t], cache.states[t]) for t in cache.states)
    # the filling model's log-probs are its own top layers': never kept, so another RM cannot read them as the base's
    assert cache.logprobs and not again.logprobs
    again.fill(model, texts[:10], PAD)
    assert again.tokens == 0  # nothing left to compute
    again.fill(model, texts, PAD)
    kept = {tuple(t) for t in texts[:10]}
    new = {tuple(t) for t in texts} - kept
    begun = {t for t in new if any(k[: len(t)] == t for k in kept)}  # read as the start of a kept text
    assert begun and again.tokens == sum(len(t) for t in new - begun)

    other = reward_model(twin)
    freeze_lower_layers(other, 1)
    with torch.no_grad():
        other.backbone.embed_tokens.weight[5] += 1e-3  # another backbone
    with pytest.raises(ValueError, match="holds the states of another backbone, dtype or layer"):
        cache.fill(other, texts[:2], PAD)
    assert FeatureCache.load(tmp_path, other, start).read == 0  # its own file, none yet
    assert FeatureCache.load(tmp_path, model, 0).read == 0  # another layer: another file
    with pytest.raises(
        ValueError, match="a feature cache of the states entering layer 0 filled from a model that trains from layer 1"
    ):
        FeatureCache(0).fill(model, texts[:2], PAD)
    bf16 = reward_model(twin).to(torch.bfloat16)
    assert FeatureCache.load(tmp_path, bf16, start).identity != cache.identity

    # a file under the other backbone's name that records this one's identity (copied by hand): refused
    forged = FeatureCache(start, identity=FeatureCache.load(tmp_path, other, start).identity)
    save_file(
        load_file(str(path)), str(forged.path(tmp_path)), metadata={"identity": cache.identity, "layer": str(start)}
    )
    with pytest.raises(ValueError, match="a feature cache of another backbone or layer"):
        FeatureCache.load(tmp_path, other, start)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="not a readable feature cache"):
        FeatureCache.load(tmp_path, model, start)


def test_a_fill_says_how_far_it_is(twin, items):
    """The cache pass reports after every batch: texts and tokens done of all it computes, longest first, so the
    tokens reach the total exactly when the texts do."""
    texts = [t for it in items for t in (it["chosen_ids"], it["rejected_ids"])]
    model = reward_model(twin)
    start = freeze_lower_layers(model, 1)
    seen = []
    FeatureCache(start).fill(model, texts, PAD, batch_size=3, progress=seen.append)
    distinct = {tuple(t) for t in texts}
    assert [p.texts for p in seen] == [min(k, len(distinct)) for k in range(3, len(distinct) + 3, 3)]
    assert all(p.total_texts == len(distinct) and p.total_tokens == sum(map(len, distinct)) for p in seen)
    assert [p.tokens for p in seen] == sorted(p.tokens for p in seen) and seen[-1].tokens == seen[-1].total_tokens
