import math

import pytest
import torch

from goalrm_core.model.losses import contrastive_goal_loss, log_exp_loss, pairwise_loss, sample_response_positions
from goalrm_core.model.settings import ContrastiveSettings as Settings


def test_pairwise_loss_by_hand():
    chosen, rejected = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0])
    expected = (-math.log(1 / (1 + math.exp(-1))) - math.log(1 / (1 + math.exp(2)))) / 2
    assert pairwise_loss(chosen, rejected).item() == pytest.approx(expected, rel=1e-6)
    # a margin of 1 on the first pair makes its difference 0: -log σ(0) = log 2
    with_margin = pairwise_loss(chosen[:1], rejected[:1], margin=1.0)
    assert with_margin.item() == pytest.approx(math.log(2), rel=1e-6)
    assert log_exp_loss(chosen, rejected).item() == pytest.approx(expected, rel=1e-6)


def _hidden_with(vectors_by_position, seq_len=4):
    hidden = torch.zeros(1, seq_len, 2)
    for pos, vec in vectors_by_position.items():
        hidden[0, pos] = torch.tensor(vec, dtype=torch.float)
    return hidden


def test_contrastive_loss_by_hand():
    # Response of one token (the last position): every positive pair compares it with itself
    # (cos = 1), every negative pair compares it with the rejected last state.
    chosen = _hidden_with({3: [1.0, 0.0]})
    rejected_orthogonal = _hidden_with({3: [0.0, 1.0]})
    one = torch.tensor([1])
    loss = contrastive_goal_loss(
        chosen, rejected_orthogonal, one, one, Settings(contrastive_loss_beta=0.5, sim_samples=3, unsim_samples=5)
    )
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    expected = 0.5 * (-math.log(sig(1.0)) - math.log(1 - sig(0.0)))
    assert loss.item() == pytest.approx(expected, rel=1e-6)

    rejected_opposite = _hidden_with({3: [-1.0, 0.0]})
    loss = contrastive_goal_loss(
        chosen, rejected_opposite, one, one, Settings(contrastive_loss_beta=2.0, sim_samples=1, unsim_samples=1)
    )
    assert loss.item() == pytest.approx(2.0 * (-math.log(sig(1.0)) - math.log(1 - sig(-1.0))), rel=1e-6)


def test_contrastive_loss_cosine_avg_by_hand():
    # Chosen response = positions 2,3 with orthogonal states; rejected goal states average to [1, 1].
    chosen = _hidden_with({2: [1.0, 0.0], 3: [0.0, 1.0]})
    rejected = _hidden_with({2: [1.0, 0.0], 3: [0.0, 1.0]})
    two = torch.tensor([2])
    g = torch.Generator().manual_seed(0)
    settings = Settings(contrastive_strategy="cosine_avg", sim_samples=64, unsim_samples=64)
    loss = contrastive_goal_loss(chosen, rejected, two, two, settings, g)
    # every negative compares a unit axis with the averaged goal: cos = 1/sqrt(2)
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    neg_term = -math.log(1 - sig(1 / math.sqrt(2)))
    assert loss.item() > 0.5 * neg_term  # positive term is > 0 too
    assert loss.item() < 0.5 * (neg_term - math.log(sig(0.0)))


def test_sampled_positions_stay_inside_responses():
    g = torch.Generator().manual_seed(1)
    num_actions = torch.tensor([1, 3, 10, 50])
    seq_len = 60
    for pct in (0.0, 0.5, 0.9):
        pos = sample_response_positions(num_actions, seq_len, 2000, pct, g)
        first_allowed = seq_len - torch.ceil(num_actions * (1 - pct)).long().clamp(min=1)
        assert (pos <= seq_len - 1).all()
        assert (pos >= first_allowed.unsqueeze(1)).all()
        # the whole allowed range is reachable
        assert (pos.min(dim=1).values == first_allowed).all()


