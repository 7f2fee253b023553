"""The embedded default's data stage: benchmarks, base policy, generations and preference pairs.

Each function reads and writes the run directory layout (``data.rundir.RunDir``), so a stage can be re-run alone:

    data/benchmarks/task.json                   the ToyMath config and the benchmark names, in order
    data/benchmarks/<bench>/test.jsonl          question, expected_answer, reference_solution, n_steps
    data/policy/                                 HF causal LM + tokenizer, sft_history.jsonl
    data/generations/<bench>/{greedy,samples}.jsonl   Nemo-Skills shape + first-error position
    data/preference/{train,eval}.jsonl           question, correct, incorrect (OpenMathInstruct shape)
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from transformers import AutoTokenizer, LlamaForCausalLM

from goalrm_core.data.io import atomic_write_json, read_jsonl, require_artifact, write_jsonl
from goalrm_core.data.questions import held_out_questions, preference_pairs
from goalrm_core.data.schema import GENERATION_FIELDS
from goalrm_core.inference.sampler import Sample, sample_completions
from goalrm_core.model.templates import apply_template
from goalrm_core.model.tokenization import build_char_tokenizer
from goalrm_core.tasks.toymath import problems as toymath
from goalrm_core.tasks.toymath.policy import PolicyConfig, build_policy, train_sft
from goalrm_core.tasks.toymath.verify_data import confident_pairs, covering_fact_table, slip_pairs

TEMPLATE = "toymath"


def data_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "data"


def configs_from_profile(p: Mapping[str, Any]) -> tuple[toymath.ToyMathConfig, PolicyConfig]:
    """The task's and the base policy's configs from a profile's data keys (``min_chain_steps`` …,
    ``policy_steps`` …; notebook 01's parameters). The profile names them after the study; this is
    the one place they become the configs' fields (and where ``pair_source`` is checked)."""
    if p["pair_source"] not in toymath.PREFERENCE_SOURCES:
        raise ValueError(
            f"profile key pair_source must be one of {toymath.PREFERENCE_SOURCES}, got {p['pair_source']!r}"
        )
    task = toymath.ToyMathConfig(
        min_steps=p["min_chain_steps"],
        max_steps=p["max_chain_steps"],
        operand_min=p["operand_min"],
        operand_max=p["operand_max"],
        operations=p["operations"],
        modulus=p["modulus"],
        heldout_facts=p["heldout_facts"],
        mistaught_facts=p["mistaught_facts"],
    )
    policy = PolicyConfig(
        hidden_size=p["policy_hidden_size"],
        num_layers=p["policy_layers"],
        steps=p["policy_steps"],
        batch_size=p["policy_batch_size"],
        learning_rate=p["policy_learning_rate"],
        seed=p["seed"],
    )
    return task, policy


def config_table(task: toymath.ToyMathConfig, policy: PolicyConfig) -> pd.DataFrame:
    """The task's and the base policy's settings as one two-column table (what the notebook shows
    instead of the configs' reprs)."""
    rows = [
        ("chain steps", f"{task.min_steps}-{task.max_steps}"),
        ("operands", f"{task.operand_min}-{task.operand_max}"),
        ("operations", " ".join(task.operations)),
        ("results", f"mod {task.modulus}" if task.modulus else "exact"),
        ("facts held out of training", f"{task.heldout_facts}"),
        ("policy", f"{policy.num_layers} layers, hidden size {policy.hidden_size}"),
        (
            "SFT",
            f"{policy.steps} steps, batch {policy.batch_size}, learning rate {policy.learning_rate:g}, seed "
            f"{policy.seed}",
        ),
    ]
    return pd.DataFrame(rows, columns=["setting", "value"])


