"""The real-lm recipe (goalrm_core.recipes.real_lm) end to end on the tiny SmolLM2 twin, packaged as the real
model is: the data split three ways, RMs trained on the top layer from the shared feature cache, goal states,
scoring of one held-out split, and its summary over two RM seeds."""

import gzip
import json
import math
from pathlib import Path

import pytest
from smollm2_twin import fake_package, write_twin_gguf

from goalrm_core.data.io import read_jsonl
from goalrm_core.model import pretrained
from goalrm_core.model.pretrained import CACHE_ENV, SMOLLM2_135M, resolve_model
from goalrm_core.recipes import real_lm


def write_data(folder: Path, n: int = 16) -> None:
    with open(folder / "gsm8k.jsonl", "w") as f:
        for q in range(n):
            row = {"question": f"Tom has {q} apples and buys {q + 1}. How many?", "ground_truth": f"A: {2 * q + 1}"}
            for m, wrong in (("small", q % 2), ("large", q % 3 == 0)):
                answer = 2 * q + 1 + wrong
                row[m] = {"solution": f"{q} + {q + 1} = {answer}\nA: {answer}", "is_correct": not wrong}
            f.write(json.dumps(row) + "\n")
    with gzip.open(folder / "hh.jsonl.gz", "wt") as f:
        for i in range(n):
            dialogue = f"\n\nHuman: how do I bake bread {i}?\n\nAssistant:"
            f.write(json.dumps({"chosen": dialogue + " Mix flour and water.", "rejected": dialogue + " No."}) + "\n")


@pytest.fixture
def setting(tmp_path, monkeypatch):
    """The twin as the packaged smollm2-135m, converted into a fresh cache that the trainers' processes read."""
    path = tmp_path / "twin.gguf"
    write_twin_gguf(path)
    model = fake_package(tmp_path / "site", path)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(pretrained.PACKAGED_MODELS, SMOLLM2_135M.name, model)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    resolve_model(SMOLLM2_135M.name)
    write_data(tmp_path)
    return {
        "run_dir": str(tmp_path / "run"),
        "data_dir": str(tmp_path),
        "gsm8k_solutions_file": "gsm8k.jsonl",
        "hh_file": "hh.jsonl.gz",
        "rm_seeds": [0, 1],
        "train_top_layers": 1,
        "max_len": 256,
        "train_batch_size": 4,
        "micro_train_batch_size": 4,
        "n_gsm8k_pairs": 8,
        "n_hh_pairs": 8,
        "n_boot": 50,
    }


def test_prepare_splits_by_question_and_dialogue_and_counts_the_cut(setting):
    manifest = real_lm.real_lm_prepare(**setting)
    p = real_lm.real_lm_paths(setting["run_dir"])
    assert sum(manifest["gsm8k"]["questions"].values()) == 16
    pairs = read_jsonl(p["gsm8k_train"])
    assert manifest["gsm8k"]["train_pairs"] == len(pairs) <= 8
    held = {
        split: {r["question"] for r in read_jsonl(p["generations"] / real_lm.bench_name(split) / "greedy.jsonl")}
        for split in real_lm.HELD_OUT
    }
    assert not ({r["question"] for r in pairs} & (held["validation"] | held["reported"]))
    assert not held["validation"] & held["reported"]
    hh = {split: {r["question"] for r in read_jsonl(p[f"hh_{split}"])} for split in real_lm.SPLITS}
    assert not (hh["train"] & hh["validation"] or hh["train"] & hh["reported"] or hh["validation"] & hh["reported"])
    lengths = manifest["gsm8k"]["lengths"]["train"]
    assert lengths["texts"] == 2 * len(pairs) and lengths["max_len"] == 256 and 0 <= lengths["over_max_len"]


def test_the_reported_split_is_asked_for_by_name(setting):
    with pytest.raises(ValueError, match="split must be one of validation, reported"):
        real_lm.real_lm_commands(split="test", **setting)


def test_every_scoring_command_reads_its_data_sets_feature_cache(setting):
    p = real_lm.real_lm_paths(setting["run_dir"])
    cmds = real_lm.real_lm_commands(split="validation", **setting)
    scoring = {name: cmd for name, cmd in cmds.items() if name.startswith(("get-representation-", "eval-rm-"))}
    assert len(scoring) == 3 * len(setting["rm_seeds"])
    for name, cmd in scoring.items():
        assert cmd[cmd.index("--feature_cache_dir") + 1] == str(p["feature_cache"] / "gsm8k"), name
    for name, cmd in cmds.items():
        if name.startswith("train-"):
            data = name.removeprefix("train-").split("-")[0]
            assert cmd[cmd.index("--feature_cache_dir") + 1] == str(p["feature_cache"] / data), name


