"""The whole demo and the test suite at ``b54e8af`` and at today's code, on one machine, side by side.

    python benchmarks/pair_b54e8af.py demo OLD_REPORT NEW_REPORT # two scratch `goalrm report --profile demo` folders
    python benchmarks/pair_b54e8af.py suite OLD_LOG              # the old `make test` log, beside benchmarks/suite.json
    python benchmarks/pair_b54e8af.py --doc                      # docs/performance.md's block from the JSON

Both demos are scratch runs (never the committed report), every RM trained (a fresh run folder, so no RM
store is prefilled), one after the other on a machine with nothing else running; ``demo`` reads each
folder's ``status.json`` (stage seconds) and ``metrics.json`` (the code it ran on, the machine's fp32 matmul
rate when it started, the training stage's per-RM wall times, the data stage's parts where recorded).
``suite`` reads the old suite's log (``/usr/bin/time -v make test`` in a clone at ``b54e8af``, with
``uptime`` before and after) and today's ``benchmarks/suite.json`` (``scripts/suite_time.py --record``).
One run of each: a ratio here has no spread, and says so.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core.generated_block import update_file  # noqa: E402

RESULTS = ROOT / "benchmarks" / "pair_b54e8af.json"
DOC = ROOT / "docs" / "performance.md"
BEGIN = (
    "<!-- begin: generated from benchmarks/pair_b54e8af.json by `python benchmarks/pair_b54e8af.py --doc`; "
    "do not edit by hand -->"
)
END = "<!-- end: generated from benchmarks/pair_b54e8af.json -->"


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def demo_side(report: Path) -> dict:
    """One scratch demo: its stage seconds, the code and machine speed it ran with, its RMs' wall times."""
    status, metrics = _read(report / "status.json"), _read(report / "metrics.json")
    stages = {s["name"]: s["duration_s"] for s in status["stages"] if s.get("status") == "ok"}
    prov = metrics.get("provenance", {})
    side = {
        "report": str(report),
        "commit": prov.get("git", {}).get("commit", "")[:7],
        "dirty": prov.get("git", {}).get("dirty"),
        "matmul_gflops": prov.get("machine", {}).get("speed", {}).get("matmul_gflops"),
        "stages_s": stages,
        "total_s": round(sum(stages.values()), 1),
    }
    data_parts = metrics.get("timings", {}).get("data", {})
    if isinstance(data_parts, dict) and len(data_parts) > 1:
        side["data_parts_s"] = {k: v for k, v in data_parts.items() if isinstance(v, (int, float))}
    return side


def demo(old: Path, new: Path, others: list[Path] = (), note: str = "") -> dict:
    """The pair, and any other run of either side kept beside it (``others``: not in the ratio)."""
    a, b = demo_side(old), demo_side(new)
    ratio = {
        name: round(b["stages_s"][name] / s, 3) for name, s in a["stages_s"].items() if name in b["stages_s"] and s
    }
    ratio["total"] = round(b["total_s"] / a["total_s"], 3)
    out = {"old": a, "new": b, "ratio_new_over_old": ratio, "runs": 1, "note": note}
    if others:
        out["other_runs"] = [demo_side(p) for p in others]
    return out


def suite(old_log: Path, new_record: Path) -> dict:
    """The old suite's seconds and counts from its log; today's from benchmarks/suite.json."""
    text = old_log.read_text(encoding="utf-8")
    summary = re.findall(r"(\d+) passed(?:, (\d+) skipped)?.* in ([\d.]+)s", text)
    if not summary:
        raise SystemExit(f"{old_log}: no pytest summary line ('N passed ... in Ss')")
    passed, skipped, seconds = summary[-1]
    loads = re.findall(r"load average: ([\d.]+), ([\d.]+), ([\d.]+)", text)
    new = _read(new_record)
    old_side = {
        "commit": "b54e8af",
        "command": "make test (pytest -q, one process)",
        "seconds": float(seconds),
        "passed": int(passed),
        "skipped": int(skipped or 0),
        "load_average_before_after": [[float(x) for x in loads[0]], [float(x) for x in loads[-1]]] if loads else None,
    }
    new_side = {
        k: new[k]
        for k in ("commit", "dirty", "seconds", "passed", "skipped", "load_average_1_5_15_before_after", "machine")
        if k in new
    }
    new_side["command"] = " ".join(new.get("command", []))
    return {
        "old": old_side,
        "new": new_side,
        "ratio_new_over_old": round(new["seconds"] / float(seconds), 3),
        "runs": 1,
    }


def table(r: dict) -> str:
    lines = ["| what | b54e8af | now | now / b54e8af |", "| --- | --- | --- | --- |"]
    d = r.get("demo")
    if d:
        for name, ratio in d["ratio_new_over_old"].items():
            old = d["old"]["total_s"] if name == "total" else d["old"]["stages_s"][name]
            new = d["new"]["total_s"] if name == "total" else d["new"]["stages_s"][name]
            lines.append(f"| demo, {name.split('_', 1)[-1]} | {old:.0f} s | {new:.0f} s | {ratio:.2f} |")
    s = r.get("suite")
    if s:
        lines.append(
            f"| `make test`, pytest seconds | {s['old']['seconds']:.0f} s ({s['old']['passed']} passed) | "
            f"{s['new']['seconds']:.0f} s ({s['new']['passed']} passed) | {s['ratio_new_over_old']:.2f} |"
        )
    speeds = sorted(
        {x for x in ((d or {}).get("old", {}).get("matmul_gflops"), (d or {}).get("new", {}).get("matmul_gflops")) if x}
    )
    where = (
        f"; fp32 matmul {' and '.join(f'{x:.0f}' for x in speeds)} GFLOP/s at 2 threads when the demos started"
        if speeds
        else ""
    )
    lines.append("")
    lines.append(f"One run of each, one after the other on one 2-core machine{where}; a ratio without spread.")
    if d and d.get("note"):
        lines.append(d["note"])
    for other in (d or {}).get("other_runs", []):
        lines.append(
            f"Another run, not in the ratio: `{other['commit']}` {other['total_s']:.0f} s "
            f"({', '.join(f'{k.split(chr(95), 1)[-1]} {v:.0f}' for k, v in other['stages_s'].items())} s)."
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what")
    p = sub.add_parser("demo")
    p.add_argument("old", type=Path)
    p.add_argument("new", type=Path)
    p.add_argument(
        "--other", type=Path, action="append", default=[], help="another run kept beside the pair, not in the ratio"
    )
    p.add_argument("--note", default="", help="how the runs were made (order, load)")
    p = sub.add_parser("suite")
    p.add_argument("old_log", type=Path)
    p.add_argument("--new", type=Path, default=ROOT / "benchmarks" / "suite.json")
    parser.add_argument("--doc", action="store_true", help="write docs/performance.md's block from the JSON")
    args = parser.parse_args(argv)
    results = _read(RESULTS) if RESULTS.exists() else {}
    if args.what == "demo":
        results["demo"] = demo(args.old, args.new, args.other, args.note)
    elif args.what == "suite":
        results["suite"] = suite(args.old_log, args.new)
    if args.what:
        RESULTS.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    if args.doc:
        update_file(DOC, BEGIN, END, f"{BEGIN}\n{table(results)}\n{END}", write=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
