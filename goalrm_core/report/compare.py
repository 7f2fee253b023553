"""``goalrm compare RUN_A RUN_B``: do two runs of the report agree? Reads two ``metrics.json``
(a report folder, or the file itself) and says, figure by figure and conclusion by conclusion, whether
a rerun (another policy seed, another thread count) reproduces the committed report.

    goalrm compare reports/demo reports/demo-seed1 --out compare.md

**Figures.** A figure agrees when the 95% interval of the difference B − A includes 0. With per-seed
values on both sides (``stats.across_seeds`` figures, schema 2) the interval is Welch's t interval of
the difference of means; with a mean and its t-interval over ``n`` seeds on each side (``training``,
``evaluation.seeds``) it is Welch's interval too, each side's standard error recovered from its
interval; with only a point estimate and a 95% interval per run (the seed-0 bootstrap figures) it is a
normal approximation, se = (high − low) / (2·1.96) on each side. Each row says which method it used.
A figure that is undefined (null, NaN) on either side is "undefined", never an error.

**Conclusions.** Each conclusion has a verdict in each run (passed/failed, better/worse/not shown,
holds/reversed/not shown/not tested, or undefined; the across-seed ones are the records of
:mod:`~goalrm_core.report.conclusions`, with the notes worded there); it *holds in both* when both runs reach the same
defined verdict (a "not tested" one, whose mechanism was switched off, is no finding either way).
Across-seed conclusions (schema 2) are two-sided (`evaluation.verdicts`: a difference significant the
unexpected way is "reversed", never "not shown"; a "not shown" carries the effect the run would have
seen with 80% power, where it recorded one); seed-0 conclusions
(both schemas) read the bootstrap interval (does it exclude 0, and on which side) or the point
estimates where no interval is recorded (filtering and pruning).

**Threads.** Floats depend on the CPU threads a stage computed with: a stage whose ``threads``
differ between the runs is flagged (schema 1 records none per stage: ``provenance.threads.used``,
the run's count, stands in).

A schema-1 run read against a schema-2 run is compared on what both have (the seed-0 detail figures
exist in both); the figures and conclusions one side lacks are listed apart.

Library: :func:`compare_runs` (two metrics mappings → a structured result), :func:`render_markdown`,
:func:`~goalrm_core.report.metrics_view.load_metrics`; the figures and their intervals are read in
:mod:`~goalrm_core.report.compare_figures`,
the conclusions and their verdicts in :mod:`~goalrm_core.report.compare_conclusions`. Exit 0 whenever
the comparison was made (disagreement is a result, not an error); a missing or malformed ``metrics.json`` is one line
on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Mapping

from goalrm_core.flags import run_command
from goalrm_core.report.compare_conclusions import collect_conclusions
from goalrm_core.report.compare_figures import GROUPS, METHODS, NOT_STAGES, collect_figures, compare_figure
from goalrm_core.report.metrics_view import load_metrics, metrics_schema, section

# --------------------------------------------------------------------------------------- threads


def stage_threads(m: Mapping) -> dict[str, tuple[int | None, str | None]]:
    """``{stage: (threads, where it was read)}`` of one run: the stage's own ``threads`` (schema 2),
    else the run's ``provenance.threads.used`` (schema 1); plus a ``provenance`` row of its own."""
    recorded = section(m, "provenance", "threads").get("used")
    run_threads = recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else None
    out: dict[str, tuple[int | None, str | None]] = {}
    for stage, node in m.items():
        if stage in NOT_STAGES or not isinstance(node, Mapping):
            continue
        t = node.get("threads")
        if isinstance(t, int) and not isinstance(t, bool):
            out[stage] = (t, "stage")
        elif run_threads is not None:
            out[stage] = (run_threads, "provenance")
        else:
            out[stage] = (None, None)
    if "provenance" in m:
        out["provenance"] = (run_threads, "provenance" if run_threads is not None else None)
    return out


# ----------------------------------------------------------------------------------- the whole


