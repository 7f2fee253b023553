"""How fast the command line answers: ``goalrm <command> --help`` and an argument error, per command.

    python benchmarks/cli_startup.py                         # this checkout, label "after"
    python benchmarks/cli_startup.py --checkout ../other --label before --reps 5

Each case runs in a fresh interpreter (``python -c``: import ``goalrm_core.cli``, call ``main``) ``--reps``
times, one after another; the figure is the median wall time of the whole process, with min and max,
beside the heavy modules the case loaded. The target is :data:`TARGET_S` per case. The results go to
``benchmarks/cli_startup.json`` under the label, keeping the other labels there (before/after).
``tests/report/test_cli_startup.py`` runs the same cases and asserts that none of them loads a heavy
module; the time itself is measured here, never asserted in a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 1.0
HEAVY = ("torch", "transformers", "deepspeed", "scipy", "pandas", "matplotlib", "datasets")

# (argv, expected exit code): the bare dispatcher, then each command's --help and one argument error (and a
# sweep's --dry-run, which checks every point's values against the trainer's flags)
CASES: list[tuple[list[str], int]] = [
    (["--help"], 0),
    (["no-such-command"], 2),
    (["report", "--help"], 0),
    (["report", "--profile", "no-such-profile"], 2),
    (["sweep", "--help"], 0),
    (["sweep", "--profile", "no-such-profile", "--grid", "rm.contrastive_loss_beta=0"], 2),
    (["sweep", "--grid", "rm.max_steps=-5", "--dry-run"], 2),
    (["sweep", "--grid", "rm.contrastive_loss_beta=0,0.5", "--dry-run"], 0),
    (["train-rm", "--help"], 0),
    (["train-rm", "--max_steps", "-3"], 2),
    (["get-representation", "--help"], 0),
    (["get-representation", "--batch_size", "0"], 2),
    (["eval-rm", "--help"], 0),
    (["eval-rm", "--batch_size", "0"], 2),
    (["metrics", "--help"], 0),
    (["metrics", "--n_boot", "0"], 2),
    (["decode", "--help"], 0),
    (["decode", "nope"], 2),
    (["compare", "--help"], 0),
    (["compare"], 2),
    (["sync-notebooks", "--help"], 0),
    (["sync-notebooks", "--bogus"], 2),
    (["tiny-run", "--help"], 0),
    (["tiny-run", "--seed", "-1", "new-folder"], 2),
    (["tiny-run", "."], 2),
]

PROBE = """
import json, sys
from goalrm_core.cli import main
try:
    code = main({argv!r})
except SystemExit as exit:
    code = exit.code
print(json.dumps({{"code": code, "loaded": sorted(m for m in {heavy!r} if m in sys.modules)}}))
"""


def probe(argv: list[str], checkout: Path, python: str = sys.executable) -> tuple[float, dict, str]:
    """(wall seconds of the whole process, {"code", "loaded"}, stderr) of one case in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    t0 = time.perf_counter()
    done = subprocess.run(
        [python, "-c", PROBE.format(argv=argv, heavy=HEAVY)],
        capture_output=True,
        text=True,
        cwd=checkout,
        env=env,
        timeout=300,
    )
    wall = time.perf_counter() - t0
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"{' '.join(argv)}: no result (exit {done.returncode}): {done.stderr[-500:]}")
    return wall, json.loads(lines[-1]), done.stderr


def measure(checkout: Path, reps: int) -> dict:
    out = {}
    for argv, code in CASES:
        walls, result = [], None
        for _ in range(reps):
            wall, result, stderr = probe(argv, checkout)
            walls.append(wall)
        key = "goalrm " + " ".join(argv)
        out[key] = {
            "median_s": round(statistics.median(walls), 3),
            "min_s": round(min(walls), 3),
            "max_s": round(max(walls), 3),
            "n": reps,
            "exit": result["code"],
            "expected_exit": code,
            "heavy_loaded": result["loaded"],
        }
        print(
            f"{key:<60} {out[key]['median_s']:6.2f} s (range {out[key]['min_s']:.2f}-{out[key]['max_s']:.2f})  "
            f"exit {result['code']}  {','.join(result['loaded']) or '-'}",
            flush=True,
        )
    return out


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--checkout", default=str(ROOT), help="the checkout whose goalrm_core is measured (default: this one)"
    )
    parser.add_argument("--label", default="after", help="the name these figures are kept under in the results file")
    parser.add_argument("--reps", type=int, default=5, help="runs of each case (default: 5)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "cli_startup.json"))
    args = parser.parse_args(argv)
    checkout = Path(args.checkout).resolve()
    before = load_average()
    cases = measure(checkout, args.reps)
    out = Path(args.out)
    results = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    results["target_s"] = TARGET_S
    results["heavy_modules"] = list(HEAVY)
    results.setdefault("runs", {})[args.label] = {
        "commit": subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average_1_5_15_before_after": [before, load_average()],
        "reps": args.reps,
        "cases": cases,
        "worst_median_s": max(c["median_s"] for c in cases.values()),
        "over_target": sorted(k for k, c in cases.items() if c["median_s"] > TARGET_S),
    }
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    tmp.replace(out)
    print(f"worst median {results['runs'][args.label]['worst_median_s']:.2f} s (target {TARGET_S} s) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
