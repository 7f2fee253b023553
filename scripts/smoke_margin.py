"""How far the smoke profile's headline sets are from holding one class only.

The smoke report scores every RM on each benchmark's headline set (``headline: sample0``: the first
sampled solution of each benchmark question). With one class only, every AUROC there is undefined.
This script runs the smoke data stage (notebook 01's code path, called directly, into a temporary
run directory) under several seeds and CPU thread counts, since the same pins give other floats on
another machine, and records, per run, how many headline solutions are correct and incorrect on
each benchmark:

    python scripts/smoke_margin.py            # seeds 0-4 x threads 1, 2 (minutes)
    python scripts/smoke_margin.py --table    # re-render from the records only

On a machine whose cores other work shares, set ``OMP_WAIT_POLICY=PASSIVE``: otherwise the 2-thread
runs busy-wait for a descheduled partner thread (15x slower here); it changes no number.

It rewrites ``reports/calibration/smoke-margin.jsonl`` (one row per run, with the profile values it
ran with) and the section of ``reports/calibration/README.md`` between the two marker comments, and
prints the table. ``--set key=value`` tries other profile values without touching either file
unless ``--out`` names one.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core.generated_block import replace_block  # noqa: E402

RECORDS = ROOT / "reports" / "calibration" / "smoke-margin.jsonl"
README = ROOT / "reports" / "calibration" / "README.md"
BEGIN = "<!-- smoke-margin:begin (written by python scripts/smoke_margin.py) -->"
END = "<!-- smoke-margin:end -->"
SEEDS = (0, 1, 2, 3, 4)
THREADS = (1, 2)
# The profile values notebook 01 reads (its parameters cell) minus the run's folders: what a row records
# and what must still equal params/smoke.yaml for the records to describe the profile.
DATA_KEYS = (
    "min_chain_steps",
    "max_chain_steps",
    "operand_min",
    "operand_max",
    "operations",
    "modulus",
    "heldout_facts",
    "n_benchmark_questions",
    "n_train_questions",
    "policy_steps",
    "policy_batch_size",
    "policy_hidden_size",
    "policy_layers",
    "policy_learning_rate",
    "n_samples",
    "sampling_temperature",
    "max_new_tokens",
    "n_pair_questions",
    "pair_samples_per_question",
    "pairs_per_question",
    "eval_fraction",
)
VARIED = ("seed", "torch_threads")  # what the runs vary; every other DATA_KEYS value is the profile's
TESTED = "toy-id"  # the benchmark whose headline set the smoke tests read (tests/test_notebooks.py)


# ------------------------------------------------------------------------------------- counting
def headline_counts(samples: Iterable[Mapping]) -> dict[str, int]:
    """Correct and incorrect solutions of the ``sample0`` headline set (sample index 0 of each
    question) among one benchmark's sampled generations."""
    first = [bool(r["is_correct"]) for r in samples if r.get("sample_index") == 0]
    return {"correct": sum(first), "incorrect": len(first) - sum(first)}


def accuracy(rows: Sequence[Mapping]) -> float:
    return sum(bool(r["is_correct"]) for r in rows) / len(rows) if rows else float("nan")


def minority(counts: Mapping[str, int]) -> int:
    return min(counts["correct"], counts["incorrect"])


def benchmarks_of(records: Sequence[Mapping]) -> list[str]:
    """The benchmarks in the records, in the order the runs wrote them (``toy-id`` first)."""
    seen = list(dict.fromkeys(b for r in records for b in r["headline"]))
    return sorted(seen, key=lambda b: b != TESTED)  # stable: only moves toy-id to the front


def thread_invariant(records: Sequence[Mapping]) -> bool | None:
    """Whether every seed gave the very same numbers (headline counts, accuracies, final SFT loss)
    under each thread count; None when no seed ran under two."""
    by_seed: dict = {}
    for r in records:
        by_seed.setdefault(r["seed"], []).append(
            json.dumps(
                [r["headline"], r["sample_accuracy"], r["greedy_accuracy"], r.get("sft_final_loss")], sort_keys=True
            )
        )
    if not any(len(v) > 1 for v in by_seed.values()):
        return None
    return all(len(set(v)) == 1 for v in by_seed.values())