def length_table(samples: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark, the mean length (characters) of correct and incorrect samples and their
    difference with a 95% Welch interval: the numbers behind "are wrong solutions longer?"."""
    from scipy import stats

    rows = []
    for bench, g in samples.groupby("benchmark", sort=False):
        right, wrong = g.loc[g["is_correct"], "length"], g.loc[~g["is_correct"], "length"]
        row = {
            "benchmark": bench,
            "correct_len_mean": right.mean(),
            "incorrect_len_mean": wrong.mean(),
            "n_correct": len(right),
            "n_incorrect": len(wrong),
        }
        if len(right) > 1 and len(wrong) > 1:
            ci = stats.ttest_ind(wrong, right, equal_var=False).confidence_interval()
            row.update(
                length_difference=wrong.mean() - right.mean(),
                length_difference_ci_low=ci.low,
                length_difference_ci_high=ci.high,
            )
        else:
            row.update(length_difference=None, length_difference_ci_low=None, length_difference_ci_high=None)
        rows.append(row)
    return pd.DataFrame(rows)


def length_sentence(lengths: pd.DataFrame) -> str:
    """Which benchmarks' incorrect samples are longer, shorter or not distinguishable in length, read
    from the intervals of ``length_table``."""

    def side(r):
        if pd.isna(r["length_difference_ci_low"]):
            return "undetermined"
        return (
            "longer"
            if r["length_difference_ci_low"] > 0
            else "shorter"
            if r["length_difference_ci_high"] < 0
            else "no different"
        )

    groups: dict[str, list] = {}
    for _, r in lengths.iterrows():
        groups.setdefault(side(r), []).append(r)
    parts = []
    for how, rows in groups.items():
        names = ", ".join(r["benchmark"] for r in rows)
        if how in ("longer", "shorter"):
            sizes = sorted(abs(r["length_difference"]) for r in rows)
            by = f"{sizes[0]:.1f}" if len(sizes) == 1 else f"{sizes[0]:.1f} to {sizes[-1]:.1f}"
            parts.append(f"{names}: incorrect samples are {how}, by {by} characters on average")
        elif how == "no different":
            parts.append(f"{names}: no length difference resolved (the 95% interval covers 0)")
        else:
            parts.append(f"{names}: too few samples of one outcome to compare")
    return "; ".join(parts) + "."


def pair_sentence(stats: Mapping[str, Any]) -> str:
    """What ``build_preference_data`` (or ``build_slip_preference_data``) did, in a sentence."""
    if stats.get("source") == "confident+slips":
        return (
            f"{stats['n_slip_pairs']:,} one-fact slips of reference solutions and {stats['n_confident_pairs']:,} "
            f"solutions of a generator taught {stats['generator_facts']} facts wrong, each against the reference: "
            f"{stats['n_pairs']:,} pairs from {stats['n_questions']:,} questions ({stats['n_train']:,} to train, "
            f"{stats['n_eval']:,} held out, split by question)."
        )
    if stats.get("source") == "slips":
        return (
            f"{stats['n_sampled_questions']:,} training questions, each reference solution paired with copies of it "
            f"that slip on one fact: {stats['n_pairs']:,} pairs from {stats['n_questions']:,} questions "
            f"({stats['n_train']:,} to train, {stats['n_eval']:,} held out, split by question)."
        )
    return (
        f"{stats['n_sampled_questions']:,} training questions sampled, {stats['sample_accuracy']:.1%} of the samples "
        f"correct; {stats['n_questions']:,} questions had both a correct and an incorrect sample and gave "
        f"{stats['n_pairs']:,} pairs ({stats['n_train']:,} to train, {stats['n_eval']:,} held out, split by question)."
    )


def data_metrics(
    task: toymath.ToyMathConfig,
    policy: PolicyConfig,
    accuracy: pd.DataFrame,
    sft_history: list[dict],
    pair_stats: Mapping[str, Any],
) -> dict:
    """The ``data`` section of metrics.json: each benchmark's accuracy (``benchmark_table``), the
    preference pairs' counts, the policy's final SFT loss and the task's shape."""
    return {
        "benchmarks": {name: row for name, row in accuracy.to_dict(orient="index").items()},
        "preference": {k: pair_stats[k] for k in ("n_pairs", "n_questions", "n_train", "n_eval")},
        "policy": {"sft_final_loss": sft_history[-1]["loss"], "steps": policy.steps},
        "task": {
            "name": "digit-chain ToyMath" if task.is_digit_chain else "multi-digit ToyMath",
            "min_steps": task.min_steps,
            "max_steps": task.max_steps,
            "modulus": task.modulus,
            "heldout_facts": task.heldout_facts,
            "mistaught_facts": task.mistaught_facts,
        },
    }


def write_benchmarks(run_dir, train_cfg: toymath.ToyMathConfig, n_questions: int, seed: int = 0) -> dict[str, int]:
    """Fixed test questions per benchmark, and task.json (the task config and benchmark order) so
    later stages know the task without its parameters; returns the number of questions in each."""
    counts = {}
    for name in toymath.benchmark_configs(train_cfg):
        problems = toymath.make_benchmark(name, train_cfg, n_questions, seed)
        counts[name] = write_jsonl(
            data_dir(run_dir) / "benchmarks" / name / "test.jsonl", map(toymath.problem_to_row, problems)
        )
    atomic_write_json(
        data_dir(run_dir) / "benchmarks" / "task.json", {"toymath": asdict(train_cfg), "benchmarks": list(counts)}
    )
    return counts


def _task(run_dir) -> dict:
    path = require_artifact(data_dir(run_dir) / "benchmarks" / "task.json", "notebooks/01_data.ipynb")
    return json.loads(path.read_text())


def task_config(run_dir) -> toymath.ToyMathConfig:
    """The ToyMath training config the run's data stage used."""
    cfg = _task(run_dir)["toymath"]
    return toymath.ToyMathConfig(**{**cfg, "operation_weights": tuple(cfg.get("operation_weights", ()))})


def benchmark_names(run_dir) -> list[str]:
    """The run's benchmarks, ``toy-id`` first (the order of the report's tables)."""
    return list(_task(run_dir)["benchmarks"])


def training_problems(run_dir, train_cfg: toymath.ToyMathConfig, n: int, seed: int) -> list[toymath.Problem]:
    """Training questions, never colliding with a benchmark question."""
    held_out = {row["question"] for name in benchmark_names(run_dir) for row in read_benchmark(run_dir, name)}
    return toymath.generate_problems(train_cfg, n, seed, exclude=held_out)


def sft_examples(run_dir, problems: list[toymath.Problem]) -> list[tuple[str, str]]:
    """(prompt, completion) per problem: the solution the policy is taught, which is the correct one
    except that the run's mis-taught facts (``mistaught_facts``, 0 in the demo) are wrong in every
    occurrence (``toymath.taught_solution``)."""
    task = task_config(run_dir)
    return [(apply_template(TEMPLATE, p.question), toymath.taught_solution(p, task)) for p in problems]


def train_policy(run_dir, problems: list[toymath.Problem], cfg: PolicyConfig, progress: bool = True) -> list[dict]:
    """SFT the tiny policy on :func:`sft_examples` and save it (with its tokenizer) under data/policy."""
    tokenizer = build_char_tokenizer()
    model = build_policy(tokenizer, cfg)
    history = train_sft(model, tokenizer, sft_examples(run_dir, problems), cfg, progress=progress)
    out = data_dir(run_dir) / "policy"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_jsonl(out / "sft_history.jsonl", history)
    return history


def load_policy(run_dir):
    path = require_artifact(data_dir(run_dir) / "policy" / "config.json", "notebooks/01_data.ipynb").parent
    return LlamaForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def read_benchmark(run_dir, name: str) -> list[dict]:
    path = require_artifact(data_dir(run_dir) / "benchmarks" / name / "test.jsonl", "notebooks/01_data.ipynb")
    return read_jsonl(path, required=("question", "expected_answer"))


def generation_record(question: str, expected: int, completion: Sample, sample_index: int, modulus: int = 0) -> dict:
    """One generation in the Nemo-Skills shape, plus where it first goes wrong."""
    problem = toymath.problem_from_question(question, modulus)
    err = toymath.first_error(problem, completion.text)
    return {
        "question": question,
        "generated_solution": completion.text,
        "predicted_answer": toymath.parse_answer(completion.text),
        "expected_answer": expected,
        "is_correct": err is None,
        "sample_index": sample_index,
        "num_generated_tokens": completion.num_tokens,
        "policy_mean_logprob": completion.mean_logprob,
        "policy_min_logprob": completion.min_logprob,
        "first_error_step": None if err is None else err.step_index,
        "first_error_char": None if err is None else err.char_offset,
    }


def generate_for_benchmarks(
    run_dir,
    model,
    tokenizer,
    n_samples: int,
    temperature: float,
    seed: int = 0,
    max_new_tokens: int = 96,
    progress: bool = True,
    timings: dict[str, float] | None = None,
) -> None:
    """One greedy generation and ``n_samples`` sampled ones per benchmark question; with ``timings``,
    the seconds spent on each (``greedy``, ``sampling``) are added to it."""
    import time

    modulus = task_config(run_dir).modulus
    for name in benchmark_names(run_dir):
        rows = read_benchmark(run_dir, name)
        prompts = [apply_template(TEMPLATE, r["question"]) for r in rows]
        out = data_dir(run_dir) / "generations" / name
        for mode, n in (("greedy", 1), ("samples", n_samples)):
            t0 = time.perf_counter()
            completions = sample_completions(
                model,
                tokenizer,
                prompts,
                n=n,
                temperature=temperature,
                greedy=mode == "greedy",
                max_new_tokens=max_new_tokens,
                seed=seed,
                progress=progress,
                desc=f"{name} {mode}",
            )
            write_jsonl(
                out / f"{mode}.jsonl",
                (
                    generation_record(r["question"], r["expected_answer"], c, i, modulus)
                    for r, comps in zip(rows, completions)
                    for i, c in enumerate(comps)
                ),
            )
            if timings is not None:
                key = "greedy" if mode == "greedy" else "sampling"
                timings[key] = timings.get(key, 0.0) + time.perf_counter() - t0


def read_generations(run_dir, bench: str, mode: str) -> list[dict]:
    folder = data_dir(run_dir) / "generations"
    if not (folder / bench).is_dir():
        existing = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        raise FileNotFoundError(
            f"benchmark {bench!r} has no generations in {folder}; available: "
            f"{existing or 'none (run notebooks/01_data.ipynb)'}"
        )
    return read_jsonl(folder / bench / f"{mode}.jsonl", required=GENERATION_FIELDS)


def _write_pair_splits(run_dir, pairs: list[dict], eval_fraction: float, seed: int) -> dict[str, int]:
    """Split ``pairs`` into train and eval by question, write both to the run's preference folder, and
    count them."""
    questions = sorted({p["question"] for p in pairs})
    eval_questions = held_out_questions(questions, eval_fraction, seed)
    train = [p for p in pairs if p["question"] not in eval_questions]
    held = [p for p in pairs if p["question"] in eval_questions]
    out = data_dir(run_dir) / "preference"
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "eval.jsonl", held)
    return {"n_pairs": len(pairs), "n_train": len(train), "n_eval": len(held), "n_questions": len(questions)}


