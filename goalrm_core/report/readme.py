"""The README's numbers, generated from the committed demo report so that they cannot drift from it.

``python -m goalrm_core.report.readme`` rewrites the block of README.md between :data:`BEGIN` and
:data:`END` from ``reports/demo/metrics.json`` and ``status.json`` (and, where they are committed,
the reproducibility reruns' ``metrics.json`` under ``reports/reproducibility/``); ``--check`` changes
nothing and exits 1 when the README differs (a test runs it). Every figure in that block is read
from those files; the prose around it quotes no number.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Mapping

from goalrm_core.evaluation.auroc import delta_of
from goalrm_core.evaluation.verdicts import policy_scope
from goalrm_core.generated_block import update_file
from goalrm_core.report import regimes
from goalrm_core.report.conclusions import conclusions
from goalrm_core.report.formats import across, ci, fixed
from goalrm_core.report.metrics_view import detail_seed, read_metrics
from goalrm_core.report.provenance import speed_text
from goalrm_core.report.reproduction import reruns_of, verdicts
from goalrm_core.study.formatting import order_benchmarks
from goalrm_core.study.recipe import renamed

BEGIN = "<!-- begin: generated from reports/demo by `python -m goalrm_core.report.readme`; do not edit by hand -->"
END = "<!-- end: generated from reports/demo -->"
REPORT = Path("reports/demo")
RERUNS = Path("reports/reproducibility")


def _read_status(report: Path) -> dict:
    """The report's ``status.json`` (what ran and for how long), ``{}`` where there is none."""
    path = report / "status.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _benches(ev: Mapping) -> list[str]:
    return order_benchmarks(ev.get("delta_auroc", {}))


def _deterministic(metrics: Mapping) -> dict:
    """``metrics`` without what differs between identical runs (timings, provenance, thread counts)."""
    out = {k: v for k, v in metrics.items() if k not in ("timings", "provenance")}
    return {
        k: ({kk: vv for kk, vv in v.items() if kk != "threads"} if isinstance(v, dict) else v) for k, v in out.items()
    }


def _commit(metrics: dict) -> str:
    """The short commit a run's code was at (from its provenance), marked where it had local changes."""
    git = metrics.get("provenance", {}).get("git", {})
    commit = git.get("commit")
    if not isinstance(commit, str) or not commit:
        return "unknown"
    return f"`{commit[:7]}`" + (" with local changes" if git.get("dirty") else "")


def _reruns(report: Path, reruns: Path) -> dict[str, dict]:
    """The reproducibility reruns' metrics by folder name (the report's own reruns where ``reruns`` is its folder)."""
    if reruns == report.parent / "reproducibility":
        return reruns_of(report)
    return {p.name: m for p in sorted(reruns.glob("*")) if (m := read_metrics(p, strict=True)) is not None}


def _rerun_lines(metrics: Mapping, rerun_runs: Mapping[str, dict]) -> list[str]:
    """The sentences under the conclusions table that name each rerun and say whether it is bit-identical."""
    out = [
        "Reruns compared (`goalrm compare`, committed beside them): "
        f"{', '.join(f'`{n}`' for n in rerun_runs)}; "
        f'the committed report ran code {_commit(metrics)}. A verdict is "absent" where a rerun\'s code did '
        "not compute that conclusion, and a rerun on other code differs by that code as well as by its "
        "overrides."
    ]
    for name, m in rerun_runs.items():
        same = _deterministic(m) == _deterministic(metrics)
        threads = sorted(
            {v["threads"] for v in m.values() if isinstance(v, dict) and isinstance(v.get("threads"), int)}
        )
        overrides = m.get("provenance", {}).get("profile", {}).get("overrides", {})
        out.append(
            f"`{name}` ({', '.join(f'{k}: {v}' for k, v in overrides.items()) or 'no overrides'}; "
            f"threads {', '.join(map(str, threads))}; code {_commit(m)}): its metrics are "
            f"{'**bit-identical** to' if same else 'not identical to'} the committed report, "
            f"timings, provenance and thread counts aside."
        )
    return out


def _conclusion_lines(metrics: Mapping, params: Mapping, rerun_runs: Mapping[str, dict]) -> list[str]:
    """The primary conclusions' table (with each verdict's agreement across the reruns), the gate and the
    reruns' sentences; nothing where the report drew no conclusion."""
    rows = conclusions(metrics)
    if not rows:
        return []
    primary = metrics.get("evaluation", {}).get("primary", {})
    runs = [metrics, *rerun_runs.values()]
    interval = primary.get("interval") or "RM seeds only (a t-interval; the questions held fixed)"
    out = [
        f"Every conclusion below is {policy_scope(primary.get('policy_seeds') or [params.get('seed')])}; "
        f'its 95% interval is over {interval}. A verdict is two-sided: "reversed" where the interval lies '
        'wholly on the unexpected side; "not tested" where the mechanism was switched off.',
        "",
    ]
    header = "| primary conclusion | RM | mean over seeds [95% interval] | seeds the expected way | verdict |"
    if rerun_runs:
        header += f" same verdict in all {len(runs)} runs |"
    out += [header, "|" + "---|" * (header.count("|") - 1)]
    for c in rows:
        line = f"| {c.claim} | {c.rm} | {c.interval} | {c.seeds} | {c.verdict_words} |"
        seen = verdicts(c.claim, c.rm, runs)
        same = "yes" if len(set(seen)) == 1 else "no: " + " / ".join(seen)
        out.append(line + (f" {same} |" if rerun_runs else ""))
    gate = primary.get("gate", {})
    out += [
        "",
        f"Gate: **{gate.get('state', 'undefined')}**" + (f" ({gate['reason']})" if gate.get("reason") else "") + ".",
    ]
    if rerun_runs:
        out += _rerun_lines(metrics, rerun_runs)
    return out


