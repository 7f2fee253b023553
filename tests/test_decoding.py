"""Q-guided beam search, online pruning and their input checks, on stubs and tiny local models."""

import json

import numpy as np
import pytest
import torch
from transformers import LlamaForCausalLM, LlamaModel

from goalrm_core.inference import decoding as dec
from goalrm_core.model.reward_model import RewardModel, save_reward_model, tiny_llama_config
from goalrm_core.inference.forward import iter_scored
from goalrm_core.inference.goal_state import q_values
from goalrm_core.model.tokenization import build_char_tokenizer

PROMPTS = ["3 +4\n", "9 *2 -1\n"]


@pytest.fixture(scope="module")
def policy(tiny_config):
    torch.manual_seed(1)
    return LlamaForCausalLM(tiny_config).eval()


@pytest.fixture(scope="module")
def rm(tiny_config):
    torch.manual_seed(2)
    return RewardModel(LlamaModel(tiny_config)).eval()


@pytest.fixture(scope="module")
def goal(tiny_config):
    return np.random.default_rng(0).normal(size=(1, tiny_config.hidden_size)).astype(np.float32)


def texts(samples):
    return [[s.text for s in group] for group in samples]


# ------------------------------------------------------------------------------- beam search logic


def test_beam_search_keeps_best_scoring_candidates():
    """Two questions; each step appends one letter; solutions end after two letters. The scorer is a
    table, so the kept beams and the answer are known in advance."""
    table = {"a": 0.9, "b": 0.1, "c": 0.5, "aa": 0.2, "ab": 0.3, "ac": 0.1, "ca": 0.8, "cb": 0.0, "cc": 0.4,
             "ba": 5.0, "bb": 5.0, "bc": 5.0}  # b's children are excellent but b is pruned at step 0

    def propose(beams, step):
        return [dec.Candidate(b.question, b.token_ids + [ord(ch)], b.text + ch, finished=len(b.text) + 1 == 2, new_tokens=3)
                for b in beams for ch in "abc"]

    calls = []

    def score(cands):
        calls.append(len(cands))
        return np.array([table[c.text] - c.question for c in cands])  # same order for both questions

    res = dec.beam_search(2, propose, score, beam_size=2, max_steps=5)
    assert [(c.question, c.text) for c in res.trace[0]] == [(0, "a"), (0, "c"), (1, "a"), (1, "c")]
    assert [(c.question, c.text) for c in res.trace[1]] == [(0, "ca"), (0, "cc"), (1, "ca"), (1, "cc")]
    assert [c.text for c in res.best] == ["ca", "ca"]
    assert res.best[0].score == pytest.approx(0.8) and res.best[1].score == pytest.approx(-0.2)
    assert calls == [6, 12]  # one scoring call per step, every candidate of the step at once
    assert len(res.trace) == 2  # all beams finished after step 1: the search stops
    assert res.tokens_generated.tolist() == [3 * 3 + 6 * 3, 3 * 3 + 6 * 3]


def test_beam_search_finished_beams_compete_and_duplicates_merge():
    def propose(beams, step):
        # "x" finishes at once with a middling score; "y" continues and later beats it; "y" twice is merged
        return [dec.Candidate(0, b.token_ids + [1], b.text + "x", finished=True, new_tokens=1) for b in beams] + \
               [dec.Candidate(0, b.token_ids + [2], b.text + "y", new_tokens=1) for b in beams for _ in range(2)]

    scores = {"x": 0.5, "y": 0.4, "yx": 0.9, "yy": 0.1}
    seen = []

    def score(cands):
        seen.extend(c.text for c in cands)
        return np.array([scores.get(c.text, -1.0) for c in cands])

    res = dec.beam_search(1, propose, score, beam_size=2, max_steps=2)
    assert seen == ["x", "y", "yx", "yy"]  # the duplicate "y" is scored once
    assert [c.text for c in res.trace[0]] == ["x", "y"]
    assert [c.text for c in res.trace[1]] == ["yx", "x"]  # the finished "x" stays in the pool
    assert res.best[0].text == "yx"
    assert res.tokens_generated.tolist() == [3 + 3]


def test_select_top_rejects_bad_beam_size():
    with pytest.raises(ValueError, match="beam_size"):
        dec.select_top([], 0)


