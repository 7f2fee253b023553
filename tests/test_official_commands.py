"""Every command line of the official README (``../shared/seed/official-readme.txt``, parsed from the file),
run as typed from a copy of the project's root on CPU, through goalrm's official entry points
(``examples/train_rm.py`` …, ``examples/run_scripts/*.sh``), with ``deepspeed`` where the README uses it.

What the test substitutes, and only that (what cannot exist on this machine):

* Hub names -> local tiny models and data: ``nvidia/OpenMath-CodeLlama-7b-Python-hf`` and
  ``meta-llama/Meta-Llama-3-8B-Instruct`` -> one random 1-layer Llama (character tokenizer) saved locally;
  ``Anthropic/hh-rlhf`` -> a save_to_disk folder of 64 + 8 short synthetic dialogues;
* ``--flash_attn`` and ``--bf16`` dropped (no CUDA);
* placeholders: ``<your wandb key>`` -> a fake key (wandb is not installed here: train-rm says in one line
  that it logs to the metrics JSONL only); ``<project name>``/``<group name>``/``<org name>`` -> names;
  ``<your s3 save path>`` -> ``s3://bucket/rm`` (train-rm says in one line that it does not upload); the
  ``<path to ...>`` placeholders -> the paths the official run scripts use;
* ``data_setup.sh`` reads tiny local copies of its two archives (``OPENMATH_PREDICTIONS_URL`` and
  ``PREFERENCE_RANKING_URL`` as ``file://`` URLs): 64 + 8 preference pairs, 4 questions per benchmark
  (greedy + 2 samples each). The runs are tiny because the data is: 64 pairs are one optimiser step of the
  README's batch of 64; no step count is substituted;
* the print scripts get ``--dataset_len 4``: the official metrics.py assumes the full benchmarks (gsm8k
  1319, math 5000 questions), which the tiny copy is not;
* the README's two eval blocks lose a line continuation after ``--reward_model_path <...>`` (bash would run
  the rest as a command of its own); they are joined as the official eval scripts have them.

The installation lines (pip, conda, build_openrlhf.sh) are not run. The run scripts whose commands the
README prints (train_*.sh, get_representation.sh) are checked to hold those command lines; the others
named by the README (data_setup.sh, eval_*.sh, print_*_metrics.sh) are run.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT.parent / "shared" / "seed" / "official-readme.txt"
BENCHMARKS = ("gsm8k", "math", "gsm-hard", "mawps", "asdiv", "algebra222", "svamp")
PLACEHOLDER_PATHS = {
    "<path to preference ranking dataset>": "./examples/data/preference_ranking_dataset",
    "<path to save dir>": "./examples/data/representation",
    "<path to basemodel generations>": "./examples/data/base_model_generation",
    "<your wandb key>": "not-a-real-key",
    "<project name>": "goalrm-test",
    "<group name>": "official-commands",
    "<org name>": "nobody",
    "<your s3 save path>": "s3://bucket/rm",
}


def readme_commands(text: str) -> list[tuple[str, str]]:
    """(run script the README names for it, command text) for each command block, in README order."""
    lines, found, script, i = text.splitlines(), [], None, 0
    while i < len(lines):
        line = lines[i]
        named = re.findall(r"examples/run_scripts/(\w+\.sh)", line)
        if named:
            script = named[-1]
        if line.startswith("read -r -d '' training_commands"):
            start = i
            while lines[i].strip() != "fi":
                i += 1
            found.append((script, "\n".join(lines[start : i + 1])))
        elif line.startswith("python ./examples/"):
            block = [line]
            # a line ending in "\" continues; so does one followed by a flag (the README's lost continuation)
            while i + 1 < len(lines) and (block[-1].endswith("\\") or lines[i + 1].startswith("--")):
                i += 1
                block[-1] = block[-1].rstrip("\\").rstrip() + " \\"
                block.append(lines[i])
            block[-1] = block[-1].rstrip("\\").rstrip()
            found.append((script, "\n".join(block)))
        i += 1
    return found


def substitute(text: str, models: Path, hh: Path) -> str:
    text = text.replace("nvidia/OpenMath-CodeLlama-7b-Python-hf", str(models / "policy"))
    text = text.replace("meta-llama/Meta-Llama-3-8B-Instruct", str(models / "policy"))
    text = text.replace("Anthropic/hh-rlhf", str(hh))
    text = re.sub(r"^\s*--(flash_attn|bf16) \\\n", "", text, flags=re.M)
    for placeholder, value in PLACEHOLDER_PATHS.items():
        text = text.replace(placeholder, value)
    text = re.sub(r"<path to reward model>", lambda _: "REWARD_MODEL", text)
    text = re.sub(
        r"<path to goal state representation[^>]*>",
        "./examples/data/representation/contrastive_reward_model_goal_state_embedding.npy",
        text,
    )
    assert "<" not in text.replace("<<EOF", ""), f"a placeholder is left: {text}"
    return text


def flat(text: str) -> str:
    """A command's words, continuations and indentation aside."""
    return " ".join(text.replace("\\\n", " ").split())


