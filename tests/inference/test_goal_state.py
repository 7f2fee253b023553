"""The one Q function, ``goal_state.q_values``: every reader of Q gets the numbers the dense scorer has
always written, on a tiny RM's real hidden states (fixtures tiny_rm, tiny_goal in tests/conftest.py)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from goalrm_core.inference.forward import iter_scored
from goalrm_core.inference.goal_state import last_token_states, q_values
from goalrm_core.inference.scoring import score_generations
from goalrm_core.model.templates import apply_template
from goalrm_core.study.representations import last_token_frame

ROWS = [
    {"question": "3 +4", "generated_solution": "3+4=7\n#7", "is_correct": True},
    {"question": "9 *2 -1", "generated_solution": "9*2=18\n18-1=16\n#16", "is_correct": False},
    {"question": "2 +2", "generated_solution": "2+2=4\n#4", "is_correct": True},
]


@pytest.fixture(scope="module")
def states(tiny_rm, tokenizer):
    """Every response token's hidden state of ROWS, as the dense scorer sees them."""
    prompts = [apply_template("toymath", r["question"]) for r in ROWS]
    by_index = dict(iter_scored(tiny_rm, tokenizer, prompts, [r["generated_solution"] for r in ROWS]))
    return torch.cat([by_index[i].response_hidden for i in range(len(ROWS))])


def test_q_is_the_scorers_cosine_bit_for_bit(states, tiny_goal):
    """What ``scoring.cosine_to_goal`` computed (and what the scored files hold) and what the
    decoding module's online and beam-search Q computed (the same cosine, clamped): identical."""
    goal = torch.tensor(tiny_goal[0])
    scorer_formula = F.cosine_similarity(states, goal.unsqueeze(0), dim=-1)
    decoding_formula = F.cosine_similarity(states, goal[None, :], dim=-1).clamp(-1.0, 1.0)
    q = q_values(states, tiny_goal)
    assert q.dtype == torch.float32 and q.shape == (states.shape[0],)
    assert torch.equal(q, scorer_formula) and torch.equal(q, decoding_formula)
    # one state at a time, numpy in, (hidden,) goal: the same numbers
    assert torch.equal(torch.stack([q_values(s.numpy(), goal) for s in states]), q)


def test_q_against_the_former_numpy_cosine(states, tiny_goal):
    """``goal_state.cosine_rows`` (numpy, for the last-token tables) rounded differently: it agrees
    to float32 precision, not bit for bit."""
    s, g = states.numpy(), tiny_goal.reshape(-1)
    former = s @ g / (np.linalg.norm(s, axis=1) * np.linalg.norm(g) + 1e-12)
    np.testing.assert_allclose(q_values(s, tiny_goal).numpy(), former, rtol=0, atol=1e-6)


def test_every_reader_gets_q_values(tiny_rm, tokenizer, tiny_goal, states):
    """The scorer's ``cosine_sim`` and notebook 03's ``cosine_to_goal`` column are ``q_values``."""
    scored = score_generations(
        tiny_rm, tokenizer, ROWS, "toymath", torch.tensor(tiny_goal[0]), progress=False, encoding="split", readout="eos"
    )
    lasts = last_token_states(tiny_rm, tokenizer, ROWS, "toymath", encoding="split", readout="eos")
    start = 0
    for row in scored:
        n = row["num_actions"]
        assert row["cosine_sim"] == q_values(states[start : start + n], tiny_goal).tolist()
        start += n
    frame = last_token_frame(lasts, ROWS, q_values(lasts, tiny_goal))
    assert frame["cosine_to_goal"].tolist() == q_values(lasts, tiny_goal).tolist()
    assert frame["cosine_to_goal"].tolist() == [r["cosine_sim"][-1] for r in scored]


def test_q_stays_within_minus_one_and_one():
    x = torch.tensor([[1e-3, 2e-3, 3e-3]])
    assert q_values(x, x).item() <= 1.0 and q_values(-x, x).item() >= -1.0


def test_goal_states_of_several_methods_are_each_methods_own(tiny_rm, tokenizer):
    """One pass for all methods gives each method's goal bit for bit, and each is the mean it names:
    the random methods read one drawn response (the same one), random_token one drawn token of it."""
    import random

    from goalrm_core.choices import GOAL_METHODS
    from goalrm_core.inference.goal_state import goal_state, goal_states

    prompts = [apply_template("toymath", r["question"]) for r in ROWS]
    responses = [r["generated_solution"] for r in ROWS]
    kw = dict(seed=3, batch_size=2, encoding="split", readout="eos")
    together = goal_states(tiny_rm, tokenizer, prompts, responses, GOAL_METHODS, **kw)
    assert list(together) == list(GOAL_METHODS)
    for method in GOAL_METHODS:
        assert np.array_equal(together[method], goal_state(tiny_rm, tokenizer, prompts, responses, method, **kw)), (
            method
        )
    by_index = dict(iter_scored(tiny_rm, tokenizer, prompts, responses, batch_size=2))
    hidden = [by_index[i].response_hidden.double() for i in range(len(ROWS))]
    rng = random.Random(3)
    pick = rng.randrange(len(ROWS))
    token = rng.randrange(len(hidden[pick]))
    expected = {
        "mean_last": sum(h[-1] for h in hidden) / len(hidden),
        "mean_all_tokens": torch.cat(hidden).mean(0),
        "random_response": hidden[pick][-1],
        "random_token": hidden[pick][token],
    }
    for method, goal in expected.items():
        assert np.allclose(together[method][0], goal.float().numpy(), atol=1e-5), method


