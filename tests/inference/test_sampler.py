"""The KV-cache sampler: determinism, online Q-values, online pruning, and its input checks, on tiny local
models (fixtures tiny_lm, tiny_rm, tiny_goal in tests/conftest.py)."""

import numpy as np
import pytest
import torch
from transformers import LlamaForCausalLM

from goalrm_core.inference import beam_search, sampler
from goalrm_core.inference.forward import iter_scored
from goalrm_core.inference.goal_state import q_values
from goalrm_core.inference.pruning import PruneConfig
from goalrm_core.inference.sampler import sample
from goalrm_core.model.reward_model import tiny_llama_config
from goalrm_core.model.tokenization import build_char_tokenizer

PROMPTS = ["3 +4\n", "9 *2 -1\n"]


def texts(samples):
    return [[s.text for s in group] for group in samples]


def test_sampling_is_deterministic_and_greedy_is_argmax(tiny_lm, tokenizer):
    a = sample(tiny_lm, tokenizer, PROMPTS, n=3, temperature=1.0, max_new_tokens=10, seed=3)
    b = sample(tiny_lm, tokenizer, PROMPTS, n=3, temperature=1.0, max_new_tokens=10, seed=3)
    assert texts(a) == texts(b)
    assert texts(a) != texts(sample(tiny_lm, tokenizer, PROMPTS, n=3, temperature=1.0, max_new_tokens=10, seed=4))
    greedy = sample(tiny_lm, tokenizer, PROMPTS[:1], n=2, temperature=0.0, max_new_tokens=6)[0]
    ids = tokenizer(PROMPTS[0], add_special_tokens=False)["input_ids"]
    for _ in range(6):
        with torch.no_grad():
            ids.append(int(tiny_lm(torch.tensor([ids])).logits[0, -1].argmax()))
    assert greedy[0].token_ids == greedy[1].token_ids == ids[-6:]


def test_both_entry_points_return_samples_with_the_policys_logprobs(tiny_lm, tokenizer):
    """``sample`` and ``sample_completions`` share the result type; greedy, both pick the argmax token,
    and each token's log-probability is the untempered policy's."""
    kv = sample(tiny_lm, tokenizer, PROMPTS[:1], n=1, temperature=0.0, max_new_tokens=6)[0][0]
    hf = sampler.sample_completions(
        tiny_lm, tokenizer, PROMPTS[:1], n=1, greedy=True, max_new_tokens=6, progress=False
    )[0][0]
    assert kv.token_ids == hf.token_ids and kv.text == hf.text
    np.testing.assert_allclose(kv.logprobs, hf.logprobs, atol=1e-5)
    assert hf.min_logprob <= hf.mean_logprob <= 0 and hf.num_tokens == 6


def rm_calls(rm, run) -> int:
    """How many forward passes of ``rm``'s backbone ``run()`` makes (a forward hook on the real model)."""
    calls = []
    handle = rm.backbone.register_forward_hook(lambda *_: calls.append(1))
    try:
        run()
    finally:
        handle.remove()
    return len(calls)


@pytest.mark.parametrize("threshold", [-1.0, -1.5])
def test_threshold_at_or_below_minus_one_is_pruning_off(tiny_lm, tiny_rm, tokenizer, tiny_goal, threshold):
    """A threshold no Q can fall below runs as pruning off: not one RM forward, and the samples are
    the unpruned ones, token for token. A threshold above -1 does call the RM (the hook counts)."""
    kw = dict(n=4, temperature=1.0, max_new_tokens=16, seed=7)
    plain = sample(tiny_lm, tokenizer, PROMPTS, **kw)
    out = []
    assert (
        rm_calls(
            tiny_rm,
            lambda: out.append(
                sample(
                    tiny_lm,
                    tokenizer,
                    PROMPTS,
                    rm=tiny_rm,
                    goal=tiny_goal,
                    prune=PruneConfig(threshold=threshold),
                    **kw,
                )
            ),
        )
        == 0
    )
    pruned = out[0]
    assert PruneConfig(threshold=threshold).off
    assert texts(plain) == texts(pruned)
    for g, h in zip(plain, pruned):
        for s, t in zip(g, h):
            assert s.token_ids == t.token_ids and s.logprobs == t.logprobs and not t.pruned and t.q_values == []
    assert (
        rm_calls(
            tiny_rm,
            lambda: sample(
                tiny_lm, tokenizer, PROMPTS, rm=tiny_rm, goal=tiny_goal, prune=PruneConfig(threshold=-0.99), **kw
            ),
        )
        > 0
    )


def test_online_q_matches_offline_scoring(tiny_lm, tiny_rm, tokenizer, tiny_goal):
    samples = sample(
        tiny_lm, tokenizer, PROMPTS, n=2, temperature=1.0, max_new_tokens=12, seed=1, rm=tiny_rm, goal=tiny_goal
    )
    flat = [(p, s) for p, g in zip(PROMPTS, samples) for s in g]
    for i, scored in iter_scored(tiny_rm, tokenizer, [p for p, _ in flat], [s.text for _, s in flat]):
        online = np.array(flat[i][1].q_values)
        assert online.shape == (scored.num_actions,)  # text + " " + EOS, as scored offline
        np.testing.assert_allclose(online, q_values(scored.response_hidden, tiny_goal).numpy(), atol=1e-4)


