"""``--train_top_layers`` through the real command line (``python -m goalrm_core.train.trainer``, ZeRO-0 on CPU): a run
from the feature cache logs the losses of a run that runs the frozen layers at every step (``--feature_cache off``)
to float rounding, evaluations included; the saved RM's frozen weights are the pretrained ones, bit for bit; the
summary says what the cache pass cost; --feature_cache_dir keeps the cache for the next run."""

import json

import pytest
import torch
from safetensors.torch import load_file
from test_trainer import max_weight_diff, metrics, run, write_pairs

from goalrm_core.model.reward_model import load_reward_model

#: the losses of the two runs: the same updates from gradients equal to rounding (tests/model/test_top_layers.py)
LOSS_TOL = 1e-5


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_policy_dir):
    root = tmp_path_factory.mktemp("top_layers")
    args = {
        "pretrain": str(tiny_policy_dir),
        "dataset": str(write_pairs(root / "pairs.jsonl", 24)),
        "template": "toymath",
        "max_len": 64,
        "eval_split": 0.25,
        "train_batch_size": 4,
        "micro_train_batch_size": 2,
        "max_steps": 4,
        "eval_steps": 2,
        "logging_steps": 1,
        "learning_rate": 1e-3,
        "zero_stage": 0,
        "reward_model_strategy": "contrastive",
        "sim_samples": 2,
        "unsim_samples": 2,
        "seed": 7,
        "train_top_layers": 1,
    }
    logs = {}
    for cache in ("memory", "off"):
        kept = {"feature_cache_dir": str(root / "features")} if cache == "memory" else {}
        logs[cache] = run(
            {**args, "feature_cache": cache, "save_path": str(root / cache), **kept}, root / f"{cache}.log"
        )
    return root, logs


def test_a_run_from_the_cache_is_a_run_through_the_frozen_layers(runs, tiny_policy_dir):
    root, logs = runs
    assert "feature cache:" in logs["memory"] and "each step runs the top 1 of 2 layers" in logs["memory"]
    assert "feature cache:" not in logs["off"]
    kept = list((root / "features").glob("features-*.safetensors"))  # the cache kept for the next run of this backbone
    assert len(kept) == 1 and f"texts kept in {kept[0]}" in logs["memory"]
    cached, full = metrics(root / "memory.metrics.jsonl"), metrics(root / "off.metrics.jsonl")
    assert [(r["step"], r["split"]) for r in cached] == [(r["step"], r["split"]) for r in full]
    assert [r["split"] for r in cached].count("eval") == 2
    for c, f in zip(cached, full):
        for term in ("loss", "preference_loss", "contrastive_loss", "chosen_reward", "rejected_reward"):
            assert abs(c[term] - f[term]) < LOSS_TOL, (c["step"], c["split"], term)
    assert max_weight_diff(root / "memory", root / "off") < 1e-4
    summary = json.loads((root / "memory" / "train_summary.json").read_text())
    assert summary["train_top_layers"] == 1 and summary["feature_cache_s"] > 0
    assert json.loads((root / "off" / "train_summary.json").read_text())["feature_cache_s"] is None


def test_the_frozen_weights_are_saved_as_they_were_loaded(runs, tiny_policy_dir):
    root, _ = runs
    pretrained = load_file(str(tiny_policy_dir / "model.safetensors"))
    for cache in ("memory", "off"):
        saved = load_reward_model(root / cache).state_dict()
        assert set(saved) - set(pretrained) == {"score.weight"}
        for name, weight in saved.items():
            if name == "score.weight":
                continue
            frozen = name.startswith(("model.embed_tokens", "model.layers.0."))
            assert torch.equal(weight, pretrained[name]) == frozen, (cache, name)
