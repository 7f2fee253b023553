"""Levers on the RM trainer's step, measured instead of assumed: the attention kernel, the optimiser's
implementation, ``torch.compile`` of the model, and one process with two threads against one thread.

Each variant runs in its own process (so a compiled graph or a thread pool never leaks into the next)
on the demo profile's RM shape and recipe: a reward model the size of the policy, batches of
``train_batch_size`` slip pairs grouped by length as the trainer groups them (so the padded length
varies from batch to batch, as a dynamic-shape compile meets it), one AdamW step per batch. Variants
alternate within each repetition, so a change of load hits them alike.

    python benchmarks/step_levers.py            # writes benchmarks/step_levers.json (then --doc)
    python benchmarks/step_levers.py --strategy contrastive
    python benchmarks/step_levers.py --quick    # a fast look, not written
    python benchmarks/step_levers.py --doc      # docs/performance.md's lever table from the committed file

Recorded per variant: the median step time over the timed steps (min/median/max over repetitions),
real tokens per second, the first steps' extra time (for the compiled variants: the compilation, with
inductor's on-disk cache warm, as a run's later RMs find it, or cold), and for those how many optimiser
steps it takes to repay that extra time against the eager default at the same thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from run import spread  # noqa: E402  (benchmarks/run.py: min/median/max over repetitions, as every table here)

RESULTS = ROOT / "benchmarks" / "step_levers.json"
TRAINER_RESULTS = ROOT / "benchmarks" / "step_levers_trainer.json"
TABLE_DOC = ROOT / "docs" / "performance.md"
BEGIN = (
    "<!-- begin: generated from benchmarks/step_levers.json by `python benchmarks/step_levers.py --doc`; "
    "do not edit by hand -->"
)
END = "<!-- end: generated from benchmarks/step_levers.json -->"

# name -> (threads, attention kernel, AdamW implementation, torch.compile: False, "warm" (inductor's on-disk
# cache as later processes of a run find it) or "cold" (an empty cache, as a machine's first compile))
VARIANTS = {
    "default": (1, "sdpa", "foreach", False),  # what the trainer runs today, one thread per RM (rm_parallel 2)
    "eager-attention": (1, "eager", "foreach", False),
    "adamw-for-loop": (1, "sdpa", "for-loop", False),
    "adamw-fused": (1, "sdpa", "fused", False),
    "compile": (1, "sdpa", "foreach", "warm"),
    "compile-cold": (1, "sdpa", "foreach", "cold"),
    "default-2-threads": (2, "sdpa", "foreach", False),  # one process, two threads (vs two RMs side by side)
}


def one_variant(name: str, steps: int, warmup: int, strategy: str) -> dict:
    """Time ``steps`` optimiser steps of variant ``name`` after ``warmup`` untimed ones (in this process)."""
    import run as harness  # benchmarks/run.py: the profile's setup, pairs and model

    from goalrm_core.model.encoding import PreferenceCollator, encode_preference_rows
    from goalrm_core.model.objective import reward_model_loss
    from goalrm_core.model.tokenization import build_char_tokenizer
    from goalrm_core.pipeline.profile_files import load_profile
    from goalrm_core.tasks.toymath.pipeline import TEMPLATE
    from goalrm_core.train.batching import item_length

    threads, attention, adamw, compiled = VARIANTS[name]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    setup = harness.Setup("demo", load_profile("demo"), steps=steps, reps=1, n_score=0, n_questions=0)
    recipe = setup.config(reward_model_strategy=strategy)
    batch_pairs = recipe.train_batch_size
    pairs = harness.task_pairs(setup, batch_pairs * 8)
    tokenizer = build_char_tokenizer()
    items, _ = encode_preference_rows(tokenizer, pairs, TEMPLATE, recipe.max_len, encoding=recipe.encoding)
    items.sort(key=item_length)  # grouped by length, as the trainer's group_by_length
    collate = PreferenceCollator(tokenizer.pad_token_id)
    batches = [collate(items[i : i + batch_pairs]) for i in range(0, len(items) - batch_pairs + 1, batch_pairs)]

    model, _, _ = harness.one_step_model(setup, pairs)
    model.backbone.config._attn_implementation = attention
    kwargs = {"foreach": {"foreach": True}, "for-loop": {"foreach": False}, "fused": {"fused": True}}[adamw]
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, betas=(0.9, 0.95), **kwargs)
    if compiled:
        model.compile(dynamic=True)  # as the trainer's --torch_compile
    generator = torch.Generator().manual_seed(0)

    def step(i: int) -> None:
        loss = reward_model_loss(model, batches[i % len(batches)], recipe, generator).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    first = []
    for i in range(warmup):  # one pass over every batch length at least, so a dynamic compile has met them all
        t0 = time.perf_counter()
        step(i)
        first.append(time.perf_counter() - t0)
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    real = statistics.mean(int(b["attention_mask"].sum()) for b in batches)
    padded = statistics.mean(int(b["attention_mask"].numel()) for b in batches)
    return {
        "step_s": median,
        "tokens_per_s": real / median,
        "warmup_extra_s": sum(first) - warmup * median,
        "real_tokens_per_step": real,
        "padded_tokens_per_step": padded,
    }


def measure(reps: int, steps: int, warmup: int, strategy: str) -> dict:
    runs: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    for rep in range(reps):
        for name in VARIANTS:
            env = {**os.environ, "OMP_NUM_THREADS": str(VARIANTS[name][0])}
            cold = tempfile.TemporaryDirectory() if VARIANTS[name][3] == "cold" else None
            if cold:
                env["TORCHINDUCTOR_CACHE_DIR"] = cold.name
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    name,
                    "--steps",
                    str(steps),
                    "--warmup",
                    str(warmup),
                    "--strategy",
                    strategy,
                ],
                check=True,
                capture_output=True,
                text=True,
                cwd=ROOT,
                env=env,
            )
            if cold:
                cold.cleanup()
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(
                f"rep {rep + 1}/{reps} {name}: {runs[name][-1]['step_s'] * 1e3:.1f} ms/step",
                file=sys.stderr,
                flush=True,
            )
    base = runs["default"]
    table = {}
    for name, rows in runs.items():
        threads = VARIANTS[name][0]
        speedup = [b["step_s"] / r["step_s"] for b, r in zip(base, rows)]
        row = {
            "threads": threads,
            "attention": VARIANTS[name][1],
            "adamw": VARIANTS[name][2],
            "compile": VARIANTS[name][3],
            "step_ms": spread([1e3 * r["step_s"] for r in rows]),
            "tokens_per_s": spread([r["tokens_per_s"] for r in rows]),
            "speedup_vs_default": spread(speedup),
            "warmup_extra_s": spread([r["warmup_extra_s"] for r in rows]),
        }
        saved = [b["step_s"] - r["step_s"] for b, r in zip(base, rows)]
        if name != "default" and threads == 1 and statistics.median(saved) > 0 and VARIANTS[name][3]:
            # steps it takes the per-step saving to repay the extra warm-up time (compilation) once per process
            row["break_even_steps"] = statistics.median(r["warmup_extra_s"] for r in rows) / statistics.median(saved)
        table[name] = row
    return {
        "variants": table,
        "real_tokens_per_step": base[0]["real_tokens_per_step"],
        "padded_tokens_per_step": base[0]["padded_tokens_per_step"],
    }


def profile_default(strategy: str) -> dict:
    """The share of the eager one-thread step that is matrix multiplication (``aten::mm``), and the rest."""
    import run as harness

    from goalrm_core.model.objective import reward_model_loss
    from goalrm_core.pipeline.profile_files import load_profile

    torch.set_num_threads(1)
    setup = harness.Setup("demo", load_profile("demo"), steps=1, reps=1, n_score=0, n_questions=0)
    recipe = setup.config(reward_model_strategy=strategy)
    model, batch, optimizer = harness.one_step_model(setup, harness.task_pairs(setup, recipe.train_batch_size))

    def step() -> None:
        loss = reward_model_loss(model, batch, recipe, torch.Generator().manual_seed(0)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
    ops = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in ops)
    mm = sum(e.self_cpu_time_total for e in ops if e.key in ("aten::mm", "aten::addmm", "aten::bmm"))
    top = sorted(ops, key=lambda e: e.self_cpu_time_total, reverse=True)[:6]
    return {
        "matmul_share": mm / total,
        "step_ms": total / 3e3,
        "top": [{"op": e.key, "ms_per_step": round(e.self_cpu_time_total / 3e3, 2)} for e in top],
    }


def trainer_pair(steps: int, reps: int) -> dict:
    """The lever that counts, through the real trainer: an eager and a ``--torch_compile`` goal-conditioned RM
    of the demo's recipe trained side by side (as ``rm_parallel: 2`` runs them, one thread each) for ``steps``
    steps with the profile's evaluations; each one's training seconds (its compile included) and process wall."""
    import run as harness

    from goalrm_core.data.io import write_jsonl
    from goalrm_core.pipeline.profile_files import load_profile
    from goalrm_core.tasks.toymath.pipeline import TEMPLATE
    from goalrm_core.train.launch import train_command

    setup = harness.Setup("demo", load_profile("demo"), steps=steps, reps=reps, n_score=0, n_questions=0)
    sides: dict[str, list[dict]] = {"eager": [], "compiled": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        policy = harness.policy_dir(setup, tmp)
        data = tmp / "pairs.jsonl"
        write_jsonl(data, harness.task_pairs(setup, 9000))
        for rep in range(reps):
            procs = {}
            for side in sides:
                out = tmp / f"rm-{side}-{rep}"
                cfg = setup.config(
                    pretrain=str(policy),
                    dataset=str(data),
                    save_path=str(out),
                    template=TEMPLATE,
                    reward_model_strategy="contrastive",
                    max_steps=steps,
                    max_epochs=100,
                    eval_split=0.02,
                    logging_steps=100,
                    torch_compile=side == "compiled",
                )
                procs[side] = (
                    out,
                    time.perf_counter(),
                    subprocess.Popen(
                        train_command(cfg),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        cwd=ROOT,
                        env={**os.environ, "OMP_NUM_THREADS": "1"},
                    ),
                )
            pending = dict(procs)
            while pending:  # each side's wall ends when its own process does
                for side, (out, started, proc) in list(pending.items()):
                    if proc.poll() is not None:
                        if proc.returncode:
                            raise RuntimeError(f"the {side} trainer failed (exit {proc.returncode})")
                        summary = json.loads((out / "train_summary.json").read_text())
                        sides[side].append({"train_s": summary["train_s"], "process_s": time.perf_counter() - started})
                        del pending[side]
                time.sleep(0.2)
            print(
                f"rep {rep + 1}/{reps}: " + ", ".join(f"{k} {v[-1]['train_s']:.0f} s" for k, v in sides.items()),
                file=sys.stderr,
                flush=True,
            )
    e, c = sides["eager"], sides["compiled"]
    return {
        "steps": steps,
        "reps": reps,
        "eval_steps": setup.recipe.eval_steps,
        "train_s": {k: spread([r["train_s"] for r in v]) for k, v in sides.items()},
        "process_s": {k: spread([r["process_s"] for r in v]) for k, v in sides.items()},
        "speedup_train_s": spread([a["train_s"] / b["train_s"] for a, b in zip(e, c)]),
        "speedup_process_s": spread([a["process_s"] / b["process_s"] for a, b in zip(e, c)]),
    }


def format_table(rows: list[dict]) -> str:
    """One table per objective: each variant's step time, its speed-up over the default and its warm-up cost."""

    def ms(x: dict) -> str:
        return f"{x['median']:.0f} ({x['min']:.0f}-{x['max']:.0f})"

    lines = []
    for r in rows:
        prof = r["profile_one_thread"]
        lines += [
            f"`{r['strategy']}` objective, {r['reps']} repetitions x {r['steps']} timed steps, on {r['machine']} "
            f"(fp32 matmul {r['matmul_gflops_one_thread']:.0f} GFLOP/s on one thread), "
            f"commit `{r['commit']}`, load average "
            f"before {[round(x, 2) for x in r['load_average_before']]}; {r['real_tokens_per_step']:.0f} real of "
            f"{r['padded_tokens_per_step']:.0f} tokens per step; "
            f"eager one-thread step {prof['matmul_share']:.0%} matmul.",
            "",
            "| variant | threads | step ms (median, range) | "
            "speed-up vs default | first steps' extra s | steps to repay it |",
            "|---|---|---|---|---|---|",
        ]
        for name, v in r["variants"].items():
            s = v["speedup_vs_default"]
            repay = f"{v['break_even_steps']:.0f}" if "break_even_steps" in v else "-"
            lines.append(
                f"| {name} | {v['threads']} | {ms(v['step_ms'])} | {s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f}) | "
                f"{v['warmup_extra_s']['median']:.1f} | {repay} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip()


def trainer_line(pair: dict) -> str:
    """The real trainer's side-by-side figures (``--trainer``), one sentence."""
    t, _ = pair["train_s"], pair["process_s"]
    return (
        f"Through the real trainer (`--trainer {pair['steps']}`: a goal-conditioned RM, "
        f"eager and compiled side by side "
        f"with a thread each, evaluations every {pair['eval_steps']} steps, {pair['reps']} repetitions, commit "
        f"`{pair['commit']}`): training {t['eager']['median']:.0f} s eager "
        f"vs {t['compiled']['median']:.0f} s compiled, "
        f"{pair['speedup_train_s']['median']:.2f}x "
        f"(range {pair['speedup_train_s']['min']:.2f}-{pair['speedup_train_s']['max']:.2f}); "
        f"the whole process {pair['speedup_process_s']['median']:.2f}x."
    )


def table_block(rows: list[dict], pair: dict | None = None) -> str:
    body = format_table(rows) + (f"\n\n{trainer_line(pair)}" if pair else "")
    return f"{BEGIN}\n{body}\n{END}"


def committed_block() -> str:
    """The block docs/performance.md holds: the committed step table and, when recorded, the trainer's pair."""
    pair = json.loads(TRAINER_RESULTS.read_text()) if TRAINER_RESULTS.exists() else None
    return table_block(json.loads(RESULTS.read_text()), pair)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 repetition of few steps; prints, writes nothing")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=24, help="timed steps per variant run")
    ap.add_argument("--warmup", type=int, default=8, help="untimed first steps (the compile happens here)")
    ap.add_argument("--strategy", default="vanilla", choices=("vanilla", "contrastive"))
    ap.add_argument(
        "--trainer",
        type=int,
        metavar="STEPS",
        help="time the real trainer, eager vs --torch_compile side by side, for STEPS steps (recorded apart)",
    )
    ap.add_argument("--doc", action="store_true", help="write docs/performance.md's table from the committed results")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.doc:
        from goalrm_core.generated_block import update_file

        update_file(TABLE_DOC, BEGIN, END, committed_block(), write=True)
        return 0
    if args.one:
        print(json.dumps(one_variant(args.one, args.steps, args.warmup, args.strategy)))
        return 0
    if args.trainer:
        from goalrm_core.data.io import atomic_write_json

        load_before = list(os.getloadavg())
        pair = trainer_pair(args.trainer, args.reps)
        pair.update(
            load_average_before=load_before,
            load_average_after=list(os.getloadavg()),
            commit=subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
            ).stdout.strip(),
        )
        print(json.dumps(pair, indent=1))
        atomic_write_json(TRAINER_RESULTS, pair, indent=1)
        return 0
    if args.quick:
        args.reps, args.steps = 1, 6
    from goalrm_core.data.io import atomic_write_json
    from goalrm_core.threads import matmul_gflops

    load_before = list(os.getloadavg())
    result = measure(args.reps, args.steps, args.warmup, args.strategy)
    result["profile_one_thread"] = profile_default(args.strategy)
    peak = matmul_gflops(1, n=1024, reps=5)
    result.update(
        machine=f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}, torch {torch.__version__}",
        matmul_gflops_one_thread=peak,
        strategy=args.strategy,
        reps=args.reps,
        steps=args.steps,
        warmup=args.warmup,
        load_average_before=load_before,
        load_average_after=list(os.getloadavg()),
        commit=subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
    )
    print(json.dumps(result, indent=1))
    if not args.quick:
        rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
        atomic_write_json(RESULTS, [r for r in rows if r.get("strategy") != args.strategy] + [result], indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
