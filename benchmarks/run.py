"""Performance harness on the demo's configuration: every figure is a ratio measured side by side in one run.

    python benchmarks/run.py                  # writes benchmarks/results.json and prints a table
    python benchmarks/run.py --quick          # tiny sizes, one repetition: the test suite runs this so it cannot rot
    python benchmarks/run.py --profile confident
    python benchmarks/run.py --reports-only   # re-reads the committed reports' figures into results.json (no run)
    python benchmarks/run.py --doc            # rewrites docs/performance.md's table from results.json (no run)

The shapes are read from ``params/<profile>.yaml``, not restated: the policy's width and depth (the RMs start
from it), notebook 02's RM recipe (batch, max_len, sim/unsim samples, contrastive settings) and the
sampler's settings (samples per question, temperature, new-token budget). The training text is the
profile's own task (its digit chains, one-fact slips of reference solutions as the rejected side), so the
sequence lengths are the demo's.

Comparisons (CPU, the profile's torch threads):
  1. RM training: goalrm's trainer (a subprocess, as notebook 02 runs it) / TRL's RewardTrainer, tokens/s
  2. contrastive overhead: the goal-conditioned trainer / the baseline trainer, tokens/s, one process at a
     time, alternating; the same on one optimiser step in-process; and a profile of one step of each
  3. the RM trainer's fraction of this machine's fp32 matmul peak (FLOPs per token from the model's shapes)
  4. dense scoring: sequences/s of the bucketed batched scorer / a batch-size-1 loop (and max |diff|)
  5. online Q: sampling with the RM following every sample (a threshold that is evaluated but stops nothing)
     / the policy alone, and pruning off (threshold <= -1: no RM call) / the policy alone
  6. from the committed reports: Q-pruned / unpruned tokens and wall time, and each stage's wall time
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core.data.io import atomic_write_json, write_jsonl  # noqa: E402
from goalrm_core.generated_block import update_file  # noqa: E402
from goalrm_core.inference.pruning import PRUNING_OFF, PruneConfig  # noqa: E402
from goalrm_core.inference.sampler import RM_EVERY, sample  # noqa: E402
from goalrm_core.inference.scoring import score_generations  # noqa: E402
from goalrm_core.model.encoding import PreferenceCollator, encode_preference_rows  # noqa: E402
from goalrm_core.model.objective import reward_model_loss  # noqa: E402
from goalrm_core.model.reward_model import RewardModel  # noqa: E402
from goalrm_core.model.templates import apply_template  # noqa: E402
from goalrm_core.model.tokenization import build_char_tokenizer  # noqa: E402
from goalrm_core.pipeline.profile_files import load_profile  # noqa: E402
from goalrm_core.study.training import notebook_recipe  # noqa: E402
from goalrm_core.tasks.toymath import problems as toymath  # noqa: E402
from goalrm_core.tasks.toymath.pipeline import TEMPLATE, configs_from_profile  # noqa: E402
from goalrm_core.tasks.toymath.policy import build_policy  # noqa: E402
from goalrm_core.tasks.toymath.verify_data import slip_pairs  # noqa: E402
from goalrm_core.threads import matmul_gflops  # noqa: E402
from goalrm_core.train.config import TrainRMConfig  # noqa: E402
from goalrm_core.train.launch import train_command  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results.json"
TABLE_DOC = ROOT / "docs" / "performance.md"
BEGIN = (
    "<!-- begin: generated from benchmarks/results.json by `python benchmarks/run.py --doc`; do not edit by hand -->"
)
END = "<!-- end: generated from benchmarks/results.json -->"


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


@dataclasses.dataclass
class Setup:
    """What the profile fixes, and what this run sizes (``--quick`` shrinks the steps and repetitions)."""

    profile: str
    values: dict
    steps: int  # optimiser steps per timed training run
    reps: int  # repetitions of each side-by-side comparison
    n_score: int  # sequences scored
    n_questions: int  # questions sampled (x the profile's samples per question)

    def config(self, **flags):
        """Notebook 02's trainer config of the profile (``flags``: trainer flags that win over it)."""
        return TrainRMConfig.from_dict({**notebook_recipe(self.values).to_dict(), "pretrain": "unused", **flags})

    @property
    def recipe(self):
        return self.config()

    def shapes(self) -> dict:
        v, r = self.values, self.recipe
        return {
            "hidden_size": v["policy_hidden_size"],
            "layers": v["policy_layers"],
            "batch_pairs": r.train_batch_size,
            "micro_batch_pairs": r.micro_train_batch_size,
            "max_len": r.max_len,
            "sim_samples": r.sim_samples,
            "unsim_samples": r.unsim_samples,
            "contrastive_beta": r.contrastive_loss_beta,
            "encoding": r.encoding,
            "n_samples": v["n_samples"],
            "temperature": v["sampling_temperature"],
            "max_new_tokens": v["max_new_tokens"],
            "torch_threads": v["torch_threads"],
            "steps_per_timed_run": self.steps,
            "reps": self.reps,
        }


