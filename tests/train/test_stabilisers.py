"""The contrastive term's stabilisers (issue 50, item 4; not in the paper): ``--contrastive_warmup_steps`` and
``--contrastive_stop_gradient goal``. Off by default, where they change no float and no stored RM's key; on,
the intended effect: β at step k, no gradient through the goal states. (The trainer runs of both are in
tests/train/test_trainer.py.)"""

import copy

import pytest
import torch
from transformers import AutoModel

from goalrm_core.cli.train_rm import parse_args
from goalrm_core.model.encoding import PreferenceCollator, encode_preference_rows
from goalrm_core.model.losses import contrastive_goal_loss
from goalrm_core.model.objective import reward_model_loss
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.model.settings import ContrastiveSettings
from goalrm_core.pipeline.profile_files import available_profiles, load_profile
from goalrm_core.study.recipe import notebook_recipe
from goalrm_core.tasks.toymath.tiny_run import tiny_pairs
from goalrm_core.train.config import CONTRASTIVE_FIELDS, STABILISER_FIELDS, TrainRMConfig
from goalrm_core.train.fingerprint import identity_settings
from goalrm_core.train.store import rm_key

ON = {"contrastive_warmup_steps": 4, "contrastive_stop_gradient": "goal"}


@pytest.fixture(scope="module")
def batch(tokenizer):
    items, _ = encode_preference_rows(tokenizer, tiny_pairs(6, seed=4), "toymath", 64)
    return PreferenceCollator(tokenizer.pad_token_id)(items)


@pytest.fixture
def model(tiny_config):
    torch.manual_seed(0)
    return RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear").train()


def contrastive(**over) -> TrainRMConfig:
    return TrainRMConfig(pretrain="local", reward_model_strategy="contrastive", sim_samples=4, unsim_samples=4, **over)


