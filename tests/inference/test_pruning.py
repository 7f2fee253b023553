"""Online pruning: the rule while generating, its replay on recorded Q-values, and the threshold chosen
by replaying it (tiny local models: fixtures tiny_lm, tiny_rm, tiny_goal in tests/conftest.py)."""

import numpy as np
import pytest
import torch

from goalrm_core.inference.pruning import PruneConfig, choose_online_threshold, simulate_pruning, stop_now
from goalrm_core.inference.sampler import sample

PROMPTS = ["3 +4\n", "9 *2 -1\n"]


def test_replayed_pruning_matches_online_pruning(tiny_lm, tiny_rm, tokenizer, tiny_goal):
    """Replaying the online rule on recorded Q-values gives the online run's stop positions, so a
    threshold tuned on scored samples means the same thing while generating."""
    kw = dict(n=4, temperature=1.0, max_new_tokens=14, seed=5, rm=tiny_rm, goal=tiny_goal)
    recorded = sample(tiny_lm, tokenizer, PROMPTS, **kw)
    threshold = float(np.float32(np.median([q for g in recorded for s in g for q in s.q_values[5:]])))
    for keep_last in (True, False):
        rule = PruneConfig(threshold, 5, keep_last)
        online = sample(tiny_lm, tokenizer, PROMPTS, prune=rule, **kw)
        for g, h in zip(recorded, online):
            assert simulate_pruning([s.q_values for s in g], rule) == [s.stopped_at for s in h]
        assert any(s.pruned for g in online for s in g)


@pytest.mark.parametrize("keep_last", [True, False])
def test_stop_now_and_the_replay_are_one_rule(keep_last):
    """Step the tensor rule over random Q-values of one question in lockstep: it stops the samples where
    the replay says, including the spared last sample and ties (values on a coarse grid)."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        q = np.round(rng.uniform(-0.5, 0.5, size=(5, 9)), 1).tolist()
        rule = PruneConfig(threshold=0.0, skip_first=2, keep_last=keep_last)
        stopped = [None] * 5
        alive = {0: 5}
        for t in range(9):
            running = [i for i in range(5) if stopped[i] is None]
            if not running:
                break
            stop = stop_now(
                torch.tensor([q[i][t] for i in running]),
                torch.full((len(running),), t),
                torch.zeros(len(running), dtype=torch.long),
                alive,
                rule,
            )
            for i, s in zip(running, stop.tolist()):
                if s:
                    stopped[i] = t
        assert stopped == simulate_pruning(q, rule)


def test_choose_online_threshold_prefers_accuracy_then_fewer_tokens():
    def row(answer, ok, q):
        return {
            "question": "1 +1",
            "predicted_answer": answer,
            "is_correct": ok,
            "num_generated_tokens": len(q) - 1,
            "cosine_sim": q,
        }

    # the correct samples keep a high Q; the wrong ones drop at position 1
    group = [
        row(2, True, [0.9, 0.8, 0.8, 0.8]),
        row(3, False, [0.9, -0.2, -0.2, -0.2]),
        row(3, False, [0.9, -0.3, -0.3, -0.3]),
    ]
    best, table = choose_online_threshold([group], candidates=[-0.5, 0.0, 0.85], skip_first=1)
    # -0.5 stops nothing and the wrong answer wins the vote; 0.0 and 0.85 both stop the wrong samples at
    # position 1 (0.85 would stop the correct one too, but it is the last and is spared): equal accuracy
    # and tokens, so the lower threshold wins
    assert best == 0.0
    assert table.set_index("threshold")["tokens"].tolist() == [3 + 3 + 3, 3 + 2 + 2, 3 + 2 + 2]
    assert table.set_index("threshold").loc[0.0, "accuracy"] == 1.0
    assert table.set_index("threshold").loc[-0.5, "accuracy"] == 0.0
    assert table["chosen"].tolist() == [False, True, False]


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(skip_first=-1), "skip_first"),
        (dict(skip_first=1.5), "skip_first"),
        (dict(threshold=float("nan")), "threshold"),
        (dict(threshold="0.3"), "threshold"),
    ],
)
def test_prune_config_rejects_bad_values(bad, match):
    with pytest.raises(ValueError, match=match):
        PruneConfig(**bad)
