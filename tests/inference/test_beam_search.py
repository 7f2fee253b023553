"""Q-guided beam search: the search logic on stub propose/score functions, then the model pieces on
tiny local models (fixtures tiny_lm, tiny_rm, tiny_goal in tests/conftest.py)."""

import dataclasses

import numpy as np
import pytest

from goalrm_core.inference import beam_search as bs
from goalrm_core.inference.forward import iter_scored
from goalrm_core.inference.goal_state import q_values

# ------------------------------------------------------------------------------- beam search logic


def test_beam_search_keeps_best_scoring_candidates():
    """Two questions; each step appends one letter; solutions end after two letters. The scorer is a
    table, so the kept beams and the answer are known in advance."""
    table = {
        "a": 0.9,
        "b": 0.1,
        "c": 0.5,
        "aa": 0.2,
        "ab": 0.3,
        "ac": 0.1,
        "ca": 0.8,
        "cb": 0.0,
        "cc": 0.4,
        "ba": 5.0,
        "bb": 5.0,
        "bc": 5.0,
    }  # b's children are excellent but b is pruned at step 0

    def propose(beams, step):
        return [
            bs.Candidate(b.question, b.token_ids + [ord(ch)], b.text + ch, finished=len(b.text) + 1 == 2, new_tokens=3)
            for b in beams
            for ch in "abc"
        ]

    calls = []

    def score(cands):
        calls.append(len(cands))
        return np.array([table[c.text] - c.question for c in cands])  # same order for both questions

    res = bs.beam_search(2, propose, score, beam_size=2, max_steps=5)
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
        return [bs.Candidate(0, b.token_ids + [1], b.text + "x", finished=True, new_tokens=1) for b in beams] + [
            bs.Candidate(0, b.token_ids + [2], b.text + "y", new_tokens=1) for b in beams for _ in range(2)
        ]

    scores = {"x": 0.5, "y": 0.4, "yx": 0.9, "yy": 0.1}
    seen = []

    def score(cands):
        seen.extend(c.text for c in cands)
        return np.array([scores.get(c.text, -1.0) for c in cands])

    res = bs.beam_search(1, propose, score, beam_size=2, max_steps=2)
    assert seen == ["x", "y", "yx", "yy"]  # the duplicate "y" is scored once
    assert [c.text for c in res.trace[0]] == ["x", "y"]
    assert [c.text for c in res.trace[1]] == ["yx", "x"]  # the finished "x" stays in the pool
    assert res.best[0].text == "yx"
    assert res.tokens_generated.tolist() == [3 + 3]


def test_select_top_rejects_bad_beam_size():
    with pytest.raises(ValueError, match="beam_size"):
        bs.select_top([], 0)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"beam_size": 0}, "beam_size must be an integer >= 1, got 0"),
        ({"temperature": -0.1}, "temperature must be a finite number >= 0 (0 = greedy), got -0.1"),
        ({"conf_ratio": 1.5}, "conf_ratio must be a finite number in [0, 1], got 1.5"),
        ({"reward_weight": float("nan")}, "reward_weight must be a finite number, got nan"),
        ({"max_line_tokens": 2.0}, "max_line_tokens must be an integer >= 1, got 2.0"),
    ],
)
def test_a_search_config_out_of_range_is_refused_in_python_as_on_the_command_line(bad, message):
    """DecodeConfig's fields carry their ranges; a config built in Python is checked against them, and
    ``goalrm decode``'s flags and the profiles' decoding keys take the same ranges and help from them."""
    from goalrm_core.pipeline.profile_rules import PROFILE_HELP, PROFILE_RULES
    from goalrm_core.study.decode_cli import build_parser

    with pytest.raises(ValueError) as caught:
        bs.DecodeConfig(**bad)
    assert str(caught.value) == message
    flags = {a.dest: a for a in build_parser()._actions}
    for f in dataclasses.fields(bs.DecodeConfig):
        assert flags[f.name].type is f.metadata["range"] and flags[f.name].default == f.default
        assert flags[f.name].help.endswith(f.metadata["help"])
    assert PROFILE_RULES["decode_max_steps"] is dataclasses.fields(bs.DecodeConfig)[6].metadata["range"]
    assert PROFILE_HELP["beam_size"] == dataclasses.fields(bs.DecodeConfig)[0].metadata["help"]