def task_pairs(setup: Setup, n: int) -> list[dict]:
    """``n`` preference pairs of the profile's task: a reference solution against the same solution
    with one step's result changed (the demo's lengths; its pairs differ only in who made the slip)."""
    task, _ = configs_from_profile(setup.values)
    problems = toymath.generate_problems(task, n, 12345)
    return slip_pairs(problems, 1, task.modulus, seed=0)[:n]


def policy_dir(setup: Setup, tmp: Path) -> Path:
    """An untrained policy of the profile's shape (the RMs start from the policy; timing needs no training)."""
    _, policy_cfg = configs_from_profile(setup.values)
    tokenizer = build_char_tokenizer()
    build_policy(tokenizer, policy_cfg).save_pretrained(tmp / "policy")
    tokenizer.save_pretrained(tmp / "policy")
    return tmp / "policy"


# 1, 2 ----------------------------------------------------------------------------------------
def train_once(setup: Setup, policy: Path, data: Path, tmp: Path, strategy: str) -> dict:
    """One RM training of notebook 02's recipe for ``setup.steps`` steps, in its own process as the
    notebook runs it; its summary's training seconds and tokens/s (start-up and saving excluded)."""
    out = tmp / f"rm-{strategy}-{time.time_ns()}"
    cfg = setup.config(
        pretrain=str(policy),
        dataset=str(data),
        save_path=str(out),
        template=TEMPLATE,
        reward_model_strategy=strategy,
        max_steps=setup.steps,
        eval_split=0.0,
        eval_steps=-1,
        logging_steps=setup.steps,
    )
    started = time.perf_counter()
    subprocess.run(train_command(cfg), check=True, capture_output=True, cwd=ROOT)
    process_s = time.perf_counter() - started
    summary = json.loads((out / "train_summary.json").read_text())
    return {"train_s": summary["train_s"], "tokens_per_s": summary["tokens_per_s"], "process_s": process_s}


