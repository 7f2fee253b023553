"""``real-lm``: the paper's GSM8K and HH designs on real text, with a pretrained LM as the RMs' backbone, on a CPU.

The backbone is a packaged model (``pretrain: smollm2-135m`` in the profile's ``rm:`` block; see
:mod:`goalrm_core.model.pretrained`), and the cost levers are the trainer's own flags in that block:
``train_top_layers`` (only the top layers and the head train) with ``feature_cache: memory`` and one
``feature_cache_dir`` per data set, so that the frozen layers run once over the training texts for every
seed and both arms. Scoring reads the same folder: ``get-representation`` and ``eval-rm --feature_cache_dir``,
the HH pairwise verdicts (:func:`~goalrm_core.recipes.commands.pair_correct`) and the base LM's log-probs
(:func:`base_lm_mean_logprobs`) run the frozen layers once per text for all the RMs of a data set, and only each
RM's top layers (the base LM's) on what they kept.

* :func:`real_lm_prepare` splits the data (:mod:`goalrm_core.tasks.realtext.design`): GSM8K by question and HH
  by dialogue, into train, validation and reported. It writes the training pairs, each held-out split's GSM8K
  solutions as a benchmark (``gsm8k-validation``, ``gsm8k-reported``) and its HH pairs, and counts in the
  manifest what the ``rm:`` block's ``max_len`` truncates.
* :func:`real_lm_commands` gives the ordinary command lines: per data set, arm and seed in ``rm_seeds``, a
  ``goalrm train-rm``; for GSM8K, each goal-conditioned RM's goal state and both RMs scoring one split.
* :func:`real_lm_summary` reads one split (``validation`` while sizes and levers are chosen, ``reported``
  once): GSM8K AUROC per RM, and HH pairwise accuracy, each over RM seeds and questions (or dialogues) with the
  two-level interval and MDE of :mod:`goalrm_core.evaluation.hierarchical`; the paired goal-conditioned −
  baseline difference; and the two reference scorers that need no training, length alone and the base LM's
  mean log-prob.

``python -m goalrm_core.paper real-lm [--split validation] [--dry-run]`` runs it all.
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from goalrm_core.data.adapters import load_generations, load_pairs, write_generation_folder
from goalrm_core.data.io import atomic_write_json, iter_jsonl, read_jsonl, write_jsonl
from goalrm_core.data.rundir import RunDir, rm_metrics_path
from goalrm_core.evaluation import hierarchical
from goalrm_core.evaluation.tables import read_scored
from goalrm_core.model.templates import apply_template
from goalrm_core.paths import resolve_path
from goalrm_core.recipes.commands import cli_command, data_file, pair_correct, train_config_from_profile
from goalrm_core.recipes.profile_keys import command_line_profile
from goalrm_core.study.rms import BASELINE, GOAL_CONDITIONED, RMS
from goalrm_core.tasks.realtext.design import (
    SPLITS,
    fitting_pairs,
    gsm8k_pairs,
    hh_split,
    three_way_split,
    token_lengths,
)
from goalrm_core.train.launch import run_streaming, train_command

HELD_OUT = SPLITS[1:]  # validation, reported
TEMPLATES = {"gsm8k": "math", "hh": "hh"}


def real_lm_paths(run_dir: str | Path) -> dict[str, Path]:
    """Where real-lm puts everything, in the run-directory layout (`RunDir`)."""
    run = RunDir(resolve_path(run_dir))
    paths = {
        "run": run.root,
        "manifest": run.data_manifest,
        "generations": run.generations,
        "models": run.models,
        "representations": run.representations,
        "eval": run.eval_root,
        "logs": run.logs,
        "feature_cache": run.feature_cache,
        "reference": run.eval_root / "reference",
    }
    paths["gsm8k_train"] = run.preference_pairs("train", "gsm8k")
    for split in SPLITS:
        paths[f"hh_{split}"] = run.preference_pairs(split, "hh")
    return paths


def bench_name(split: str) -> str:
    """The benchmark folder of one held-out split's GSM8K solutions."""
    return f"gsm8k-{split}"