def build_preference_data(
    run_dir,
    model,
    tokenizer,
    problems: list[toymath.Problem],
    samples_per_question: int,
    temperature: float,
    pairs_per_question: int,
    eval_fraction: float,
    seed: int = 0,
    max_new_tokens: int = 96,
    progress: bool = True,
) -> dict[str, int]:
    """Sample the policy on training questions, pair correct with incorrect, split by question."""
    prompts = [apply_template(TEMPLATE, p.question) for p in problems]
    completions = sample_completions(
        model,
        tokenizer,
        prompts,
        n=samples_per_question,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed + 1,
        progress=progress,
        desc="pairs",
    )
    modulus = task_config(run_dir).modulus
    samples = [
        generation_record(p.question, p.answer, c, i, modulus)
        for p, comps in zip(problems, completions)
        for i, c in enumerate(comps)
    ]
    # Correct ToyMath solutions of one question are often the same text: pair each incorrect one once.
    pairs = preference_pairs(samples, pairs_per_question, seed, pairing="each_incorrect", carry=("first_error_char",))
    return {
        **_write_pair_splits(run_dir, pairs, eval_fraction, seed),
        "n_sampled_questions": len(problems),
        "sample_accuracy": sum(s["is_correct"] for s in samples) / max(1, len(samples)),
    }