def bench_trl(setup: Setup, policy: Path, pairs: list[dict], tmp: Path) -> float | None:
    """Training seconds of TRL's RewardTrainer on the same model, pairs and batch size."""
    try:
        from datasets import Dataset
        from transformers import AutoModelForSequenceClassification
        from trl import RewardConfig, RewardTrainer
    except ImportError:
        return None
    tokenizer = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForSequenceClassification.from_pretrained(policy, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    batch = setup.recipe.train_batch_size
    rows = [
        {
            "prompt": apply_template(TEMPLATE, p["question"]),
            "chosen": p["correct"] + " " + tokenizer.eos_token,
            "rejected": p["incorrect"] + " " + tokenizer.eos_token,
        }
        for p in pairs[: setup.steps * batch]
    ]
    args = RewardConfig(
        output_dir=str(tmp / "trl"),
        per_device_train_batch_size=batch,
        max_steps=setup.steps,
        learning_rate=setup.recipe.learning_rate,
        logging_steps=setup.steps,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        max_length=setup.recipe.max_len,
        disable_tqdm=True,
        seed=0,
    )
    trainer = RewardTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    return trainer.train().metrics["train_runtime"]


def bench_training(setup: Setup, policy: Path, pairs: list[dict], tmp: Path) -> tuple[dict, dict]:
    """Comparisons 1 and 2 (trainer level): baseline, goal-conditioned and TRL runs, one at a time, in
    turn within each repetition, so that a change of load hits all three alike."""
    data = tmp / "pairs.jsonl"
    write_jsonl(data, pairs[: setup.steps * setup.recipe.train_batch_size])
    runs: dict[str, list[dict]] = {"vanilla": [], "contrastive": []}
    trl: list[float] = []
    for _ in range(setup.reps):
        for strategy in ("vanilla", "contrastive"):
            runs[strategy].append(train_once(setup, policy, data, tmp, strategy))
        seconds = bench_trl(setup, policy, pairs, tmp)
        if seconds is not None:
            trl.append(seconds)
    base = runs["vanilla"]
    training = {
        "goalrm_tokens_per_s": statistics.median(r["tokens_per_s"] for r in base),
        "train_s_goalrm": spread([r["train_s"] for r in base]),
        "process_s_goalrm": spread([r["process_s"] for r in base]),
    }
    if trl:
        # TRL reports its own runtime only: compare seconds for the same pairs and steps
        training.update(train_s_trl=spread(trl), ratio=spread([t / r["train_s"] for t, r in zip(trl, base)]))
    else:
        training.update(ratio=None, note="trl not installed: pip install -e '.[bench]'")
    overhead = {
        "trainer_ratio": spread([c["tokens_per_s"] / v["tokens_per_s"] for c, v in zip(runs["contrastive"], base)]),
        "baseline_tokens_per_s": training["goalrm_tokens_per_s"],
        "goal_conditioned_tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs["contrastive"]),
    }
    return training, overhead


def one_step_model(setup: Setup, pairs: list[dict]):
    """The RM of the profile's shape, one training batch of its recipe, and an optimiser."""
    tokenizer = build_char_tokenizer()
    _, policy_cfg = configs_from_profile(setup.values)
    model = RewardModel(AutoModel.from_config(build_policy(tokenizer, policy_cfg).config)).train()
    recipe = setup.recipe
    items, _ = encode_preference_rows(
        tokenizer, pairs[: recipe.train_batch_size], TEMPLATE, recipe.max_len, encoding=recipe.encoding
    )
    batch = PreferenceCollator(tokenizer.pad_token_id)(items)
    return model, batch, torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate)