def _paired_figures(fa: Mapping[str, dict], fb: Mapping[str, dict]) -> list[dict]:
    """Every figure both runs have, compared (A's order, then grouped in report order)."""
    figures = []
    for name, sa in fa.items():
        if name in fb:
            sb = fb[name]
            group = (
                sa["group"]
                if sa["group"] == sb["group"]
                else "across_seeds"
                if "across_seeds" in (sa["group"], sb["group"])
                else sa["group"]
            )
            figures.append({"name": name, "group": group, "a": sa, "b": sb, **compare_figure(sa, sb)})
    figures.sort(key=lambda f: list(GROUPS).index(f["group"]))  # stable: report order within a group
    return figures


def _paired_conclusions(ca: Mapping[str, dict], cb: Mapping[str, dict]) -> list[dict]:
    """Every conclusion both runs have, with both verdicts and whether it holds in both."""
    conclusions = []
    for cid, x in ca.items():
        if cid in cb:
            y = cb[cid]
            defined = not {"undefined", "not tested"} & {
                x["verdict"],
                y["verdict"],
            }  # a switched-off mechanism is no finding
            conclusions.append(
                {
                    "id": cid,
                    "label": x["label"],
                    "basis": x["basis"],
                    "a": x["verdict"],
                    "b": y["verdict"],
                    "holds_in_both": (x["verdict"] == y["verdict"]) if defined else None,
                    "note_a": x["note"],
                    "note_b": y["note"],
                }
            )
    return conclusions


def _thread_rows(ta: Mapping[str, tuple], tb: Mapping[str, tuple]) -> list[dict]:
    """One row per stage either run records (A's first): each run's thread count, where it came from, and
    whether they differ."""
    threads = []
    for stage in list(ta) + [s for s in tb if s not in ta]:
        (na, src_a), (nb, src_b) = ta.get(stage, (None, None)), tb.get(stage, (None, None))
        threads.append(
            {
                "stage": stage,
                "a": na,
                "b": nb,
                "a_source": src_a,
                "b_source": src_b,
                "mismatch": None if na is None or nb is None else na != nb,
            }
        )
    return threads


def _lacking(fa: Mapping, fb: Mapping, ca: Mapping[str, dict], cb: Mapping[str, dict]) -> dict:
    """What each run lacks: the figures and conclusions only the other has."""
    return {
        "a": {
            "figures": [n for n in fb if n not in fa],
            "conclusions": [cb[c]["label"] + f" [{cb[c]['basis']}]" for c in cb if c not in ca],
        },
        "b": {
            "figures": [n for n in fa if n not in fb],
            "conclusions": [ca[c]["label"] + f" [{ca[c]['basis']}]" for c in ca if c not in cb],
        },
    }


def _counts(figures: list[dict], conclusions: list[dict]) -> dict:
    """The comparison's counts: figures compared, agreeing, disagreeing, undefined; the same for conclusions."""
    return {
        "figures": len(figures),
        "figures_agree": sum(f["agree"] is True for f in figures),
        "figures_disagree": sum(f["agree"] is False for f in figures),
        "figures_undefined": sum(f["agree"] is None for f in figures),
        "conclusions": len(conclusions),
        "conclusions_hold_in_both": sum(c["holds_in_both"] is True for c in conclusions),
        "conclusions_differ": sum(c["holds_in_both"] is False for c in conclusions),
        "conclusions_undefined": sum(c["holds_in_both"] is None for c in conclusions),
    }