def build_slip_preference_data(
    run_dir, problems: list[toymath.Problem], slips_per_question: int, eval_fraction: float, seed: int = 0
) -> dict[str, int]:
    """Preference pairs from a second generator, not the evaluated policy (the paper's setting: its
    pairs are OpenMathInstruct solutions): each question's reference solution against the same
    solution with one step's result changed and carried through (``verify_data.slip_pairs``), split
    by question like :func:`build_preference_data`. Synthetic pairs are free: ``slips_per_question``
    scales them."""
    pairs = slip_pairs(problems, slips_per_question, task_config(run_dir).modulus, seed)
    return {
        **_write_pair_splits(run_dir, pairs, eval_fraction, seed),
        "n_sampled_questions": len(problems),
        "source": "slips",
    }


def build_confident_preference_data(
    run_dir,
    slip_problems: list[toymath.Problem],
    confident_problems: list[toymath.Problem],
    slips_per_question: int,
    generator_extra_facts: int,
    eval_fraction: float,
    seed: int = 0,
) -> dict[str, int]:
    """Pairs from two generators other than the evaluated policy, split by question: one-fact slips of
    ``slip_problems`` (as :func:`build_slip_preference_data`) and, on ``confident_problems``, the
    reference against a generator taught wrong every fact the policy is taught wrong and
    ``generator_extra_facts`` more (``verify_data.confident_pairs``), so that some rejected sides carry
    the policy's own confident errors. Questions it gets right give no pair."""
    cfg = task_config(run_dir)
    slips = slip_pairs(slip_problems, slips_per_question, cfg.modulus, seed)
    table = covering_fact_table(cfg, generator_extra_facts, seed=seed)
    confident = confident_pairs(confident_problems, table, cfg.modulus)
    pairs = slips + confident
    random.Random(seed).shuffle(pairs)  # the two kinds interleaved in the file, as the calibration wrote them
    stats = _write_pair_splits(run_dir, pairs, eval_fraction, seed)
    return {
        **stats,
        "n_sampled_questions": len(slip_problems) + len(confident_problems),
        "source": "confident+slips",
        "n_slip_pairs": len(slips),
        "n_confident_pairs": len(confident),
        "generator_facts": len(table),
    }