def bench_step(setup: Setup, pairs: list[dict]) -> dict:
    """Comparison 2, in-process: one optimiser step of each objective on the same batch, alternating;
    and a profile of one step of each (the operators that take the time)."""
    model, batch, optimizer = one_step_model(setup, pairs)
    configs = {s: setup.config(reward_model_strategy=s) for s in ("vanilla", "contrastive")}

    def step(strategy: str, rep: int) -> None:
        loss = reward_model_loss(model, batch, configs[strategy], torch.Generator().manual_seed(rep)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    times = {"vanilla": [], "contrastive": []}
    for rep in range(setup.reps * 5 + 1):
        for strategy in times:
            t0 = time.perf_counter()
            step(strategy, rep)
            if rep:  # the first repetition warms up
                times[strategy].append(time.perf_counter() - t0)
    profiles = {}
    for strategy in times:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            step(strategy, 0)
        ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        total = sum(e.self_cpu_time_total for e in ops)
        profiles[strategy] = {
            "total_ms": total / 1e3,
            "top": [{"op": e.key, "self_ms": round(e.self_cpu_time_total / 1e3, 2), "calls": e.count} for e in ops[:8]],
        }
    tokens = int(batch["attention_mask"].sum())
    return {
        "ratio": spread([c / v for c, v in zip(times["contrastive"], times["vanilla"])]),
        "vanilla_tokens_per_s": tokens / statistics.median(times["vanilla"]),
        "contrastive_tokens_per_s": tokens / statistics.median(times["contrastive"]),
        "padded_tokens_per_step": int(batch["attention_mask"].numel()),
        "real_tokens_per_step": tokens,
        "profile": profiles,
    }


# 3 -------------------------------------------------------------------------------------------
def matmul_peak(n: int, reps: int) -> float:
    """This machine's fp32 matmul rate (GFLOP/s) on n x n matrices at the harness's thread count
    (the same measure every report records in its provenance)."""
    return matmul_gflops(torch.get_num_threads(), n=n, reps=max(1, reps))


def train_flops_per_token(setup: Setup, seq_len: float) -> float:
    """Forward + backward FLOPs per token of the RM (``6 x matmul weights`` plus attention's
    ``12 x layers x seq_len x hidden``; the embedding is a lookup, the value head one dot product)."""
    h, layers = setup.values["policy_hidden_size"], setup.values["policy_layers"]
    inter = 8 * h // 3  # tiny_llama_config's SwiGLU width
    weights = layers * (4 * h * h + 3 * h * inter) + h
    return 6 * weights + 12 * layers * seq_len * h


def bench_peak_fraction(setup: Setup, step: dict, training: dict, overhead: dict) -> dict:
    peak = matmul_peak(256 if setup.reps == 1 else 1024, setup.reps)
    seq_len = step["padded_tokens_per_step"] / (2 * setup.recipe.train_batch_size)
    flops = train_flops_per_token(setup, seq_len)
    return {
        "matmul_peak_gflops": peak,
        "train_flops_per_token": flops,
        "mean_padded_len": seq_len,
        "baseline_fraction_of_peak": training["goalrm_tokens_per_s"] * flops / 1e9 / peak,
        "goal_conditioned_fraction_of_peak": overhead["goal_conditioned_tokens_per_s"] * flops / 1e9 / peak,
        "note": "tokens/s counts real (unpadded) tokens; FLOPs per token use the mean padded length",
    }


# 4 -------------------------------------------------------------------------------------------
def bench_scoring(setup: Setup, pairs: list[dict]) -> dict:
    tokenizer = build_char_tokenizer()
    model, _, _ = one_step_model(setup, pairs)
    model.eval()
    rows = [
        {"question": p["question"], "generated_solution": s}
        for p in pairs[: setup.n_score // 2]
        for s in (p["correct"], p["incorrect"])
    ]
    goal = torch.randn(setup.values["policy_hidden_size"])
    kw = dict(progress=False, encoding="split", readout="eos", max_len=setup.recipe.max_len)
    ratios, diffs, rate = [], [], []
    for _ in range(setup.reps):
        t0 = time.perf_counter()
        batched = score_generations(model, tokenizer, rows, TEMPLATE, goal, batch_size=64, **kw)
        t1 = time.perf_counter()
        single = score_generations(model, tokenizer, rows, TEMPLATE, goal, batch_size=1, bucket=False, **kw)
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / (t1 - t0))
        rate.append(len(rows) / (t1 - t0))
        diffs.append(
            max(
                max(
                    abs(a - b)
                    for a, b in zip(x["cosine_sim"] + x["partial_rewards"], y["cosine_sim"] + y["partial_rewards"])
                )
                for x, y in zip(batched, single)
            )
        )
    return {
        "ratio": spread(ratios),
        "batched_sequences_per_s": statistics.median(rate),
        "max_abs_diff": max(diffs),
        "n_sequences": len(rows),
    }


# 5 -------------------------------------------------------------------------------------------
RM_EVERY_SCAN = (1, 4, RM_EVERY, 16, 48)


def bench_online_q(setup: Setup, pairs: list[dict], scan: tuple[int, ...] = RM_EVERY_SCAN) -> tuple[dict, list[dict]]:
    """The sampler at the profile's settings, each run against the policy alone, alternating in one
    loop over the same models and prompts:

    * pruning off (-1: the RM is never called);
    * for each ``rm_every`` of ``scan`` (how many policy steps the RM reads in one forward; 1 reads every
      token as it is drawn): the RM following every sample at the lowest threshold that is evaluated
      (-0.999: Q is computed at every token and stops nothing, so the runs make the same tokens), and
      pruning that stops samples: the threshold is the median of the Q-values the evaluated run
      recorded past ``skip_first``, so many samples stop; its wall ratio is set beside its token ratio.

    Returns the sampler's default (``RM_EVERY``, chosen from the scan) against reading every token,
    and the scan's rows.
    """
    scan = tuple(sorted(set(scan) | {1, RM_EVERY}))
    tokenizer = build_char_tokenizer()
    _, policy_cfg = configs_from_profile(setup.values)
    policy = build_policy(tokenizer, policy_cfg).eval()
    rm, _, _ = one_step_model(setup, pairs)
    rm.eval()
    goal = torch.randn(setup.values["policy_hidden_size"])
    prompts = [apply_template(TEMPLATE, p["question"]) for p in pairs[: setup.n_questions]]
    kw = dict(
        n=setup.values["n_samples"],
        temperature=setup.values["sampling_temperature"],
        max_new_tokens=setup.values["max_new_tokens"],
        seed=0,
        stop_texts=(),
    )
    evaluated = PruneConfig(threshold=PRUNING_OFF + 1e-3)

    def timed(**extra) -> tuple[float, int, list]:
        t0 = time.perf_counter()
        out = sample(policy, tokenizer, prompts, **kw, **extra)
        return time.perf_counter() - t0, sum(len(s.token_ids) + s.overrun for group in out for s in group), out

    _, _, recorded = timed(rm=rm, goal=goal, prune=evaluated)  # also the warm-up of both models
    q = [v for group in recorded for s in group for v in s.q_values[evaluated.skip_first :]]
    stopping = PruneConfig(threshold=float(np.median(q)))
    runs = {"off": dict(rm=rm, goal=goal, prune=PruneConfig(threshold=PRUNING_OFF))}
    for every in scan:
        runs[f"evaluated_{every}"] = dict(rm=rm, goal=goal, prune=evaluated, rm_every=every)
        runs[f"stopping_{every}"] = dict(rm=rm, goal=goal, prune=stopping, rm_every=every)
    walls: dict[str, list[float]] = {name: [] for name in runs}
    tokens: dict[str, int] = {}
    for _ in range(setup.reps):
        alone, tokens["alone"], _ = timed()
        for name, extra in runs.items():
            wall, tokens[name], _ = timed(**extra)
            walls[name].append(wall / alone)
    rows = [
        {
            "rm_every": every,
            "evaluated_wall_ratio": spread(walls[f"evaluated_{every}"])["median"],
            "stopping_wall_ratio": spread(walls[f"stopping_{every}"])["median"],
            "stopping_tokens_ratio": tokens[f"stopping_{every}"] / tokens["alone"],
        }
        for every in scan
    ]
    main = {
        "evaluated_wall_ratio": spread(walls[f"evaluated_{RM_EVERY}"]),
        "evaluated_per_token_wall_ratio": spread(walls["evaluated_1"]),
        "rm_every": RM_EVERY,
        "off_wall_ratio": spread(walls["off"]),
        "stopping_wall_ratio": spread(walls[f"stopping_{RM_EVERY}"]),
        "stopping_tokens_ratio": tokens[f"stopping_{RM_EVERY}"] / tokens["alone"],
        "stopping_threshold": stopping.threshold,
        "tokens": {
            "alone": tokens["alone"],
            "per_token": tokens["evaluated_1"],
            "chunked": tokens[f"evaluated_{RM_EVERY}"],
            "off": tokens["off"],
            "stopping": tokens[f"stopping_{RM_EVERY}"],
        },
        "n_questions": len(prompts),
        "threshold_evaluated": evaluated.threshold,
        "note": "tokens count every token the policy drew, those cut after a stop (Sample.overrun) included; "
        "the rm_every scan ran in the same loop, on the same models",
    }
    return main, rows


# 6 -------------------------------------------------------------------------------------------
def stage_times(reports_root: Path) -> dict:
    """Each executed stage's wall time (``status.json``), its training's seconds per RM seed, and the
    machine's fp32 matmul speed where the report recorded it (its provenance): the same CPU model has
    run the demo at speeds 3x apart, so a time is read beside the speed it ran at."""
    out = {}
    for status_path in sorted(reports_root.glob("*/status.json")) if reports_root.is_dir() else []:
        status = json.loads(status_path.read_text())
        stages = {s["name"]: s["duration_s"] for s in status.get("stages", []) if s.get("duration_s") is not None}
        if not stages:
            continue
        entry = {"stages_s": stages, "total_s": round(sum(stages.values()), 1)}
        metrics_path = status_path.parent / "metrics.json"
        if metrics_path.exists():
            m = json.loads(metrics_path.read_text())
            n_seeds = m.get("training", {}).get("baseline", {}).get("n_seeds")
            if n_seeds and "02_training" in stages:
                entry["training_s_per_seed"] = round(stages["02_training"] / n_seeds, 1)
                entry["n_seeds"] = n_seeds
            speed = (m.get("provenance", {}).get("machine", {}).get("speed") or {}).get("matmul_gflops")
            if speed is not None:
                entry["matmul_gflops"] = speed
        out[status_path.parent.name] = entry
    return out


def pruning_ratios(reports_root: Path) -> dict:
    """Q-pruned / unpruned tokens and wall time, measured side by side on the same questions and seeds
    by the decoding notebook of each executed report (threshold tuned on held-out questions)."""
    out = {}
    for metrics_path in sorted(reports_root.glob("*/metrics.json")) if reports_root.is_dir() else []:
        m = json.loads(metrics_path.read_text())
        pruning = m.get("decoding", {}).get("pruning", {})
        walls = m.get("timings", {}).get("decoding", {}).get("pruning", {})
        rows = {
            bench: {
                "threshold": row.get("threshold"),
                "pruning_off": (row.get("threshold") or 0.0) <= PRUNING_OFF,
                "tokens_ratio": row["tokens_generated"] / row["tokens_generated_unpruned"],
                "wall_ratio": walls[bench]["wall_s"] / walls[bench]["wall_s_unpruned"] if bench in walls else None,
                "accuracy": row["accuracy"],
                "accuracy_unpruned": row["accuracy_unpruned"],
            }
            for bench, row in pruning.items()
            if row.get("tokens_generated_unpruned")
        }
        if rows:
            out[metrics_path.parent.name] = rows
    return out


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick", action="store_true", help="Tiny step counts and one repetition (the test suite runs this)."
    )
    parser.add_argument(
        "--profile", default="demo", help="The profile whose shapes are measured (params/<profile>.yaml)."
    )
    parser.add_argument("--out", default=str(RESULTS), help="Where the results JSON goes.")
    parser.add_argument(
        "--doc", action="store_true", help="Measure nothing: rewrite docs/performance.md's table from --out."
    )
    parser.add_argument(
        "--only-online-q",
        action="store_true",
        help="Measure only the sampler figures (comparison 5b) and update them in --out.",
    )
    parser.add_argument(
        "--reports-only",
        action="store_true",
        help="Measure nothing: re-read the committed reports' figures (comparison 6) into --out.",
    )
    args = parser.parse_args(argv)
    if args.doc:
        write_doc(json.loads(Path(args.out).read_text()))
        return 0
    if args.reports_only:
        results = json.loads(Path(args.out).read_text())
        results.update(pruning=pruning_ratios(ROOT / "reports"), end_to_end=stage_times(ROOT / "reports"))
        atomic_write_json(args.out, results)
        print(format_table(results))
        return 0
    values = load_profile(args.profile)
    if args.quick:  # the demo's shapes are cheap enough; only the amounts shrink
        setup = Setup(args.profile, values, steps=2, reps=1, n_score=16, n_questions=2)
    else:
        setup = Setup(args.profile, values, steps=150, reps=3, n_score=512, n_questions=32)
    torch.set_num_threads(values["torch_threads"] or os.cpu_count() or 1)
    pairs = task_pairs(setup, max(setup.steps * setup.recipe.train_batch_size, setup.n_score) + 8)
    if args.only_online_q:
        results = json.loads(Path(args.out).read_text())
        before = load_average()
        results["online_q"], results["online_q_rm_every"] = bench_online_q(setup, pairs)
        results["online_q"] |= {"load_average_before": before, "load_average_after": load_average()}
        atomic_write_json(args.out, results)
        print(format_table(results))
        return 0
    results: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, "
        f"{platform.python_version()}, torch {torch.__version__}",
        "profile": args.profile,
        "quick": args.quick,
        "shapes": setup.shapes(),
        "load_average_before": load_average(),
    }
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        policy = policy_dir(setup, tmp)
        results["training"], trainer_overhead = bench_training(setup, policy, pairs, tmp)
    step = bench_step(setup, pairs)
    results["contrastive_overhead"] = {**trainer_overhead, "step": step}
    results["peak_fraction"] = bench_peak_fraction(setup, step, results["training"], trainer_overhead)
    results["scoring"] = bench_scoring(setup, pairs)
    results["online_q"], results["online_q_rm_every"] = bench_online_q(setup, pairs)
    results["pruning"] = pruning_ratios(ROOT / "reports")
    results["end_to_end"] = stage_times(ROOT / "reports")
    results["load_average_after"] = load_average()
    atomic_write_json(args.out, results)
    print(format_table(results))
    return 0