def loss_and_grads(model, batch, cfg, steps_taken=None):
    model.zero_grad()
    out = reward_model_loss(model, batch, cfg, torch.Generator().manual_seed(1), steps_taken=steps_taken)
    out.loss.backward()
    return out, {name: p.grad.clone() for name, p in model.named_parameters()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------------------------------------------- off by default


def test_every_stabiliser_is_off_by_default_and_in_no_profile():
    cfg = TrainRMConfig(pretrain="p")
    assert (cfg.contrastive_warmup_steps, cfg.contrastive_stop_gradient) == (0, "none")
    assert set(STABILISER_FIELDS) <= set(CONTRASTIVE_FIELDS)  # a vanilla RM does not depend on them
    for profile in available_profiles():  # the recipes of every committed profile, the frozen power run's included
        settings = load_profile(profile)
        assert all(settings.get(name, getattr(cfg, name)) == getattr(cfg, name) for name in STABILISER_FIELDS), profile
    recipe = notebook_recipe(load_profile("confident-power"))
    assert (recipe.contrastive_warmup_steps, recipe.contrastive_stop_gradient) == (0, "none")


def test_off_they_leave_a_stored_rms_key_alone_and_on_they_make_another_rm():
    plain = contrastive()
    assert not set(STABILISER_FIELDS) & set(plain.training_fields())  # the key of an RM stored before they existed
    keys = {rm_key(plain)}
    for name, value in ON.items():
        on = contrastive(**{name: value})
        assert on.training_fields()[name] == value and identity_settings(on)[name] == value
        keys.add(rm_key(on))
    assert len(keys) == 3
    vanilla = TrainRMConfig(pretrain="local", **ON)  # a baseline under a profile's stabilised rm: block
    assert rm_key(vanilla) == rm_key(TrainRMConfig(pretrain="local"))


def test_off_the_objective_is_the_same_float_for_float_at_every_step(model, batch):
    """With the stabilisers off the step a batch comes after changes nothing, and naming their defaults is the
    config without them."""
    base, base_grads = loss_and_grads(model, batch, contrastive())
    for steps_taken in (0, 3, 1000):
        out, grads = loss_and_grads(
            model,
            batch,
            contrastive(contrastive_warmup_steps=0, contrastive_stop_gradient="none"),
            steps_taken,
        )
        assert all(torch.equal(out.terms()[k], base.terms()[k]) for k in base.terms()) and same(grads, base_grads)


# ------------------------------------------------------------------------------------------------------ the warm-up


def test_the_warmup_weighs_the_term_by_beta_at_step_k(model, batch):
    cfg = contrastive(contrastive_loss_beta=0.5, contrastive_warmup_steps=4)
    full, _ = loss_and_grads(model, batch, cfg)  # evaluation (no step): the full β
    first, first_grads = loss_and_grads(model, batch, cfg, steps_taken=0)
    assert first.contrastive_loss.item() == 0.0  # β = 0: the first step trains the preference loss alone
    pairwise, pairwise_grads = loss_and_grads(model, batch, TrainRMConfig(pretrain="local"))
    assert torch.equal(first.loss, pairwise.loss)
    assert all(torch.allclose(first_grads[k], pairwise_grads[k], rtol=0, atol=1e-7) for k in pairwise_grads)
    for k, share in ((1, 0.25), (2, 0.5), (3, 0.75)):
        out, _ = loss_and_grads(model, batch, cfg, steps_taken=k)
        assert out.contrastive_loss.item() == pytest.approx(share * full.contrastive_loss.item(), rel=1e-6)
    after, _ = loss_and_grads(model, batch, cfg, steps_taken=4)
    assert torch.equal(after.contrastive_loss, full.contrastive_loss)


def test_the_warmup_refuses_bad_values_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--pretrain", "p", "--contrastive_warmup_steps", "-1"])
    assert exit_.value.code == 2
    assert "--contrastive_warmup_steps: must be an integer >= 0 (0 = off), got -1" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^--contrastive_warmup_steps 500 is longer than --max_steps 400: "):
        TrainRMConfig(pretrain="p", contrastive_warmup_steps=500, max_steps=400)
    with pytest.raises(ValueError, match="contrastive_warmup_steps must be an integer >= 0"):
        TrainRMConfig(pretrain="p", contrastive_warmup_steps=2.5)


# ------------------------------------------------------------------------------------------------ the stop-gradient


def test_the_stop_gradient_keeps_the_value_and_cuts_the_goal_side(monkeypatch):
    from goalrm_core.model import losses

    generator = torch.Generator().manual_seed(0)
    chosen = torch.randn(3, 6, 4, generator=generator, requires_grad=True)
    rejected = torch.randn(3, 6, 4, generator=generator, requires_grad=True)
    n = torch.tensor([4, 5, 6])

    def term(stop: str):
        settings = ContrastiveSettings(sim_samples=5, unsim_samples=5, contrastive_stop_gradient=stop)
        return contrastive_goal_loss(chosen, rejected, n, n, settings, torch.Generator().manual_seed(2))

    plain, stopped = term("none"), term("goal")
    assert torch.equal(plain, stopped)  # the same value: detaching changes no float of the forward pass
    plain_chosen, plain_rejected = torch.autograd.grad(plain, (chosen, rejected))
    (stopped_chosen,) = torch.autograd.grad(stopped, (chosen,))
    assert plain_rejected.abs().sum() > 0
    # the dispreferred response enters the term as goal states only: detached, it gets no gradient at all
    assert torch.autograd.grad(term("goal"), (rejected,), allow_unused=True) == (None,)
    assert not torch.equal(stopped_chosen, plain_chosen) and stopped_chosen.abs().sum() > 0

    # the preferred response's gradient is its source states' alone: the term with every goal state a constant of
    # the same values (the loss gathers source, goal, source, goal: mean_pair_score's arguments, in order)
    gather, calls = losses._gather, []

    def goals_as_constants(hidden, positions):
        calls.append(hidden)
        return gather(hidden.detach() if len(calls) % 2 == 0 else hidden, positions)

    monkeypatch.setattr(losses, "_gather", goals_as_constants)
    reference = term("none")
    assert len(calls) == 4 and calls[3] is rejected and torch.equal(reference, stopped)
    assert torch.equal(torch.autograd.grad(reference, (chosen,))[0], stopped_chosen)


def test_the_stop_gradient_refuses_an_unknown_side_in_one_line(capsys):
    with pytest.raises(ValueError, match=r"^unknown contrastive_stop_gradient 'source'; valid: none, goal$"):
        TrainRMConfig(pretrain="p", contrastive_stop_gradient="source")
    with pytest.raises(SystemExit):
        parse_args(["--pretrain", "p", "--contrastive_stop_gradient", "source"])
    assert "--contrastive_stop_gradient: invalid choice: 'source'" in capsys.readouterr().err


def test_the_stop_gradient_reaches_the_loss_from_the_config(model, batch):
    plain, plain_grads = loss_and_grads(model, batch, contrastive())
    stopped, stopped_grads = loss_and_grads(model, batch, contrastive(contrastive_stop_gradient="goal"))
    assert torch.equal(plain.loss, stopped.loss) and not same(plain_grads, stopped_grads)
    assert torch.equal(plain_grads["score.weight"], stopped_grads["score.weight"])  # the head never reads the term
