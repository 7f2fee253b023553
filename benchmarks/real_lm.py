"""The real LM's training and scoring speed on this CPU (SmolLM2-135M-Instruct, ``--pretrain smollm2-135m``): each
lever the ``real-lm`` profile can use, against a plain PyTorch loop on the same model and batches, and as a fraction
of this machine's fp32 matmul peak.

    python benchmarks/real_lm.py               # writes benchmarks/real_lm.json
    python benchmarks/real_lm.py --quick       # a tiny look, not written (the test suite runs it on the twin)
    python benchmarks/real_lm.py --pretrain DIR --quick   # another backbone folder

Training (each variant in its own process, variants alternating within a repetition so a change of load hits
them alike; tokens/s counts real tokens, start-up, caching and saving excluded):

* ``goalrm`` — goalrm's trainer (``python -m goalrm_core.train.trainer``, as notebook 02 runs it): ``full``
  (every layer), ``top-2 cached`` (``--train_top_layers 2 --feature_cache memory``: the frozen 28 layers ran
  once, before the timed steps), ``lora`` (``--lora_rank 8``) and ``full + checkpointing``
  (``--gradient_checkpointing``);
* ``plain`` — a PyTorch loop written out here on the same RM class, pairs, batch and AdamW settings: ``full``,
  ``top-2`` (the lower layers frozen, the whole forward run each step: what a loop does without a cache) and
  ``full + checkpointing`` (transformers' ``gradient_checkpointing_enable``). LoRA has no plain twin here: a
  plain LoRA loop would be PEFT's, which is what goalrm runs.

The ratio is goalrm / plain at the same lever (the ``top-2`` ratio compares the cached lever with a plain loop
that has none). The fraction of peak counts FLOPs per token from the backbone's shapes: ``6 x weights`` for what
trains fully, ``4 x`` for LoRA (no weight gradients), ``8 x`` with checkpointing (one more forward), only the top
layers for the cached lever, plus attention's ``12 x layers x length x hidden``.

Scoring: the dense scorer's tokens/s over held-out texts in length-bucketed batches of 8, against batch 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

RESULTS = ROOT / "benchmarks" / "real_lm.json"
TEMPLATE = "math"
GOALRM_VARIANTS = {  # name -> trainer flags on top of the common recipe
    "full": {},
    "top-2 cached": {"train_top_layers": 2, "feature_cache": "memory"},
    "lora": {"lora_rank": 8},
    "full + checkpointing": {"gradient_checkpointing": True},
}
PLAIN_VARIANTS = {"full": "full", "top-2 cached": "top-2", "full + checkpointing": "checkpointing"}


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def gsm8k_pairs(n: int, seed: int = 0) -> list[dict]:
    """``n`` real training pairs: a correct and an incorrect model solution of one GSM8K question (the real-lm
    design's training split, from ../shared/data)."""
    from goalrm_core.data.adapters import load_generations
    from goalrm_core.tasks.realtext.design import gsm8k_pairs as pairs_of
    from goalrm_core.tasks.realtext.design import three_way_split

    path = ROOT.parent / "shared" / "data" / "gsm8k_example_model_solutions.jsonl"
    parts = three_way_split(load_generations(path).rows, 0.2, 0.4, seed)
    return pairs_of(parts["train"], {}, 2, n, seed)


def synthetic_pairs(n: int) -> list[dict]:
    """``n`` short arithmetic pairs, for ``--quick`` where the real data may be absent."""
    rows = []
    for q in range(n):
        right, wrong = 2 * q + 1, 2 * q + 2
        question = f"Tom has {q} apples and buys {q + 1}. How many?"
        rows.append(
            {
                "question": question,
                "correct": f"{q} + {q + 1} = {right}\nA: {right}",
                "incorrect": f"{q} + {q + 1} = {wrong}\nA: {wrong}",
            }
        )
    return rows


def common_flags(args) -> dict:
    return {
        "template": TEMPLATE,
        "max_len": args.max_len,
        "train_batch_size": args.batch,
        "micro_train_batch_size": args.batch,
        "max_steps": args.steps,
        "learning_rate": 1e-4,
        "lr_warmup_ratio": 0.0,
        "eval_split": 0.0,
        "eval_steps": -1,
        "logging_steps": args.steps,
        "zero_stage": 0,
        "seed": 0,
    }


def run_goalrm(args, name: str, data: Path, tmp: Path) -> dict:
    """One trainer run of a lever; its summary's training tokens/s (and the feature cache's seconds)."""
    from goalrm_core.train.config import TrainRMConfig
    from goalrm_core.train.launch import train_command

    out = tmp / f"goalrm-{name.replace(' ', '_').replace('+', '')}-{time.time_ns()}"
    cfg = TrainRMConfig.from_dict(
        {
            **common_flags(args),
            **GOALRM_VARIANTS[name],
            "pretrain": args.pretrain,
            "dataset": str(data),
            "save_path": str(out),
        }
    )
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TQDM_DISABLE": "1"}
    done = subprocess.run(train_command(cfg), capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode:
        raise RuntimeError(f"{name}: the trainer exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    summary = json.loads((out / "train_summary.json").read_text())
    return {"tokens_per_s": summary["tokens_per_s"], "feature_cache_s": summary.get("feature_cache_s")}


def run_plain(args, lever: str, data: Path) -> dict:
    """The plain loop of a lever, in its own process (``--plain``)."""
    cmd = [
        sys.executable,
        __file__,
        "--plain",
        lever,
        "--data-file",
        str(data),
        "--pretrain",
        args.pretrain,
        "--steps",
        str(args.steps),
        "--batch",
        str(args.batch),
        "--max-len",
        str(args.max_len),
        "--threads",
        str(args.threads),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def plain_loop(lever: str, data: Path, pretrain: str, steps: int, batch: int, max_len: int, threads: int) -> dict:
    """A plain PyTorch loop: goalrm's RM class, the pairs in a seeded order, ``batch`` pairs per step, the
    pairwise loss, AdamW at the trainer's learning rate; tokens/s over the timed steps (the first one warms)."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoTokenizer

    from goalrm_core.data.io import read_jsonl
    from goalrm_core.model.encoding import PreferenceCollator, encode_preference_rows
    from goalrm_core.model.reward_model import RewardModel
    from goalrm_core.model.top_layers import freeze_lower_layers

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(pretrain)
    model = RewardModel.from_backbone(pretrain).train()
    if lever == "top-2":
        freeze_lower_layers(model, 2)
    if lever == "checkpointing":
        model.backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    items, _ = encode_preference_rows(tokenizer, read_jsonl(data), TEMPLATE, max_len)
    random.Random(0).shuffle(items)
    collate = PreferenceCollator(tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    tokens, seconds = 0, 0.0
    for step in range(steps + 1):
        chunk = [items[(step * batch + i) % len(items)] for i in range(batch)]
        b = collate(chunk)
        t0 = time.perf_counter()
        reward = model(b["input_ids"], b["attention_mask"], b["num_actions"]).reward
        loss = -F.logsigmoid(reward[:batch] - reward[batch:]).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step:  # the first step warms the allocator and the kernels
            seconds += time.perf_counter() - t0
            tokens += int(b["attention_mask"].sum())
    return {"tokens_per_s": tokens / seconds}


def backbone_shapes(pretrain: str) -> dict:
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(pretrain)
    h, layers, inter = c.hidden_size, c.num_hidden_layers, c.intermediate_size
    kv = h * c.num_key_value_heads // c.num_attention_heads
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * inter  # q, o; k, v; the SwiGLU MLP
    return {"hidden_size": h, "layers": layers, "per_layer_weights": per_layer}


def flops_per_token(shapes: dict, lever: str, length: float) -> float:
    """Training FLOPs per token of a lever (the module's docstring)."""
    h, layers, w = shapes["hidden_size"], shapes["layers"], shapes["per_layer_weights"]
    trained = 2 if lever.startswith("top-2") else layers
    factor = {"lora": 4, "full + checkpointing": 8}.get(lever, 6)
    return factor * trained * w + 12 * trained * length * h


def mean_length(data: Path, pretrain: str, max_len: int) -> float:
    from transformers import AutoTokenizer

    from goalrm_core.data.io import read_jsonl
    from goalrm_core.model.encoding import encode_preference_rows

    tokenizer = AutoTokenizer.from_pretrained(pretrain)
    items, _ = encode_preference_rows(tokenizer, read_jsonl(data), TEMPLATE, max_len)
    lengths = [len(it[k]) for it in items for k in ("chosen_ids", "rejected_ids")]
    return sum(lengths) / len(lengths)


def bench_scoring(args, pairs: list[dict]) -> dict:
    """Dense scoring's tokens/s, length-bucketed batches of 8 against batch 1, with the largest difference."""
    import torch
    from transformers import AutoTokenizer

    from goalrm_core.inference.scoring import score_generations
    from goalrm_core.model.reward_model import RewardModel

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.pretrain)
    model = RewardModel.from_backbone(args.pretrain).eval()
    rows = [
        {"question": p["question"], "generated_solution": p[k]}
        for p in pairs[: args.n_score]
        for k in ("correct", "incorrect")
    ]
    goal = torch.randn(model.config.hidden_size)
    kw = dict(progress=False, encoding="split", readout="eos", max_len=args.max_len)
    t0 = time.perf_counter()
    batched = score_generations(model, tokenizer, rows, TEMPLATE, goal, batch_size=8, **kw)
    t1 = time.perf_counter()
    single = score_generations(model, tokenizer, rows, TEMPLATE, goal, batch_size=1, bucket=False, **kw)
    t2 = time.perf_counter()
    tokens = sum(len(r["partial_rewards"]) for r in batched)
    diff = max(abs(a - b) for x, y in zip(batched, single) for a, b in zip(x["partial_rewards"], y["partial_rewards"]))
    return {
        "batched_response_tokens_per_s": tokens / (t1 - t0),
        "batch1_response_tokens_per_s": tokens / (t2 - t1),
        "ratio": (t2 - t1) / (t1 - t0),
        "max_abs_diff": diff,
        "n_sequences": len(rows),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/real_lm.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pretrain", default="smollm2-135m", help="a packaged model's name or a checkpoint folder")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, synthetic pairs, one repetition; not written")
    ap.add_argument("--steps", type=int, default=6, help="timed optimiser steps per run")
    ap.add_argument("--batch", type=int, default=8, help="pairs per step")
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-score", type=int, default=24, help="pairs whose two solutions are scored")
    ap.add_argument("--out", default=None, help="where the results go (default benchmarks/real_lm.json; --quick: none)")
    ap.add_argument("--plain", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--data-file", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from goalrm_core.model.pretrained import resolve_model

    args.pretrain = resolve_model(args.pretrain)
    if args.plain:  # one plain loop, in its own process
        print(
            json.dumps(
                plain_loop(
                    args.plain, Path(args.data_file), args.pretrain, args.steps, args.batch, args.max_len, args.threads
                )
            )
        )
        return 0
    if args.quick:
        args.steps, args.batch, args.reps, args.n_score, args.max_len = 2, 2, 1, 4, 256
    from goalrm_core.data.io import write_jsonl
    from goalrm_core.pipeline.provenance import _cpu_model
    from goalrm_core.threads import matmul_gflops

    pairs = synthetic_pairs(64) if args.quick else gsm8k_pairs(args.steps * args.batch * 4)
    load_before = os.getloadavg()
    peak = matmul_gflops(args.threads, n=256 if args.quick else 1024, reps=1 if args.quick else 3)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "pairs.jsonl"
        write_jsonl(data, pairs)
        goalrm = {name: [] for name in GOALRM_VARIANTS}
        plain = {name: [] for name in PLAIN_VARIANTS}
        cache_s = []
        for _ in range(args.reps):
            for name in GOALRM_VARIANTS:
                run = run_goalrm(args, name, data, Path(tmp))
                goalrm[name].append(run["tokens_per_s"])
                if run["feature_cache_s"] is not None:
                    cache_s.append(run["feature_cache_s"])
                if name in PLAIN_VARIANTS:
                    plain[name].append(run_plain(args, PLAIN_VARIANTS[name], data)["tokens_per_s"])
        length = mean_length(data, args.pretrain, args.max_len)
    shapes = backbone_shapes(args.pretrain)
    levers = {}
    for name, rates in goalrm.items():
        flops = flops_per_token(shapes, name, length)
        levers[name] = {
            "goalrm_tokens_per_s": spread(rates),
            "fraction_of_peak": statistics.median(rates) * flops / 1e9 / peak,
            "train_flops_per_token": flops,
        }
        if plain.get(name):
            levers[name]["plain_tokens_per_s"] = spread(plain[name])
            levers[name]["train_tokens_per_s_ratio_vs_plain_loop"] = spread([g / p for g, p in zip(rates, plain[name])])
    result = {
        "backbone": Path(args.pretrain).name,
        "shapes": shapes,
        "recipe": {
            "steps": args.steps,
            "batch_pairs": args.batch,
            "max_len": args.max_len,
            "threads": args.threads,
            "reps": args.reps,
            "mean_tokens_per_text": length,
        },
        "matmul_peak_gflops": peak,
        "levers": levers,
        "feature_cache_s": spread(cache_s) if cache_s else None,
        "scoring": bench_scoring(args, pairs),
        "machine": {
            "cpu": _cpu_model() or platform.machine(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(result, indent=1))
    out = args.out or (None if args.quick else str(RESULTS))
    if out:
        Path(out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