def format_table(r: dict) -> str:
    def ratio(x):
        return "n/a" if not x else f"{x['median']:.2f} (range {x['min']:.2f}-{x['max']:.2f}, n={x['n']})"

    o, peak, q = r["contrastive_overhead"], r["peak_fraction"], r["online_q"]
    lines = [
        f"Measured on {r['machine']}; profile `{r['profile']}`; load average (1, 5, 15 min) before "
        f"{r['load_average_before']}, after {r['load_average_after']}.",
        "",
        "| comparison | ratio (median, range) | goal | detail |",
        "|---|---|---|---|",
        f"| RM training seconds, TRL RewardTrainer / goalrm | {ratio(r['training'].get('ratio'))} | >= 1.2 | "
        f"goalrm {r['training']['goalrm_tokens_per_s']:.0f} tok/s |",
        f"| goal-conditioned / baseline trainer tokens/s | {ratio(o['trainer_ratio'])} | >= 0.95 | "
        f"{o['goal_conditioned_tokens_per_s']:.0f} vs {o['baseline_tokens_per_s']:.0f} tok/s |",
        f"| contrastive step / vanilla step (seconds) | {ratio(o['step']['ratio'])} | <= 1.05 | "
        f"{o['step']['contrastive_tokens_per_s']:.0f} vs {o['step']['vanilla_tokens_per_s']:.0f} tok/s |",
        f"| RM trainer / fp32 matmul peak | {peak['baseline_fraction_of_peak']:.2f} "
        f"(goal-conditioned {peak['goal_conditioned_fraction_of_peak']:.2f}) | "
        f"- | peak {peak['matmul_peak_gflops']:.0f} GFLOP/s, {peak['train_flops_per_token'] / 1e6:.1f} MFLOP/token |",
        f"| scoring seq/s, bucketed batch / batch-1 loop | {ratio(r['scoring']['ratio'])} | >= 10 | "
        f"max abs diff {r['scoring']['max_abs_diff']:.1e} over {r['scoring']['n_sequences']} sequences |",
        f"| sampling wall, RM following every token (read {q['rm_every']} at a time) "
        f"/ policy alone | {ratio(q['evaluated_wall_ratio'])} | - | "
        f"one at a time: {ratio(q['evaluated_per_token_wall_ratio'])}; same tokens |",
        f"| sampling wall, pruning off / policy alone | {ratio(q['off_wall_ratio'])} | 1.0 | no RM call |",
        f"| sampling wall, pruning that stops samples / policy alone | {ratio(q['stopping_wall_ratio'])} | "
        f"within 0.1 of tokens | "
        f"tokens {q['stopping_tokens_ratio']:.2f} (threshold {q['stopping_threshold']:.3f}, the median Q) |",
    ]
    if r.get("online_q_rm_every"):
        scan = "; ".join(
            f"{x['rm_every']}: {x['evaluated_wall_ratio']:.2f}, stopping {x['stopping_wall_ratio']:.2f} at tokens "
            f"{x['stopping_tokens_ratio']:.2f}"
            for x in r["online_q_rm_every"]
        )
        lines.append(f"| sampling wall / policy alone by tokens the RM reads per forward | see detail | - | {scan} |")
    for profile, benches in r["pruning"].items():
        for bench, p in benches.items():
            wall = f"{p['wall_ratio']:.2f}" if p["wall_ratio"] is not None else "n/a"
            rule = "pruning off" if p["pruning_off"] else f"threshold {p['threshold']:.3g}"
            lines.append(
                f"| Q-pruned / unpruned tokens, {profile} {bench} ({rule}) | {p['tokens_ratio']:.2f} (wall {wall}) | "
                f"<= 0.6 | accuracy {p['accuracy']:.3f} vs {p['accuracy_unpruned']:.3f} |"
            )
    for profile, e in r["end_to_end"].items():
        per_seed = (
            f", training {e['training_s_per_seed']:.0f} s per seed ({e['n_seeds']} seeds)"
            if "training_s_per_seed" in e
            else ""
        )
        goal = "<= 900 s with >= 5 seeds (aim 600)" if profile == "demo" else "-"
        stages = ", ".join(f"{name.split('_', 1)[-1]} {seconds:.0f}" for name, seconds in e["stages_s"].items())
        speed = f"; fp32 matmul {e['matmul_gflops']:.0f} GFLOP/s when it ran" if "matmul_gflops" in e else ""
        lines.append(f"| end to end, {profile} | {e['total_s']:.0f} s | {goal} | {stages} s{per_seed}{speed} |")
    return "\n".join(lines)


def table_block(r: dict) -> str:
    """docs/performance.md's table: :func:`format_table` of the committed results."""
    return f"{BEGIN}\n{format_table(r)}\n{END}"


def write_doc(r: dict, doc: Path = TABLE_DOC) -> None:
    update_file(doc, BEGIN, END, table_block(r), write=True)


if __name__ == "__main__":
    sys.exit(main())