# ------------------------------------------------------------------------------- real tiny models


def test_q_guided_decode_end_to_end(tiny_lm, tiny_rm, tokenizer, tiny_goal):
    cfg = bs.DecodeConfig(
        beam_size=2,
        samples_per_step=2,
        temperature=1.0,
        temperature_decay=0.9,
        conf_ratio=0.3,
        max_steps=3,
        max_line_tokens=5,
        max_new_tokens=12,
    )
    rows, scorer = bs.q_guided_decode(tiny_lm, tiny_rm, tokenizer, tiny_goal, ["3 +4", "9 *2 -1"], cfg)
    assert [r["question"] for r in rows] == ["3 +4", "9 *2 -1"]
    for r in rows:
        assert 0 < r["num_tokens"] <= 12 and r["tokens_generated"] >= r["num_tokens"]
        assert -1.0 <= r["q"] <= 1.0 and np.isfinite(r["score"])
        assert r["score"] == pytest.approx(0.7 * r["q"] + 0.3 * r["mean_logprob"], abs=1e-5)
    assert 1 <= scorer.forward_passes <= 3  # one batched RM pass per step
    again, _ = bs.q_guided_decode(tiny_lm, tiny_rm, tokenizer, tiny_goal, ["3 +4", "9 *2 -1"], cfg)
    assert again == rows  # deterministic given the seed


def test_goal_scorer_q_is_offline_cosine(tiny_rm, tokenizer, tiny_goal):
    """The beam search's Q equals the offline Q-value at the prefix's last token: the final EOS for a
    finished candidate, the newline for an unfinished one (offline, it is followed by " " and EOS)."""
    scorer = bs.GoalScorer(tiny_rm, tokenizer, tiny_goal, ["3 +4\n"])
    cands = [bs.Candidate(0, [], "3+4=7\n"), bs.Candidate(0, [], "3+4=7\n#7", finished=True)]
    scorer(cands)
    offline = [
        q_values(s.response_hidden, tiny_goal).numpy()
        for _, s in iter_scored(tiny_rm, tokenizer, ["3 +4\n"] * 2, [c.text for c in cands], bucket=False)
    ]
    assert cands[0].q == pytest.approx(float(offline[0][-3]), abs=1e-4)
    assert cands[1].q == pytest.approx(float(offline[1][-1]), abs=1e-4)


def test_line_proposer_keeps_every_beam_within_its_token_budget(tiny_lm, tokenizer):
    """Beams of different lengths share one sampling call whose room fits the shortest; a longer
    beam's line is cut to its own budget (found when a beam outgrew the RM's max_len)."""
    prompts = ["3 +4\n", "9 *2 -1\n"]
    proposer = bs.PolicyLineProposer(
        tiny_lm, tokenizer, prompts, samples_per_step=3, temperature=2.0, max_line_tokens=8, max_new_tokens=10, seed=0
    )
    short = bs.Candidate(0, tokenizer("1", add_special_tokens=False)["input_ids"], "1")
    long_ids = tokenizer("12345678", add_special_tokens=False)["input_ids"]
    long = bs.Candidate(1, long_ids, "12345678")
    out = proposer([short, long], step=0)
    assert len(out) == 6
    assert all(len(c.token_ids) <= 10 for c in out)
    assert all(c.finished for c in out if c.question == 1 and len(c.token_ids) == 10)
    assert any(len(c.token_ids) > len(long_ids) for c in out if c.question == 1)  # the long beam still grew
