"""Filtering rules on a run's scored samples: which per-token signal saves tokens without costing votes?

Every rule of ``goalrm_core.study.filter_rules`` (Q at every token, Q at line ends, Q minus a token-type
baseline, Q's fall between line ends, the value head's partial reward, the policy's own log-prob) gets
its threshold chosen on validation questions and is reported on the test questions of every benchmark,
for each RM seed, beside the oracle that stops every incorrect solution at its first wrong token. One
row per (benchmark, seed, rule) is appended to ``reports/calibration/filter-rules.jsonl``, and the
toy-id frontier of seed 0 is drawn to ``reports/calibration/filter-frontier-<name>.png``.

    python scripts/filter_rules.py --run_dir runs/demo --name demo-400 --seeds 0 1 2

Notebook 04 must have scored every sample in ``--run_dir`` (``eval/<rm>-seed<k>/<bench>/all``).
``scripts/calibration_table.py`` renders the pooled table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core.evaluation.voting import SKIP_FIRST  # noqa: E402
from goalrm_core.study import filter_rules as fr  # noqa: E402
from goalrm_core.study import plots  # noqa: E402
from goalrm_core.study.rms import GOAL_CONDITIONED, RMS  # noqa: E402
from goalrm_core.tasks.toymath.pipeline import benchmark_names  # noqa: E402

TABLE = ROOT / "reports" / "calibration" / "filter-rules.jsonl"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run_dir", required=True)
    p.add_argument("--name", required=True, help="label of this run in the table")
    p.add_argument("--rm", default=GOAL_CONDITIONED, choices=list(RMS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--skip_first", type=int, default=SKIP_FIRST)
    p.add_argument("--val_fraction", type=float, default=0.3)
    p.add_argument("--split_seed", type=int, default=0, help="seed of the validation/test split of questions")
    p.add_argument("--n_boot", type=int, default=1000)
    p.add_argument("--table", type=Path, default=TABLE)
    args = p.parse_args(argv)
    if not 0 < args.val_fraction < 1:
        p.error(f"--val_fraction must be in (0, 1), got {args.val_fraction}")
    started = time.perf_counter()
    benches = benchmark_names(args.run_dir)
    per_seed, frontier = fr.rules_over_seeds(
        args.run_dir, args.rm, args.seeds, benches, args.skip_first, args.val_fraction, args.split_seed, args.n_boot
    )
    settings = {
        "run_dir": args.run_dir,
        "rm": args.rm,
        "skip_first": args.skip_first,
        "val_fraction": args.val_fraction,
        "split_seed": args.split_seed,
    }
    args.table.parent.mkdir(parents=True, exist_ok=True)
    with open(args.table, "a") as f:
        for rec in per_seed.to_dict("records"):
            clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in rec.items()}
            f.write(json.dumps({"name": args.name, **settings, **clean}) + "\n")
    first = min(args.seeds)
    bench = benches[0]
    fig = plots.filter_frontier(
        frontier.query("benchmark == @bench and rm_seed == @first"),
        per_seed.query("benchmark == @bench and rm_seed == @first"),
        title=f"{bench}, {args.rm} RM seed {first}: test questions",
    )
    figure = args.table.parent / f"filter-frontier-{args.name}.png"
    fig.savefig(figure, dpi=110)
    summary = fr.pooled(per_seed)
    cols = ["benchmark", "rule", "accuracy_change", "tokens_saved_pct", "share_of_oracle", "meets_target"]
    print(summary[cols].to_string(index=False))
    print(f"{len(per_seed)} rows -> {args.table}; figure -> {figure}; {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