def write_fixtures(root: Path, data: Path) -> dict:
    import datasets
    import torch
    from transformers import LlamaForCausalLM

    from goalrm_core.model.reward_model import tiny_llama_config
    from goalrm_core.model.tokenization import build_char_tokenizer

    tokenizer = build_char_tokenizer()
    config = tiny_llama_config(len(tokenizer), hidden_size=16, num_layers=1, num_heads=2, max_position_embeddings=4096)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(data / "models" / "policy")
    tokenizer.save_pretrained(data / "models" / "policy")

    pairs = [
        {
            "question": f"{a} +{b}",
            "correct": f"{a}+{b}={a + b}\n#{a + b}",
            "incorrect": f"{a}+{b}={a + b + 1}\n#{a + b + 1}",
        }
        for a in range(1, 10)
        for b in range(1, 9)
    ]
    pref = data / "pref" / "preference_ranking_dataset"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(pairs[:64]), "test": datasets.Dataset.from_list(pairs[64:72])}
    ).save_to_disk(str(pref))
    with zipfile.ZipFile(data / "preference_ranking_dataset.zip", "w") as z:
        for f in sorted(pref.rglob("*")):
            z.write(f, f.relative_to(pref.parent).as_posix())

    with zipfile.ZipFile(data / "openmath-test-predictions.zip", "w") as z:
        for bench in BENCHMARKS:
            for name, shift in (("output-greedy.jsonl", 0), ("output-rs0.jsonl", 1), ("output-rs1.jsonl", 2)):
                rows = []
                for q, (a, b) in enumerate([(2, 3), (4, 1), (5, 5), (3, 6)]):
                    answer = a + b + ((q + shift) % 2)
                    rows.append(
                        {
                            "question": f"{a} +{b}",
                            "generated_solution": f"{a}+{b}={answer}\n#{answer}",
                            "predicted_answer": answer,
                            "expected_answer": a + b,
                            "is_correct": answer == a + b,
                        }
                    )
                z.writestr(
                    f"openmath-test-predictions/codellama-7b/{bench}/{name}",
                    "".join(json.dumps(r) + "\n" for r in rows),
                )

    dialogue = "\n\nHuman: is {a} plus {b} {c}?\n\nAssistant: {yes}"
    hh_rows = [
        {
            "chosen": dialogue.format(a=a, b=b, c=a + b, yes="yes"),
            "rejected": dialogue.format(a=a, b=b, c=a + b, yes="no"),
        }
        for a in range(1, 10)
        for b in range(1, 9)
    ]
    hh = data / "hh-rlhf"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(hh_rows[:64]), "test": datasets.Dataset.from_list(hh_rows[64:72])}
    ).save_to_disk(str(hh))
    return {"models": data / "models", "hh": hh}


def run(script: str, root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["bash", "-c", script, "bash", *args], cwd=root, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-5000:]}"
    return done


