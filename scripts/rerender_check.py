"""Re-render the committed report pages from their committed metrics.json into a temp folder and diff
them against the committed files (52, item 2): reports/demo and reports/confident index.html (through
``goalrm report --index-only``'s :func:`rebuild_index`), the README's generated block and the committed
``goalrm compare`` outputs under reports/reproducibility/, and the sweep page
(reports/demo-sweep-ablations, its time of drawing aside). No training, no notebook runs.

    PYTHONPATH=$PWD .venv/bin/python scripts/rerender_check.py [--keep DIR]

Prints one line per page (identical / differs, with a unified diff of the differing lines) and exits 1
when any page differs. ``--keep DIR`` keeps what was drawn; ``--against DIR`` then diffs a later
drawing against that one (the code's own output before a change) rather than against the committed files."""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("demo", "confident")
SWEEPS = ("demo-sweep-ablations",)
GENERATED = re.compile(r"Generated [0-9T:+-]+")


def _diff(name: str, old: str, new: str) -> bool:
    if old == new:
        print(f"{name}: identical ({len(old)} chars)")
        return False
    print(f"{name}: DIFFERS")

    # split the one-line HTML at tags so the diff names the words that changed
    def split(t):
        return re.sub(r"(</(?:p|li|div|tr|h\d)>)", r"\1\n", t).splitlines(keepends=True)

    for line in difflib.unified_diff(split(old), split(new), "committed", "re-rendered", n=0):
        sys.stdout.write(line if line.endswith("\n") else line + "\n")
    return True


def main(argv=None) -> int:
    from goalrm_core.pipeline.status import rebuild_index
    from goalrm_core.report import readme
    from goalrm_core.report.compare import compare_runs, render_markdown
    from goalrm_core.report.metrics_view import load_metrics
    from goalrm_core.report.pages import refresh_navigation

    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", default=None, help="write the re-rendered pages here and keep them")
    parser.add_argument(
        "--against",
        default=None,
        help="diff against an earlier --keep folder (the code's output before a change) instead of the committed files",
    )
    args = parser.parse_args(argv)
    base = Path(args.against) if args.against else None

    def reference(committed: Path, kept: Path) -> str:
        return (kept if base else committed).read_text(encoding="utf-8")

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rerender-"))
    reports = tmp / "reports"
    if reports.exists():
        shutil.rmtree(reports)
    shutil.copytree(ROOT / "reports", reports, ignore=shutil.ignore_patterns("*.ipynb", "*.png"))
    differs = False
    for name in PAGES:
        # each stage page's navigation bar drawn again (goalrm report refreshes it after every stage)
        stages = [s["name"] for s in json.loads((reports / name / "status.json").read_text(encoding="utf-8"))["stages"]]
        refresh_navigation(reports / name, stages)
        nav_differs = [
            stage
            for stage in stages
            if (reports / name / f"{stage}.html").is_file()
            and (reports / name / f"{stage}.html").read_bytes()
            != (ROOT / "reports" / name / f"{stage}.html").read_bytes()
        ]
        print(
            f"reports/{name} stage pages' navigation: "
            + (f"DIFFERS in {', '.join(nav_differs)}" if nav_differs else f"identical ({len(stages)} pages)")
        )
        differs |= bool(nav_differs)
        page = rebuild_index(reports / name)
        differs |= _diff(
            f"reports/{name}/index.html",
            reference(ROOT / "reports" / name / "index.html", (base or tmp) / "reports" / name / "index.html"),
            page.read_text(encoding="utf-8"),
        )
    for sweep in SWEEPS:  # a sweep's page, its time of drawing aside
        from goalrm_core.report import sweep_page

        page = sweep_page.write_comparison(reports / sweep)
        drawn = GENERATED.sub("Generated (time)", page.read_text(encoding="utf-8"))
        (page).write_text(drawn, encoding="utf-8")
        differs |= _diff(
            f"reports/{sweep}/index.html (time of drawing aside)",
            GENERATED.sub(
                "Generated (time)",
                reference(ROOT / "reports" / sweep / "index.html", (base or tmp) / "reports" / sweep / "index.html"),
            ),
            drawn,
        )
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index(readme.BEGIN) : text.index(readme.END) + len(readme.END)]
    new = f"{readme.BEGIN}\n{readme.findings(reports / 'demo', reports / 'reproducibility')}{readme.END}"
    (tmp / "README-block.md").write_text(new, encoding="utf-8")
    differs |= _diff(
        "README.md generated block", (base / "README-block.md").read_text(encoding="utf-8") if base else block, new
    )
    for committed in sorted((ROOT / "reports" / "reproducibility").glob("compare-*.md")):
        rerun = committed.stem[len("compare-") :]
        a, b = "reports/demo", f"reports/reproducibility/{rerun}"
        out = render_markdown(compare_runs(load_metrics(ROOT / a), load_metrics(ROOT / b)), a, b) + "\n"
        (tmp / committed.name).write_text(out, encoding="utf-8")
        differs |= _diff(str(committed.relative_to(ROOT)), reference(committed, (base or tmp) / committed.name), out)
    if not args.keep:
        shutil.rmtree(tmp)
    return 1 if differs else 0


if __name__ == "__main__":
    raise SystemExit(main())