def test_contrastive_loss_ignores_prompt_and_padding():
    """Changing states outside the responses must not change the loss."""
    torch.manual_seed(0)
    chosen, rejected = torch.randn(2, 12, 8), torch.randn(2, 12, 8)
    n_chosen, n_rejected = torch.tensor([3, 5]), torch.tensor([4, 2])
    settings = Settings(sim_samples=8, unsim_samples=8)
    base = contrastive_goal_loss(chosen, rejected, n_chosen, n_rejected, settings, torch.Generator().manual_seed(3))
    chosen2, rejected2 = chosen.clone(), rejected.clone()
    chosen2[0, :9] = 100.0
    chosen2[1, :7] = -5.0
    rejected2[0, :8] = 7.0
    rejected2[1, :10] = 3.0
    again = contrastive_goal_loss(chosen2, rejected2, n_chosen, n_rejected, settings, torch.Generator().manual_seed(3))
    assert again.item() == pytest.approx(base.item(), rel=1e-6)


def test_generator_makes_the_loss_reproducible():
    torch.manual_seed(0)
    chosen, rejected = torch.randn(3, 20, 8), torch.randn(3, 20, 8)
    n = torch.tensor([10, 15, 20])
    a = contrastive_goal_loss(chosen, rejected, n, n, generator=torch.Generator().manual_seed(7))
    b = contrastive_goal_loss(chosen, rejected, n, n, generator=torch.Generator().manual_seed(7))
    c = contrastive_goal_loss(chosen, rejected, n, n, generator=torch.Generator().manual_seed(8))
    assert a.item() == b.item() != c.item()
    assert a.dim() == 0


def test_bad_inputs_raise_clear_errors():
    h = torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match=r"row 1 has an empty response"):
        contrastive_goal_loss(h, h, torch.tensor([2, 0]), torch.tensor([1, 1]))
    with pytest.raises(ValueError, match=r"cosine, cosine_avg"):
        Settings(contrastive_strategy="dot")
    with pytest.raises(ValueError, match=r"\(2, 5, 4\) and \(2, 5, 3\)"):
        contrastive_goal_loss(h, torch.randn(2, 5, 3), torch.tensor([2, 2]), torch.tensor([1, 1]))


# ---------------------------------------------------------------- the official code's sampling forms

# this section's own names, imported beside its tests (the module is already imported above): noqa: E402
from goalrm_core.model.losses import earliest_window_positions, mean_pair_score  # noqa: E402


def test_earliest_window_positions_follow_the_official_formula():
    # a 10-token response at positions 2..11 of a 12-long sequence; p = 0.5
    n, seq_len = torch.tensor([10]), 12
    u = torch.tensor([[0.0, 0.25, 0.5, 0.999]])
    # f = (0.5 - 1)·u + 1;  back = floor(f·10 + 1);  position = 12 - back
    expected = [12 - math.floor(((0.5 - 1) * x + 1) * 10 + 1) for x in (0.0, 0.25, 0.5, 0.999)]
    assert earliest_window_positions(n, seq_len, u, 0.5)[0].tolist() == expected == [1, 3, 4, 6]


def test_percentile_window_direction():
    # p = 0.8: "earliest" draws from the first fifth of the response (and the token before it, at u = 0
    # exactly, as the official indexing does); "latest" from its last fifth
    g = torch.Generator().manual_seed(0)
    n, seq_len = torch.tensor([50]), 60  # response at positions 10..59
    u = torch.rand((1, 2000), generator=g, dtype=torch.float64)
    early = earliest_window_positions(n, seq_len, u, 0.8)
    late = sample_response_positions(n, seq_len, 2000, 0.8, g)
    assert early.min() >= 9 and early.max() <= 10 + 10
    assert late.min() >= 60 - 10 and late.max() == 59


def test_pair_forms_by_hand():
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    source = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    goal = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]])
    matched, every = (mean_pair_score(source, goal, Settings(contrastive_pairs=p)).item() for p in ("matched", "all"))
    # matched: cos(s0, g0) = 1, cos(s1, g1) = 0
    assert matched == pytest.approx((sig(1) + sig(0)) / 2)
    # all: cos = 1, -1, 0, 0 over the four combinations
    assert every == pytest.approx((sig(1) + sig(-1) + 2 * sig(0)) / 4)
    assert every != pytest.approx(matched)


