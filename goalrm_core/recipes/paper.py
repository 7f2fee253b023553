"""Command lines for the paper's runs, a GPU check, and a CPU-scale run on real data.

Three profiles in ``params/`` are read here rather than by the notebooks:

* ``paper-math`` / ``paper-hh``: the official code's 7B/8B runs. :func:`paper_train_command` builds the
  ``deepspeed --module goalrm_core.train.trainer ...`` line of one RM (through
  :func:`goalrm_core.train.launch.train_command`), :func:`paper_commands` every step after it
  (goal state, scoring, metrics), :func:`paper_script` all of it as a shell script. Nothing runs.
* ``gpu-check``: a ~1B-parameter Llama with random weights and the character tokenizer, written
  locally by :func:`write_random_llama` (no download), trained a few steps with ZeRO-3 + bf16 +
  flash-attn on ToyMath pairs: ``python -m goalrm_core.recipes.paper gpu-check`` (:func:`gpu_check_command`),
  then once more with the backbone in 4-bit NF4 under LoRA (``--load_in_4bit``, ZeRO-2; needs bitsandbytes).
* ``real-cpu``: HH-RLHF harmless pairs and real GSM8K model solutions from ``../shared/data`` (or
  ``data_dir``), prepared into a run directory in the project's layout by :func:`real_cpu_prepare`,
  so the ordinary CLIs (``goalrm train-rm``, ``get-representation``, ``eval-rm``, ``metrics``) run
  on them (:func:`real_cpu_commands`, :func:`real_cpu_run`); :func:`real_cpu_summary` reads the
  results. Every number it gives is CPU-scale.

A profile's ``rm:`` block holds the train-rm flags under their own names (``max_steps``, ``train_batch_size``,
``max_len``, ``bf16``), as in the notebooks' profiles, and becomes the config by name
(:func:`goalrm_core.study.recipe.trainer_settings`); every profile is checked first, its other keys
against :data:`goalrm_core.recipes.profile_keys.COMMAND_LINE_KEYS` (a typo is refused, not ignored).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import random
import shlex
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from transformers import LlamaForCausalLM

from goalrm_core.data.adapters import load_generations, load_pairs, load_questions, write_generation_folder
from goalrm_core.data.io import ArtifactError, atomic_write_json, read_jsonl, write_jsonl
from goalrm_core.data.preferences import split_train_eval
from goalrm_core.data.questions import preference_pairs, split_by_question
from goalrm_core.data.rundir import RunDir, rm_metrics_path, rm_name, train_summary_path
from goalrm_core.evaluation import metrics
from goalrm_core.evaluation.tables import delta_auroc, labels, question_ids, read_scored
from goalrm_core.flags import run_command
from goalrm_core.model.reward_model import tiny_llama_config
from goalrm_core.model.tokenization import build_char_tokenizer
from goalrm_core.paths import resolve_path
from goalrm_core.recipes.commands import (  # noqa: F401  (STRATEGIES, CKPT_NAMES, strategy_name: read here too)
    CKPT_NAMES,
    STRATEGIES,
    cli_command,
    data_file,
    pair_correct,
    strategy_name,
    train_config_from_profile,
)
from goalrm_core.recipes.profile_keys import command_line_profile
from goalrm_core.study.live import tail_view
from goalrm_core.tasks.toymath import problems as toymath
from goalrm_core.train.launch import run_streaming, train_command

CPU_SCALE = "CPU-scale"


def paper_train_command(
    profile_name: str,
    strategy: str,
    num_gpus: int | None = None,
    hostfile: str | None = None,
    num_nodes: int | None = None,
    **overrides: Any,
) -> list[str]:
    """The ``deepspeed ... --module goalrm_core.train.trainer <flags>`` command of one paper RM.

    ``num_gpus`` (per node) defaults to the profile's ``rm_processes``; with a ``hostfile`` the run
    spans its hosts (``--num_nodes`` when given), as in ``examples/slurm_train_rm.sh``. Nothing runs.

    ``paper_train_command("paper-math", "contrastive", num_gpus=8)`` -> ``[".../deepspeed",
    "--num_gpus", "8", "--master_port", "...", "--module", "goalrm_core.train.trainer", "--max_steps",
    "0", "--train_batch_size", "64", ...]``.
    """
    profile = command_line_profile(profile_name)
    cfg = train_config_from_profile(profile, strategy, **overrides)
    n = int(num_gpus if num_gpus is not None else profile.get("rm_processes", 1))
    return train_command(cfg, num_processes=n, use_deepspeed_launcher=True, hostfile=hostfile, num_nodes=num_nodes)


def _data_parallel(cmd: list[str], n: int) -> list[str]:
    """``cmd`` (``python -m goalrm_core.cli ...``) launched by ``torchrun`` on ``n`` processes, one per GPU:
    eval-rm scores a shard in each and merges them (``inference.scoring``); as it is with ``n`` = 1."""
    return cmd if n <= 1 else ["torchrun", "--nproc_per_node", str(n), *cmd[1:]]


def command_text(cmd: Sequence[str]) -> str:
    """A command as a reader types it: ``goalrm <command> ...`` and ``deepspeed ...`` without paths."""
    cmd = [str(c) for c in cmd]
    if cmd[1:3] == ["-m", "goalrm_core.cli"]:
        cmd = ["goalrm", *cmd[3:]]
    elif cmd[1:3] == ["-m", "goalrm_core.train.trainer"]:
        cmd = ["goalrm", "train-rm", *cmd[3:]]
    elif Path(cmd[0]).name == "deepspeed":
        cmd = ["deepspeed", *cmd[1:]]
        if "--master_port" in cmd:
            i = cmd.index("--master_port")
            del cmd[i : i + 2]
    return shlex.join(cmd)


def paper_commands(profile_name: str, num_gpus: int | None = None, hostfile: str | None = None) -> dict[str, list[str]]:
    """Every step of a paper profile, in order: both RMs' training and, for a profile with
    ``completions_data_path`` (paper-math), the goal state, scoring of the generations and metrics."""
    profile = command_line_profile(profile_name)
    cmds = {f"train-{s}": paper_train_command(profile_name, s, num_gpus, hostfile) for s in ("vanilla", "contrastive")}
    if "completions_data_path" not in profile:
        return cmds
    ckpt = str(profile.get("ckpt_dir", "./ckpt")).rstrip("/")
    base, goal_rm = f"{ckpt}/{CKPT_NAMES['vanilla']}", f"{ckpt}/{CKPT_NAMES['contrastive']}"
    goal_dir = profile.get("goal_state_dir", f"{goal_rm}.goal_state")
    save_dir = profile.get("eval_save_dir", "./rm_eval_data")
    benches = list(profile.get("benchmarks", ["gsm8k"]))
    threshold = profile.get("filter_threshold", 0.0)
    template = profile.get("template", "nemo")
    max_len = profile.get("eval_max_len", profile.get("max_len", 2048))  # 0: read whole, as the official eval_rm.py
    # the official scripts read the RM in its checkpoint's dtype (bf16), get_representation.py with flash-attn
    precision = [*(["--bf16"] if profile.get("bf16") else []), *(["--flash_attn"] if profile.get("flash_attn") else [])]
    # the official get_representation.py builds the clean prompt (and cuts at its own 1024 tokens, the CLI's default)
    cmds["get-representation"] = cli_command(
        "get-representation",
        "--dataset-path",
        profile["dataset"],
        "--reward-model-path",
        goal_rm,
        "--save-dir",
        goal_dir,
        "--template",
        "math" if template == "nemo" else template,
        *precision,
    )
    goal_file = f"{goal_dir}/{rm_name(goal_rm)}_goal_state_embedding.npy"
    for name, rm, extra in (
        ("vanilla", base, ["--vanilla"]),
        ("contrastive", goal_rm, ["--goal_state_path", goal_file]),
    ):
        # one --save_dir for both: eval-rm files each RM under its folder's name, as the official script does
        # data-parallel over the node's GPUs by default: every process scores its shard of the generations
        gpus = int(num_gpus if num_gpus is not None else profile.get("rm_processes", 1))
        cmds[f"eval-rm-{name}"] = _data_parallel(
            cli_command(
                "eval-rm",
                "--completions_data_path",
                profile["completions_data_path"],
                "--reward_model_path",
                rm,
                "--save_dir",
                save_dir,
                "--filter_threshold",
                threshold,
                "--template",
                template,
                "--max_len",
                max_len,
                "--benchmarks",
                *benches,
                *extra,
                *precision,
            ),
            gpus,
        )
        cmds[f"metrics-{name}"] = cli_command(
            "metrics",
            "--model_name",
            CKPT_NAMES[name],
            "--eval_results_dir",
            save_dir,
            "--filter_threshold",
            threshold,
            "--benchmarks",
            *benches,
            *(["--vanilla"] if name == "vanilla" else []),
        )
    # the official figures over the official set (greedy + samples, grouped by position), as the official metrics.py
    # prints them
    cmds["metrics-contrastive-official"] = cli_command(
        "metrics",
        "--model_name",
        CKPT_NAMES["contrastive"],
        "--eval_results_dir",
        save_dir,
        "--filter_threshold",
        threshold,
        "--benchmarks",
        *benches,
        "--official",
    )
    return cmds


def paper_script(profile_name: str, num_gpus: int | None = None, hostfile: str | None = None) -> str:
    """:func:`paper_commands` as a shell script to read or run on the cluster."""
    lines = [
        "#!/usr/bin/env bash",
        f"# profile {profile_name}: built by goalrm_core.recipes.paper.paper_script",
        "set -euo pipefail",
    ]
    for name, cmd in paper_commands(profile_name, num_gpus, hostfile).items():
        lines += [f"# {name}", command_text(cmd)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# random-initialised Llama backbones (gpu-check, real-cpu): written locally, nothing downloaded
# ---------------------------------------------------------------------------------------------


def llama_parameter_count(
    hidden_size: int,
    num_layers: int,
    vocab_size: int,
    intermediate_size: int | None = None,
    num_heads: int | None = None,
    num_kv_heads: int | None = None,
    lm_head: bool = True,
) -> int:
    """Parameters of a Llama causal LM (untied head) without building it.

    >>> round(llama_parameter_count(2048, 16, 32000, 5632) / 1e9, 2)
    0.95
    """
    intermediate_size = intermediate_size or 8 * hidden_size // 3
    kv_dim = num_kv_heads * (hidden_size // num_heads) if num_heads and num_kv_heads else hidden_size  # GQA shrinks k/v
    attention = 2 * hidden_size * hidden_size + 2 * hidden_size * kv_dim
    layer = attention + 3 * hidden_size * intermediate_size + 2 * hidden_size
    return num_layers * layer + vocab_size * hidden_size * (2 if lm_head else 1) + hidden_size


def write_random_llama(
    out_dir: str | Path,
    hidden_size: int = 2048,
    num_layers: int = 16,
    num_heads: int = 16,
    intermediate_size: int | None = None,
    vocab_size: int | None = 32000,
    max_positions: int = 2048,
    dtype: str = "bfloat16",
    seed: int = 0,
) -> Path:
    """A randomly initialised Llama causal LM plus the character tokenizer, saved like a Hub
    checkpoint in ``out_dir`` (``--pretrain out_dir`` then works offline).

    The tokenizer's special ids (pad 0, bos 1, eos 2) are the config's. ``vocab_size=None`` uses
    the tokenizer's size; a larger one (32000, Llama-2's) gives a realistic embedding table of which
    the tokenizer uses the first ids. A smaller one is refused: the ids would not fit.
    """
    tokenizer = build_char_tokenizer()
    vocab = len(tokenizer) if vocab_size is None else int(vocab_size)
    if vocab < len(tokenizer):
        raise ValueError(f"vocab_size {vocab} is smaller than the tokenizer's {len(tokenizer)} ids")
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
    config = tiny_llama_config(
        vocab,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        max_position_embeddings=max_positions,
        intermediate_size=intermediate_size,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM._from_config(config, dtype=getattr(torch, dtype))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


# ---------------------------------------------------------------------------------------------
# gpu-check
# ---------------------------------------------------------------------------------------------


def toymath_pairs(n: int, seed: int = 0, max_steps: int = 8) -> list[dict]:
    """Pairs with a known answer and no policy: the reference solution of a ToyMath problem against
    the same chain with one step's result changed (and the later steps carried on from it)."""
    cfg = toymath.ToyMathConfig(min_steps=3, max_steps=max_steps, operand_max=20, style="verbose")
    rng = random.Random(seed + 1)
    pairs = []
    for problem in toymath.generate_problems(cfg, n, seed):
        k = rng.randrange(len(problem.steps))
        a, op, b, c = problem.steps[k]
        wrong = [*problem.steps[:k], (a, op, b, c + rng.choice([-3, -2, -1, 1, 2, 10]))]
        wrong += toymath.chain_steps(wrong[-1][3], [(s[1], s[2]) for s in problem.steps[k + 1 :]])
        pairs.append(
            {
                "question": problem.question,
                "correct": problem.solution("verbose"),
                "incorrect": toymath.format_solution(wrong, "verbose"),
            }
        )
    return pairs