def _exploratory_lines(ev: Mapping) -> list[str]:
    """The exploratory ΔAUROC table (Holm-corrected p-values), or nothing where there is none."""
    exploratory = ev.get("exploratory", {}).get("delta_auroc", {})
    if not exploratory:
        return []
    out = [
        "",
        f"Exploratory (leads, not findings; p-values Holm-corrected over {len(exploratory)} benchmarks):",
        "",
        "| benchmark | ΔAUROC over seeds [95% CI] | higher in | p (Holm) |",
        "|---|---|---|---|",
    ]
    for bench in order_benchmarks(exploratory):
        s = exploratory[bench]
        out.append(f"| {bench} | {across(s)} | {s['k']} of {s['n_seeds']} seeds | {fixed(s.get('p_holm'), 3)} |")
    return out


def _seed_detail_lines(metrics: Mapping, params: Mapping) -> list[str]:
    """The detail seed's AUROC table per benchmark (policy accuracy, each scorer, the Δ row), or nothing."""
    ev, data = metrics.get("evaluation", {}), metrics.get("data", {})
    benches = _benches(ev)
    if not benches:
        return []
    seed = detail_seed(metrics)
    out = [
        "",
        f"Seed {seed} (detail; 95% bootstrap CIs over questions):",
        "",
        f"| AUROC, seed {seed} | " + " | ".join(benches) + " |",
        "|---|" + "---|" * len(benches),
    ]
    acc = [
        f"{100 * data['benchmarks'][b]['sample_accuracy']:.1f}%" if b in data.get("benchmarks", {}) else ""
        for b in benches
    ]
    out.append(f"| policy sampled accuracy (T = {params.get('sampling_temperature', '?')}) | " + " | ".join(acc) + " |")
    for scorer in ("baseline", "goal-conditioned", "length only", "policy mean logprob"):
        if scorer in ev:
            cells = [
                ci(ev[scorer][b].get("auroc"), ev[scorer][b].get("auroc_ci_low"), ev[scorer][b].get("auroc_ci_high"))
                if b in ev[scorer]
                else ""
                for b in benches
            ]
            out.append(f"| {scorer} | " + " | ".join(cells) + " |")
    d = ev.get("delta_auroc", {})
    out.append(
        "| Δ goal-conditioned − baseline | "
        + " | ".join(ci(delta_of(d[b]), d[b]["ci_low"], d[b]["ci_high"], signed=True) for b in benches)
        + " |"
    )
    return out


def _designs_lines(report: Path) -> list[str]:
    """The claims in both embedded designs, where the report's sibling of the other design is committed."""
    both = regimes.read_reports(report.parent)
    if report.name not in both or len(both) <= 1:
        return []
    return [
        "",
        "The paper's claims in both embedded designs (each report's primary conclusions; see \"Two designs\" below):",
        "",
        regimes.markdown(both).rstrip("\n"),
    ]


def _wall_time_lines(metrics: Mapping, status: Mapping) -> list[str]:
    """The committed run's wall time per stage and in all (from ``status.json``), or nothing."""
    stages = status.get("stages", [])
    if not stages:
        return []
    total = sum(s.get("duration_s") or 0 for s in stages)
    parts = ", ".join(f"{s['name'].split('_', 1)[1]} {s.get('duration_s') or 0:.0f}" for s in stages)
    how = "one uninterrupted run" if all(s.get("status") == "ok" for s in stages) else "resumed: some stages kept"
    return [
        "",
        f"Wall time of the committed run (s, `status.json`): {parts}; **{total:,.0f} s in all** ({how}"
        f"{speed_text(metrics.get('provenance', {}).get('machine', {}))}).",
    ]


def findings(report: Path = REPORT, reruns: Path = RERUNS) -> str:
    """The README's "What the demo shows" numbers, as Markdown."""
    metrics, status = read_metrics(report, strict=True, absent={}), _read_status(report)
    ev = metrics.get("evaluation", {})
    primary = ev.get("primary", {})
    params = metrics.get("provenance", {}).get("profile", {}).get("parameters", {})
    params = {renamed(k): v for k, v in params.items()}  # a report recorded before the rm: block, under today's names
    out = [
        f"From the committed [`reports/demo/`](reports/demo/index.html): {primary.get('n_seeds', '?')} RM seeds per "
        f"RM, {params.get('max_steps', '?')} steps each; {params.get('n_benchmark_questions', '?')} questions per "
        f"benchmark; {params.get('torch_threads', '?')} torch threads; headline set "
        f"`{primary.get('headline', ev.get('headline', '?'))}`.",
        "",
    ]
    out += _conclusion_lines(metrics, params, _reruns(report, reruns))
    out += _exploratory_lines(ev)
    out += _seed_detail_lines(metrics, params)
    out += _designs_lines(report)
    out += _wall_time_lines(metrics, status)
    return "\n".join(out) + "\n"


def update(readme: Path, text: str, write: bool) -> bool:
    """Put ``text`` between the markers of ``readme``; return whether it differed."""
    return update_file(readme, BEGIN, END, f"{BEGIN}\n{text}{END}", write)


def main(argv: list[str] | None = None) -> int:
    from goalrm_core.paths import project_root

    parser = argparse.ArgumentParser(prog="python -m goalrm_core.report.readme", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when README.md differs")
    args = parser.parse_args(argv)
    root = project_root()
    differs = update(root / "README.md", findings(root / REPORT, root / RERUNS), write=not args.check)
    if args.check and differs:
        print(
            "README.md's generated block differs from reports/demo: run `python -m goalrm_core.report.readme`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