@pytest.mark.slow
@pytest.mark.deepspeed
@pytest.mark.skipif(not README.is_file(), reason=f"{README} is absent: no official README to run")
def test_every_official_readme_command_runs_as_typed(tmp_path):
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert [s for s, _ in commands] == [
        "train_baseline_rm.sh",
        "train_contrastive_rm.sh",
        "train_naturallanguage_rm.sh",
        "get_representation.sh",
        "eval_basline_rm.sh",
        "eval_contrastive_rm.sh",
    ]
    root, data = tmp_path / "project", tmp_path / "data"
    shutil.copytree(ROOT / "examples", root / "examples")
    fixtures = write_fixtures(root, data)
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TQDM_DISABLE": "1",
        "WANDB_MODE": "offline",
        "OPENMATH_PREDICTIONS_URL": (data / "openmath-test-predictions.zip").as_uri(),
        "PREFERENCE_RANKING_URL": (data / "preference_ranking_dataset.zip").as_uri(),
    }
    scripts = root / "examples" / "run_scripts"

    # the run scripts hold the README's command lines (a <...> placeholder stands for any one path)
    for script, text in commands:
        if script.startswith(("train_", "get_")):
            pattern = re.sub(r"<[a-z][^<>]*>", lambda _: r"(?:<[^<>]*>|\S+)", re.escape(flat(text)))
            assert re.search(pattern, flat((scripts / script).read_text())), (
                f"{script} does not hold the README's command"
            )

    run("bash examples/run_scripts/data_setup.sh", root, env)
    for bench in BENCHMARKS:
        assert sorted(p.name for p in (root / "examples/data/base_model_generation" / bench).iterdir()) == [
            "output-greedy.jsonl",
            "output-rs0.jsonl",
            "output-rs1.jsonl",
        ]
    assert (root / "examples/data/preference_ranking_dataset/dataset_dict.json").is_file()

    outputs = {}
    for script, text in commands:
        rm = "./ckpt/baseline_reward_model" if script == "eval_basline_rm.sh" else "./ckpt/contrastive_reward_model"
        outputs[script] = run(
            substitute(text, fixtures["models"], fixtures["hh"]).replace("REWARD_MODEL", rm), root, env
        )
    for name in (
        "baseline_reward_model",
        "contrastive_reward_model",
        "reward_model",
    ):  # the NL block has no --save_path
        assert (root / "ckpt" / name / "config.json").is_file() and list(
            (root / "ckpt" / name).glob("*.safetensors")
        ), name
    for script in (
        "train_baseline_rm.sh",
        "train_contrastive_rm.sh",
        "train_naturallanguage_rm.sh",
    ):  # one line each, not a failure
        if importlib.util.find_spec("wandb") is None:
            assert "--use_wandb given but wandb is not installed" in outputs[script].stdout + outputs[script].stderr, (
                script
            )
    nl = outputs["train_naturallanguage_rm.sh"]
    assert "--s3_save_path s3://bucket/rm: not uploaded" in nl.stdout + nl.stderr
    assert (root / "examples/data/representation/contrastive_reward_model_goal_state_embedding.npy").is_file()

    # the official output layout: <save_dir>/<rm>/<bench>/greedy/output-metrics-dense.jsonl, and all/ for gsm8k and math
    # (goalrm also scores the samples of the other benchmarks into their all/, which the official code skips)
    for rm in ("baseline_reward_model", "contrastive_reward_model"):
        for bench in BENCHMARKS:
            folder = root / "examples/data/rm_eval_data" / rm / bench
            assert {p.name for p in folder.iterdir()} <= {"greedy", "all"}, folder
            for split in ("greedy", "all") if bench in ("gsm8k", "math") else ("greedy",):
                assert [p.name for p in (folder / split).iterdir()] == ["output-metrics-dense.jsonl"], folder / split

    # the scripts the README names without printing them
    run("bash examples/run_scripts/eval_basline_rm.sh", root, env)
    run("bash examples/run_scripts/eval_contrastive_rm.sh", root, env)
    printed = {}
    for name in ("print_baseline_metrics.sh", "print_contrastive_metrics.sh"):
        text = (scripts / name).read_text().rstrip().rstrip("\\").rstrip()
        printed[name] = run(f"{text} --dataset_len 4", root, env).stdout.splitlines()
    for name, model in (
        ("print_baseline_metrics.sh", "baseline_reward_model"),
        ("print_contrastive_metrics.sh", "contrastive_reward_model"),
    ):
        lines = printed[name]
        assert lines[0] == f"Model: {model}"
        assert [line.split(":")[0] for line in lines[1:8]] == list(BENCHMARKS)
    assert "gsm8k accuracy" in "\n".join(printed["print_contrastive_metrics.sh"])
    assert "accuracy" not in "\n".join(printed["print_baseline_metrics.sh"])  # --vanilla: AUROC only


def test_flash_attn_without_the_package_is_one_line_and_exit_2(tmp_path):
    if __import__("importlib").util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here")
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "config.json").write_text("{}")
    for cmd in (
        [
            sys.executable,
            str(ROOT / "examples" / "train_rm.py"),
            "--pretrain",
            str(tmp_path / "policy"),
            "--dataset",
            "x.jsonl",
            "--flash_attn",
        ],
    ):
        done = subprocess.run(
            cmd, cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300
        )
        assert done.returncode == 2, done.stderr
        assert (
            done.stderr.strip().count("\n") == 0
            and "--flash_attn" in done.stderr
            and "flash-attn package is not installed" in done.stderr
        )