# ------------------------------------------------------------------------------- real tiny models


def test_q_guided_decode_end_to_end(policy, rm, tokenizer, goal):
    cfg = dec.DecodeConfig(beam_size=2, samples_per_step=2, temperature=1.0, temperature_decay=0.9, conf_ratio=0.3,
                           max_steps=3, max_line_tokens=5, max_new_tokens=12)
    rows, scorer = dec.q_guided_decode(policy, rm, tokenizer, goal, ["3 +4", "9 *2 -1"], cfg)
    assert [r["question"] for r in rows] == ["3 +4", "9 *2 -1"]
    for r in rows:
        assert 0 < r["num_tokens"] <= 12 and r["tokens_generated"] >= r["num_tokens"]
        assert -1.0 <= r["q"] <= 1.0 and np.isfinite(r["score"])
        assert r["score"] == pytest.approx(0.7 * r["q"] + 0.3 * r["mean_logprob"], abs=1e-5)
    assert 1 <= scorer.forward_passes <= 3  # one batched RM pass per step
    again, _ = dec.q_guided_decode(policy, rm, tokenizer, goal, ["3 +4", "9 *2 -1"], cfg)
    assert again == rows  # deterministic given the seed


def test_goal_scorer_q_is_offline_cosine(rm, tokenizer, goal):
    """The beam search's Q equals the offline Q-value at the prefix's last token: the final EOS for a
    finished candidate, the newline for an unfinished one (offline, it is followed by " " and EOS)."""
    scorer = dec.GoalScorer(rm, tokenizer, goal, ["3 +4\n"])
    cands = [dec.Candidate(0, [], "3+4=7\n"), dec.Candidate(0, [], "3+4=7\n#7", finished=True)]
    scorer(cands)
    offline = [q_values(s.response_hidden, goal).numpy()
               for _, s in iter_scored(rm, tokenizer, ["3 +4\n"] * 2, [c.text for c in cands], bucket=False)]
    assert cands[0].q == pytest.approx(float(offline[0][-3]), abs=1e-4)
    assert cands[1].q == pytest.approx(float(offline[1][-1]), abs=1e-4)


# ------------------------------------------------------------------------------- sampling and pruning


def test_sampling_is_deterministic_and_greedy_is_argmax(policy, tokenizer):
    a = dec.sample(policy, tokenizer, PROMPTS, n=3, temperature=1.0, max_new_tokens=10, seed=3)
    b = dec.sample(policy, tokenizer, PROMPTS, n=3, temperature=1.0, max_new_tokens=10, seed=3)
    assert texts(a) == texts(b)
    assert texts(a) != texts(dec.sample(policy, tokenizer, PROMPTS, n=3, temperature=1.0, max_new_tokens=10, seed=4))
    greedy = dec.sample(policy, tokenizer, PROMPTS[:1], n=2, temperature=0.0, max_new_tokens=6)[0]
    ids = tokenizer(PROMPTS[0], add_special_tokens=False)["input_ids"]
    for _ in range(6):
        with torch.no_grad():
            ids.append(int(policy(torch.tensor([ids])).logits[0, -1].argmax()))
    assert greedy[0].token_ids == greedy[1].token_ids == ids[-6:]


def test_threshold_minus_one_reproduces_unpruned_sampling(policy, rm, tokenizer, goal):
    kw = dict(n=4, temperature=1.0, max_new_tokens=16, seed=7)
    plain = dec.sample(policy, tokenizer, PROMPTS, **kw)
    pruned = dec.sample(policy, tokenizer, PROMPTS, rm=rm, goal=goal, prune_threshold=-1.0, **kw)
    assert texts(plain) == texts(pruned)
    for g, h in zip(plain, pruned):
        for s, t in zip(g, h):
            assert s.token_ids == t.token_ids and s.logprobs == t.logprobs and not t.pruned


def test_online_q_matches_offline_scoring(policy, rm, tokenizer, goal):
    samples = dec.sample(policy, tokenizer, PROMPTS, n=2, temperature=1.0, max_new_tokens=12, seed=1, rm=rm, goal=goal)
    flat = [(p, s) for p, g in zip(PROMPTS, samples) for s in g]
    for i, scored in iter_scored(rm, tokenizer, [p for p, _ in flat], [s.text for _, s in flat]):
        online = np.array(flat[i][1].q_values)
        assert online.shape == (scored.num_actions,)  # text + " " + EOS, as scored offline
        np.testing.assert_allclose(online, q_values(scored.response_hidden, goal).numpy(), atol=1e-4)