def summary(records: Sequence[Mapping]) -> dict[str, dict]:
    """Per benchmark over all runs: min and max of each class, the smallest minority class, the mean
    and standard deviation of the correct count (population sd over the runs)."""
    out = {}
    for bench in benchmarks_of(records):
        counts = [r["headline"][bench] for r in records if bench in r["headline"]]
        correct = [c["correct"] for c in counts]
        mean = sum(correct) / len(correct)
        sd = math.sqrt(sum((c - mean) ** 2 for c in correct) / len(correct))
        out[bench] = {
            "runs": len(counts),
            "correct_min": min(correct),
            "correct_max": max(correct),
            "incorrect_min": min(c["incorrect"] for c in counts),
            "incorrect_max": max(c["incorrect"] for c in counts),
            "minority_min": min(minority(c) for c in counts),
            "correct_mean": mean,
            "correct_sd": sd,
        }
    return out


def min_minority(records: Sequence[Mapping], benchmarks: Sequence[str] | None = None) -> int:
    """The smallest class count of any headline set in any run (of ``benchmarks``, default all)."""
    return min(s["minority_min"] for b, s in summary(records).items() if benchmarks is None or b in benchmarks)


def _markdown(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows])


def runs_table(records: Sequence[Mapping]) -> str:
    """One line per run: correct/incorrect of the headline set per benchmark, accuracies, wall time."""
    benches = benchmarks_of(records)
    header = ["seed", "threads", *(f"{b} c/i" for b in benches), "toy-id sampled", "toy-id greedy", "wall s"]
    rows = []
    for r in sorted(records, key=lambda r: (r["seed"], r["threads"])):
        rows.append(
            [
                r["seed"],
                r["threads"],
                *(
                    f"{r['headline'][b]['correct']}/{r['headline'][b]['incorrect']}" if b in r["headline"] else ""
                    for b in benches
                ),
                f"{r['sample_accuracy'].get('toy-id', float('nan')):.1%}",
                f"{r['greedy_accuracy'].get('toy-id', float('nan')):.1%}",
                f"{r['wall_s']:.0f}",
            ]
        )
    return _markdown(header, rows)


def summary_table(records: Sequence[Mapping]) -> str:
    """Per benchmark: the range of each class over the runs and the smallest minority class."""
    header = [
        "benchmark",
        "runs",
        "correct min-max",
        "incorrect min-max",
        "correct mean (sd)",
        "min minority class",
        "sampled acc min-max",
    ]
    rows = []
    for bench, s in summary(records).items():
        acc = [r["sample_accuracy"][bench] for r in records if bench in r["sample_accuracy"]]
        rows.append(
            [
                bench,
                s["runs"],
                f"{s['correct_min']}-{s['correct_max']}",
                f"{s['incorrect_min']}-{s['incorrect_max']}",
                f"{s['correct_mean']:.1f} ({s['correct_sd']:.1f})",
                s["minority_min"],
                f"{min(acc):.0%}-{max(acc):.0%}",
            ]
        )
    return _markdown(header, rows)


def profile_values(records: Sequence[Mapping]) -> dict:
    """The profile values the runs share (DATA_KEYS); raises if the runs disagree."""
    seen = {json.dumps({k: r["profile"][k] for k in DATA_KEYS if k in r["profile"]}, sort_keys=True) for r in records}
    if len(seen) != 1:
        raise ValueError(f"the records ran with {len(seen)} different profiles; rerun the script")
    return json.loads(seen.pop())


def stale_keys(profile: Mapping, records: Sequence[Mapping]) -> dict[str, tuple]:
    """DATA_KEYS whose profile value differs from the one the records ran with: {key: (profile, recorded)}."""
    recorded = profile_values(records)
    return {k: (profile.get(k), recorded.get(k)) for k in DATA_KEYS if profile.get(k) != recorded.get(k)}


def thin_note(records: Sequence[Mapping], floor: int = 5) -> str:
    """A sentence naming the runs whose headline set held fewer than ``floor`` of a class, if any."""
    thin = [
        f"`{b}` {minority(r['headline'][b])} (seed {r['seed']}, {r['threads']} thread{'s' * (r['threads'] != 1)}; "
        f"greedy {r['greedy_accuracy'][b]:.0%})"
        for b in benchmarks_of(records)
        for r in sorted(records, key=lambda r: (r["seed"], r["threads"]))
        if b in r["headline"] and minority(r["headline"][b]) < floor
    ]
    return f" Fewer than {floor} of a class: {', '.join(thin)}." if thin else ""


