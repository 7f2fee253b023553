"""Performance harness: every figure is a ratio measured side by side in one run.

    python benchmarks/run.py            # full run, writes benchmarks/results.json and prints a table
    python benchmarks/run.py --quick    # tiny sizes, one repetition: CI runs this so the harness cannot rot

Comparisons (same tiny Llama, same data, same batch shapes, CPU):
  1. RM training throughput: goalrm's DeepSpeed trainer (vanilla) / TRL's RewardTrainer, tokens/s
  2. contrastive overhead: step time with the contrastive term / vanilla step, same batch
  3. dense scoring: sequences/s of the bucketed batched scorer / a batch-size-1 loop (and max |diff|)
  4. online pruning: tokens and wall time with Q-pruning / without (when the decoding module is there)
  5. end to end: wall time of each stage of the executed reports (smoke, demo)
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModel, LlamaForCausalLM

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core.tasks.toymath import problems as toymath  # noqa: E402
from goalrm_core.train.config import TrainRMConfig  # noqa: E402
from goalrm_core.model.encoding import PreferenceCollator, encode_preference_rows  # noqa: E402
from goalrm_core.data.io import atomic_write_json, write_jsonl  # noqa: E402
from goalrm_core.train.launch import train_command  # noqa: E402
from goalrm_core.model.reward_model import RewardModel, tiny_llama_config  # noqa: E402
from goalrm_core.model.objective import reward_model_loss  # noqa: E402
from goalrm_core.inference.scoring import score_generations  # noqa: E402
from goalrm_core.model.tokenization import build_char_tokenizer  # noqa: E402


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def synthetic_pairs(n: int, seed: int = 0) -> list[dict]:
    """ToyMath pairs of varied length (1-6 steps): the reference vs the same solution with one slip."""
    rng = random.Random(seed)
    cfg = toymath.ToyMathConfig(min_steps=1, max_steps=6, operand_max=20)
    pairs = []
    for p in toymath.generate_problems(cfg, n, seed):
        good = p.solution()
        lines = good.split("\n")
        k = rng.randrange(len(lines) - 1) if len(lines) > 1 else 0
        lines[k] = lines[k] + "1"
        pairs.append({"question": p.question, "correct": good, "incorrect": "\n".join(lines)})
    return pairs


def tiny_model_dir(tmp: Path, hidden: int, layers: int) -> Path:
    tokenizer = build_char_tokenizer()
    torch.manual_seed(0)
    config = tiny_llama_config(len(tokenizer), hidden, layers, 4, 512)
    LlamaForCausalLM(config).save_pretrained(tmp / "policy")
    tokenizer.save_pretrained(tmp / "policy")
    return tmp / "policy"


def real_tokens(pairs: list[dict], tokenizer, steps: int, batch: int) -> int:
    items, _ = encode_preference_rows(tokenizer, pairs, "toymath", 512)
    return sum(len(it["chosen_ids"]) + len(it["rejected_ids"]) for it in items[: steps * batch])


# 1 -------------------------------------------------------------------------------------------
def bench_goalrm_training(policy: Path, data: Path, tmp: Path, steps: int, batch: int) -> float:
    """Training seconds of goalrm's trainer (DeepSpeed engine, one process), from its summary."""
    out = tmp / f"goalrm-rm-{time.time_ns()}"
    cfg = TrainRMConfig(pretrain=str(policy), dataset=str(data), save_path=str(out), template="toymath",
                        train_batch_size=batch, micro_train_batch_size=batch, max_steps=steps, max_epochs=100,
                        learning_rate=1e-4, zero_stage=0, eval_split=0.0, logging_steps=steps, max_len=512)
    subprocess.run(train_command(cfg), check=True, capture_output=True, cwd=ROOT)
    return json.loads((out / "train_summary.json").read_text())["train_s"]