def test_load_in_4bit_without_a_cuda_gpu_is_one_line_and_exit_2():
    """The official entry point with --load_in_4bit (and the --bf16 and LoRA it needs) on a machine without a CUDA GPU
    or bitsandbytes: one line naming why. LoRA's flags run (tests/train/test_lora.py)."""
    from goalrm_core.train.lora import four_bit_unavailable

    if not four_bit_unavailable():
        pytest.skip("this machine has a CUDA GPU and bitsandbytes: --load_in_4bit runs here")
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "train_rm.py"),
            "--pretrain",
            "p",
            "--load_in_4bit",
            "--bf16",
            "--lora_rank",
            "4",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert (
        "--load_in_4bit (an official train_rm.py flag) cannot run here" in done.stderr
        and "unrecognized" not in done.stderr
    )


def test_paper_math_reads_what_data_setup_downloads(tmp_path, monkeypatch):
    """The paper-math profile's dataset and generations paths are the folders the official data_setup.sh
    unzips (the zipped save_to_disk preference data, the Nemo-Skills generations), read as they come."""
    from goalrm_core.data.preferences import load_preference_rows
    from goalrm_core.pipeline.profile_files import load_profile

    root, data = tmp_path / "project", tmp_path / "data"
    shutil.copytree(ROOT / "examples", root / "examples")
    write_fixtures(root, data)
    env = {
        **os.environ,
        "OPENMATH_PREDICTIONS_URL": (data / "openmath-test-predictions.zip").as_uri(),
        "PREFERENCE_RANKING_URL": (data / "preference_ranking_dataset.zip").as_uri(),
    }
    run("bash examples/run_scripts/data_setup.sh", root, env)
    profile = load_profile("paper-math")
    monkeypatch.chdir(root)  # the profile's paths are the official scripts', relative to the project's root
    reports = []
    rows = load_preference_rows(profile["dataset"], profile["dataset_probs"], seed=0, reports=reports)
    assert len(rows) == 64 and [(r.n_used, r.n_skipped) for r in reports] == [
        (64, 0)
    ]  # the train split, every row used
    generations = Path(profile["completions_data_path"])
    assert sorted(p.name for p in generations.iterdir()) == sorted(BENCHMARKS) == sorted(profile["benchmarks"])


def test_the_official_checkpoint_folder_never_resumes_another_run(tmp_path, tiny_policy_dir):
    """examples/train_rm.py keeps the official ./ckpt/checkpoints_rm for every run: a vanilla run told to
    --load_checkpoint after a contrastive run's checkpoints is refused in one line naming both runs (exit 2),
    before it loads or writes anything."""
    rows = [
        {"question": f"{a} +{b}", "correct": f"{a}+{b}={a + b}", "incorrect": f"{a}+{b}={a + b + 1}"}
        for a in range(1, 9)
        for b in range(1, 5)
    ]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1"}
    common = [
        sys.executable,
        str(ROOT / "examples" / "train_rm.py"),
        "--pretrain",
        str(tiny_policy_dir),
        "--dataset",
        "pairs.jsonl",
        "--train_batch_size",
        "4",
        "--micro_train_batch_size",
        "2",
        "--template",
        "toymath",
        "--max_len",
        "64",
        "--max_steps",
        "2",
        "--save_steps",
        "2",
        "--zero_stage",
        "0",
        "--sim_samples",
        "2",
        "--unsim_samples",
        "2",
    ]
    first = subprocess.run(
        [*common, "--contrastive_loss", "--learning_rate", "1e-3", "--loss", "logexp"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    ckpt = tmp_path / "ckpt" / "checkpoints_rm"
    assert (ckpt / "latest").read_text() == "global_step2" and (ckpt / "global_step2" / "goalrm_run.json").is_file()
    weights = sorted((tmp_path / "ckpt" / "reward_model").glob("*.safetensors"))[0].read_bytes()
    second = subprocess.run(
        [*common, "--learning_rate", "2e-3", "--load_checkpoint"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-3000:]
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert lines[0] == (
        "goalrm train-rm: error: --load_checkpoint: ckpt/checkpoints_rm/global_step2 was written by a run with "
        "strategy=contrastive, loss=logexp, lr=0.001; this run has strategy=vanilla, loss=sigmoid, lr=0.002; "
        "use another --ckpt_path or drop --load_checkpoint (--debug for the traceback)"
    ), lines[0]
    assert "resumed from" not in second.stdout and "Traceback" not in second.stderr
    assert (
        sorted((tmp_path / "ckpt" / "reward_model").glob("*.safetensors"))[0].read_bytes() == weights
    )  # the first RM untouched