def gsm8k_references(path: Path) -> dict[str, str]:
    """Question → reference solution (``ground_truth``) of a GSM8K model-solutions file."""
    out = {}
    for _, row in iter_jsonl(path):
        if isinstance(row, dict) and isinstance(row.get("question"), str) and isinstance(row.get("ground_truth"), str):
            out[row["question"]] = row["ground_truth"]
    return out


def _sample(rows: list[dict], n: int, seed: int) -> list[dict]:
    """A seeded sample of ``n`` rows in their order (all of them when ``n`` is 0 or more than there are)."""
    if not n or len(rows) <= n:
        return rows
    return [rows[i] for i in sorted(random.Random(seed).sample(range(len(rows)), n))]


def _lengths(tokenizer, template: str, rows: Sequence[dict], texts, max_len: int) -> dict:
    prompts, responses = [], []
    for row in rows:
        for text in texts(row):
            prompts.append(apply_template(template, row["question"]))
            responses.append(text)
    return token_lengths(tokenizer, prompts, responses, max_len).as_dict()


def real_lm_prepare(profile_name: str = "real-lm", data_dir: str | Path | None = None, **changes: Any) -> dict:
    """Split and write the real-lm data (the module's docstring); returns the manifest it writes."""
    from transformers import AutoTokenizer

    from goalrm_core.model.pretrained import resolve_model

    profile = command_line_profile(profile_name, **changes)
    p = real_lm_paths(profile["run_dir"])
    seed, val, rep = int(profile.get("seed", 0)), profile["validation_fraction"], profile["reported_fraction"]
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(profile["pretrain"]))
    max_len = int(profile["max_len"])

    gsm8k_file = data_file(profile, "gsm8k_solutions_file", data_dir)
    gens = load_generations(gsm8k_file)
    parts = three_way_split(gens.rows, val, rep, seed)
    pairs = gsm8k_pairs(
        parts["train"],
        gsm8k_references(gsm8k_file),
        profile["gsm8k_pairs_per_question"],
        profile["n_gsm8k_pairs"],
        seed,
    )
    manifest: dict[str, Any] = {
        "profile": profile_name,
        "seed": seed,
        "pretrain": profile["pretrain"],
        "max_len": max_len,
    }
    manifest["gsm8k"] = {
        "source": gens.source,
        "questions": {split: len({r["question"] for r in rows}) for split, rows in parts.items()},
        "train_pairs": write_jsonl(p["gsm8k_train"], pairs),
        "lengths": {"train": _lengths(tokenizer, "math", pairs, lambda r: (r["correct"], r["incorrect"]), max_len)},
    }
    for split in HELD_OUT:
        write_generation_folder(parts[split], p["generations"], bench_name(split), samples=True)
        manifest["gsm8k"][f"{split}_solutions"] = len(parts[split])
        manifest["gsm8k"]["lengths"][split] = _lengths(
            tokenizer, "math", parts[split], lambda r: (r["generated_solution"],), max_len
        )

    hh = load_pairs(data_file(profile, "hh_file", data_dir))
    hh_parts = hh_split(hh.rows, val, rep, seed)
    manifest["hh"] = {
        "source": hh.source,
        "skipped": hh.report.n_skipped,
        "pairs": {},
        "lengths": {},
        "over_max_len": {},
    }
    for split in SPLITS:  # a dialogue longer than max_len could leave two identical sides: left out, counted
        prompts = [apply_template("hh", r["question"]) for r in hh_parts[split]]
        hh_parts[split], manifest["hh"]["over_max_len"][split] = fitting_pairs(
            tokenizer, prompts, hh_parts[split], max_len
        )
    hh_parts["train"] = _sample(hh_parts["train"], profile["n_hh_pairs"], seed)
    for split in SPLITS:
        manifest["hh"]["pairs"][split] = write_jsonl(p[f"hh_{split}"], hh_parts[split])
        manifest["hh"]["lengths"][split] = _lengths(
            tokenizer, "hh", hh_parts[split], lambda r: (r["correct"], r["incorrect"]), max_len
        )
    atomic_write_json(p["manifest"], manifest)
    return manifest