def test_official_and_matched_forms_differ_but_agree_on_constant_states():
    g = torch.Generator().manual_seed(0)
    chosen, rejected = torch.randn(3, 8, 4, generator=g), torch.randn(3, 8, 4, generator=g)
    n = torch.tensor([5, 8, 3])
    forms = {
        (w, p): contrastive_goal_loss(
            chosen,
            rejected,
            n,
            n,
            Settings(contrastive_window=w, contrastive_pairs=p, sim_samples=4, unsim_samples=4),
            torch.Generator().manual_seed(1),
        ).item()
        for w in ("earliest", "latest")
        for p in ("all", "matched")
    }
    assert len({round(v, 6) for v in forms.values()}) == 4
    # every state of a response equal: every form is the same hand-computed number
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    same_c = torch.tensor([1.0, 0.0, 0.0, 0.0]).expand(3, 8, 4)
    same_r = torch.tensor([0.0, 1.0, 0.0, 0.0]).expand(3, 8, 4)
    for w in ("earliest", "latest"):
        for p in ("all", "matched"):
            loss = contrastive_goal_loss(same_c, same_r, n, n, Settings(contrastive_window=w, contrastive_pairs=p))
            assert loss.item() == pytest.approx(0.5 * (-math.log(sig(1)) - math.log(1 - sig(0))), rel=1e-6)
    with pytest.raises(ValueError, match="contrastive_window 'middle'"):
        Settings(contrastive_window="middle")
    with pytest.raises(ValueError, match="contrastive_pairs 'some'"):
        Settings(contrastive_pairs="some")


def test_a_registered_strategy_gets_its_hyperparameter_from_the_config(monkeypatch):
    """Adding a contrastive strategy is one registry entry: the objective hands it the config fields
    it names, and the contrastive term scores with it."""
    import dataclasses
    import types

    from goalrm_core.model import strategies
    from goalrm_core.model.objective import reward_model_loss
    from goalrm_core.train.config import TrainRMConfig

    def scaled(source, goal, contrastive_temperature):
        return strategies.cosine_matrix(source, goal) / contrastive_temperature

    monkeypatch.setitem(
        strategies.CONTRASTIVE_STRATEGIES,
        "scaled",
        strategies.ContrastiveStrategy(scaled, ("contrastive_temperature",)),
    )
    chosen, rejected, one = _hidden_with({3: [1.0, 0.0]}), _hidden_with({3: [0.0, 1.0]}), torch.tensor([1])
    settings = Settings(
        contrastive_strategy="scaled",
        sim_samples=2,
        unsim_samples=2,
        contrastive_pairs="matched",
        options={"contrastive_temperature": 0.5},
    )
    loss = contrastive_goal_loss(chosen, rejected, one, one, settings)
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    assert loss.item() == pytest.approx(0.5 * (-math.log(sig(2.0)) - math.log(1 - sig(0.0))), rel=1e-6)
    with pytest.raises(ValueError, match=r"'scaled' takes the options \['contrastive_temperature'\], got \[\]"):
        Settings(contrastive_strategy="scaled")

    class Model:  # the RM's outputs for one pair: chosen row first, then rejected
        def __call__(self, input_ids, attention_mask, num_actions=None):
            return types.SimpleNamespace(
                reward=torch.tensor([1.0, 0.0]), hidden=torch.cat([chosen, rejected]), values=None
            )

    batch = {
        "input_ids": torch.zeros(2, 4, dtype=torch.long),
        "attention_mask": torch.ones(2, 4, dtype=torch.long),
        "num_actions": torch.tensor([1, 1]),
    }
    # the config with the new field, as train/config.py would declare it
    WithTemperature = dataclasses.make_dataclass(
        "WithTemperature", [("contrastive_temperature", float, 0.5)], bases=(TrainRMConfig,)
    )
    cfg = WithTemperature(
        reward_model_strategy="contrastive", sim_samples=2, unsim_samples=2, contrastive_pairs="matched"
    )
    cfg.contrastive_strategy = "scaled"  # registered after the config's choices were read
    assert cfg.contrastive_settings() == settings
    assert reward_model_loss(Model(), batch, cfg).contrastive_loss.item() == pytest.approx(loss.item(), rel=1e-6)
    cfg.contrastive_temperature = 2.0
    assert reward_model_loss(Model(), batch, cfg).contrastive_loss.item() != pytest.approx(loss.item(), rel=1e-3)


# ---------------------------------------------------------- the strategy contract: similarities in, pairing by the loss