def test_a_second_get_representation_into_one_folder_hides_no_earlier_pairing(tmp_path, tiny_config, tokenizer, capsys):
    """Two get-representation runs into one --save-dir with two RMs: the manifest keeps both runs, so the first RM's
    official goal-state file (which the second run did not rewrite) still names its RM. Paired with the second RM
    in eval-rm it is refused in one line (exit 2); paired with its own RM it scores."""
    import json

    from transformers import LlamaModel

    from goalrm_core.cli import main
    from goalrm_core.data import manifest
    from goalrm_core.data.io import ArtifactError, write_jsonl
    from goalrm_core.inference.goal_state import check_goal_state_owner
    from goalrm_core.model.reward_model import RewardModel, save_reward_model

    rms = {}
    for seed, name in ((0, "first_rm"), (1, "second_rm")):
        torch.manual_seed(seed)
        rms[name] = save_reward_model(
            RewardModel(LlamaModel(tiny_config)).eval(), tmp_path / name, tokenizer, training_args={"seed": seed}
        )
    write_jsonl(
        tmp_path / "pairs.jsonl",
        [
            {"question": "1 +2", "correct": "1+2=3\n#3", "incorrect": "1+2=4\n#4"},
            {"question": "4 -1", "correct": "4-1=3\n#3", "incorrect": "4-1=5\n#5"},
        ],
    )
    rep = tmp_path / "representation"
    for name in rms:
        assert (
            main(
                [
                    "get-representation",
                    f"--dataset-path={tmp_path / 'pairs.jsonl'}",
                    f"--reward-model-path={rms[name]}",
                    f"--save-dir={rep}",
                    "--template=toymath",
                ]
            )
            == 0
        )
    first_goal, second_goal = rep / "first_rm_goal_state_embedding.npy", rep / "second_rm_goal_state_embedding.npy"
    made = json.loads((rep / manifest.MANIFEST).read_text())
    assert [h["producer"]["reward_model_path"] for h in made["history"]] == [str(rms["first_rm"])]
    assert made["producer"]["reward_model_path"] == str(rms["second_rm"])

    with pytest.raises(
        ArtifactError,
        match=r"first_rm_goal_state_embedding.npy is another RM's goal state: it was made from .*first_rm",
    ):
        check_goal_state_owner(first_goal, rms["second_rm"])
    assert check_goal_state_owner(first_goal, rms["first_rm"])["goal_state_config_hash"] == manifest.config_hash(
        rms["first_rm"]
    )
    assert check_goal_state_owner(second_goal, rms["second_rm"])["goal_state_config_hash"] == manifest.config_hash(
        rms["second_rm"]
    )
    with pytest.raises(
        ArtifactError, match="another RM's goal state"
    ):  # the shared goal_state.npy is the second RM's now
        check_goal_state_owner(rep / "goal_state.npy", rms["first_rm"])

    write_jsonl(
        tmp_path / "gens" / "toy" / "greedy.jsonl",
        [
            {
                "question": "1 +2",
                "generated_solution": "1+2=3\n#3",
                "predicted_answer": 3,
                "expected_answer": 3,
                "is_correct": True,
            },
            {
                "question": "4 +4",
                "generated_solution": "4+4=9\n#9",
                "predicted_answer": 9,
                "expected_answer": 8,
                "is_correct": False,
            },
        ],
    )
    capsys.readouterr()
    eval_args = [f"--completions_data_path={tmp_path / 'gens'}", "--benchmarks", "toy", "--template", "toymath"]
    assert (
        main(
            [
                "eval-rm",
                f"--reward_model_path={rms['second_rm']}",
                f"--goal_state_path={first_goal}",
                f"--save_dir={tmp_path / 'eval-wrong'}",
                *eval_args,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"goalrm eval-rm: error: {first_goal} is another RM's goal state: it was made from {rms['first_rm']}"
    ), err
    # the first RM's own pairing still scores (its file is still what the first run wrote, the manifest says so)
    assert (
        main(
            [
                "eval-rm",
                f"--reward_model_path={rms['first_rm']}",
                f"--goal_state_path={first_goal}",
                f"--save_dir={tmp_path / 'eval-right'}",
                *eval_args,
            ]
        )
        == 0
    )
    # a file the first run wrote and someone changed since is refused, naming the run that wrote it
    np.save(first_goal, np.ones(tiny_config.hidden_size, dtype=np.float32))
    with pytest.raises(
        ArtifactError, match=r"first_rm_goal_state_embedding.npy: changed since `goalrm get-representation"
    ):
        check_goal_state_owner(first_goal, rms["first_rm"])