def model_dir(p: Mapping[str, Path], data: str, rm: str, seed: int) -> Path:
    return p["models"] / RunDir.model_name(f"{data}-{rm}", seed)


def cache_dir(p: Mapping[str, Path], data: str) -> Path:
    """The feature cache of one data set's RMs: their frozen layers' states of its training and scored texts."""
    return p["feature_cache"] / data


def real_lm_commands(profile_name: str = "real-lm", split: str = "validation", **changes: Any) -> dict[str, list[str]]:
    """The command lines of one real-lm run, in order (run :func:`real_lm_prepare` first): training, and the
    GSM8K goal states and scoring of ``split``."""
    if split not in HELD_OUT:
        raise ValueError(f"split must be one of {', '.join(HELD_OUT)}, got {split!r}")
    profile = command_line_profile(profile_name, **changes)
    p = real_lm_paths(profile["run_dir"])
    max_len = int(profile["max_len"])
    cmds: dict[str, list[str]] = {}
    for data in ("gsm8k", "hh"):
        for rm in RMS:
            for seed in profile["rm_seeds"]:
                save = model_dir(p, data, rm, seed)
                cfg = train_config_from_profile(
                    profile,
                    rm,
                    save_path=str(save),
                    dataset=str(p[f"{data}_train"]),
                    template=TEMPLATES[data],
                    seed=int(seed),
                    feature_cache_dir=str(cache_dir(p, data)),
                    metrics_path=str(rm_metrics_path(save)),
                )
                cmds[f"train-{save.name}"] = train_command(cfg, num_processes=1)
    for seed in profile["rm_seeds"]:
        goal = model_dir(p, "gsm8k", GOAL_CONDITIONED, seed)
        cmds[f"get-representation-{goal.name}"] = cli_command(
            "get-representation",
            *("--dataset-path", p["gsm8k_train"], "--reward-model-path", goal),
            *("--save-dir", p["representations"] / goal.name, "--template", "math", "--max_len", max_len),
            *("--feature_cache_dir", cache_dir(p, "gsm8k")),
        )
        for rm in RMS:
            model = model_dir(p, "gsm8k", rm, seed)
            extra = (
                ["--vanilla"]
                if rm == BASELINE
                else ["--goal_state_path", p["representations"] / goal.name / "goal_state.npy"]
            )
            cmds[f"eval-rm-{model.name}-{split}"] = cli_command(
                "eval-rm",
                *("--completions_data_path", p["generations"], "--reward_model_path", model),
                *("--save_dir", p["eval"], "--benchmarks", bench_name(split), "--template", "math"),
                *("--max_len", max_len, "--feature_cache_dir", cache_dir(p, "gsm8k"), *extra),
            )
    return cmds


def _question_index(rows: Sequence[dict]) -> np.ndarray:
    index: dict[str, int] = {}
    return np.array([index.setdefault(r["question"], len(index)) for r in rows], dtype=np.int64)


def _summarise(statistics, n_clusters: int, null: float, n_boot: int, seed: int) -> dict:
    ones = np.ones((1, n_clusters), dtype=np.int64)
    values = [float(np.asarray(f(ones))[0]) for f in statistics]
    boot = hierarchical.hierarchical_bootstrap(statistics, n_clusters, n_boot, seed=seed)
    summary = hierarchical.across_seeds_and_questions(values, boot, null=null)
    # an AUROC or an accuracy lies in [0, 1], a difference of two in [-1, 1]: the interval is kept inside
    return hierarchical.clipped(summary, 0.0, 1.0) if null == 0.5 else hierarchical.clipped(summary, -1.0, 1.0)


