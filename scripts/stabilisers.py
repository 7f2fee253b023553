"""The contrastive arm's spread, diagnosed (issue 50, item 4): the goal-conditioned RM of the ``confident`` recipe
trained on validation seeds without a stabiliser and with each stabiliser of the contrastive term, every RM scored
on a validation draw of ``toy-id``, one row per setting and seed in ``reports/calibration/stabilisers.jsonl`` and
the table ``reports/calibration/stabilisers.md``::

    python scripts/stabilisers.py --dry-run     # the plan, what is already in the table, an estimated time
    python scripts/stabilisers.py               # the study: prepares the validation draw if needed, then trains

A row records the RM's toy-id AUROC (all 2,400 samples of the draw, question-clustered CI) and its training
curves as the trainer's train rows log them: the contrastive term, the pair accuracy, and the norm and effective
rank of the states the term reads (``hidden_norm``, ``hidden_effective_rank``), each at the end (the mean over
the last 5% of the steps) and summarised (the smallest effective rank and its step; the curves in 12 step bins).
Per setting the table gives the mean and SD over seeds; a stabiliser whose SD is below the unstabilised arm's
without a lower mean (paired by seed) is a candidate for the next design's recipe. Nothing here enters the power
run, whose recipe is frozen (``params/confident-power.yaml``), and the paper's comparison stays pairwise against
pairwise + contrastive.

Validation only: the RM seeds (default 0-5) must not be a reported run's (the committed profiles' ``rm_seeds``,
10-34), and the questions are a validation draw (benchmark seed 1000, not the reported draw's 0). When
``--run_dir`` holds no ``toy-id`` samples it is made first, as ``val1000-reported`` was
(``reports/calibration/confident-findings.md``): the power run's policy, from its committed data snapshot
(``reports/confident/records/data-*.tar.gz``), sampled 8 times on 300 new ``toy-id`` questions by
``scripts/calibrate_confident.py --reuse_policy --benchmark_seed 1000`` (its policy row goes to
``<run_dir>/policy-row.jsonl``). The RMs train as ``scripts/calibrate_rm.py`` trains recipe C's validation RMs:
``--profile confident``'s ``rm:`` block with the evaluation passes off, on the ``confident+slips`` pairs it builds
(data seed 0), two side by side, one thread each; every RM goes through a content-addressed store under
``<run_dir>/stabilisers/``, so a run stopped after training and before scoring does not train again. A rerun skips
the rows the table has (``--name``, setting and seed) and refuses one recorded with another recipe.

Flags after ``--`` override the trainer's recipe for every setting (e.g. a tiny test run).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "scripts"))

TABLE = ROOT / "reports" / "calibration" / "stabilisers.jsonl"
RUN_DIR = ROOT / "runs" / "calibration" / "confident" / "val1000-power"
BENCH = "toy-id"
GOAL_CONDITIONED = "goal-conditioned"  # study.rms.GOAL_CONDITIONED, the arm whose spread is diagnosed
#: the settings compared, in the table's order: name -> what it is
SETTINGS = {
    "none": "no stabiliser: the confident recipe as it is",
    "warmup": "--contrastive_warmup_steps: β ramps from 0 over the first --warmup_fraction of the steps",
    "stop-goal": "--contrastive_stop_gradient goal: no gradient through the goal states",
}
#: the train-row fields a row summarises
TRACKED = ("contrastive_loss", "accuracy", "hidden_norm", "hidden_effective_rank")
TAIL = 0.05  # "final": the mean over the last 5% of the steps' rows
CURVE_BINS = 12
# The estimate of one RM's training: the power run's goal-conditioned RMs of this recipe (2,400 steps, torch.compile,
# a row every 5 steps) took 748-778 s each with two side by side on 2 idle cores at 152-175 GFLOP/s fp32 matmul
# (reports/confident/records, seeds 17-19): about 390 s of the machine per RM. Scoring 2,400 samples and reading the
# curves add about 45 s per RM, one at a time; preparing the validation draw about 4 minutes.
PAIR_TRAIN_S = 780.0
SCORE_S = 45.0
PREPARE_S = 240.0


def setting_flags(setting: str, max_steps: int, warmup_fraction: float) -> dict:
    """The trainer flags of ``setting`` (:data:`SETTINGS`) for a run of ``max_steps`` steps."""
    if setting == "none":
        return {}
    if setting == "warmup":
        return {"contrastive_warmup_steps": max(1, round(warmup_fraction * max_steps))}
    if setting == "stop-goal":
        return {"contrastive_stop_gradient": "goal"}
    raise ValueError(f"unknown setting {setting!r}; valid: {', '.join(SETTINGS)}")


def reported_seeds() -> set[int]:
    """The RM seeds of the reported runs: every committed profile's ``rm_seeds`` that a report or the power run
    trains (``confident``, ``confident-power``)."""
    from goalrm_core.pipeline.profile_files import load_profile

    return {int(s) for profile in ("confident", "confident-power") for s in load_profile(profile)["rm_seeds"]}


# ---------------------------------------------------------------------------------------------------- the curves


def _mean(values) -> float | None:
    kept = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return sum(kept) / len(kept) if kept else None


def _round(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else round(float(x), 4)


def curve_summary(train_rows: list[dict], max_steps: int, tail: float = TAIL, bins: int = CURVE_BINS) -> dict:
    """What a row keeps of an RM's train rows: each :data:`TRACKED` field's mean over the last ``tail`` of the steps
    (``final_<field>``), the smallest effective rank and its step, the first row's rank and norm, the largest norm,
    the contrastive weight at the end, and the curves as the mean of each field in ``bins`` equal step bins
    (``curves``: the bins' last steps, then each field).

    >>> rows = [{"step": s, "contrastive_loss": 1 / s, "accuracy": 0.5, "hidden_norm": 2.0,
    ...          "hidden_effective_rank": 10 - s, "contrastive_beta": 0.5} for s in range(1, 5)]
    >>> s = curve_summary(rows, 4, tail=0.25, bins=2)
    >>> s["final_hidden_effective_rank"], s["min_hidden_effective_rank"], s["min_hidden_effective_rank_step"]
    (6.0, 6.0, 4)
    >>> s["curves"]["step"], s["curves"]["hidden_effective_rank"]
    ([2, 4], [8.5, 6.5])
    """
    rows = sorted(train_rows, key=lambda r: r["step"])
    if not rows:
        raise ValueError("no train rows to summarise")
    last = rows[-1]["step"]
    ends = [math.ceil(max_steps * (i + 1) / bins) for i in range(bins)]
    cut = last - max(1, math.ceil(tail * max_steps))
    final = [r for r in rows if r["step"] > cut]
    ranks = [(r.get("hidden_effective_rank"), r["step"]) for r in rows if r.get("hidden_effective_rank") is not None]
    norms = [r["hidden_norm"] for r in rows if r.get("hidden_norm") is not None]
    out = {f"final_{name}": _round(_mean(r.get(name) for r in final)) for name in TRACKED}
    out.update(
        {
            "final_contrastive_beta": _round(rows[-1]["contrastive_beta"]) if "contrastive_beta" in rows[-1] else None,
            "min_hidden_effective_rank": _round(min(ranks)[0]) if ranks else None,
            "min_hidden_effective_rank_step": min(ranks)[1] if ranks else None,
            "first_hidden_effective_rank": _round(ranks[0][0]) if ranks else None,
            "first_hidden_norm": _round(norms[0]) if norms else None,
            "max_hidden_norm": _round(max(norms)) if norms else None,
            "n_train_rows": len(rows),
        }
    )
    lows = [0, *ends[:-1]]
    kept = [(lo, hi) for lo, hi in zip(lows, ends) if any(lo < r["step"] <= hi for r in rows)]
    out["curves"] = {"step": [hi for _, hi in kept]} | {
        name: [_round(_mean(r.get(name) for r in rows if lo < r["step"] <= hi)) for lo, hi in kept] for name in TRACKED
    }
    return out


# ------------------------------------------------------------------------------------------------ the validation draw


def prepare_validation_run(run_dir: Path, n_questions: int, samples: int, pair_questions: int, threads: int) -> None:
    """The validation draw at ``run_dir`` (``runs/calibration/confident/<name>``): the power run's data snapshot
    unpacked beside it (``power-data``, for its policy), then ``calibrate_confident.py --reuse_policy power-data
    --benchmark_seed 1000`` (``n_questions`` x ``samples`` toy-id samples, slip pairs of ``pair_questions``)."""
    import calibrate_confident
    import power_run

    base = calibrate_confident.ROOT / "runs" / "calibration" / "confident"
    if run_dir.resolve().parent != base.resolve():
        raise SystemExit(
            f"stabilisers: {run_dir} holds no {BENCH} samples and only a run folder in {base} is made here "
            f"(scripts/calibrate_confident.py writes there): give --run_dir {base}/<name>, or one made already"
        )
    snapshots = sorted((ROOT / "reports" / "confident" / "records").glob(power_run.snapshot_name("*")))
    if len(snapshots) != 1:
        raise SystemExit(f"stabilisers: expected one power-run data snapshot, found {len(snapshots)}")
    source = base / "power-data"
    if not (source / "data" / "policy" / "config.json").is_file():
        print(f"stabilisers: the power run's data from {snapshots[0].name} into {source}", flush=True)
        power_run.read_snapshot(snapshots[0], source)
    task = json.loads((source / "data" / "benchmarks" / "task.json").read_text())["toymath"]
    expected = {"mistaught_facts": 12, "heldout_facts": 12, "modulus": 10, "operations": "+-"}
    if any(task.get(k) != v for k, v in expected.items()):
        raise SystemExit(f"stabilisers: {snapshots[0]}'s task is not the confident one calibrate_confident.py makes")
    argv = [
        "--name",
        run_dir.name,
        "--reuse_policy",
        source.name,
        "--benchmark_seed",
        "1000",
        "--n_questions",
        str(n_questions),
        "--samples",
        str(samples),
        "--n_pair_questions",
        str(pair_questions),
        "--threads",
        str(threads),
        "--table",
        str(run_dir / "policy-row.jsonl"),
    ]
    print(f"stabilisers: the validation draw: scripts/calibrate_confident.py {' '.join(argv)}", flush=True)
    if calibrate_confident.main(argv) != 0:
        raise SystemExit("stabilisers: calibrate_confident.py failed")


def _shown(path: Path) -> str:
    """A path as a row records it: relative to the checkout when inside it."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def has_samples(run_dir: Path) -> bool:
    return (run_dir / "data" / "generations" / BENCH / "samples.jsonl").is_file()


# ------------------------------------------------------------------------------------------------------ the table


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def read_table(path: Path) -> list[dict]:
    from goalrm_core.data.io import read_jsonl

    return read_jsonl(path) if path.is_file() else []


#: what makes two rows of one name and setting the same study (a rerun with another of these is refused)
PLAN_KEYS = ("run_dir", "recipe", "flags", "data", "bench", "score_set")


def conflict(old: dict, new: dict) -> str | None:
    differ = [k for k in PLAN_KEYS if json.dumps(old.get(k), sort_keys=True) != json.dumps(new.get(k), sort_keys=True)]
    if not differ:
        return None
    k = differ[0]
    return (
        f"{old['name']!r} {old['setting']} seed {old['seed']} is recorded with {k} {json.dumps(old.get(k))[:200]}, "
        f"this run has {json.dumps(new.get(k))[:200]}: one name is one study; give another --name"
    )


def _f(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _cell(values, digits: int = 3) -> str:
    kept = [v for v in values if v is not None]
    return " / ".join(f"{v:.{digits}f}" for v in kept) if kept else "-"


def _summary_rows(rows: list[dict], settings: list[str]) -> list[dict]:
    from goalrm_core.evaluation.stats import mean_ci, sd_upper

    by = {s: {r["seed"]: r for r in rows if r["setting"] == s and r.get("auroc") is not None} for s in settings}
    base = by.get("none", {})
    base_sd = _sd([r["auroc"] for r in base.values()])
    out = []
    for s in settings:
        got = by[s]
        if not got:
            continue
        aurocs = [got[k]["auroc"] for k in sorted(got)]
        mean, low, high = mean_ci(aurocs)
        sd = _sd(aurocs)
        paired = sorted(set(got) & set(base))
        delta = mean_ci([got[k]["auroc"] - base[k]["auroc"] for k in paired]) if s != "none" and paired else None
        candidate = "-"
        if s != "none" and paired and len(paired) == len(got) == len(base) and len(paired) >= 2:
            candidate = "yes" if sd < base_sd and delta[0] >= 0 else "no"
        out.append(
            {
                "setting": s,
                "flags": ", ".join(f"{k} {v}" for k, v in next(iter(got.values()))["flags"].items()) or "-",
                "seeds": ", ".join(map(str, sorted(got))),
                "AUROC per seed": _cell(aurocs),
                "mean [95% CI]": _ci(mean, low, high),
                "SD (80% upper)": f"{sd:.3f} ({sd_upper(aurocs):.3f})" if len(aurocs) > 1 else "-",
                "SD / none's": f"{sd / base_sd:.2f}" if s != "none" and base_sd and len(aurocs) > 1 else "-",
                "Δ mean vs none, paired [95% CI]": "-" if delta is None else _ci(*delta, signed=True),
                "candidate": candidate,
                **{
                    label: _spread([got[k].get(key) for k in sorted(got)])
                    for label, key in (
                        ("held-out pair acc", "eval_accuracy"),
                        ("contrastive term (end)", "final_contrastive_loss"),
                        ("train pair acc (end)", "final_accuracy"),
                        ("norm (end)", "final_hidden_norm"),
                        ("eff. rank (end)", "final_hidden_effective_rank"),
                        ("eff. rank (min)", "min_hidden_effective_rank"),
                    )
                },
            }
        )
    return out


def _sd(values) -> float:
    v = [float(x) for x in values if x is not None]
    if len(v) < 2:
        return math.nan
    m = sum(v) / len(v)
    return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))