@pytest.mark.parametrize("skip_first", [0, 5])
def test_pruning_never_stops_before_skip_first(tiny_lm, tiny_rm, tokenizer, tiny_goal, skip_first):
    kw = dict(n=3, temperature=1.0, max_new_tokens=14, seed=2)
    plain = sample(tiny_lm, tokenizer, PROMPTS, **kw)
    # a cosine is below 1.01 everywhere: every sample stops at the first position it may
    pruned = sample(
        tiny_lm,
        tokenizer,
        PROMPTS,
        rm=tiny_rm,
        goal=tiny_goal,
        prune=PruneConfig(1.01, skip_first, keep_last=False),
        **kw,
    )
    for g, h in zip(plain, pruned):
        for s, t in zip(g, h):
            if len(s.q_values if s.q_values else t.q_values) > skip_first or t.pruned:
                assert t.stopped_at == skip_first  # never earlier
            assert t.num_tokens == min(skip_first + 1, s.num_tokens)
            assert t.token_ids == s.token_ids[: t.num_tokens]  # the stopped sample is a prefix of the unpruned one


def test_keep_last_spares_one_sample_per_question(tiny_lm, tiny_rm, tokenizer, tiny_goal):
    pruned = sample(
        tiny_lm,
        tokenizer,
        PROMPTS,
        n=3,
        temperature=1.0,
        max_new_tokens=10,
        seed=2,
        rm=tiny_rm,
        goal=tiny_goal,
        prune=PruneConfig(1.01, keep_last=True),
    )
    assert [sum(not s.pruned for s in g) for g in pruned] == [1, 1]


def test_pruning_without_rm_or_goal_is_refused(tiny_lm, tiny_rm, tokenizer):
    with pytest.raises(ValueError, match="needs both rm and goal"):
        sample(tiny_lm, tokenizer, PROMPTS, rm=tiny_rm, prune=PruneConfig())


# ------------------------------------------------------------------------------- bad input, caught before generation


@pytest.fixture
def no_generation(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("generation started before the inputs were checked")

    monkeypatch.setattr(sampler, "_sample_batch", fail)
    monkeypatch.setattr(beam_search, "beam_search", fail)


def test_goal_of_wrong_hidden_size_fails_before_generation(tiny_lm, tiny_rm, tokenizer, no_generation):
    bad = np.zeros((1, tiny_rm.config.hidden_size + 3), dtype=np.float32)
    with pytest.raises(ValueError, match="hidden size"):
        sample(tiny_lm, tokenizer, PROMPTS, rm=tiny_rm, goal=bad, prune=PruneConfig(0.0))
    with pytest.raises(ValueError, match="hidden size"):
        beam_search.q_guided_decode(tiny_lm, tiny_rm, tokenizer, bad, ["3 +4"])


def test_policy_with_other_vocabulary_fails_before_generation(tiny_rm, tokenizer, tiny_goal, no_generation):
    other = LlamaForCausalLM(tiny_llama_config(len(tokenizer) + 10, hidden_size=32, num_layers=1, num_heads=4))
    with pytest.raises(ValueError, match="vocabulary"):
        beam_search.q_guided_decode(other, tiny_rm, tokenizer, tiny_goal, ["3 +4"])
    with pytest.raises(ValueError, match="vocabulary"):
        sample(other, tokenizer, PROMPTS, rm=tiny_rm, goal=tiny_goal)


def test_policy_tokenizer_that_differs_fails_before_generation(tiny_lm, tiny_rm, tokenizer, tiny_goal, no_generation):
    digits_only = build_char_tokenizer("0123456789+-*=#\n ")
    with pytest.raises(ValueError, match="tokenizer"):
        beam_search.q_guided_decode(tiny_lm, tiny_rm, tokenizer, tiny_goal, ["3 +4"], policy_tokenizer=digits_only)


def test_rm_reading_in_chunks_stops_where_reading_every_token_does(tiny_lm, tiny_rm, tokenizer, tiny_goal):
    """The RM reading the policy's tokens several steps at a time (``rm_every``) records the same
    Q-values and stops the same samples at the same positions as reading each token as it is drawn;
    only the tokens drawn past a stop before the RM read them differ, and they are cut and counted.
    The threshold sits in the widest gap between the recorded Q-values, far from any float tie."""
    kw = dict(n=4, temperature=1.0, max_new_tokens=16, seed=5, rm=tiny_rm, goal=tiny_goal)
    recorded = sample(tiny_lm, tokenizer, PROMPTS, rm_every=1, **kw)
    q = np.sort(np.concatenate([s.q_values[3:] for g in recorded for s in g]))
    middle = q[len(q) // 4 : 3 * len(q) // 4]
    gap = int(np.argmax(np.diff(middle)))
    assert middle[gap + 1] - middle[gap] > 1e-4
    rule = PruneConfig(float(middle[gap] + middle[gap + 1]) / 2, skip_first=3, keep_last=True)
    step = sample(tiny_lm, tokenizer, PROMPTS, rm_every=1, prune=rule, **kw)
    assert any(s.pruned for g in step for s in g) and all(s.overrun == 0 for g in step for s in g)
    for every in (3, 8):
        chunked = sample(tiny_lm, tokenizer, PROMPTS, rm_every=every, prune=rule, **kw)
        for g, h in zip(step, chunked):
            for s, t in zip(g, h):
                assert (t.token_ids, t.stopped_at, t.finished, t.text) == (
                    s.token_ids,
                    s.stopped_at,
                    s.finished,
                    s.text,
                )
                np.testing.assert_allclose(t.q_values, s.q_values, atol=1e-5)
                np.testing.assert_allclose(t.logprobs, s.logprobs, atol=1e-5)
                assert 0 <= t.overrun < every and (t.overrun == 0 or t.pruned)
        assert sum(t.overrun for h in chunked for t in h) > 0  # the policy did draw past some stop
    with pytest.raises(ValueError, match="rm_every"):
        sample(tiny_lm, tokenizer, PROMPTS, rm_every=0, **kw)
