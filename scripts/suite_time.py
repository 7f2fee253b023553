"""How long the README's two commands take, with the machine's speed beside each time.

    python scripts/suite_time.py --record     # runs the suite as `make test` does, writes benchmarks/suite.json
    python scripts/suite_time.py --readme     # rewrites the README's timing table (no run)
    python scripts/suite_time.py --check      # changes nothing; exit 1 when the README's table differs

`make test`'s row comes from ``benchmarks/suite.json`` (what ``--record`` measured: the pytest wall time, the
counts from pytest's JUnit XML, the commit, the load average before and after, and this machine's fp32 matmul
rate). `make report`'s row comes from the committed demo report (``reports/demo/status.json`` for the stage
times, its ``metrics.json`` provenance for the machine's speed when it ran). A time means something only beside
that speed: the same CPU model has run the demo at speeds three times apart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core.generated_block import update_file  # noqa: E402

RECORD = ROOT / "benchmarks" / "suite.json"
REPORT = ROOT / "reports" / "demo"
README = ROOT / "README.md"
BEGIN = (
    "<!-- begin: generated from benchmarks/suite.json and reports/demo by `python scripts/suite_time.py --readme`; "
    "do not edit by hand -->"
)
END = "<!-- end: generated from benchmarks/suite.json and reports/demo -->"
# pytest's arguments in the Makefile's `test` target: two workers, the smoke report's readers kept in one
MAKE_TEST = ["-q", "-n", "2", "--dist", "loadgroup"]


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def duration(seconds: float) -> str:
    """``1468`` -> ``"24 min 28 s"``; under a minute, seconds alone.

    >>> duration(1468), duration(3055.4), duration(42)
    ('24 min 28 s', '50 min 55 s', '42 s')
    """
    s = int(round(seconds))
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def speed(machine: Mapping[str, Any]) -> str:
    """``"2 cores, fp32 matmul 68 GFLOP/s at 2 threads"`` from a record's or a provenance's ``machine``."""
    parts = [f"{machine['cores']} cores"] if isinstance(machine.get("cores"), int) else []
    rate = machine.get("speed", {})
    if isinstance(rate, Mapping) and isinstance(rate.get("matmul_gflops"), (int, float)):
        parts.append(f"fp32 matmul {rate['matmul_gflops']:.0f} GFLOP/s at {rate.get('threads', '?')} threads")
    return ", ".join(parts) or "machine not recorded"


def junit_counts(xml: Path) -> dict:
    """Tests, passed, failed, errors and skipped from pytest's ``--junitxml`` file."""
    root = ET.parse(xml).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    return {
        "tests": counts["tests"],
        "passed": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"],
        "failed": counts["failures"],
        "errors": counts["errors"],
        "skipped": counts["skipped"],
    }


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def record(pytest_args: list[str], out: Path = RECORD) -> int:
    """Run the suite as `make test` does (``python -m pytest`` with ``MAKE_TEST``), time it and write ``out``."""
    from goalrm_core.threads import matmul_gflops

    threads = int(os.environ.get("OMP_NUM_THREADS") or 0) or (os.cpu_count() or 1)
    before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        start = time.monotonic()
        code = subprocess.call(
            [sys.executable, "-m", "pytest", *MAKE_TEST, f"--junitxml={xml}", *pytest_args], cwd=ROOT
        )
        seconds = time.monotonic() - start
        counts = junit_counts(xml) if xml.is_file() else {}
    rec = {
        "recorded_by": "python scripts/suite_time.py --record",
        "command": ["python", "-m", "pytest", *MAKE_TEST, *pytest_args],
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "commit": _git("rev-parse", "HEAD")[:7],
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "exit_code": code,
        "seconds": round(seconds, 1),
        **counts,
        "load_average_1_5_15_before_after": [before, [round(x, 2) for x in os.getloadavg()]],
        "machine": {
            "cores": os.cpu_count(),
            "speed": {"matmul_gflops": round(matmul_gflops(threads), 1), "threads": threads},
        },
    }
    out.write_text(json.dumps(rec, indent=1) + "\n", encoding="utf-8")
    print(f"{out}: {duration(seconds)}, exit code {code}")
    return code