def section(records: Sequence[Mapping]) -> str:
    """The README section (between the markers) for these records."""
    values = profile_values(records)
    seeds = sorted({r["seed"] for r in records})
    threads = sorted({r["threads"] for r in records})
    shown = (
        "n_benchmark_questions",
        "n_samples",
        "sampling_temperature",
        "policy_steps",
        "min_chain_steps",
        "max_chain_steps",
    )
    total = sum(r["wall_s"] for r in records)
    same = thread_invariant(records)
    threads_note = {
        True: " Here each seed gave bit-identical numbers under every thread count (the same final SFT "
        "loss to the last digit), so the spread below is the seeds'; another CPU gives other floats, "
        "which moves the numbers as another seed would.",
        False: " The thread count changed the numbers of at least one seed.",
        None: "",
    }[same]
    return (
        "\n".join(
            [
                BEGIN,
                "## Smoke profile: both classes in every headline set",
                "",
                "The smoke report scores each RM on the first sampled solution of every benchmark question "
                "(`headline: sample0`); a set with one class only leaves every AUROC undefined. The smoke data stage "
                f"(notebook 01's code, `params/smoke.yaml`: "
                f"{', '.join(f'`{k}: {values[k]}`' for k in shown if k in values)}) "
                f"was run under seeds {', '.join(map(str, seeds))} and {' and '.join(map(str, threads))} torch threads "
                "(floats differ with the thread count and the CPU). Records: `smoke-margin.jsonl`; regenerate with "
                "`python scripts/smoke_margin.py`." + threads_note,
                "",
                f"**Smallest minority class seen on `{TESTED}`: {min_minority(records, [TESTED])}**, on any benchmark: "
                f"{min_minority(records)} (of {values.get('n_benchmark_questions', '?')} "
                f"headline solutions per benchmark, "
                f"over {len(records)} runs; {total:.0f} s of data stage in all)." + thin_note(records),
                "",
                summary_table(records),
                "",
                "Per run (correct/incorrect headline solutions per benchmark; wall seconds of the whole data stage "
                "on a 2-core machine shared with other work, run with `OMP_WAIT_POLICY=PASSIVE`: busy-waiting OpenMP "
                "threads made a 2-thread run 15x slower there):",
                "",
                runs_table(records),
                END,
            ]
        )
        + "\n"
    )


def replace_section(text: str, new_section: str) -> str:
    """``text`` with the marked section replaced by ``new_section`` (appended when there is none)."""
    if BEGIN in text and END in text:
        return replace_block(text, BEGIN, END, new_section.rstrip("\n"))
    return text.rstrip("\n") + "\n\n" + new_section