@pytest.mark.parametrize("skip_first", [0, 5])
def test_pruning_never_stops_before_skip_first(policy, rm, tokenizer, goal, skip_first):
    kw = dict(n=3, temperature=1.0, max_new_tokens=14, seed=2)
    plain = dec.sample(policy, tokenizer, PROMPTS, **kw)
    # a cosine is below 1.01 everywhere: every sample stops at the first position it may
    pruned = dec.sample(policy, tokenizer, PROMPTS, rm=rm, goal=goal, prune_threshold=1.01, skip_first=skip_first, keep_last=False, **kw)
    for g, h in zip(plain, pruned):
        for s, t in zip(g, h):
            if len(s.q_values if s.q_values else t.q_values) > skip_first or t.pruned:
                assert t.stopped_at == skip_first  # never earlier
            assert t.num_tokens == min(skip_first + 1, s.num_tokens)
            assert t.token_ids == s.token_ids[:t.num_tokens]  # the stopped sample is a prefix of the unpruned one


def test_keep_last_spares_one_sample_per_question(policy, rm, tokenizer, goal):
    pruned = dec.sample(policy, tokenizer, PROMPTS, n=3, temperature=1.0, max_new_tokens=10, seed=2, rm=rm, goal=goal,
                        prune_threshold=1.01, keep_last=True)
    assert [sum(not s.pruned for s in g) for g in pruned] == [1, 1]


def test_pruning_comparison_reports_tokens_and_accuracy(policy, rm, tokenizer, goal):
    out, timings = dec.pruning_comparison(policy, rm, tokenizer, goal, ["3 +4", "9 *2 -1"], n=3, threshold=1.01,
                                          max_new_tokens=10, temperature=1.0)
    assert out["tokens_generated"] < out["tokens_generated_unpruned"]
    assert 0 <= out["accuracy"] <= 1 and 0 <= out["accuracy_unpruned"] <= 1
    assert set(timings) == {"wall_s", "wall_s_unpruned"}
    same, _ = dec.pruning_comparison(policy, rm, tokenizer, goal, ["3 +4", "9 *2 -1"], n=3, threshold=-1.0, max_new_tokens=10,
                                     temperature=1.0)
    assert same["tokens_generated"] == same["tokens_generated_unpruned"] and same["samples_stopped_pct"] == 0


# ------------------------------------------------------------------------------- bad input, caught before generation