def _spread(values) -> str:
    """mean ± SD over seeds."""
    v = [float(x) for x in values if x is not None]
    if not v:
        return "-"
    return f"{sum(v) / len(v):.3f}" + (f" ± {_sd(v):.3f}" if len(v) > 1 else "")


def _ci(mean, low, high, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    if not math.isfinite(low):
        return f.format(mean)
    return f"{f.format(mean)} [{f.format(low)}, {f.format(high)}]"


def _markdown(rows: list[dict]) -> str:
    if not rows:
        return "(no rows yet)"
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def render(rows: list[dict]) -> str:
    """``stabilisers.md``: per study name, the settings' summary over seeds, then every seed's row."""
    parts = [
        "# The contrastive arm's spread: stabilisers on validation seeds (issue 50, item 4)",
        "",
        "Generated by `python scripts/stabilisers.py` from `stabilisers.jsonl` (one row per setting and RM seed);"
        " do not edit by hand. The goal-conditioned RM of the `confident` recipe, trained on validation RM seeds"
        " (never the reported 10-34) and scored on a validation draw of `toy-id` (benchmark seed 1000). The"
        " training curves are the trainer's train rows: the contrastive term (β-weighted, as logged), the pair"
        " accuracy, and the mean norm and effective rank of the chosen responses' last-layer token states, the"
        ' states the term reads (a collapse shows as a falling rank); "end" is the mean over the last 5% of the'
        ' steps, "min" the smallest rank over the run, and each row\'s `curves` holds the rest.',
        "",
        "**The rule, fixed before any row:** a stabiliser is a *candidate* for the next design's recipe when, on"
        " the same seeds as the unstabilised arm, its AUROC SD is below that arm's and its mean is not below it"
        " (paired by seed, the difference's point estimate >= 0). With a handful of seeds neither comparison is"
        " resolved: the intervals say how far from it the table is. A candidate does not enter the power run,"
        " whose recipe is frozen; the paper's comparison stays pairwise against pairwise + contrastive.",
    ]
    for name in dict.fromkeys(r["name"] for r in rows):
        mine = [r for r in rows if r["name"] == name]
        settings = [s for s in SETTINGS if any(r["setting"] == s for r in mine)]
        settings += sorted({r["setting"] for r in mine} - set(settings))
        first = mine[0]
        parts += [
            "",
            f"## {name}",
            "",
            f"Run folder `{first['run_dir']}`, {first['n_eval_rows']} `{first['bench']}` samples"
            f" ({first.get('n_incorrect', '?')} incorrect; the free scorers' AUROC on them: length"
            f" {_f(first.get('length_auroc'))}, the policy's mean log-prob {_f(first.get('logprob_auroc'))});"
            f" pairs: {first['data'].get('source')}"
            f" ({first['data'].get('n_pairs')}, data seed {first['data'].get('data_seed', '-')}); recipe:"
            f" {', '.join(f'{k} {v}' for k, v in first['recipe'].items())}.",
            "",
            _markdown(_summary_rows(mine, settings)),
            "",
            "Every seed:",
            "",
            _markdown(
                [
                    {
                        "setting": r["setting"],
                        "seed": r["seed"],
                        "AUROC [95% CI]": f"{_f(r['auroc'])} [{_f(r['auroc_ci'][0])}, {_f(r['auroc_ci'][1])}]",
                        "well-formed AUROC": _f(r.get("auroc_well_formed")),
                        "held-out pair acc": round(r["eval_accuracy"], 3),
                        "contrastive term (end)": r["final_contrastive_loss"],
                        "train pair acc (end)": r["final_accuracy"],
                        "norm (first / end / max)": _cell(
                            [r["first_hidden_norm"], r["final_hidden_norm"], r["max_hidden_norm"]], 2
                        ),
                        "eff. rank (first / end / min @ step)": _ranks(r),
                        "train s": r["train_s"],
                    }
                    for s in settings
                    for r in sorted((r for r in mine if r["setting"] == s), key=lambda r: r["seed"])
                ]
            ),
        ]
    return "\n".join(parts) + "\n"


def _ranks(r: dict) -> str:
    ranks = [r["first_hidden_effective_rank"], r["final_hidden_effective_rank"], r["min_hidden_effective_rank"]]
    return f"{_cell(ranks, 1)} @ {r['min_hidden_effective_rank_step']}"


def write_markdown(table: Path) -> Path:
    path = table.with_suffix(".md")
    path.write_text(render(read_table(table)), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------------ the study


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(
        prog="python scripts/stabilisers.py",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--run_dir", type=Path, default=RUN_DIR, help="the validation run folder (made when missing)")
    p.add_argument("--name", default="confident-val1000", help="the study's label in the table")
    p.add_argument("--profile", default="confident", help="the profile whose rm: block is the recipe")
    p.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5], help="validation RM seeds")
    p.add_argument("--warmup_fraction", type=float, default=0.25, help="the warm-up's share of the steps")
    p.add_argument("--parallel", type=int, default=2, help="trainings side by side")
    p.add_argument("--threads", type=int, default=2, help="threads in all (each training gets its share)")
    p.add_argument("--data", default="confident+slips", help="training pairs, as calibrate_rm.py's --data")
    p.add_argument("--n_slip_questions", type=int, default=6000, help="as calibrate_rm.py's")
    p.add_argument("--data_seed", type=int, default=0, help="seed of the training pairs (recipe C's validation: 0)")
    p.add_argument("--n_boot", type=int, default=1000)
    p.add_argument("--questions", type=int, default=300, help="validation draw: toy-id questions")
    p.add_argument("--samples", type=int, default=8, help="validation draw: samples per question")
    p.add_argument("--pair_questions", type=int, default=6000, help="validation draw: its own slip pairs' questions")
    p.add_argument("--table", type=Path, default=TABLE)
    p.add_argument(
        "--pair_seconds",
        type=float,
        default=PAIR_TRAIN_S,
        help="the estimate's wall seconds for two 2,400-step RMs side by side (scaled by the recipe's steps)",
    )
    p.add_argument("--dry-run", dest="dry_run", action="store_true", help="print the plan and its time; run nothing")
    args = p.parse_args(own)
    if not 0 < args.warmup_fraction <= 1:
        p.error(f"--warmup_fraction must be in (0, 1], got {args.warmup_fraction}")
    if args.parallel < 1 or args.threads < 1:
        p.error("--parallel and --threads must be >= 1")
    reported = sorted(set(args.seeds) & reported_seeds())
    if reported:
        p.error(f"--seeds {reported} are reported RM seeds (the committed profiles' rm_seeds): validation seeds only")
    seeds = list(dict.fromkeys(args.seeds))

    import calibrate_rm

    from goalrm_core.train.config import TrainRMConfig

    overrides = calibrate_rm.parse_overrides(extra)
    base = calibrate_rm.profile_recipe(args.profile)
    recipe = TrainRMConfig.from_dict({**base.to_dict(), **overrides})  # unknown flags stop here
    flags = {s: setting_flags(s, recipe.max_steps, args.warmup_fraction) for s in args.settings}
    for s in args.settings:  # each setting's config is valid before anything runs
        TrainRMConfig.from_dict({**recipe.to_dict(), **flags[s], "reward_model_strategy": "contrastive"})
    recorded = {k: getattr(recipe, k) for k in calibrate_rm.RECORDED_FLAGS} | overrides
    done = {(r["setting"], r["seed"]): r for r in read_table(args.table) if r["name"] == args.name}
    plan = {"run_dir": _shown(args.run_dir), "recipe": json.loads(json.dumps(recorded, default=str))}
    for (s, _), old in done.items():  # the rows a rerun skips are this study's, or it stops here
        refused = conflict(old, {**old, **plan, "flags": flags.get(s, old["flags"])})
        if refused:
            print(f"stabilisers: error: {refused}", file=sys.stderr)
            return 2
    todo = [(s, seed) for seed in seeds for s in args.settings if (s, seed) not in done]
    prepared = has_samples(args.run_dir)
    pairs = math.ceil(len(todo) / args.parallel)
    pair_s = max(30.0, args.pair_seconds * recipe.max_steps / 2400)
    estimate = (0 if prepared else PREPARE_S) + (60 if todo else 0) + pairs * pair_s + len(todo) * SCORE_S
    print(
        f"stabilisers: {args.name}: goal-conditioned RMs of --profile {args.profile} ({recipe.max_steps} steps, lr "
        f"{recipe.learning_rate}, head lr {recipe.head_learning_rate}, β {recipe.contrastive_loss_beta}"
        f"{', overrides ' + json.dumps(overrides) if overrides else ''}) on {args.run_dir}"
        f"{'' if prepared else ' (to be made: the power policy on a validation draw, about 4 min)'}",
        flush=True,
    )
    for s in args.settings:
        left = [seed for seed in seeds if (s, seed) not in done]
        print(
            f"  {s:<10} {json.dumps(flags[s]):<36} seeds {seeds}: {len(seeds) - len(left)} in the table, "
            f"{len(left)} to train",
            flush=True,
        )
    print(
        f"  {len(todo)} RMs to train, {args.parallel} side by side: about {estimate / 3600:.1f} h on 2 idle cores at "
        f"~160 GFLOP/s ({pair_s:.0f} s per {args.parallel} RMs side by side, {SCORE_S:.0f} s to score each)",
        flush=True,
    )
    if args.dry_run or not todo:
        if not args.dry_run:
            print(f"stabilisers: every row is in {args.table}; {write_markdown(args.table)} rewritten", flush=True)
        return 0

    from goalrm_core.data.io import append_jsonl, read_jsonl
    from goalrm_core.data.rundir import rm_metrics_path
    from goalrm_core.tasks.toymath.pipeline import task_config
    from goalrm_core.threads import matmul_gflops, set_torch_threads
    from goalrm_core.train.store import rm_key

    started = time.perf_counter()
    set_torch_threads(args.threads)
    if not prepared:
        prepare_validation_run(args.run_dir, args.questions, args.samples, args.pair_questions, args.threads)
    run = args.run_dir
    out_root = run / "stabilisers"
    data = calibrate_rm.training_pairs(
        run, out_root, args.data, args.n_slip_questions, 1, seed=args.data_seed, generator_extra_facts=12
    )
    if data["path"] is not None:
        overrides = {"dataset": str(data["path"]), **overrides}
    generations = calibrate_rm.scored_generations(run, BENCH, "sample0", "samples")
    made = {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "matmul_gflops": round(matmul_gflops(args.threads), 1),
        "threads": args.threads,
        "parallel": args.parallel,
    }
    plan |= {"data": json.loads(json.dumps(data["summary"], default=str)), "bench": BENCH, "score_set": "samples"}
    for (s, _), old in done.items():  # the same pairs as the rows already in the table
        refused = conflict(old, {**plan, "flags": flags.get(s, old["flags"])})
        if refused:
            print(f"stabilisers: error: {refused}", file=sys.stderr)
            return 2
    task = dataclasses.asdict(task_config(run))
    from goalrm_core.study.training import rm_config, train_rms

    for first in range(0, len(seeds), args.parallel):
        group = seeds[first : first + args.parallel]
        for s in args.settings:
            left = [seed for seed in group if (s, seed) not in done]
            if not left:
                continue
            t0 = time.perf_counter()
            trained = train_rms(
                run,
                [GOAL_CONDITIONED],
                left,
                base,
                parallel=min(args.parallel, len(left)),
                out_root=out_root / s,
                store=out_root / "store",
                threads=args.threads,
                **overrides,
                **flags[s],
            )
            wall = time.perf_counter() - t0
            for row in trained.itertuples():
                cfg = rm_config(base, run, GOAL_CONDITIONED, int(row.seed), out_root / s, **overrides, **flags[s])
                train_rows = [r for r in read_jsonl(rm_metrics_path(cfg.save_path)) if r["split"] == "train"]
                record = {
                    "name": args.name,
                    "setting": s,
                    "flags": flags[s],
                    "seed": int(row.seed),
                    "arm": GOAL_CONDITIONED,
                    **plan,
                    "task": task,
                    "rm_key": rm_key(cfg),
                    "n_eval_rows": len(generations),
                    "eval_accuracy": round(float(row.eval_accuracy), 4),
                    **calibrate_rm.rm_figures(Path(cfg.save_path), generations, cfg.max_len, BENCH, args.n_boot),
                    **curve_summary(train_rows, cfg.max_steps),
                    "train_s": round(float(row.wall_s), 1),
                    "wall_s_group": round(wall, 1),
                    "reused": bool(getattr(row, "reused", False)),
                    "made": made | {"date": datetime.now(timezone.utc).isoformat(timespec="seconds")},
                }
                append_jsonl(args.table, [record])
                done[(s, record["seed"])] = record
                print(
                    f"{s} seed {record['seed']}: AUROC {_f(record['auroc'])} {record['auroc_ci']}, held-out pair acc "
                    f"{record['eval_accuracy']:.3f}, contrastive {record['final_contrastive_loss']}, effective rank "
                    f"{record['final_hidden_effective_rank']} (min {record['min_hidden_effective_rank']}), "
                    f"train {record['train_s']:.0f} s",
                    flush=True,
                )
            write_markdown(args.table)
    print(f"stabilisers: done in {time.perf_counter() - started:.0f} s; {write_markdown(args.table)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