def _register(monkeypatch, name, similarity, **entry):
    from goalrm_core.model import strategies

    monkeypatch.setitem(strategies.CONTRASTIVE_STRATEGIES, name, strategies.ContrastiveStrategy(similarity, **entry))


def test_the_loss_pairs_what_a_strategy_scores(monkeypatch):
    """A strategy sees whole rows under ``all`` (every source with every goal) and one pair per row under
    ``matched``; with ``average_goals`` it sees one goal per row either way."""
    from goalrm_core.model.strategies import cosine_matrix

    seen = []

    def recording(source, goal):
        seen.append((tuple(source.shape), tuple(goal.shape), source.dtype, goal.dtype))
        return cosine_matrix(source, goal)

    _register(monkeypatch, "recording", recording)
    _register(monkeypatch, "recording_avg", recording, average_goals=True)
    g = torch.Generator().manual_seed(0)
    chosen, rejected = (
        torch.randn(2, 9, 4, generator=g).to(torch.bfloat16),
        torch.randn(2, 9, 4, generator=g).to(torch.bfloat16),
    )
    n = torch.tensor([5, 9])
    expected = {
        ("recording", "all"): [((2, 3, 4), (2, 3, 4)), ((2, 5, 4), (2, 5, 4))],
        ("recording", "matched"): [((6, 1, 4), (6, 1, 4)), ((10, 1, 4), (10, 1, 4))],
        ("recording_avg", "all"): [((2, 3, 4), (2, 1, 4)), ((2, 5, 4), (2, 1, 4))],
        ("recording_avg", "matched"): [((2, 3, 4), (2, 1, 4)), ((2, 5, 4), (2, 1, 4))],
    }
    for (name, pairs), shapes in expected.items():
        seen.clear()
        contrastive_goal_loss(
            chosen,
            rejected,
            n,
            n,
            Settings(contrastive_strategy=name, contrastive_pairs=pairs, sim_samples=3, unsim_samples=5),
            g,
        )
        assert [s[:2] for s in seen] == shapes, (name, pairs)
        assert {s[2:] for s in seen} == {(torch.float32, torch.float32)}  # the states arrive as float32


def test_a_strategy_that_pairs_by_itself_is_refused(monkeypatch):
    """The earlier contract (a strategy returns its mean score over the pairs it chose) or a matched-only
    result (the k-th source with the k-th goal) cannot slip through: the loss wants the whole matrix."""
    import torch.nn.functional as F

    _register(
        monkeypatch, "mean_score", lambda source, goal: torch.sigmoid(F.cosine_similarity(source, goal, dim=-1)).mean()
    )
    _register(monkeypatch, "diagonal", lambda source, goal: F.cosine_similarity(source, goal, dim=-1))
    h, n = torch.randn(2, 6, 4), torch.tensor([6, 6])
    for name, shape in (("mean_score", r"\(\)"), ("diagonal", r"\(2, 4\)")):
        with pytest.raises(ValueError, match=rf"strategy '{name}' returned shape {shape}, expected \(2, 4, 4\)"):
            contrastive_goal_loss(h, h, n, n, Settings(contrastive_strategy=name, sim_samples=4, unsim_samples=4))


def test_the_settings_are_the_configs_fields_by_name():
    """Every contrastive setting is the trainer config's field of the same name, type, default, help and
    valid values (one definition, nothing renamed on the way to the loss); the settings object is read-only."""
    import dataclasses

    from goalrm_core.train.config import CONTRASTIVE_FIELDS, TrainRMConfig

    config = {f.name: f for f in dataclasses.fields(TrainRMConfig)}
    for f in dataclasses.fields(Settings):
        if f.name == "options":
            continue
        assert (config[f.name].type, config[f.name].default, dict(config[f.name].metadata)) == (
            f.type,
            f.default,
            dict(f.metadata),
        )
        assert f.name in CONTRASTIVE_FIELDS
    settings = TrainRMConfig(
        pretrain="p", contrastive_loss_beta=0.25, contrastive_window="latest"
    ).contrastive_settings()
    assert (settings.contrastive_loss_beta, settings.contrastive_window, dict(settings.options)) == (0.25, "latest", {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.sim_samples = 3
    with pytest.raises(TypeError):
        settings.options["x"] = 1
