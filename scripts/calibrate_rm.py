"""RM calibration on the embedded task: train one recipe for several seeds (side by side), score each
seed's RM on a benchmark's headline generations, and append one row per seed to the committed table
``reports/calibration/rm.jsonl``, beside the free reference scorers (length only, policy log-prob).

    python scripts/calibrate_rm.py --run_dir runs/demo --name lr2e-4-s800 --seeds 0 1 2 -- \
        --max_steps 800 --learning_rate 2e-4

``--data`` chooses the training pairs (``goalrm_core.tasks.toymath.verify_data``): the policy's own pairs
(notebook 01's), only those whose rejected solution is well-formed, synthetic one-fact slips of the
reference solutions on fresh training questions, or both. Each RM is scored on ``--score_set``: the
headline set (``sample0``, one sample per question) or every sample, and each AUROC is recorded on all
generations and on the correct against the well-formed incorrect ones only (an RM that verifies
arithmetic, not one that spots malformed text).

Everything after ``--`` overrides goalrm_core.train.trainer flags of notebook 02's recipe as ``--profile``
sets it (each row records the trainer flags it ran). The data stage
(notebook 01) must have run in ``--run_dir``. ``scripts/calibration_table.py`` renders the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from transformers import AutoTokenizer  # noqa: E402

from goalrm_core.data.io import (  # noqa: E402
    append_jsonl,  # noqa: E402
    read_jsonl,
    write_jsonl,
)
from goalrm_core.data.rundir import RunDir  # noqa: E402
from goalrm_core.evaluation import tables  # noqa: E402
from goalrm_core.inference.scoring import score_generations  # noqa: E402
from goalrm_core.model.reward_model import load_reward_model  # noqa: E402
from goalrm_core.pipeline.profile_files import load_profile  # noqa: E402
from goalrm_core.study.artifacts import (  # noqa: E402
    HEADLINE_SETS,
    first_samples,
    subset_rows,  # noqa: E402
)
from goalrm_core.study.rms import STRATEGY  # noqa: E402
from goalrm_core.study.training import notebook_recipe, train_rms  # noqa: E402
from goalrm_core.tasks.toymath import verify_data  # noqa: E402
from goalrm_core.tasks.toymath.pipeline import (  # noqa: E402
    TEMPLATE,  # noqa: E402
    read_generations,
    task_config,
    training_problems,
)
from goalrm_core.train.config import TrainRMConfig  # noqa: E402

TABLE = ROOT / "reports" / "calibration" / "rm.jsonl"


def profile_recipe(profile: str) -> TrainRMConfig:
    """Notebook 02's recipe as the profile sets it (its rm: block: steps, rates, batch, encoding, contrastive
    settings), with the evaluation passes off: the table records the final held-out accuracy."""
    return dataclasses.replace(notebook_recipe(load_profile(profile)), eval_steps=-1)


# The trainer flags a row records (the paths, strategy and seed are recorded apart).
RECORDED_FLAGS = (
    "max_steps",
    "train_batch_size",
    "micro_train_batch_size",
    "learning_rate",
    "head_learning_rate",
    "lr_warmup_ratio",
    "eval_steps",
    "contrastive_loss_beta",
    "sim_samples",
    "unsim_samples",
    "zero_stage",
    "max_len",
    "max_epochs",
    "encoding",
    "contrastive_window",
    "contrastive_pairs",
)


def parse_overrides(extra: list[str]) -> dict:
    """``--key value`` pairs (and bare ``--flag`` booleans) into a dict, values parsed as JSON when they are."""
    out, i = {}, 0
    while i < len(extra):
        key = extra[i].lstrip("-")
        if i + 1 < len(extra) and not extra[i + 1].startswith("--"):
            raw = extra[i + 1]
            try:
                out[key] = json.loads(raw)
            except json.JSONDecodeError:
                out[key] = raw
            i += 2
        else:
            out[key] = True
            i += 1
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run_dir", required=True)
    p.add_argument(
        "--profile", default="demo", help="the profile whose RM recipe (notebook 02's) the flags after -- override"
    )
    p.add_argument("--name", required=True, help="Recipe label; RMs go to <run_dir>/calibration/<name>/.")
    p.add_argument("--strategy", default="baseline", choices=list(STRATEGY))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--parallel", type=int, default=2, help="Trainings side by side.")
    p.add_argument("--bench", default="toy-id")
    p.add_argument("--headline", default="sample0", choices=HEADLINE_SETS)
    p.add_argument("--n_boot", type=int, default=1000)
    p.add_argument("--table", type=Path, default=TABLE)
    p.add_argument(
        "--data",
        default="policy",
        choices=verify_data.PAIR_SOURCES,
        help="training pairs: the policy's (notebook 01's), those with a well-formed rejected side, synthetic "
        "one-fact slips of reference solutions, the policy's and the slips together, a confidently wrong "
        "second generator's solutions against the references (confident), or those and the slips",
    )
    p.add_argument("--n_slip_questions", type=int, default=6000, help="fresh training questions for --data slips")
    p.add_argument("--slips_per_question", type=int, default=1)
    p.add_argument(
        "--generator_extra_facts",
        type=int,
        default=12,
        help="--data confident: the second generator is taught wrong every fact the policy is, and this many more",
    )
    p.add_argument(
        "--data_seed",
        type=int,
        default=None,
        help="seed of the generated training pairs (default: the smallest of --seeds); give it to train "
        "seeds in several calls on the same pairs",
    )
    p.add_argument(
        "--pairs",
        type=Path,
        default=None,
        help="train on this pair file instead of --data (e.g. scripts/rollout_labels.py's exact or rollout-labelled "
        "subset); the table records its path and size",
    )
    p.add_argument(
        "--score_set",
        default="sample0",
        choices=("sample0", "samples"),
        help="generations each RM is scored on: the headline set, or every sample (clustered by question)",
    )
    args = p.parse_args(own)
    if args.headline == "greedy" and args.score_set == "samples":
        p.error("--score_set samples reads the sampled generations; it cannot be combined with --headline greedy")
    run = Path(args.run_dir)
    overrides = parse_overrides(extra)
    out_root = run / "calibration" / args.name
    if args.pairs is not None:
        if not args.pairs.is_file():
            p.error(f"--pairs {args.pairs}: no such file")
        data = {
            "path": args.pairs,
            "summary": {"source": "file", "path": str(args.pairs), "n_pairs": len(read_jsonl(args.pairs))},
        }
    else:
        data = training_pairs(
            run,
            out_root,
            args.data,
            args.n_slip_questions,
            args.slips_per_question,
            seed=min(args.seeds) if args.data_seed is None else args.data_seed,
            generator_extra_facts=args.generator_extra_facts,
        )
    if data["path"] is not None:
        overrides.setdefault("dataset", str(data["path"]))
    base = profile_recipe(args.profile)
    ran = TrainRMConfig.from_dict({**base.to_dict(), **overrides})  # unknown flags stop here, before any training
    recipe = {**{k: getattr(ran, k) for k in RECORDED_FLAGS}, **{k: v for k, v in overrides.items() if k != "dataset"}}
    # one recipe name is one recipe: the table averages a name's seeds, so rows of another recipe under it are refused
    # before anything trains (scripts/calibration_table.py refuses them too when it renders)
    from calibration_table import _read, recipe_conflict  # scripts/: first on sys.path when run as a script

    conflict = recipe_conflict(
        _read(args.table),
        args.table,
        new={
            "name": args.name,
            "strategy": args.strategy,
            "run_dir": str(run),
            "recipe": json.loads(json.dumps(recipe, default=str)),
            "data": json.loads(json.dumps(data["summary"], default=str)),
            "task": asdict(task_config(run)),
            "bench": args.bench,
            "headline": args.headline,
            "score_set": args.score_set,
        },
    )
    if conflict:
        print(f"calibrate_rm.py: error: {conflict}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    runs = train_rms(run, [args.strategy], args.seeds, base, parallel=args.parallel, out_root=out_root, **overrides)
    train_wall = time.perf_counter() - started

    rows = scored_generations(run, args.bench, args.headline, args.score_set)
    task = asdict(task_config(run))
    records = []
    for row in runs.itertuples():
        figures = rm_figures(out_root / f"{args.strategy}-seed{row.seed}", rows, ran.max_len, args.bench, args.n_boot)
        records.append(
            {
                "name": args.name,
                "strategy": args.strategy,
                "seed": int(row.seed),
                "recipe": recipe,
                "data": data["summary"],
                "run_dir": str(run),
                "task": task,
                "bench": args.bench,
                "headline": args.headline,
                "score_set": args.score_set,
                "n_eval_rows": len(rows),
                "eval_accuracy": round(float(row.eval_accuracy), 4),
                "train_s": round(float(row.wall_s), 1),
                **figures,
                "wall_s_all_seeds": round(train_wall, 1),
            }
        )
    append_jsonl(args.table, records)
    for r in records:
        print(
            f"{r['name']} seed {r['seed']}: held-out acc {r['eval_accuracy']:.3f}  "
            f"AUROC {r['auroc']:.3f} {r['auroc_ci']}  "
            f"well-formed {r['auroc_well_formed']:.3f} {r['auroc_well_formed_ci']} "
            f"(length {r['length_auroc_well_formed']:.3f}, "
            f"log-prob {r['logprob_auroc_well_formed']:.3f}, "
            f"{r['n_incorrect_well_formed']} errors)  train {r['train_s']:.0f}s"
        )
    return 0


def rm_figures(path: Path, rows: list[dict], max_len: int, bench: str, n_boot: int) -> dict:
    """The RM saved at ``path`` scored on the generations ``rows`` (read at the EOS, as notebook 04 reads it): its
    AUROC with the question-clustered bootstrap CI, beside length's and the policy's log-prob's, on all of them and
    on the correct against the well-formed incorrect ones only (keys with ``_well_formed``)."""
    model, tokenizer = load_reward_model(path), AutoTokenizer.from_pretrained(path)
    scored = score_generations(
        model,
        tokenizer,
        rows,
        TEMPLATE,
        batch_size=128,
        max_len=max_len,
        progress=False,
        encoding="split",
        readout="eos",
    )
    figures = {}
    for subset, suffix in (("all", ""), ("well_formed", "_well_formed")):
        chosen = subset_rows(scored, subset)
        table = tables.auroc_table({"rm": chosen}, bench, n_boot=n_boot).set_index("scorer")
        figures.update(
            {
                f"auroc{suffix}": _round(table.loc["rm", "auroc"]),
                f"auroc{suffix}_ci": [_round(table.loc["rm", "ci_low"]), _round(table.loc["rm", "ci_high"])],
                f"length_auroc{suffix}": _round(table.loc["length only", "auroc"]),
                f"logprob_auroc{suffix}": _round(table.loc["policy mean logprob", "auroc"]),
                f"n_incorrect{suffix}": sum(not r["is_correct"] for r in chosen),
            }
        )
    return figures


def scored_generations(run: Path, bench: str, headline: str, score_set: str) -> list[dict]:
    """The generations an RM is scored on: the greedy ones, every sample, or the headline set notebook 04 scores
    (``study.artifacts.headline_rows``: sample 0 of each question)."""
    if headline == "greedy":
        return read_generations(run, bench, "greedy")
    if score_set == "samples":
        return read_generations(run, bench, "samples")
    return first_samples(read_generations(run, bench, "samples"))


def _round(x) -> float | None:
    x = float(x)
    return round(x, 4) if math.isfinite(x) else None


def training_pairs(
    run: Path,
    out_root: Path,
    source: str,
    n_slip_questions: int,
    slips_per_question: int,
    seed: int,
    generator_extra_facts: int = 12,
) -> dict:
    """The training pairs of ``source`` (``verify_data.PAIR_SOURCES``), written under ``out_root/data``
    unless they are the run's own; returns their path (None: the run's) and a summary for the table."""
    own = read_jsonl(RunDir(run).preference_pairs("train"))
    if source == "policy":
        return {"path": None, "summary": {"source": source, "n_pairs": len(own)}}
    pairs, summary = [], {"source": source}
    if source in ("policy_well_formed", "policy+slips"):
        kept = own if source == "policy+slips" else verify_data.policy_well_formed(own)
        pairs += kept
        summary["n_policy_pairs"] = len(kept)
    if source in ("slips", "policy+slips", "confident+slips"):
        cfg = task_config(run)
        held = {r["question"] for r in read_jsonl(RunDir(run).preference_pairs("eval"))}
        problems = [
            q for q in training_problems(run, cfg, n_slip_questions, seed=10_000 + seed) if q.question not in held
        ]
        slips = verify_data.slip_pairs(problems, slips_per_question, cfg.modulus, seed=seed)
        pairs += slips
        summary.update(n_slip_pairs=len(slips), n_slip_questions=len(problems), slips_per_question=slips_per_question)
    if source in ("confident", "confident+slips"):
        cfg = task_config(run)
        held = {r["question"] for r in read_jsonl(RunDir(run).preference_pairs("eval"))}
        problems = [
            q for q in training_problems(run, cfg, n_slip_questions, seed=20_000 + seed) if q.question not in held
        ]
        table = verify_data.covering_fact_table(cfg, generator_extra_facts, seed=seed)
        wrong = verify_data.confident_pairs(problems, table, cfg.modulus)
        pairs += wrong
        summary.update(
            n_confident_pairs=len(wrong),
            n_confident_questions=len(problems),
            generator_facts=len(table),
            generator_extra_facts=generator_extra_facts,
        )
    summary.update(n_pairs=len(pairs), data_seed=seed)
    path = out_root / "data" / "train.jsonl"
    write_jsonl(path, random.Random(seed).sample(pairs, len(pairs)))
    return {"path": path, "summary": summary}


if __name__ == "__main__":
    sys.exit(main())