def gpu_check_paths(run_dir: str | Path) -> dict[str, Path]:
    """The GPU check's files, in the run-directory layout (`RunDir`)."""
    run = RunDir(resolve_path(run_dir))
    return {
        "backbone": run.backbone,
        "train": run.preference_pairs("train"),
        "eval": run.preference_pairs("eval"),
        "models": run.models,
        "logs": run.logs,
    }


def prepare_gpu_check(profile_name: str = "gpu-check", **changes: Any) -> dict[str, Path]:
    """Write the gpu-check backbone (random ~1B Llama, bf16) and its ToyMath pairs into the run dir.

    ``changes`` override profile keys (tests use a tiny backbone)."""
    profile = command_line_profile(profile_name, **changes)
    paths = gpu_check_paths(profile["run_dir"])
    write_random_llama(
        paths["backbone"],
        hidden_size=profile["backbone_hidden_size"],
        num_layers=profile["backbone_layers"],
        num_heads=profile["backbone_heads"],
        intermediate_size=profile.get("backbone_intermediate_size"),
        vocab_size=profile.get("backbone_vocab_size"),
        max_positions=profile.get("backbone_max_positions", 2048),
        dtype="bfloat16" if profile.get("bf16", True) else "float32",
        seed=profile.get("seed", 0),
    )
    pairs = toymath_pairs(profile["n_pairs"], seed=profile.get("seed", 0))
    n_eval = max(1, len(pairs) // 8)
    write_jsonl(paths["eval"], pairs[:n_eval])
    write_jsonl(paths["train"], pairs[n_eval:])
    return paths


# the gpu-check's 4-bit LoRA step: QLoRA as the official code runs it (ZeRO-2: a 4-bit backbone is not partitioned)
FOUR_BIT_STEP = "vanilla-lora-4bit"
FOUR_BIT_FLAGS = {"load_in_4bit": True, "lora_rank": 16, "zero_stage": 2}


def gpu_check_command(
    profile_name: str = "gpu-check",
    strategy: str = "contrastive",
    num_gpus: int | None = None,
    four_bit: bool = False,
    **changes: Any,
) -> list[str]:
    """The train-rm command of the gpu-check (run :func:`prepare_gpu_check` first): the deepspeed
    launcher, ZeRO-3, bf16, flash-attn and gradient checkpointing as the profile sets them; with ``four_bit``
    the backbone in 4-bit NF4 under rank-16 LoRA, ZeRO-2 (:data:`FOUR_BIT_FLAGS`), saved as :data:`FOUR_BIT_STEP`."""
    profile = command_line_profile(profile_name, **changes)
    paths = gpu_check_paths(profile["run_dir"])
    strategy = strategy_name(strategy)
    save = paths["models"] / (FOUR_BIT_STEP if four_bit else strategy)
    cfg = train_config_from_profile(
        profile,
        strategy,
        save_path=str(save),
        pretrain=str(paths["backbone"]),
        dataset=str(paths["train"]),
        eval_dataset=str(paths["eval"]),
        template="toymath",
        max_epochs=100,
        logging_steps=1,
        metrics_path=str(rm_metrics_path(save)),
        **(FOUR_BIT_FLAGS if four_bit else {}),
    )
    n = int(num_gpus if num_gpus is not None else profile.get("rm_processes", 1))
    return train_command(cfg, num_processes=n, use_deepspeed_launcher=True)


def run_gpu_check(profile_name: str = "gpu-check", dry_run: bool = False, **changes: Any) -> dict[str, Any]:
    """Prepare and run the gpu-check for each of the profile's strategies, then the 4-bit LoRA step
    (:data:`FOUR_BIT_STEP`; skipped, and said so, without bitsandbytes); returns their summaries."""
    profile = command_line_profile(profile_name, **changes)
    strategies = profile.get("strategies", ["contrastive"])
    steps = {s: gpu_check_command(profile_name, s, **changes) for s in strategies}
    steps[FOUR_BIT_STEP] = gpu_check_command(profile_name, "vanilla", four_bit=True, **changes)
    if dry_run:
        return {name: command_text(cmd) for name, cmd in steps.items()}
    paths = prepare_gpu_check(profile_name, **changes)
    out: dict[str, Any] = {}
    for s, cmd in steps.items():
        name = s if s == FOUR_BIT_STEP else strategy_name(s)
        if s == FOUR_BIT_STEP and importlib.util.find_spec("bitsandbytes") is None:
            out[s] = {"skipped": "bitsandbytes is not installed (pip install bitsandbytes runs this step)"}
            continue
        result = run_streaming(
            cmd, paths["logs"] / f"train-{name}.log", desc=f"gpu-check {s}", show=tail_view(5, f"gpu-check {s}")
        )
        summary = json.loads(train_summary_path(paths["models"] / name).read_text())
        out[s] = {
            "wall_s": round(result.wall_s, 1),
            **{
                k: summary.get(k)
                for k in (
                    "steps",
                    "train_s",
                    "tokens_per_s",
                    "eval_accuracy",
                    "eval_loss",
                    "device",
                    "zero_stage",
                    "bf16",
                    "world_size",
                    "lora_rank",
                )
            },
        }
    atomic_write_json(resolve_path(profile["run_dir"]) / "gpu_check.json", out)
    return out


# ---------------------------------------------------------------------------------------------
# real-cpu: real data, tiny backbone, the ordinary CLIs
# ---------------------------------------------------------------------------------------------


def real_cpu_paths(run_dir: str | Path) -> dict[str, Path]:
    """Where real-cpu puts everything, in the run-directory layout (`RunDir`): its two pair sources
    under ``data/preference/<source>/``, its RMs under ``models/`` by name (``gsm8k-goal`` …)."""
    run = RunDir(resolve_path(run_dir))
    return {
        "run": run.root,
        "backbone": run.backbone,
        "manifest": run.data_manifest,
        "hh_train": run.preference_pairs("train", "hh"),
        "hh_eval": run.preference_pairs("eval", "hh"),
        "gsm8k_train": run.preference_pairs("train", "gsm8k"),
        "gsm8k_eval": run.preference_pairs("eval", "gsm8k"),
        "generations": run.generations,
        "benchmark": run.benchmark_questions("gsm8k"),
        "models": run.models,
        "representations": run.representations,
        "eval": run.eval_root,
        "logs": run.logs,
        "summary": run.root / "real_cpu_summary.json",
    }


def _fits(row: dict, max_chars: int) -> bool:
    """Both responses (plus the " " and EOS the trainer appends) fit ``max_chars`` characters: the
    char tokenizer gives one token per character, so such a pair is never dropped at tokenisation."""
    return len(row["correct"]) + 2 <= max_chars and len(row["incorrect"]) + 2 <= max_chars


def real_cpu_prepare(
    profile_name: str = "real-cpu", data_dir: str | Path | None = None, **changes: Any
) -> dict[str, Any]:
    """Prepare the real-cpu run directory from the shared data (nothing is copied verbatim):

    * ``data/preference/hh/{train,eval}.jsonl``: a seeded sample of ``n_hh_pairs`` HH-RLHF harmless
      pairs (dialogues split by the HH adapter; skipped dialogues and pairs too long for
      ``hh_max_len`` characters are counted in the manifest), split train/held-out;
    * ``data/generations/gsm8k/greedy.jsonl`` (and ``samples.jsonl``): every model solution of the
      held-out GSM8K questions (``gsm8k_eval_fraction``), one generation per solution;
    * ``data/preference/gsm8k/{train,eval}.jsonl``: correct-vs-incorrect pairs of the other questions;
    * ``data/benchmarks/gsm8k/test.jsonl``: the held-out questions with their reference answers;
    * ``data/backbone``: a randomly initialised tiny Llama with the character tokenizer;
    * ``data/manifest.json``: the counts of all of the above.
    """
    profile = command_line_profile(profile_name, **changes)
    paths = real_cpu_paths(profile["run_dir"])
    seed = int(profile.get("seed", 0))
    manifest: dict[str, Any] = {"scale": CPU_SCALE, "profile": profile_name, "seed": seed}

    hh = load_pairs(data_file(profile, "hh_file", data_dir))
    fitting = [r for r in hh.rows if _fits(r, profile["hh_max_len"])]
    rng = random.Random(seed)
    picked = rng.sample(fitting, min(profile["n_hh_pairs"], len(fitting)))
    hh_train, hh_eval = split_train_eval(picked, profile["hh_eval_fraction"], seed)
    manifest["hh"] = {
        "source": hh.source,
        "read": hh.report.n_read,
        "pairs": len(hh.rows),
        "skipped": hh.report.n_skipped,
        "skip_report": hh.report.summary(),
        "too_long_for_max_len": len(hh.rows) - len(fitting),
        "train": write_jsonl(paths["hh_train"], hh_train),
        "eval": write_jsonl(paths["hh_eval"], hh_eval),
    }

    gens = load_generations(data_file(profile, "gsm8k_solutions_file", data_dir))
    train_rows, held_rows = split_by_question(gens.rows, profile["gsm8k_eval_fraction"], seed)
    pairs = [
        p
        for p in preference_pairs(train_rows, profile["gsm8k_pairs_per_question"], seed)
        if _fits(p, profile["gsm8k_max_len"])
    ]
    g_train, g_eval = split_train_eval(pairs, 0.1, seed)
    longest = max(len(r["generated_solution"]) for r in held_rows)
    if (
        longest + 2 > profile["gsm8k_max_len"]
    ):  # eval-rm refuses a response longer than --max_len: fail now, not after training
        raise ValueError(
            f"a held-out GSM8K solution has {longest} characters: raise gsm8k_max_len to at least {longest + 2}"
        )
    counts = write_generation_folder(held_rows, paths["generations"], "gsm8k", samples=True)
    held_questions = {r["question"] for r in held_rows}
    manifest["gsm8k"] = {
        "source": gens.source,
        "questions": gens.report.n_read,
        "solutions": len(gens.rows),
        "train_questions": len({r["question"] for r in train_rows}),
        "held_out_questions": len(held_questions),
        "held_out_solutions": counts["greedy"],
        "held_out_correct": sum(bool(r["is_correct"]) for r in held_rows),
        "pairs_train": write_jsonl(paths["gsm8k_train"], g_train),
        "pairs_eval": write_jsonl(paths["gsm8k_eval"], g_eval),
    }
    try:
        questions = load_questions(data_file(profile, "gsm8k_test_file", data_dir)).rows
        manifest["gsm8k"]["benchmark_questions"] = write_jsonl(
            paths["benchmark"], [q for q in questions if q["question"] in held_questions]
        )
    except ArtifactError as e:  # optional: the generations already carry expected_answer
        manifest["gsm8k"]["benchmark_questions"] = f"skipped ({e})"

    max_positions = max(profile["hh_max_len"], profile["gsm8k_max_len"])
    write_random_llama(
        paths["backbone"],
        hidden_size=profile["backbone_hidden_size"],
        num_layers=profile["backbone_layers"],
        num_heads=profile["backbone_heads"],
        vocab_size=None,
        max_positions=max_positions,
        dtype="float32",
        seed=seed,
    )
    manifest["backbone"] = {
        "path": str(paths["backbone"]),
        "hidden_size": profile["backbone_hidden_size"],
        "layers": profile["backbone_layers"],
        "init": "random",
        "tokenizer": "char",
    }
    atomic_write_json(paths["manifest"], manifest)
    return manifest


def real_cpu_commands(profile_name: str = "real-cpu", **changes: Any) -> dict[str, list[str]]:
    """The ordinary CLI commands of the real-cpu run, in order (run :func:`real_cpu_prepare` first).

    HH: baseline and goal-conditioned RMs, held-out accuracy in their ``train_summary.json``.
    GSM8K: both RMs trained on pairs of the training questions, a goal state from their preferred
    solutions, both RMs scoring every held-out solution, and ``goalrm metrics``.
    """
    profile = command_line_profile(profile_name, **changes)
    p = real_cpu_paths(profile["run_dir"])
    cmds: dict[str, list[str]] = {}
    for task, template, max_len in (("hh", "hh", profile["hh_max_len"]), ("gsm8k", "math", profile["gsm8k_max_len"])):
        for rm, strategy in (("baseline", "vanilla"), ("goal", "contrastive")):
            save = p["models"] / f"{task}-{rm}"
            cfg = train_config_from_profile(
                profile,
                strategy,
                save_path=str(save),
                pretrain=str(p["backbone"]),
                dataset=str(p[f"{task}_train"]),
                eval_dataset=str(p[f"{task}_eval"]),
                template=template,
                max_len=max_len,
                max_epochs=1000,
                logging_steps=5,
                metrics_path=str(rm_metrics_path(save)),
            )
            cmds[f"train-{task}-{rm}"] = train_command(cfg, num_processes=1)
    goal_rm = p["models"] / "gsm8k-goal"
    goal_dir = p["representations"] / "gsm8k-goal"
    cmds["get-representation"] = cli_command(
        "get-representation",
        "--dataset-path",
        p["gsm8k_train"],
        "--reward-model-path",
        goal_rm,
        "--save-dir",
        goal_dir,
        "--template",
        "math",
        "--max_len",
        profile["gsm8k_max_len"],
    )
    for rm, extra in (
        ("gsm8k-baseline", ["--vanilla"]),
        ("gsm8k-goal", ["--goal_state_path", goal_dir / "goal_state.npy"]),
    ):
        cmds[f"eval-rm-{rm}"] = cli_command(
            "eval-rm",
            "--completions_data_path",
            p["generations"],
            "--reward_model_path",
            p["models"] / rm,
            "--save_dir",
            p["eval"],
            "--benchmarks",
            "gsm8k",
            "--template",
            "math",
            "--max_len",
            profile["gsm8k_max_len"],
            *extra,
        )
        cmds[f"metrics-{rm}"] = cli_command(
            "metrics",
            "--model_name",
            rm,
            "--eval_results_dir",
            p["eval"],
            "--benchmarks",
            "gsm8k",
            "--n_boot",
            profile.get("n_boot", 1000),
            *(["--vanilla"] if rm.endswith("baseline") else []),
        )
    return cmds


def real_cpu_script(profile_name: str = "real-cpu", **changes: Any) -> str:
    lines = [
        "#!/usr/bin/env bash",
        f"# real-cpu ({CPU_SCALE}): after goalrm_core.recipes.paper.real_cpu_prepare('{profile_name}')",
        "set -euo pipefail",
    ]
    for name, cmd in real_cpu_commands(profile_name, **changes).items():
        lines += [f"# {name}", command_text(cmd)]
    return "\n".join(lines) + "\n"


def real_cpu_run(
    profile_name: str = "real-cpu", data_dir: str | Path | None = None, prepare: bool = True, **changes: Any
) -> dict[str, Any]:
    """Prepare (optionally), run every real-cpu command (logs in ``<run_dir>/logs``), summarise."""
    profile = command_line_profile(profile_name, **changes)
    p = real_cpu_paths(profile["run_dir"])
    if prepare:
        real_cpu_prepare(profile_name, data_dir, **changes)
    for name, cmd in real_cpu_commands(profile_name, **changes).items():
        run_streaming(cmd, p["logs"] / f"{name}.log", desc=name, show=tail_view(5, name))
    return real_cpu_summary(profile_name, **changes)


def _accuracy_entry(correct: np.ndarray) -> dict:
    low, high = metrics.wilson_interval(int(correct.sum()), int(correct.size))
    return {"accuracy": float(correct.mean()), "ci_low": low, "ci_high": high, "n": int(correct.size)}


def _paired_accuracy_delta(a: np.ndarray, b: np.ndarray, n_boot: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(n_boot, a.size))
    d = a[idx].mean(1) - b[idx].mean(1)
    return {
        "delta": float(a.mean() - b.mean()),
        "ci_low": float(np.quantile(d, 0.025)),
        "ci_high": float(np.quantile(d, 0.975)),
        "n": int(a.size),
    }


def real_cpu_summary(profile_name: str = "real-cpu", **changes: Any) -> dict[str, Any]:
    """The real-cpu numbers, every one labelled CPU-scale, written to ``<run_dir>/real_cpu_summary.json``:

    * HH held-out pairwise accuracy of the baseline and goal-conditioned RMs (Wilson 95% CIs) and
      their paired difference (bootstrap over pairs);
    * GSM8K held-out solutions: AUROC of each RM's reward, of the goal-conditioned RM's final
      Q-value (cosine to the goal state) and of response length alone, with 95% bootstrap CIs
      resampling questions, and the paired AUROC difference goal-conditioned − baseline.
    """
    profile = command_line_profile(profile_name, **changes)
    p = real_cpu_paths(profile["run_dir"])
    n_boot, seed = int(profile.get("n_boot", 1000)), int(profile.get("seed", 0))
    out: dict[str, Any] = {
        "scale": CPU_SCALE,
        "note": (
            f"{CPU_SCALE}: a {profile['backbone_layers']}-layer, hidden-{profile['backbone_hidden_size']} "
            f"character-level Llama with random initial weights, {profile['max_steps']} steps per RM on 2 CPU cores; "
            "not comparable to the paper's 7B numbers"
        ),
    }
    hh_pairs = read_jsonl(p["hh_eval"], required=("question", "correct", "incorrect"))
    correct = {}
    for rm in ("hh-baseline", "hh-goal"):
        summary = json.loads(train_summary_path(p["models"] / rm).read_text())
        correct[rm] = pair_correct(p["models"] / rm, hh_pairs, "hh", profile["hh_max_len"])
        out[f"{rm} held-out accuracy"] = {
            **_accuracy_entry(correct[rm]),
            "trainer_eval_accuracy": summary.get("eval_accuracy"),
            "steps": summary.get("steps"),
            "train_pairs": summary.get("train_pairs"),
        }
    out["hh goal - baseline accuracy"] = _paired_accuracy_delta(
        correct["hh-goal"], correct["hh-baseline"], n_boot, seed
    )

    scored = {rm: read_scored(p["eval"] / rm, "gsm8k", "greedy") for rm in ("gsm8k-baseline", "gsm8k-goal")}
    rows = scored["gsm8k-goal"]
    y, clusters = labels(rows), question_ids(rows)

    def auroc(scores) -> dict:
        return metrics.bootstrap_auroc(scores, y, n_boot=n_boot, seed=seed, clusters=clusters).as_dict()

    out["gsm8k reward AUROC baseline"] = auroc([r["reward"] for r in scored["gsm8k-baseline"]])
    out["gsm8k reward AUROC goal-conditioned"] = auroc([r["reward"] for r in rows])
    out["gsm8k Q AUROC goal-conditioned"] = auroc([r["cosine_sim"][-1] for r in rows])
    out["gsm8k length-only AUROC"] = auroc([-r["num_actions"] for r in rows])
    out["gsm8k reward AUROC goal - baseline"] = delta_auroc(rows, scored["gsm8k-baseline"], n_boot=n_boot, seed=seed)
    for rm in ("gsm8k-baseline", "gsm8k-goal"):
        summary = json.loads(train_summary_path(p["models"] / rm).read_text())
        out[f"{rm} held-out pair accuracy"] = summary.get("eval_accuracy")
    atomic_write_json(p["summary"], out)
    return out


def format_summary(summary: Mapping[str, Any]) -> str:
    """The summary as short lines: value [95% CI] (n)."""
    lines = [str(summary.get("note", ""))]
    for key, value in summary.items():
        if not isinstance(value, Mapping):
            continue
        est = value.get("accuracy", value.get("auroc", value.get("delta", value.get("mean"))))
        if est is None or (isinstance(est, float) and math.isnan(est)):
            lines.append(f"{key}: undefined ({value.get('undefined_reason')})")
            continue
        lines.append(f"{key}: {est:.3f} [{value['ci_low']:.3f}, {value['ci_high']:.3f}] (n={value.get('n')})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# python -m goalrm_core.recipes.paper {gpu-check, real-cpu, script}
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m goalrm_core.recipes.paper",
        description="Paper command lines, the GPU check, the real-data CPU run.",
    )
    sub = parser.add_subparsers(dest="what", required=True)
    gpu = sub.add_parser(
        "gpu-check",
        help="~1B random Llama, ZeRO-3 + bf16 + flash-attn, a few steps, then 4-bit LoRA "
        "(needs CUDA; the 4-bit step bitsandbytes).",
    )
    gpu.add_argument("--profile", default="gpu-check")
    gpu.add_argument("--dry-run", action="store_true", help="Print the command lines only.")
    real = sub.add_parser("real-cpu", help="HH-RLHF + GSM8K model solutions with a tiny backbone on CPU.")
    real.add_argument("--profile", default="real-cpu")
    real.add_argument(
        "--data-dir", default=None, help="Folder of the shared data files (default: the profile's data_dir)."
    )
    real.add_argument("--dry-run", action="store_true", help="Print the command lines only.")
    lm = sub.add_parser(
        "real-lm",
        help="GSM8K and HH-RLHF with a pretrained LM (SmolLM2-135M) as the backbone on CPU, top layers trained.",
    )
    lm.add_argument("--profile", default="real-lm")
    lm.add_argument(
        "--split",
        default="validation",
        choices=("validation", "reported"),
        help="The held-out split scored: validation while sizes and levers are chosen, reported once.",
    )
    lm.add_argument(
        "--data-dir", default=None, help="Folder of the shared data files (default: the profile's data_dir)."
    )
    lm.add_argument("--dry-run", action="store_true", help="Print the command lines only.")
    script = sub.add_parser("script", help="Print the shell script of a paper profile.")
    script.add_argument("--profile", default="paper-math")
    script.add_argument("--num-gpus", type=int, default=None)
    script.add_argument("--hostfile", default=None)
    args = parser.parse_args(argv)
    if args.what == "gpu-check":
        result = run_gpu_check(args.profile, dry_run=args.dry_run)
        print(json.dumps(result, indent=2) if not args.dry_run else "\n".join(result.values()))
    elif args.what == "real-cpu":
        if args.dry_run:
            print(real_cpu_script(args.profile))
        else:
            print(format_summary(real_cpu_run(args.profile, args.data_dir)))
    elif args.what == "real-lm":
        from goalrm_core.recipes import real_lm

        if args.dry_run:
            print("\n".join(command_text(c) for c in real_lm.real_lm_commands(args.profile, args.split).values()))
        else:
            print(json.dumps(real_lm.real_lm_run(args.profile, args.split, args.data_dir), indent=2, default=str))
    else:
        print(paper_script(args.profile, args.num_gpus, args.hostfile), end="")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main, sys.argv[1:], "python -m goalrm_core.paper"))  # a bad input is one line, not a traceback