# -------------------------------------------------------------------------------------- running
def data_stage(profile: Mapping, run_dir: Path, threads: int) -> dict:
    """Notebook 01's computations (its plots and tables left out) under ``profile``; returns one record."""
    from goalrm_core.data.rundir import RunDir
    from goalrm_core.tasks.toymath import pipeline as tp
    from goalrm_core.threads import set_torch_threads

    p = dict(profile)
    started = time.perf_counter()
    used = set_torch_threads(threads)
    run = RunDir(run_dir)
    seed = p["seed"]
    train_cfg, policy_cfg = tp.configs_from_profile(p)
    timings = {}
    tp.write_benchmarks(run, train_cfg, p["n_benchmark_questions"], seed)
    tick = time.perf_counter()
    history = tp.train_policy(
        run, tp.training_problems(run, train_cfg, p["n_train_questions"], seed), policy_cfg, progress=False
    )
    timings["sft_s"] = time.perf_counter() - tick
    tick = time.perf_counter()
    policy, tokenizer = tp.load_policy(run)
    tp.generate_for_benchmarks(
        run, policy, tokenizer, p["n_samples"], p["sampling_temperature"], seed, p["max_new_tokens"], progress=False
    )
    timings["generate_s"] = time.perf_counter() - tick
    tick = time.perf_counter()
    pairs = tp.build_preference_data(
        run,
        policy,
        tokenizer,
        tp.training_problems(run, train_cfg, p["n_pair_questions"], seed + 1),
        p["pair_samples_per_question"],
        p["sampling_temperature"],
        p["pairs_per_question"],
        p["eval_fraction"],
        seed,
        p["max_new_tokens"],
        progress=False,
    )
    timings["pairs_s"] = time.perf_counter() - tick
    benches = tp.benchmark_names(run)
    samples = {b: tp.read_generations(run, b, "samples") for b in benches}
    greedy = {b: tp.read_generations(run, b, "greedy") for b in benches}
    return {
        "seed": seed,
        "threads": used,
        "headline": {b: headline_counts(samples[b]) for b in benches},
        "sample_accuracy": {b: accuracy(samples[b]) for b in benches},
        "greedy_accuracy": {b: accuracy(greedy[b]) for b in benches},
        "n_pairs": pairs["n_pairs"],
        "sft_final_loss": history[-1]["loss"],
        "wall_s": time.perf_counter() - started,
        **{k: round(v, 1) for k, v in timings.items()},
        "profile": {k: p[k] for k in (*VARIED, *DATA_KEYS)} | {"seed": seed, "torch_threads": used},
    }


def _parse_set(items: Sequence[str]) -> dict:
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set wants key=value, got {item!r}")
        out[key] = yaml.safe_load(value)
    return out


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_outputs(records: Sequence[Mapping], out: Path, readme: Path | None) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records))  # key order kept: benchmarks in run order
    tmp.replace(out)
    if readme is not None:
        readme.write_text(replace_section(readme.read_text() if readme.exists() else "", section(records)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--threads", type=int, nargs="+", default=list(THREADS))
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="override smoke.yaml values (a trial)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"records file (default {RECORDS.relative_to(ROOT)}; with --set, none unless given)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the runs an interrupted invocation finished "
        "(the .partial.jsonl next to the records) and make only the others",
    )
    parser.add_argument(
        "--table", action="store_true", help="re-render the table and README section from the records only"
    )
    args = parser.parse_args(argv)

    from goalrm_core.pipeline.profile_files import load_profile

    if args.table:
        out = args.out or RECORDS
        records = read_records(out)
    else:
        profile = load_profile("smoke") | _parse_set(args.set)
        out = args.out or (None if args.set else RECORDS)
        partial = out.with_suffix(".partial.jsonl") if out is not None else None
        records = read_records(partial) if args.resume and partial is not None and partial.exists() else []
        if records:
            if stale_keys(profile, records) or {r["seed"] for r in records} - set(args.seeds):
                raise SystemExit(f"{partial} was made with other settings; run without --resume")
            print(f"resuming: {len(records)} runs kept from {partial}", flush=True)
        done = {(r["seed"], r["threads"]) for r in records}
        for seed in args.seeds:
            for threads in args.threads:
                if (seed, threads) in done:
                    continue
                with tempfile.TemporaryDirectory(prefix="smoke-margin-") as tmp:
                    record = data_stage(profile | {"seed": seed}, Path(tmp) / "run", threads)
                records.append(record)
                counts = "  ".join(f"{b} {c['correct']}/{c['incorrect']}" for b, c in record["headline"].items())
                print(
                    f"seed {seed} threads {threads}: {counts}  ({record['wall_s']:.0f} s: sft {record['sft_s']}, "
                    f"generate {record['generate_s']}, pairs {record['pairs_s']})",
                    flush=True,
                )
                if partial is not None:  # keep what finished if a later run is interrupted (--resume)
                    write_outputs(records, partial, None)
        if partial is not None:
            partial.unlink(missing_ok=True)
        records.sort(key=lambda r: (r["seed"], r["threads"]))
    if out is not None:
        write_outputs(records, out, README if out == RECORDS else None)
    print(summary_table(records))
    print()
    print(runs_table(records))
    print(
        f"\nsmallest minority class: {TESTED} {min_minority(records, [TESTED])}, any benchmark "
        f"{min_minority(records)}; data stage wall time, all runs: "
        f"{sum(r['wall_s'] for r in records):.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