def table(
    suite: Mapping[str, Any],
    metrics: Mapping[str, Any],
    status: Mapping[str, Any],
    pair: Mapping[str, Any] | None = None,
) -> str:
    """The README's table: each command, how long it took, and on what; then, where ``pair``
    (``benchmarks/pair_b54e8af.json``) is recorded, both commands' time as a share of ``b54e8af``'s."""
    rows = ["| command | how long it took | measured on |", "|---|---|---|"]
    if suite:
        where = f"code `{suite.get('commit', '?')}`" + (" with local changes" if suite.get("dirty") else "")
        counts = (
            f"{suite['tests']:,} tests: {suite['passed']:,} passed, {suite['skipped']:,} skipped"
            + (
                f", {suite['failed'] + suite.get('errors', 0):,} failed"
                if suite.get("failed") or suite.get("errors")
                else ""
            )
            if isinstance(suite.get("tests"), int)
            else "counts not recorded"
        )
        rows.append(
            f"| `make test` | {duration(suite['seconds'])} of pytest ({counts}; {where}, {suite.get('date', '?')}) "
            f"| {speed(suite.get('machine', {}))} |"
        )
    stages = status.get("stages", [])
    if stages:
        total = sum(s.get("duration_s") or 0 for s in stages)
        state = "one uninterrupted run" if all(s.get("status") == "ok" for s in stages) else "resumed: some stages kept"
        rows.append(
            f"| `make report` | {duration(total)} for the five notebooks of the committed `reports/demo/` ({state}) "
            f"| {speed(metrics.get('provenance', {}).get('machine', {}))} |"
        )
    demo, tests = (pair or {}).get("demo"), (pair or {}).get("suite")
    if demo and tests:
        rows.append(
            f"| both, against `b54e8af` | the demo (code `{demo['new']['commit']}`) "
            f"in {demo['ratio_new_over_old']['total']:.2f}x "
            f"and `make test` (code `{tests['new'].get('commit', '?')}`) "
            f"in {tests['ratio_new_over_old']:.2f}x of `b54e8af`'s "
            f"time, one run each on one machine ([docs/performance.md](docs/performance.md)) | "
            f"{speed(tests['new'].get('machine', {}))} |"
        )
    return "\n".join(rows) + "\n"


def block(root: Path = ROOT) -> str:
    text = table(
        _read(root / "benchmarks" / "suite.json"),
        _read(root / "reports" / "demo" / "metrics.json"),
        _read(root / "reports" / "demo" / "status.json"),
        _read(root / "benchmarks" / "pair_b54e8af.json"),
    )
    return f"{BEGIN}\n{text}{END}"


def update(readme: Path, new_block: str, write: bool) -> bool:
    """Put ``new_block`` where the README's block is; return whether it differed."""
    return update_file(readme, BEGIN, END, new_block, write, what="generated timing block")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/suite_time.py", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--record", action="store_true", help="run the suite as `make test` does, write benchmarks/suite.json"
    )
    mode.add_argument(
        "--readme", action="store_true", help="rewrite the README's timing table from the committed records"
    )
    mode.add_argument("--check", action="store_true", help="change nothing; exit 1 when the README's table differs")
    args, pytest_args = parser.parse_known_args(argv)
    if args.record:
        code = record(pytest_args)
        update(README, block(), write=True)
        return code
    if pytest_args:
        parser.error(f"unrecognised arguments: {' '.join(pytest_args)}")
    differs = update(README, block(), write=args.readme)
    if args.check and differs:
        print(
            "README.md's timing table differs from its records: run `python scripts/suite_time.py --readme`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
