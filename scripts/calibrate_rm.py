"""RM calibration on the embedded task: train one RM with given flags and report its AUROC on a
benchmark's sampled generations beside the free reference scorers (length only, policy log-prob).

    python scripts/calibrate_rm.py --run_dir runs/demo --name lr5e-4 -- --max_steps 300 --learning_rate 5e-4

Everything after ``--`` goes to goalrm_core.train_rm. Results are appended to
<run_dir>/calibration.jsonl, one row per run, so a sweep's outcome stays on record.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core import evaluation, experiments as ex  # noqa: E402
from goalrm_core import toy_pipeline as tp  # noqa: E402
from goalrm_core.launch import args_to_flags, run_streaming  # noqa: E402
from goalrm_core.models import load_reward_model  # noqa: E402
from goalrm_core.scoring import score_generations  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run_dir", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--strategy", default="baseline", choices=list(ex.RM_STRATEGIES))
    p.add_argument("--bench", default="toy-id")
    p.add_argument("--n_boot", type=int, default=500)
    args = p.parse_args(own)
    run = Path(args.run_dir)
    base = ex.rm_train_args(run, args.strategy, 0, save_path=str(run / "calibration" / args.name),
                            metrics_path=str(run / "calibration" / f"{args.name}.metrics.jsonl"))
    cmd = [sys.executable, "-m", "goalrm_core.train_rm", *args_to_flags(base), *extra]
    run_streaming(cmd, run / "calibration" / f"{args.name}.log", desc=args.name)
    model = load_reward_model(run / "calibration" / args.name)
    tokenizer = AutoTokenizer.from_pretrained(run / "calibration" / args.name)
    rows = tp.read_generations(run, args.bench, "samples")
    scored = score_generations(model, tokenizer, rows, ex.TEMPLATE, batch_size=128, max_len=512, progress=False)
    table = evaluation.auroc_table({args.name: scored}, args.bench, n_boot=args.n_boot)
    summary = json.loads((run / "calibration" / args.name / "train_summary.json").read_text())
    record = {"name": args.name, "strategy": args.strategy, "flags": extra, "eval_accuracy": summary["eval_accuracy"],
              "train_s": summary["train_s"], **{f"auroc[{r.scorer}]": round(r.auroc, 4) for r in table.itertuples()},
              **{f"ci[{r.scorer}]": [round(r.ci_low, 4), round(r.ci_high, 4)] for r in table.itertuples()}}
    with open(run / "calibration.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
