"""Scoring through the frozen layers' feature cache (``--feature_cache_dir`` of ``goalrm eval-rm`` and ``goalrm
get-representation``), on the tiny SmolLM2 twin (``tests/smollm2_twin.py``) with RMs saved as ``train-rm
--train_top_layers 1`` saves them: the rewards, partial rewards, Q-values and goal states read through the cache
are the full forward's to float rounding; a second RM of the same frozen weights computes no frozen layer; an RM
that trained every layer, or one of other frozen weights, never reads another backbone's states."""

import copy
import json

import numpy as np
import pytest
import torch
from smollm2_twin import write_twin_gguf

from goalrm_core.cli.eval_rm import build_parser as eval_rm_parser
from goalrm_core.cli.eval_rm import main as eval_rm_main
from goalrm_core.cli.get_representation import build_parser as get_representation_parser
from goalrm_core.cli.get_representation import main as get_representation_main
from goalrm_core.data.io import ArtifactError, read_jsonl, write_jsonl
from goalrm_core.data.rundir import scored_path
from goalrm_core.model.reward_model import GOALRM_JSON, RewardModel, load_reward_model, save_reward_model
from goalrm_core.model.top_layers import FeatureCache, freeze_lower_layers

#: The cached path against the full forward, both float32: the same kernels on the same inputs, apart from the
#: padding around a text in its batch (the cache pass batches by length, longest first), so they agree to ~1e-6.
SCORE_TOL = 1e-5
BENCH = "toy-bench"
ROWS = [
    {"question": f"Tom has {q} apples and buys {q + 1}. How many?", "generated_solution": s, "is_correct": ok}
    for q in range(4)
    for s, ok in ((f"{q} + {q + 1} = {2 * q + 1}\nA: {2 * q + 1}", True), (f"{q} + {q} = {2 * q}\nA: {2 * q}", False))
]


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    return write_twin_gguf(tmp_path_factory.mktemp("twin") / "twin.gguf")


def save_rm(twin, path, seed: int, top: int | None = 1, nudge_frozen: bool = False):
    """An RM of the twin as train-rm saves one: the top ``top`` layers (None: every layer) and the head moved away
    from the twin's (seeded), the frozen ones left as they are (or moved too: another backbone)."""
    lm, tokenizer = twin
    torch.manual_seed(seed)
    model = RewardModel(copy.deepcopy(lm.model)).float()
    if top is not None:
        freeze_lower_layers(model, top)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith(("model.layers.1.", "score")) or (nudge_frozen and name.startswith("model.layers.0.")):
                p.add_(0.05 * torch.randn_like(p))
    return save_reward_model(model, path, tokenizer)


@pytest.fixture(scope="module")
def world(twin, tmp_path_factory):
    root = tmp_path_factory.mktemp("scoring")
    write_jsonl(root / "gens" / BENCH / "greedy.jsonl", ROWS)
    write_jsonl(root / "gens" / BENCH / "samples.jsonl", ROWS[::-1])
    write_jsonl(
        root / "pairs.jsonl",
        [{"question": r["question"], "correct": r["generated_solution"], "incorrect": "no"} for r in ROWS],
    )
    goal = np.random.default_rng(0).normal(size=(1, twin[0].config.hidden_size)).astype(np.float32)
    np.save(root / "goal.npy", goal)
    return root


def eval_rm(world, rm, out: str, cache: str | None = None) -> dict[str, list[dict]]:
    argv = ["--completions_data_path", str(world / "gens"), "--reward_model_path", str(rm)]
    argv += ["--save_dir", str(world / out), "--benchmarks", BENCH, "--template", "math"]
    argv += ["--goal_state_path", str(world / "goal.npy"), "--max_len", "256", "--batch_size", "3"]
    assert eval_rm_main(argv + (["--feature_cache_dir", str(world / cache)] if cache else [])) == 0
    return {split: read_jsonl(scored_path(world / out / rm.name, BENCH, split)) for split in ("greedy", "all")}


def assert_same_scores(full: dict, cached: dict) -> None:
    for split in full:
        assert [r["generated_solution"] for r in full[split]] == [r["generated_solution"] for r in cached[split]]
        for a, b in zip(full[split], cached[split]):
            assert a["num_actions"] == b["num_actions"] == len(b["partial_rewards"]) == len(b["cosine_sim"])
            assert abs(a["reward"] - b["reward"]) < SCORE_TOL
            np.testing.assert_allclose(b["partial_rewards"], a["partial_rewards"], rtol=0, atol=SCORE_TOL)
            np.testing.assert_allclose(b["cosine_sim"], a["cosine_sim"], rtol=0, atol=SCORE_TOL)


def test_scores_through_the_cache_are_the_full_forwards_and_a_second_rm_reads_it(twin, world, capsys):
    first, second = save_rm(twin, world / "rm-a", 1), save_rm(twin, world / "rm-b", 2)
    assert json.loads((first / GOALRM_JSON).read_text())["feature_layer"] == 1
    full = {rm: eval_rm(world, rm, "full") for rm in (first, second)}
    capsys.readouterr()

    assert_same_scores(full[first], eval_rm(world, first, "cached", "cache"))
    err = capsys.readouterr().err
    assert "no states of this backbone there yet (0 file(s) of other backbones" in err and "new texts" in err
    kept = list((world / "cache").glob("features-*.safetensors"))
    assert len(kept) == 1

    assert_same_scores(full[second], eval_rm(world, second, "cached", "cache"))
    err = capsys.readouterr().err
    assert f"texts' states read from {kept[0]}; each batch runs the top 1 layers" in err
    assert "new texts" not in err  # nothing through the frozen layer: the file is left as it was
    assert list((world / "cache").glob("features-*.safetensors")) == kept
    settings = json.loads((world / "cached" / "rm-b" / "eval_rm.json").read_text())
    assert settings["feature_cache_dir"] == str(world / "cache")


