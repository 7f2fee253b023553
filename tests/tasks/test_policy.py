import pytest

from goalrm_core.data.questions import preference_pairs
from goalrm_core.inference.sampler import sample_completions
from goalrm_core.tasks.toymath import problems as toymath
from goalrm_core.tasks.toymath.policy import PolicyConfig, build_policy, train_sft


@pytest.fixture(scope="module")
def trained(tokenizer):
    cfg = PolicyConfig(hidden_size=32, num_layers=2, steps=40, batch_size=16, learning_rate=3e-3, warmup_steps=5)
    problems = toymath.generate_problems(toymath.ToyMathConfig(min_steps=1, max_steps=2, operand_max=9), 200, seed=0)
    model = build_policy(tokenizer, cfg)
    history = train_sft(model, tokenizer, [(p.question + "\n", p.solution()) for p in problems], cfg, progress=False)
    return model, history


def test_sft_loss_goes_down(trained):
    _, history = trained
    first = sum(h["loss"] for h in history[:5]) / 5
    last = sum(h["loss"] for h in history[-5:]) / 5
    assert last < 0.8 * first


def test_sampling_is_deterministic_given_seed(trained, tokenizer):
    model, _ = trained
    prompts = ["1 +2\n", "3 -1 +4\n"]
    a = sample_completions(model, tokenizer, prompts, n=3, seed=5, max_new_tokens=20, progress=False)
    b = sample_completions(model, tokenizer, prompts, n=3, seed=5, max_new_tokens=20, progress=False)
    assert [[c.text for c in row] for row in a] == [[c.text for c in row] for row in b]
    assert len(a) == 2 and all(len(row) == 3 for row in a)
    for c in a[0]:
        assert c.min_logprob <= c.mean_logprob <= 0
        assert 1 <= c.num_tokens <= 20


def test_greedy_repeats(trained, tokenizer):
    model, _ = trained
    a = sample_completions(model, tokenizer, ["2 +2\n"], n=2, greedy=True, seed=1, max_new_tokens=20, progress=False)
    assert a[0][0].text == a[0][1].text


def test_preference_pairs_pair_correct_with_incorrect():
    gens = [
        {"question": "q1", "generated_solution": "good", "is_correct": True, "first_error_char": None},
        {"question": "q1", "generated_solution": "good", "is_correct": True, "first_error_char": None},
        {"question": "q1", "generated_solution": "bad1", "is_correct": False, "first_error_char": 0},
        {"question": "q1", "generated_solution": "bad2", "is_correct": False, "first_error_char": 1},
        {"question": "q2", "generated_solution": "bad", "is_correct": False, "first_error_char": 0},
        {"question": "q3", "generated_solution": "ok", "is_correct": True, "first_error_char": None},
    ]
    pairs = preference_pairs(gens, 2, seed=0, pairing="each_incorrect", carry=("first_error_char",))
    # q1: its one distinct correct text pairs with both incorrect ones; q2 and q3 lack one side
    assert [(p["question"], p["correct"]) for p in pairs] == [("q1", "good")] * 2
    assert {p["incorrect"] for p in pairs} == {"bad1", "bad2"}
    assert {p["incorrect"]: p["incorrect_first_error_char"] for p in pairs} == {"bad1": 0, "bad2": 1}
    assert len(preference_pairs(gens, 1, seed=0, pairing="each_incorrect")) == 1
