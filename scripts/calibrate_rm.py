"""RM calibration on the embedded task: train one recipe for several seeds (side by side), score each
seed's RM on a benchmark's headline generations, and append one row per seed to the committed table
``reports/calibration/rm.jsonl``, beside the free reference scorers (length only, policy log-prob).

    python scripts/calibrate_rm.py --run_dir runs/demo --name lr2e-4-s800 --seeds 0 1 2 -- \
        --max_steps 800 --learning_rate 2e-4

Everything after ``--`` overrides goalrm_core.train.trainer flags of notebook 02's recipe (the profile's
values are not read: the recipe below is written out, and each row records the trainer flags it ran). The data stage
(notebook 01) must have run in ``--run_dir``. ``scripts/calibration_table.py`` renders the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core.evaluation import tables  # noqa: E402
from goalrm_core.study.artifacts import HEADLINE_SETS, first_samples  # noqa: E402
from goalrm_core.study.rms import STRATEGY  # noqa: E402
from goalrm_core.study.training import RMRecipe, train_rms  # noqa: E402
from goalrm_core.tasks.toymath.pipeline import TEMPLATE  # noqa: E402
from goalrm_core.model.reward_model import load_reward_model  # noqa: E402
from goalrm_core.inference.scoring import score_generations  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

TABLE = ROOT / "reports" / "calibration" / "rm.jsonl"
# Notebook 02's recipe, written out; ``--`` flags override it.
BASE_RECIPE = RMRecipe(rm_steps=600, rm_batch_size=32, rm_micro_batch_size=32, rm_learning_rate=5e-4, rm_warmup_ratio=0.03,
                       rm_eval_steps=-1, contrastive_beta=0.5, sim_samples=16, unsim_samples=16, rm_zero_stage=0,
                       max_len=192, max_epochs=1000, logging_steps=5)
# The trainer flags a row records (the paths, strategy and seed are recorded apart).
RECORDED_FLAGS = ("max_steps", "train_batch_size", "micro_train_batch_size", "learning_rate", "head_learning_rate",
                  "lr_warmup_ratio", "eval_steps", "contrastive_loss_beta", "sim_samples", "unsim_samples", "zero_stage",
                  "max_len", "max_epochs")


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
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run_dir", required=True)
    p.add_argument("--name", required=True, help="Recipe label; RMs go to <run_dir>/calibration/<name>/.")
    p.add_argument("--strategy", default="baseline", choices=list(STRATEGY))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--parallel", type=int, default=2, help="Trainings side by side.")
    p.add_argument("--bench", default="toy-id")
    p.add_argument("--headline", default="sample0", choices=HEADLINE_SETS)
    p.add_argument("--n_boot", type=int, default=1000)
    p.add_argument("--table", type=Path, default=TABLE)
    args = p.parse_args(own)
    run = Path(args.run_dir)
    overrides = parse_overrides(extra)
    ran = BASE_RECIPE.config(**overrides)  # unknown flags stop here, before any training
    recipe = {**{k: getattr(ran, k) for k in RECORDED_FLAGS}, **overrides}
    out_root = run / "calibration" / args.name
    started = time.perf_counter()
    runs = train_rms(run, [args.strategy], args.seeds, BASE_RECIPE, parallel=args.parallel, out_root=out_root, **overrides)
    train_wall = time.perf_counter() - started

    from dataclasses import asdict

    from goalrm_core.tasks.toymath.pipeline import read_generations, task_config

    # the same headline set notebook 04 scores (study.artifacts.headline_rows), before scoring
    if args.headline == "greedy":
        rows = read_generations(run, args.bench, "greedy")
    else:
        rows = first_samples(read_generations(run, args.bench, "samples"))
    task = asdict(task_config(run))
    records = []
    for row in runs.itertuples():
        path = out_root / f"{args.strategy}-seed{row.seed}"
        model, tokenizer = load_reward_model(path), AutoTokenizer.from_pretrained(path)
        scored = score_generations(model, tokenizer, rows, TEMPLATE, batch_size=128, max_len=ran.max_len, progress=False)
        table = tables.auroc_table({"rm": scored}, args.bench, n_boot=args.n_boot).set_index("scorer")
        records.append({
            "name": args.name, "strategy": args.strategy, "seed": int(row.seed), "recipe": recipe,
            "run_dir": str(run), "task": task, "bench": args.bench, "headline": args.headline, "n_eval_rows": len(rows),
            "eval_accuracy": round(float(row.eval_accuracy), 4), "train_s": round(float(row.wall_s), 1),
            "auroc": round(float(table.loc["rm", "auroc"]), 4),
            "auroc_ci": [round(float(table.loc["rm", "ci_low"]), 4), round(float(table.loc["rm", "ci_high"]), 4)],
            "length_auroc": round(float(table.loc["length only", "auroc"]), 4),
            "logprob_auroc": round(float(table.loc["policy mean logprob", "auroc"]), 4),
            "wall_s_all_seeds": round(train_wall, 1),
        })
    args.table.parent.mkdir(parents=True, exist_ok=True)
    with open(args.table, "a") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    for r in records:
        print(f"{r['name']} seed {r['seed']}: held-out acc {r['eval_accuracy']:.3f}  AUROC {r['auroc']:.3f} "
              f"{r['auroc_ci']}  length {r['length_auroc']:.3f}  train {r['train_s']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