def benchmark_table(run_dir) -> pd.DataFrame:
    """Accuracy per benchmark, greedy and sampled, with counts."""
    rows = []
    for name in benchmark_names(run_dir):
        greedy = read_generations(run_dir, name, "greedy")
        samples = read_generations(run_dir, name, "samples")
        rows.append(
            {
                "benchmark": name,
                "n_questions": len(greedy),
                "greedy_accuracy": sum(g["is_correct"] for g in greedy) / len(greedy),
                "sample_accuracy": sum(s["is_correct"] for s in samples) / len(samples),
                "n_samples": len(samples),
            }
        )
    return pd.DataFrame(rows).set_index("benchmark")


def generations_frame(run_dir, mode: str = "samples") -> pd.DataFrame:
    """All generations of every benchmark in one tidy table."""
    frames = [
        pd.DataFrame(read_generations(run_dir, name, mode)).assign(benchmark=name) for name in benchmark_names(run_dir)
    ]
    df = pd.concat(frames, ignore_index=True)
    df["outcome"] = df["is_correct"].map({True: "correct", False: "incorrect"})
    return df


def benchmark_config_table(train_cfg: toymath.ToyMathConfig) -> pd.DataFrame:
    descriptions = toymath.benchmark_descriptions(train_cfg)
    rows = [
        {
            "benchmark": name,
            "description": descriptions[name],
            "steps": f"{c.min_steps}-{c.max_steps}",
            "operands": f"{c.operand_min}-{c.operand_max}",
            "operations": c.operations,
            "results": f"mod {c.modulus}" if c.modulus else "exact",
        }
        for name, c in toymath.benchmark_configs(train_cfg).items()
    ]
    return pd.DataFrame(rows)


def example_table(run_dir, bench: str = "toy-id", n: int = 6, seed: int = 0) -> pd.DataFrame:
    """A few correct and incorrect sampled solutions side by side with the reference."""
    df = generations_frame(run_dir).query("benchmark == @bench")
    picks = pd.concat([g.sample(min(len(g), n // 2), random_state=seed) for _, g in df.groupby("outcome")])
    modulus = task_config(run_dir).modulus
    picks["reference"] = [toymath.problem_from_question(q, modulus).solution() for q in picks["question"]]
    picks = picks[["question", "generated_solution", "reference", "outcome", "first_error_step"]].reset_index(drop=True)
    for col in ("generated_solution", "reference"):  # one solution line per step, shown on one table line
        picks[col] = picks[col].str.replace("\n", " ⏎ ", regex=False)
    picks["first_error_step"] = ["" if pd.isna(s) else f"line {int(s) + 1}" for s in picks["first_error_step"]]
    return picks.rename(columns={"generated_solution": "sampled solution", "first_error_step": "first error"})


def preference_table(run_dir) -> pd.DataFrame:
    """Pairs per split, pairs per question and response lengths (characters)."""
    rows = []
    for split in ("train", "eval"):
        pairs = pd.DataFrame(
            read_jsonl(data_dir(run_dir) / "preference" / f"{split}.jsonl"),
            columns=["question", "correct", "incorrect"],
        )
        rows.append(
            {
                "split": split,
                "n_pairs": len(pairs),
                "n_questions": pairs["question"].nunique(),
                "pairs_per_question": len(pairs) / max(1, pairs["question"].nunique()),
                "correct_len_mean": pairs["correct"].str.len().mean(),
                "incorrect_len_mean": pairs["incorrect"].str.len().mean(),
            }
        )
    return pd.DataFrame(rows)