def base_lm_mean_logprobs(
    profile: Mapping[str, Any], name: str, prompts, responses, out: Path, feature_cache_dir: Path | None = None
) -> list[float]:
    """The base LM's mean log-prob of each response after its prompt (EOS included), kept in ``out`` so that a
    rerun reads it. With ``feature_cache_dir`` (and ``train_top_layers``), from the frozen layers' states the RMs
    of the data set kept there (:func:`_cached_mean_logprobs`)."""
    if out.is_file():
        kept = [r["mean_logprob"] for r in read_jsonl(out)]
        if len(kept) == len(prompts):
            return kept
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from goalrm_core.model.pretrained import resolve_model
    from goalrm_core.study.filter_rules import policy_token_logprobs

    folder = resolve_model(profile["pretrain"])
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    top = int(profile.get("train_top_layers") or 0)
    if feature_cache_dir is not None and top:
        means = _cached_mean_logprobs(model, tokenizer, prompts, responses, feature_cache_dir, top)
    else:
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]) + len(responses[i]))
        values = policy_token_logprobs(model, tokenizer, [prompts[i] for i in order], [responses[i] for i in order], 8)
        means = [math.nan] * len(prompts)
        for i, lp in zip(order, values):
            means[i] = float(np.mean([v for v in lp if math.isfinite(v)]))
    write_jsonl(out, [{"name": name, "mean_logprob": m} for m in means])
    return means


def _cached_mean_logprobs(model, tokenizer, prompts, responses, folder: Path, top: int) -> list[float]:
    """:func:`base_lm_mean_logprobs`'s means (the same ids: :func:`policy_token_ids`) from the states entering the
    base LM's top ``top`` layers kept in ``folder``: a text is read as the start of one an RM scored (the prompt and
    response it read before its own EOS), so only the base LM's top layers, norm and head run on it; the frozen
    layers run only where no such text was kept (and their states are not kept: the means are)."""
    from goalrm_core.model.top_layers import FeatureCache, cached_token_logprobs
    from goalrm_core.study.filter_rules import policy_token_ids

    texts, counts = zip(*(policy_token_ids(tokenizer, p, r) for p, r in zip(prompts, responses)))
    layer = model.config.num_hidden_layers - top
    cache = FeatureCache.load_backbone(folder, model.model, layer)
    values = cached_token_logprobs(model.model, model.lm_head.weight, cache, texts, tokenizer.pad_token_id, 8)
    means = []
    for lp, n in zip(values, counts):
        response = lp[-n:]
        means.append(float(response[response.isfinite()].double().mean()))
    print(
        f"base LM log-probs: {len(texts)} texts from the states in {cache.path(folder)}; {cache.tokens} tokens "
        f"through the frozen layers (those of texts no RM had scored)",
        file=sys.stderr,
    )
    return means


def gsm8k_summary(profile: Mapping[str, Any], p: Mapping[str, Path], split: str, n_boot: int, seed: int) -> dict:
    seeds = [int(s) for s in profile["rm_seeds"]]
    bench = bench_name(split)
    rows = {
        rm: {s: read_scored(p["eval"] / model_dir(p, "gsm8k", rm, s).name, bench, "greedy") for s in seeds}
        for rm in RMS
    }
    first = rows[BASELINE][seeds[0]]
    questions = [r["question"] for r in first]
    c, y = _question_index(first), np.array([bool(r["is_correct"]) for r in first])
    for rm in RMS:
        for s in seeds:
            if [r["question"] for r in rows[rm][s]] != questions:
                raise ValueError(f"gsm8k {rm} seed {s}: its scored solutions differ from {BASELINE} seed {seeds[0]}'s")
    stats = {rm: [hierarchical.auroc_statistic([r["reward"] for r in rows[rm][s]], y, c) for s in seeds] for rm in RMS}
    n_q = int(c.max()) + 1
    logp = base_lm_mean_logprobs(
        profile,
        bench,
        [apply_template("math", r["question"]) for r in first],
        [r["generated_solution"] for r in first],
        p["reference"] / f"{bench}.jsonl",
        cache_dir(p, "gsm8k"),
    )
    reference = {
        "length only": hierarchical.auroc_statistic([-r["num_actions"] for r in first], y, c),
        "base LM mean log-prob": hierarchical.auroc_statistic(logp, y, c),
    }
    out: dict[str, Any] = {"split": split, "questions": n_q, "solutions": len(first), "correct": int(y.sum())}
    for rm in RMS:
        out[rm] = {"auroc": _summarise(stats[rm], n_q, 0.5, n_boot, seed)}
    delta = [hierarchical.difference(g, b) for g, b in zip(stats[GOAL_CONDITIONED], stats[BASELINE])]
    out["delta_auroc"] = _summarise(delta, n_q, 0.0, n_boot, seed)
    out["reference"] = {
        name: hierarchical.hierarchical_bootstrap([f], n_q, n_boot, seed=seed).as_dict()
        for name, f in reference.items()
    }
    return out