def hh_rm(folder: Path, seed: int) -> Path:
    """An RM of the packaged twin as train-rm --train_top_layers 1 saves one: its top layer and head moved."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from goalrm_core.model.reward_model import RewardModel, save_reward_model
    from goalrm_core.model.top_layers import freeze_lower_layers

    pretrained = resolve_model(SMOLLM2_135M.name)
    torch.manual_seed(seed)
    model = RewardModel(AutoModel.from_pretrained(pretrained, dtype=torch.float32))
    freeze_lower_layers(model, 1)
    with torch.no_grad():
        for weight in model.parameters():
            if weight.requires_grad:
                weight.add_(0.05 * torch.randn_like(weight))
    return save_reward_model(model, folder, AutoTokenizer.from_pretrained(pretrained))


#: read through the feature cache against the full forward, both float32 (tests/inference/test_feature_cache_scoring)
CACHE_TOL = 1e-5


def test_hh_verdicts_and_the_base_lms_log_probs_read_the_feature_cache(setting, tmp_path, capsys):
    """pair_correct through the cache: the full forward's verdicts (and rewards), the second RM reading the first
    one's states; the base LM's mean log-probs from the states they kept: the full forward's, computing none."""
    from goalrm_core.recipes.commands import pair_correct

    pairs = [
        {"question": f"how do I bake bread {i}?", "correct": "Mix flour and water.", "incorrect": f"No {i}."}
        for i in range(6)
    ]
    rms = [hh_rm(tmp_path / f"rm-{seed}", seed) for seed in (0, 1)]
    cache = tmp_path / "feature-cache"
    capsys.readouterr()
    for rm in rms:
        assert (pair_correct(rm, pairs, "hh", 256) == pair_correct(rm, pairs, "hh", 256, cache)).all()
    err = capsys.readouterr().err
    assert err.count("new texts") == 1 and "texts' states read from" in err

    profile = {"pretrain": SMOLLM2_135M.name, "train_top_layers": 1}
    prompts = [real_lm.apply_template("hh", r["question"]) for r in pairs] * 2
    responses = [r["correct"] for r in pairs] + [r["incorrect"] for r in pairs]
    full = real_lm.base_lm_mean_logprobs(profile, "hh", prompts, responses, tmp_path / "full.jsonl")
    cached = real_lm.base_lm_mean_logprobs(profile, "hh", prompts, responses, tmp_path / "cached.jsonl", cache)
    assert max(abs(a - b) for a, b in zip(full, cached)) < CACHE_TOL
    assert "0 tokens through the frozen layers" in capsys.readouterr().err  # every text began one an RM scored
    again = real_lm.base_lm_mean_logprobs(profile, "hh", prompts, responses, tmp_path / "cached.jsonl", cache)
    assert again == cached and "base LM log-probs" not in capsys.readouterr().err  # a rerun reads what was kept


@pytest.mark.slow
def test_a_run_trains_scores_and_summarises_one_split_over_rm_seeds(setting):
    summary = real_lm.real_lm_run(split="validation", **setting)
    p = real_lm.real_lm_paths(setting["run_dir"])
    assert summary["rm_seeds"] == [0, 1]
    for data in ("gsm8k", "hh"):  # one file per data set: training, scoring and the base LM share one backbone
        assert len(list((p["feature_cache"] / data).iterdir())) == 1, data
    for log in p["logs"].glob("get-representation-*.log"):  # each goal response begins a training text
        assert "texts' states read from" in log.read_text() and "new texts" not in log.read_text()
    gsm8k, hh = summary["gsm8k"], summary["hh"]
    for rm in real_lm.RMS:
        auroc = gsm8k[rm]["auroc"]
        assert len(auroc["per_seed"]) == 2 and all(v is None or 0 <= v <= 1 for v in auroc["per_seed"])
        assert "verdict" in auroc and "mde" in auroc or auroc["verdict"] == "undefined"
        accuracy = hh[rm]["accuracy"]
        assert all(0 <= v <= 1 for v in accuracy["per_seed"])
    assert {"length only", "base LM mean log-prob"} == set(gsm8k["reference"])
    assert all(0 <= r["estimate"] <= 1 or math.isnan(r["estimate"]) for r in gsm8k["reference"].values())
    assert gsm8k["solutions"] == 2 * gsm8k["questions"]
    written = json.loads((p["run"] / "real_lm_validation.json").read_text())
    assert written["hh"]["pairs"] == hh["pairs"]
    # the summary again, from what the run kept (the base LM's scores included): the same figures
    again = real_lm.real_lm_summary(split="validation", **setting)
    assert json.dumps(again, default=str) == json.dumps(summary, default=str)