def test_goal_states_through_the_cache_are_the_full_forwards(twin, world, capsys):
    goals = {}
    for name, seed in (("rm-c", 3), ("rm-d", 4)):
        rm = save_rm(twin, world / name, seed)
        for cache in (None, "goal-cache"):
            argv = ["--dataset-path", str(world / "pairs.jsonl"), "--reward-model-path", str(rm)]
            argv += ["--save-dir", str(world / f"rep-{name}-{cache}"), "--max_len", "256"]
            assert get_representation_main(argv + (["--feature_cache_dir", str(world / cache)] if cache else [])) == 0
            goals[name, cache] = np.load(world / f"rep-{name}-{cache}" / "goal_state.npy")
        assert np.abs(goals[name, None] - goals[name, "goal-cache"]).max() < SCORE_TOL
        assert np.abs(goals[name, None]).max() > 0.1  # a real state, not a vanishing one
    err = capsys.readouterr().err
    assert err.count("new texts") == 1  # the second RM read the first one's states


def test_an_rm_that_trained_every_layer_is_scored_by_the_full_forward(twin, world, capsys):
    rm = save_rm(twin, world / "rm-all", 5, top=None)
    assert json.loads((rm / GOALRM_JSON).read_text())["feature_layer"] is None
    full = eval_rm(world, rm, "all-full")
    capsys.readouterr()
    assert full == eval_rm(world, rm, "all-cached", "cache-all")
    err = capsys.readouterr().err
    notice = [line for line in err.splitlines() if "--feature_cache_dir" in line]
    assert len(notice) == 1 and "this RM trained every layer" in notice[0] and "full forward" in notice[0]
    assert not (world / "cache-all").exists()


def test_an_rm_of_other_frozen_weights_never_reads_another_backbones_states(twin, world, capsys):
    base, other = save_rm(twin, world / "rm-e", 6), save_rm(twin, world / "rm-f", 7, nudge_frozen=True)
    eval_rm(world, base, "e", "cache-e")
    full = eval_rm(world, other, "f-full")
    capsys.readouterr()
    assert_same_scores(full, eval_rm(world, other, "f-cached", "cache-e"))
    err = capsys.readouterr().err
    line = [line for line in err.splitlines() if "no states of this backbone" in line]
    assert len(line) == 1 and "1 file(s) of other backbones, dtypes or layers left alone" in line[0]
    assert len(list((world / "cache-e").glob("features-*.safetensors"))) == 2  # one per backbone identity

    # a file under this backbone's name that records another's identity (copied by hand): refused in one line
    files = sorted((world / "cache-e").glob("features-*.safetensors"), key=lambda f: f.stat().st_mtime)
    files[0].write_bytes(files[1].read_bytes())
    with pytest.raises(ValueError, match="a feature cache of another backbone or layer") as e:
        eval_rm(world, base, "e-again", "cache-e")
    assert "\n" not in str(e.value)


def test_the_rm_a_run_saves_reads_the_cache_the_run_kept(twin, tmp_path):
    """The states a training run kept (its backbone as loaded from --pretrain) are its saved RM's: saving sets the
    config's pad id to the tokenizer's (train-rm's may differ from the backbone's), which the forward never reads."""
    lm, tokenizer = twin
    model = RewardModel(copy.deepcopy(lm.model)).float()
    freeze_lower_layers(model, 1)
    texts = [tokenizer(r["question"] + r["generated_solution"])["input_ids"] for r in ROWS]
    kept = FeatureCache(1).fill(model, texts, 2).save(tmp_path / "cache")
    other_pad = copy.deepcopy(tokenizer)
    other_pad.pad_token = "<|endoftext|>"
    saved = load_reward_model(save_reward_model(model, tmp_path / "rm", other_pad))
    assert saved.config.pad_token_id == 0 != lm.config.pad_token_id
    again = FeatureCache.load(tmp_path / "cache", saved, saved.feature_layer)
    assert again.path(tmp_path / "cache") == kept and again.read == len(texts)


def test_the_first_trained_layer_is_read_from_old_and_new_checkpoints(twin, tmp_path):
    rm = save_rm(twin, tmp_path / "rm", 8)
    meta_path = rm / GOALRM_JSON
    meta = json.loads(meta_path.read_text())
    for recorded, expected in ((dict(meta), 1), ({**meta, "feature_layer": None}, None)):
        meta_path.write_text(json.dumps(recorded))
        assert load_reward_model(rm).feature_layer == expected
    old = {k: v for k, v in meta.items() if k != "feature_layer"}  # saved before goalrm recorded it
    for args, expected in (({"train_top_layers": 1}, 1), ({"train_top_layers": 0}, None), ({}, None)):
        meta_path.write_text(json.dumps({**old, "training_args": args}))
        assert load_reward_model(rm).feature_layer == expected
    meta_path.write_text(json.dumps({**meta, "feature_layer": 2}))
    with pytest.raises(ArtifactError, match="feature_layer 2 is no layer of the backbone's 2"):
        load_reward_model(rm)


@pytest.mark.parametrize("parser", [eval_rm_parser, get_representation_parser])
def test_both_readers_document_the_flag(parser):
    text = " ".join(parser().format_help().split())
    assert "--feature_cache_dir FEATURE_CACHE_DIR" in text and "--train_top_layers N runs only its top N" in text