@pytest.fixture
def no_generation(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("generation started before the inputs were checked")

    monkeypatch.setattr(dec, "_sample_batch", fail)
    monkeypatch.setattr(dec, "beam_search", fail)


def test_goal_of_wrong_hidden_size_fails_before_generation(policy, rm, tokenizer, no_generation):
    bad = np.zeros((1, rm.config.hidden_size + 3), dtype=np.float32)
    with pytest.raises(ValueError, match="hidden size"):
        dec.sample(policy, tokenizer, PROMPTS, rm=rm, goal=bad, prune_threshold=0.0)
    with pytest.raises(ValueError, match="hidden size"):
        dec.q_guided_decode(policy, rm, tokenizer, bad, ["3 +4"])


def test_policy_with_other_vocabulary_fails_before_generation(rm, tokenizer, goal, no_generation):
    other = LlamaForCausalLM(tiny_llama_config(len(tokenizer) + 10, hidden_size=32, num_layers=1, num_heads=4))
    with pytest.raises(ValueError, match="vocabulary"):
        dec.q_guided_decode(other, rm, tokenizer, goal, ["3 +4"])
    with pytest.raises(ValueError, match="vocabulary"):
        dec.pruning_comparison(other, rm, tokenizer, goal, ["3 +4"])


def test_policy_tokenizer_that_differs_fails_before_generation(policy, rm, tokenizer, goal, no_generation):
    digits_only = build_char_tokenizer("0123456789+-*=#\n ")
    with pytest.raises(ValueError, match="tokenizer"):
        dec.q_guided_decode(policy, rm, tokenizer, goal, ["3 +4"], policy_tokenizer=digits_only)


# ------------------------------------------------------------------------------- ToyMath bookkeeping


def _gen(q, text, answer, ok, tokens, reward, cos):
    return {"question": q, "generated_solution": text, "predicted_answer": answer, "is_correct": ok,
            "num_generated_tokens": tokens, "reward": reward, "cosine_sim": [0.0, cos]}


def test_sample_method_curves_and_matched_budget():
    qs = ["1 +1", "2 +2"]
    base = [_gen("1 +1", "", 2, True, 10, 0.1, 0.0), _gen("1 +1", "", 3, False, 10, 0.9, 0.0),
            _gen("2 +2", "", 4, True, 10, 0.5, 0.0), _gen("2 +2", "", 5, False, 10, 0.2, 0.0)]
    goalc = [dict(r, reward=1 - r["reward"], cosine_sim=[0.0, float(r["is_correct"])]) for r in base]
    greedy = [_gen("1 +1", "", 3, False, 9, 0, 0), _gen("2 +2", "", 4, True, 11, 0, 0)]
    curves = dec.sample_method_curves(greedy, {"baseline": base, "goal-conditioned": goalc}, qs)
    at = curves.set_index(["method", "n"])["accuracy"]
    assert at["greedy", 1] == 0.5
    assert at["best-of-N baseline reward", 2] == 0.5  # picks the wrong sample of question 1
    assert at["best-of-N goal-conditioned reward", 2] == 0.5
    assert at["best-of-N final Q", 2] == 1.0
    assert at["majority vote", 2] == 1.0  # ties go to the correct answer
    assert curves.set_index(["method", "n"])["tokens"]["majority vote", 2] == 20
    picked = dec.matched_budget(curves, tokens=15).set_index("method")["n"]
    assert picked["majority vote"] == 2 and picked["greedy"] == 1
    keys = dec.methods_metrics({"toy-id": dec.matched_budget(curves, 15)})["toy-id"]
    assert set(keys) == {"greedy", "majority_vote", "best_of_n_baseline_reward", "best_of_n_goal_conditioned_reward", "best_of_n_final_q"}


def test_pruned_samples_do_not_vote():
    s_ok = dec.Sample([1], [0.0], "1+1=2\n#2", True)
    s_cut = dec.Sample([1], [0.0], "1+1=2\n#2", False, stopped_at=5)
    rows = dec.sample_rows(["1 +1"], [[s_ok, s_cut]])[0]
    assert rows[0]["is_correct"] and rows[0]["predicted_answer"] == 2
    assert not rows[1]["is_correct"] and rows[1]["predicted_answer"] is None


def test_verbose_detection_and_steering_summary():
    assert dec.is_verbose("9*7=63 multiply\n63-1=62 subtract\n#62")
    assert not dec.is_verbose("9*7=63 multiply\n63-1=62\n#62")
    assert not dec.is_verbose("#62")
    guided = [{"question": "9 *7", "generated_solution": "9*7=63 multiply\n#63"}, {"question": "1 +1", "generated_solution": "1+1=3 add\n#3"}]
    unguided = [{"question": "9 *7", "generated_solution": "9*7=63\n#63"}, {"question": "1 +1", "generated_solution": "1+1=2\n#2"}]
    out = dec.steering_summary(guided, unguided)
    assert out == {"attribute_rate": 1.0, "attribute_rate_unguided": 0.0, "accuracy": 0.5, "accuracy_unguided": 1.0, "n_questions": 2}


# ------------------------------------------------------------------------------- command line


def test_cli_beam_and_sample(tmp_path, policy, rm, tokenizer, goal):
    policy.save_pretrained(tmp_path / "policy")
    tokenizer.save_pretrained(tmp_path / "policy")
    save_reward_model(rm, tmp_path / "rm", tokenizer)
    np.save(tmp_path / "goal.npy", goal)
    (tmp_path / "q.jsonl").write_text("".join(json.dumps({"question": q, "expected_answer": a}) + "\n" for q, a in (("3 +4", 7), ("2 *2", 4))))
    common = ["--policy_path", str(tmp_path / "policy"), "--reward_model_path", str(tmp_path / "rm"), "--goal_state_path",
              str(tmp_path / "goal.npy"), "--questions_path", str(tmp_path / "q.jsonl"), "--max_new_tokens", "8"]
    assert dec.main(["beam", *common, "--save_path", str(tmp_path / "beam.jsonl"), "--beam_size", "2", "--samples_per_step", "2",
                     "--max_steps", "2", "--max_line_tokens", "4"]) == 0
    beam = [json.loads(line) for line in (tmp_path / "beam.jsonl").read_text().splitlines()]
    assert len(beam) == 2 and {"generated_solution", "is_correct", "tokens_generated"} <= set(beam[0])
    assert dec.main(["sample", *common, "--save_path", str(tmp_path / "s.jsonl"), "--n_samples", "2", "--prune_threshold", "1.01",
                     "--skip_first", "2"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and sum(r["stopped_at"] is not None for r in rows) >= 2
    bad = np.zeros((1, 7), dtype=np.float32)
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(ValueError, match="hidden size"):
        dec.main(["beam", *common[:4], "--goal_state_path", str(tmp_path / "bad.npy"), *common[6:], "--save_path", str(tmp_path / "x.jsonl")])


def test_replayed_pruning_matches_online_pruning(policy, rm, tokenizer, goal):
    """Replaying the online rule on recorded Q-values gives the online run's stop positions, so a
    threshold tuned on scored samples means the same thing while generating."""
    kw = dict(n=4, temperature=1.0, max_new_tokens=14, seed=5, rm=rm, goal=goal)
    recorded = dec.sample(policy, tokenizer, PROMPTS, **kw)
    threshold = float(np.float32(np.median([q for g in recorded for s in g for q in s.q_values[5:]])))
    for keep_last in (True, False):
        online = dec.sample(policy, tokenizer, PROMPTS, prune_threshold=threshold, keep_last=keep_last, **kw)
        for g, h in zip(recorded, online):
            assert dec.simulate_pruning([s.q_values for s in g], threshold, 5, keep_last) == [s.stopped_at for s in h]
        assert any(s.pruned for g in online for s in g)


def test_choose_online_threshold_prefers_accuracy_then_fewer_tokens():
    def row(answer, ok, q):
        return {"question": "1 +1", "predicted_answer": answer, "is_correct": ok, "num_generated_tokens": len(q) - 1, "cosine_sim": q}

    # the correct samples keep a high Q; the wrong ones drop at position 1
    group = [row(2, True, [0.9, 0.8, 0.8, 0.8]), row(3, False, [0.9, -0.2, -0.2, -0.2]), row(3, False, [0.9, -0.3, -0.3, -0.3])]
    best, table = dec.choose_online_threshold([group], candidates=[-0.5, 0.0, 0.85], skip_first=1)
    # -0.5 stops nothing and the wrong answer wins the vote; 0.0 and 0.85 both stop the wrong samples at
    # position 1 (0.85 would stop the correct one too, but it is the last and is spared): equal accuracy
    # and tokens, so the lower threshold wins
    assert best == 0.0
    assert table.set_index("threshold")["tokens"].tolist() == [3 + 3 + 3, 3 + 2 + 2, 3 + 2 + 2]
    assert table.set_index("threshold").loc[0.0, "accuracy"] == 1.0
    assert table.set_index("threshold").loc[-0.5, "accuracy"] == 0.0


def test_line_proposer_keeps_every_beam_within_its_token_budget(policy, tokenizer):
    """Beams of different lengths share one sampling call whose room fits the shortest; a longer
    beam's line is cut to its own budget (found when a beam outgrew the RM's max_len)."""
    prompts = ["3 +4\n", "9 *2 -1\n"]
    proposer = dec.PolicyLineProposer(policy, tokenizer, prompts, samples_per_step=3, temperature=2.0,
                                      max_line_tokens=8, max_new_tokens=10, seed=0)
    short = dec.Candidate(0, tokenizer("1", add_special_tokens=False)["input_ids"], "1")
    long_ids = tokenizer("12345678", add_special_tokens=False)["input_ids"]
    long = dec.Candidate(1, long_ids, "12345678")
    out = proposer([short, long], step=0)
    assert len(out) == 6
    assert all(len(c.token_ids) <= 10 for c in out)
    assert all(c.finished for c in out if c.question == 1 and len(c.token_ids) == 10)
    assert any(len(c.token_ids) > len(long_ids) for c in out if c.question == 1)  # the long beam still grew