def compare_runs(a: Mapping, b: Mapping) -> dict:
    """Compare the metrics of run A and run B.

    Returns ``{"schema": {"a", "b"}, "figures": [...], "conclusions": [...], "threads": [...],
    "thread_mismatches": [stage, ...], "lacking": {"a": {"figures", "conclusions"}, "b": {...}},
    "summary": {counts}}``: ``figures`` holds every figure both runs have (``name``, ``group``, each
    run's summary under ``a``/``b``, ``difference`` B − A with ``ci_low``/``ci_high``, ``method``,
    ``agree`` True/False/None and ``reason``); ``conclusions`` every conclusion both have (``id``,
    ``label``, ``basis``, verdicts ``a``/``b``, ``holds_in_both`` True when both runs reach the same
    defined verdict, False when they differ, None when either is undefined); ``threads`` one row per
    stage (``mismatch`` True/False, None when either run did not record it); ``lacking["a"]`` the
    names only B has (what A lacks), ``lacking["b"]`` the converse.
    """
    a, b = section(a), section(b)
    fa, fb = collect_figures(a), collect_figures(b)
    figures = _paired_figures(fa, fb)
    ca, cb = collect_conclusions(a), collect_conclusions(b)
    conclusions = _paired_conclusions(ca, cb)
    threads = _thread_rows(stage_threads(a), stage_threads(b))
    lacking, summary = _lacking(fa, fb, ca, cb), _counts(figures, conclusions)
    return {
        "schema": {"a": metrics_schema(a), "b": metrics_schema(b)},
        "figures": figures,
        "conclusions": conclusions,
        "threads": threads,
        "thread_mismatches": [t["stage"] for t in threads if t["mismatch"]],
        "lacking": lacking,
        "summary": summary,
    }


# ------------------------------------------------------------------------------------- markdown


def _g(x: float | None, sign: bool = False) -> str:
    if x is None:
        return "—"
    return f"{x:+.4g}" if sign else f"{x:.4g}"


def _cell(s: dict) -> str:
    if s["value"] is None:
        return "undefined"
    text = _g(s["value"])
    if s["ci_low"] is not None and s["ci_high"] is not None:
        text += f" [{_g(s['ci_low'])}, {_g(s['ci_high'])}]"
    if s["kind"] == "per_seed" or (s["kind"] == "t_interval" and s.get("n")):
        text += f" ({s['n']} seed{'' if s['n'] == 1 else 's'})"
    return text