def hh_summary(profile: Mapping[str, Any], p: Mapping[str, Path], split: str, n_boot: int, seed: int) -> dict:
    seeds = [int(s) for s in profile["rm_seeds"]]
    pairs = read_jsonl(p[f"hh_{split}"], required=("question", "correct", "incorrect"))
    c = _question_index(pairs)
    n_d = int(c.max()) + 1
    max_len = int(profile["max_len"])
    right = {
        rm: [
            pair_correct(model_dir(p, "hh", rm, s), pairs, "hh", max_len, cache_dir(p, "hh")).astype(float)
            for s in seeds
        ]
        for rm in RMS
    }
    stats = {rm: [hierarchical.mean_statistic(v, c) for v in right[rm]] for rm in RMS}
    out: dict[str, Any] = {"split": split, "pairs": len(pairs), "dialogues": n_d}
    for rm in RMS:
        out[rm] = {"accuracy": _summarise(stats[rm], n_d, 0.5, n_boot, seed)}
    delta = [hierarchical.difference(g, b) for g, b in zip(stats[GOAL_CONDITIONED], stats[BASELINE])]
    out["delta_accuracy"] = _summarise(delta, n_d, 0.0, n_boot, seed)
    prompts = [apply_template("hh", r["question"]) for r in pairs]
    logp = base_lm_mean_logprobs(
        profile,
        f"hh-{split}",
        prompts * 2,
        [r["correct"] for r in pairs] + [r["incorrect"] for r in pairs],
        p["reference"] / f"hh-{split}.jsonl",
        cache_dir(p, "hh"),
    )
    shorter = [float(len(r["correct"]) < len(r["incorrect"])) for r in pairs]
    base = [float(a > b) for a, b in zip(logp[: len(pairs)], logp[len(pairs) :])]
    out["reference"] = {
        name: hierarchical.hierarchical_bootstrap([hierarchical.mean_statistic(v, c)], n_d, n_boot, seed=seed).as_dict()
        for name, v in (("shorter preferred", shorter), ("base LM mean log-prob", base))
    }
    return out


def real_lm_summary(profile_name: str = "real-lm", split: str = "validation", **changes: Any) -> dict:
    """One split's figures (the module's docstring), written to ``<run_dir>/real_lm_<split>.json``."""
    profile = command_line_profile(profile_name, **changes)
    p = real_lm_paths(profile["run_dir"])
    n_boot, seed = int(profile.get("n_boot", 1000)), int(profile.get("seed", 0))
    out = {
        "profile": profile_name,
        "pretrain": profile["pretrain"],
        "rm_seeds": [int(s) for s in profile["rm_seeds"]],
        "gsm8k": gsm8k_summary(profile, p, split, n_boot, seed),
        "hh": hh_summary(profile, p, split, n_boot, seed),
    }
    atomic_write_json(p["run"] / f"real_lm_{split}.json", out)
    return out


def real_lm_run(
    profile_name: str = "real-lm", split: str = "validation", data_dir: str | Path | None = None, **changes: Any
) -> dict:
    """Prepare, run every command (logs in ``<run_dir>/logs``; an RM already saved is not trained again), and
    summarise ``split``."""
    from goalrm_core.data.rundir import train_summary_path
    from goalrm_core.study.live import tail_view

    profile = command_line_profile(profile_name, **changes)
    p = real_lm_paths(profile["run_dir"])
    real_lm_prepare(profile_name, data_dir, **changes)
    for name, cmd in real_lm_commands(profile_name, split, **changes).items():
        save = p["models"] / name.removeprefix("train-")
        if name.startswith("train-") and train_summary_path(save).is_file():
            continue
        run_streaming(cmd, p["logs"] / f"{name}.log", desc=name, show=tail_view(5, name))
    return real_lm_summary(profile_name, split, **changes)