def bench_trl_training(policy: Path, pairs: list[dict], tmp: Path, steps: int, batch: int) -> float | None:
    """Training seconds of TRL's RewardTrainer on the same model, data order and batch size."""
    try:
        from datasets import Dataset
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        from trl import RewardConfig, RewardTrainer
    except ImportError:
        return None
    tokenizer = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForSequenceClassification.from_pretrained(policy, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    rows = [{"prompt": p["question"] + "\n", "chosen": p["correct"] + " " + tokenizer.eos_token,
             "rejected": p["incorrect"] + " " + tokenizer.eos_token} for p in pairs[: steps * batch]]
    args = RewardConfig(output_dir=str(tmp / "trl"), per_device_train_batch_size=batch, max_steps=steps,
                        learning_rate=1e-4, logging_steps=steps, save_strategy="no", report_to=[], use_cpu=True,
                        dataloader_num_workers=0, max_length=512, disable_tqdm=True, seed=0)
    trainer = RewardTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    return trainer.train().metrics["train_runtime"]


# 2 -------------------------------------------------------------------------------------------
def bench_contrastive_overhead(pairs: list[dict], hidden: int, layers: int, batch: int, reps: int) -> dict:
    tokenizer = build_char_tokenizer()
    torch.manual_seed(0)
    model = RewardModel(AutoModel.from_config(tiny_llama_config(len(tokenizer), hidden, layers, 4, 512))).train()
    items, _ = encode_preference_rows(tokenizer, pairs[:batch], "toymath", 512)
    batch_tensors = PreferenceCollator(tokenizer.pad_token_id)(items)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    times = {"vanilla": [], "contrastive": []}
    for rep in range(reps + 1):
        for strategy in ("vanilla", "contrastive"):
            cfg = TrainRMConfig(pretrain="x", reward_model_strategy=strategy)
            t0 = time.perf_counter()
            loss = reward_model_loss(model, batch_tensors, cfg, torch.Generator().manual_seed(rep)).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if rep:  # the first repetition warms up
                times[strategy].append(time.perf_counter() - t0)
    ratios = [c / v for c, v in zip(times["contrastive"], times["vanilla"])]
    tokens = int(batch_tensors["attention_mask"].sum())
    return {"ratio": spread(ratios), "vanilla_tokens_per_s": tokens / statistics.median(times["vanilla"]),
            "contrastive_tokens_per_s": tokens / statistics.median(times["contrastive"])}


# 3 -------------------------------------------------------------------------------------------
def bench_scoring(pairs: list[dict], hidden: int, layers: int, n: int, reps: int) -> dict:
    tokenizer = build_char_tokenizer()
    torch.manual_seed(0)
    model = RewardModel(AutoModel.from_config(tiny_llama_config(len(tokenizer), hidden, layers, 4, 512))).eval()
    rows = [{"question": p["question"], "generated_solution": s} for p in pairs[: n // 2] for s in (p["correct"], p["incorrect"])]
    goal = torch.randn(hidden)
    ratios, diffs, batched_rate = [], [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        batched = score_generations(model, tokenizer, rows, "toymath", goal, batch_size=64, progress=False, encoding="split", readout="eos")
        t1 = time.perf_counter()
        single = score_generations(model, tokenizer, rows, "toymath", goal, batch_size=1, bucket=False, progress=False, encoding="split", readout="eos")
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / (t1 - t0))
        batched_rate.append(len(rows) / (t1 - t0))
        diffs.append(max(max(abs(a - b) for a, b in zip(x["cosine_sim"] + x["partial_rewards"], y["cosine_sim"] + y["partial_rewards"]))
                         for x, y in zip(batched, single)))
    return {"ratio": spread(ratios), "batched_sequences_per_s": statistics.median(batched_rate), "max_abs_diff": max(diffs), "n_sequences": len(rows)}


# 5 -------------------------------------------------------------------------------------------
def stage_times(reports_root: Path) -> dict:
    """Wall time of each executed notebook, from papermill's metadata."""
    out = {}
    if not reports_root.is_dir():
        return out
    for profile_dir in sorted(p for p in reports_root.iterdir() if p.is_dir()):
        stages = {}
        for nb in sorted(profile_dir.glob("[0-9][0-9]_*.ipynb")):
            meta = json.loads(nb.read_text()).get("metadata", {}).get("papermill", {})
            if meta.get("duration") is not None:
                stages[nb.stem] = round(meta["duration"], 1)
        if stages:
            out[profile_dir.name] = {"stages_s": stages, "total_s": round(sum(stages.values()), 1)}
    return out


# 4 -------------------------------------------------------------------------------------------
def pruning_ratios(reports_root: Path) -> dict:
    """Q-pruned / unpruned tokens and wall time, measured side by side on the same questions and seeds
    by the decoding notebook of each executed report (threshold tuned on held-out questions)."""
    out = {}
    for metrics_path in sorted(reports_root.glob("*/metrics.json")) if reports_root.is_dir() else []:
        m = json.loads(metrics_path.read_text())
        pruning = m.get("decoding", {}).get("pruning", {})
        walls = m.get("timings", {}).get("decoding", {}).get("pruning", {})
        out[metrics_path.parent.name] = {
            bench: {"threshold": row.get("threshold"),
                    "tokens_ratio": row["tokens_generated"] / row["tokens_generated_unpruned"],
                    "wall_ratio": walls[bench]["wall_s"] / walls[bench]["wall_s_unpruned"] if bench in walls else None,
                    "accuracy": row["accuracy"], "accuracy_unpruned": row["accuracy_unpruned"]}
            for bench, row in pruning.items() if row.get("tokens_generated_unpruned")}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Tiny sizes and one repetition (CI).")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results.json"), help="Where the results JSON goes.")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    size = dict(hidden=32, layers=2, steps=4, batch=8, reps=1, n_score=32) if args.quick else \
        dict(hidden=128, layers=4, steps=40, batch=32, reps=3, n_score=512)
    pairs = synthetic_pairs(max(size["steps"] * size["batch"], size["n_score"]) + 8)
    results: dict = {"machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads, {platform.python_version()}, torch {torch.__version__}",
                     "quick": args.quick, "sizes": size}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        policy = tiny_model_dir(tmp, size["hidden"], size["layers"])
        write_jsonl(tmp / "pairs.jsonl", pairs[: size["steps"] * size["batch"]])
        tokens = real_tokens(pairs, build_char_tokenizer(), size["steps"], size["batch"])
        ours, theirs = [], []
        for _ in range(size["reps"]):
            ours.append(bench_goalrm_training(policy, tmp / "pairs.jsonl", tmp, size["steps"], size["batch"]))
            trl_s = bench_trl_training(policy, pairs, tmp, size["steps"], size["batch"])
            if trl_s is not None:
                theirs.append(trl_s)
        results["training"] = {"goalrm_tokens_per_s": tokens / statistics.median(ours), "train_s_goalrm": spread(ours)}
        if theirs:
            results["training"].update(trl_tokens_per_s=tokens / statistics.median(theirs), train_s_trl=spread(theirs),
                                       ratio=spread([tokens / o / (tokens / t) for o, t in zip(ours, theirs)]))
        else:
            results["training"]["ratio"] = None
            results["training"]["note"] = "trl not installed: pip install -e '.[bench]'"
    results["contrastive_overhead"] = bench_contrastive_overhead(pairs, size["hidden"], size["layers"], size["batch"], size["reps"] * 5)
    results["scoring"] = bench_scoring(pairs, size["hidden"], size["layers"], size["n_score"], size["reps"])
    results["pruning"] = pruning_ratios(ROOT / "reports")
    results["end_to_end"] = stage_times(ROOT / "reports")
    atomic_write_json(args.out, results)
    print(format_table(results))
    return 0


def format_table(r: dict) -> str:
    def ratio(x):
        return "n/a" if not x else f"{x['median']:.2f} (range {x['min']:.2f}-{x['max']:.2f}, n={x['n']})"

    lines = [f"machine: {r['machine']}", "| comparison | ratio (median, range) | goal | detail |", "|---|---|---|---|",
             f"| RM training tokens/s, goalrm / TRL RewardTrainer | {ratio(r['training'].get('ratio'))} | >= 1.2 | "
             f"goalrm {r['training']['goalrm_tokens_per_s']:.0f} tok/s, TRL {r['training'].get('trl_tokens_per_s', float('nan')):.0f} tok/s |",
             f"| contrastive step / vanilla step | {ratio(r['contrastive_overhead']['ratio'])} | <= 1.05 | "
             f"{r['contrastive_overhead']['vanilla_tokens_per_s']:.0f} vs {r['contrastive_overhead']['contrastive_tokens_per_s']:.0f} tok/s |",
             f"| scoring seq/s, bucketed batch / batch-1 loop | {ratio(r['scoring']['ratio'])} | >= 10 | "
             f"max abs diff {r['scoring']['max_abs_diff']:.1e} over {r['scoring']['n_sequences']} sequences |"]
    for profile, benches in r["pruning"].items():
        for bench, p in benches.items():
            wall = f"{p['wall_ratio']:.2f}" if p["wall_ratio"] is not None else "n/a"
            lines.append(f"| Q-pruning / unpruned tokens, {profile} {bench} (threshold {p['threshold']}) | {p['tokens_ratio']:.2f} (wall {wall}) | "
                         f"<= 0.6 | accuracy {p['accuracy']:.3f} vs {p['accuracy_unpruned']:.3f} |")
    for profile, e in r["end_to_end"].items():
        lines.append(f"| end to end, {profile} | {e['total_s']:.0f} s | demo <= 1200 s (aim 720) | {e['stages_s']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