def _esc(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _schema_text(v: int | None) -> str:
    if v == 1:
        return "schema 1 (seed-0 figures with bootstrap CIs)"
    if v == 2:
        return "schema 2 (figures across RM seeds, and the seed-0 detail)"
    return f"schema {v if v is not None else '?'}"


def _head_lines(result: Mapping, name_a: str, name_b: str) -> list[str]:
    """The title and the verdict in a few bullets: each run's schema, the counts, the thread mismatches."""
    s = result["summary"]
    lines = [
        f"# Do the runs agree? A = `{name_a}`, B = `{name_b}`",
        "",
        f"- run A: {_schema_text(result['schema']['a'])}",
        f"- run B: {_schema_text(result['schema']['b'])}",
        f"- figures: {s['figures']} compared, {s['figures_agree']} agree, {s['figures_disagree']} disagree, "
        f"{s['figures_undefined']} undefined (a figure agrees when the 95% interval of B − A includes 0)",
        f"- conclusions: {s['conclusions']} compared, {s['conclusions_hold_in_both']} hold in both, "
        f"{s['conclusions_differ']} differ, {s['conclusions_undefined']} undefined",
    ]
    mismatches = result["thread_mismatches"]
    lines.append(
        f"- threads: **mismatch in {', '.join(mismatches)}**: floats depend on the thread count, so differences there "
        "may come from it"
        if mismatches
        else "- threads: no mismatch recorded"
    )
    lines.append("")
    return lines


def _thread_lines(threads: list[Mapping]) -> list[str]:
    """The threads table: each stage's thread count in both runs and whether they match."""

    def th(n, src):
        return "not recorded" if n is None else f"{n}" + (" (provenance)" if src == "provenance" else "")

    lines = ["## Threads", "", "| stage | run A | run B | match? |", "|---|---|---|---|"]
    for t in threads:
        match = "not recorded" if t["mismatch"] is None else "**no**" if t["mismatch"] else "yes"
        lines.append(f"| {_esc(t['stage'])} | {th(t['a'], t['a_source'])} | {th(t['b'], t['b_source'])} | {match} |")
    if not threads:
        lines.append("| (none recorded) | | | |")
    lines.append("")
    return lines


def _conclusion_lines(conclusions: list[Mapping]) -> list[str]:
    """The conclusions table: each conclusion's verdict in both runs (with its note) and whether it holds in both."""
    lines = [
        "## Conclusions",
        "",
        "A conclusion holds in both when both runs reach the same verdict.",
        "",
        "| conclusion | basis | A | B | holds in both? |",
        "|---|---|---|---|---|",
    ]
    for c in conclusions:
        both = "undefined" if c["holds_in_both"] is None else "yes" if c["holds_in_both"] else "**no**"
        va = c["a"] + (f" ({_esc(c['note_a'])})" if c.get("note_a") else "")
        vb = c["b"] + (f" ({_esc(c['note_b'])})" if c.get("note_b") else "")
        lines.append(f"| {_esc(c['label'])} | {c['basis']} | {va} | {vb} | {both} |")
    if not conclusions:
        lines.append("| (no conclusion both runs record) | | | | |")
    lines.append("")
    return lines


def _figure_lines(figures: list[Mapping]) -> list[str]:
    """The figures, one table per group: both runs' values, the difference B − A and whether they agree."""
    lines = ["## Figures", ""]
    for group, title in GROUPS.items():
        rows = [f for f in figures if f["group"] == group]
        if not rows:
            continue
        lines += [
            f"### {title}",
            "",
            "| figure | run A | run B | difference B − A [95% CI] | agree? | method |",
            "|---|---|---|---|---|---|",
        ]
        for f in rows:
            if f["agree"] is None:
                diff, agree = f"— ({f['reason']})", "undefined"
            else:
                diff = f"{_g(f['difference'], True)} [{_g(f['ci_low'], True)}, {_g(f['ci_high'], True)}]"
                agree = "yes" if f["agree"] else "**no**"
            lines.append(
                f"| {_esc(f['name'])} | {_cell(f['a'])} | {_cell(f['b'])} | {diff} | {agree} | "
                f"{METHODS.get(f['method'], '—')} |"
            )
        lines.append("")
    if not figures:
        lines += ["No figure is recorded in both runs.", ""]
    return lines


def _lacking_lines(lack: Mapping) -> list[str]:
    """What each run lacks that the other has, or nothing where they hold the same."""
    if not any(lack[side][kind] for side in ("a", "b") for kind in ("figures", "conclusions")):
        return []
    lines = ["## What one run lacks", ""]
    for side, other in (("a", "B"), ("b", "A")):
        for kind in ("figures", "conclusions"):
            names = lack[side][kind]
            if names:
                lines.append(
                    f"- run {side.upper()} lacks {len(names)} {kind} that run {other} has: "
                    + ", ".join(f"`{_esc(n)}`" for n in names)
                )
    lines.append("")
    return lines


def render_markdown(result: Mapping, name_a: str = "A", name_b: str = "B") -> str:
    """The comparison as a Markdown report: the verdict in a sentence, threads, conclusions, figures
    (one table per group) and what each run lacks."""
    lines = [
        *_head_lines(result, name_a, name_b),
        *_thread_lines(result["threads"]),
        *_conclusion_lines(result["conclusions"]),
        *_figure_lines(result["figures"]),
        *_lacking_lines(result["lacking"]),
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="goalrm compare", description="Do two runs of the report agree? Compares two metrics.json."
    )
    p.add_argument("run_a", help="run A: a report folder (e.g. reports/demo) or its metrics.json")
    p.add_argument(
        "run_b", help="run B: a report folder or its metrics.json (a rerun: another seed, another thread count)"
    )
    p.add_argument("--out", default=None, help="also write the Markdown report to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    a, b = load_metrics(args.run_a), load_metrics(args.run_b)
    text = render_markdown(compare_runs(a, b), args.run_a, args.run_b)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0  # disagreement is a result, not an error


if __name__ == "__main__":
    sys.exit(run_command(main, sys.argv[1:], "goalrm compare"))
