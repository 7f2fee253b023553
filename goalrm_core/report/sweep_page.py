"""A sweep's comparison page, ``<reports>/<profile>-sweep-<name>/index.html``, from files alone: the plan
(``sweep.json``) and each point's ``metrics.json``, so it can be rebuilt from a committed copy.

In reading order, results first: a sentence generated from the numbers (the best points, ties named, and
each point against the base point by the paired Δ on the same generations, Holm-corrected over the k
comparisons) and what a sweep's numbers can support (one seed per point: leads, not findings), one row
per point with the headline metrics and their 95% CIs, the OOD AUROCs, a figure per swept key (AUROC
against the key's values, CI bands); then each point's configuration and what the sweep ran. An undefined metric (null,
NaN:
one class, too few seeds) reads ``undefined``, never "nan", and never stops the page.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from goalrm_core.data.io import atomic_write_text, timestamp
from goalrm_core.evaluation.auroc import delta_of
from goalrm_core.evaluation.stats import (
    wilson_rate_interval as wilson,
)  # the name tests/test_library_equivalents.py and docs/design.md use
from goalrm_core.report.metrics_view import METRICS_FILE, Auroc, Metrics, entries, mapping, read_metrics, section, value
from goalrm_core.report.page_parts import png
from goalrm_core.report.sweep_layout import (
    PAIRED_FILE,
    PLAN_FILE,
    POINT_MANIFEST,
    format_value,
    point_folder,
    renamed_record,
)
from goalrm_core.report.templating import part, render
from goalrm_core.study import formatting as fmt
from goalrm_core.study import plots
from goalrm_core.study.rms import GOAL_CONDITIONED, ID_BENCH, RMS

SIGNIFICANCE = 0.05  # a paired Δ is called a difference where its Holm-corrected p-value is below this


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def point_status(report_dir: Path, point: str) -> str:
    """complete (its manifest is there), failed, incomplete (started, never finished) or not run."""
    if (report_dir / point / POINT_MANIFEST).exists():
        return "complete"
    status = _read(report_dir / point / "status.json")
    if not isinstance(status, dict):
        return "not run"
    states = {s.get("status") for s in status.get("stages", []) if isinstance(s, dict)}
    return "failed" if "failed" in states else "incomplete"


def point_rows(plan: Mapping, report_dir: Path) -> list[dict]:
    """One dict per point: its values, status, headline numbers (value, CI low, CI high) and ``folder``, the
    name of its folder in ``report_dir`` (an older sweep's point keeps the name it was run under,
    :func:`~goalrm_core.report.sweep_layout.point_folder`)."""
    n_eval = plan.get("n_eval_pairs")
    rows = []
    for p in plan["points"]:
        folder = point_folder(report_dir, p["name"]).name
        m = Metrics(read_metrics(report_dir / folder))
        ev, training = m.evaluation, m.training
        row: dict[str, Any] = {
            "point": p["name"],
            "folder": folder,
            "values": {k: p["values"].get(k, plan["base_values"][k]) for k in plan["grid"]},
            "status": point_status(report_dir, folder),
            "has_metrics": bool(m.raw),
            "auroc": {},
            "accuracy": {},
        }
        for rm in RMS:
            for bench, scores in entries(ev, rm).items():
                if "auroc" in scores:
                    row["auroc"][(rm, bench)] = Auroc.of(scores).triple
            acc = value(training, rm, "eval_accuracy")
            if rm in training:
                bounds = value(training, rm, "eval_accuracy_ci")
                low, high = (list(bounds) + [None, None])[:2] if isinstance(bounds, (list, tuple)) else (None, None)
                how = "seeds"
                if fmt.is_undefined(low, high) and n_eval:
                    (low, high), how = wilson(acc, n_eval), "pairs"
                row["accuracy"][rm] = (acc, low, high, how)
        sep = section(m.raw, "representations", GOAL_CONDITIONED)
        row["q_auroc"] = (
            sep.get("separation_auroc"),
            sep.get("separation_auroc_ci_low"),
            sep.get("separation_auroc_ci_high"),
        )
        delta = section(ev, "delta_auroc", ID_BENCH)
        row["delta"] = (delta_of(delta), delta.get("ci_low"), delta.get("ci_high"))
        row["delta_seeds"] = section(m.primary, "delta_auroc") or None  # schema 2: the same Δ over the point's RM seeds
        row["n_seeds"] = _first_int(m.primary.get("n_seeds"), *(value(training, rm, "n_seeds") for rm in RMS))
        row["steps"] = _first_int(*(value(training, rm, "steps") for rm in RMS))
        row["vs_base"] = mapping(_read(report_dir / folder / PAIRED_FILE))
        tuned = section(ev, GOAL_CONDITIONED, ID_BENCH, "filter_validation")
        row["tokens_saved"] = (
            tuned.get("tokens_saved_pct"),
            tuned.get("tokens_saved_ci_low"),
            tuned.get("tokens_saved_ci_high"),
        )
        row["tuned_accuracy"] = (tuned.get("accuracy"), tuned.get("accuracy_unfiltered"))
        rows.append(row)
    return rows


def _first_int(*values: Any) -> int | None:
    return next((n for n in values if isinstance(n, int) and not isinstance(n, bool)), None)


def base_label(plan: Mapping, rows: list[dict]) -> str:
    """The base point named for what it is: ``base point (the demo profile's values; 200 RM steps, 1 RM seed)``."""
    base = next((r for r in rows if r["point"] == plan.get("default_point")), None)
    if base is None:
        return "the base point"
    common = plan.get("common") or {}
    steps = common.get("max_steps", base.get("steps"))
    seeds = common.get("rm_seeds")
    n = len(seeds) if isinstance(seeds, (list, tuple)) else base.get("n_seeds")
    what = [f"{steps} RM steps" if steps else "", f"{n} RM seed{'s' if n != 1 else ''}" if n else ""]
    what = ", ".join(x for x in what if x)
    return (
        f"the base point “{base['point']}” (the {plan.get('profile', 'base')} profile's "
        f"values{'; ' + what if what else ''})"
    )


def paired_comparisons(plan: Mapping, rows: list[dict]) -> list[dict]:
    """Each complete point's recorded paired Δ against the base point, with its Holm-corrected p-value
    over the k comparisons recorded (``p_holm``); empty where none is recorded."""
    from goalrm_core.evaluation.stats import holm  # scipy: only where the page is drawn

    found = [
        {"point": r["point"], **r["vs_base"]}
        for r in rows
        if r["status"] == "complete" and r.get("vs_base") and r["point"] != plan.get("default_point")
    ]
    adjusted = holm([float("nan") if fmt.is_undefined(c.get("p_value")) else float(c["p_value"]) for c in found])
    return [{**c, "p_holm": p} for c, p in zip(found, adjusted)]


def verdict(plan: Mapping, rows: list[dict]) -> str:
    """Each point against the base point by the paired Δ of the goal-conditioned RM's AUROC on the same
    generations, Holm-corrected over the k comparisons, naming every point that ties for the highest AUROC;
    without recorded paired Δs, says so rather than judging by overlapping intervals."""
    key = (GOAL_CONDITIONED, ID_BENCH)
    scored = [r for r in rows if r["status"] == "complete" and not fmt.is_undefined((r["auroc"].get(key) or [None])[0])]
    if not scored:
        return "No point has finished yet: nothing to compare."
    top = max(round(r["auroc"][key][0], 2) for r in scored)
    best = [r for r in scored if round(r["auroc"][key][0], 2) == top]
    text = (
        f"Of {len(scored)} complete point{'s' if len(scored) > 1 else ''}, the goal-conditioned RM's {ID_BENCH} AUROC "
        f"is highest, {fmt.num(top)}, at {', '.join(r['point'] for r in best)}"
        + (" (tied at two decimals)." if len(best) > 1 else ".")
    )
    base_name = plan.get("default_point")
    if base_name is None:
        return text + " The grid has no point at the base profile's values, so there is no base point to compare with."
    base = next((r for r in scored if r["point"] == base_name), None)
    label = base_label(plan, rows)
    if base is None:
        return text + f" {label[0].upper() + label[1:]} has not finished, so there is no comparison yet."
    text += f" {label[0].upper() + label[1:]} scores {fmt.ci(*base['auroc'][key])}."
    pairs = paired_comparisons(plan, rows)
    if not pairs:
        return text + (
            " No paired Δ against the base point is recorded (the sweep writes one per point when it runs), and "
            "overlapping intervals over the same generations cannot judge a difference: this page compares no points."
        )
    k = len(pairs)
    differ = [c for c in pairs if not fmt.is_undefined(c.get("p_holm")) and c["p_holm"] < SIGNIFICANCE]
    text += (
        f" Each point against the base point, paired on the same {ID_BENCH} generations (goal-conditioned AUROC, point "
        f"− base point, bootstrap over questions): {k} comparison{'s' if k != 1 else ''}, p-values Holm-corrected over "
        f"the {k}. "
    )
    if differ:
        text += (
            "A difference after correction: "
            + "; ".join(
                f"{c['point']} {fmt.signed_ci(c.get('delta'), c.get('ci_low'), c.get('ci_high'))} (Holm p "
                f"{fmt.p_value(c['p_holm'])})"
                for c in differ
            )
            + f"; no detectable difference at the other {k - len(differ)}."
        )
    else:
        text += "No point differs detectably from the base point after the correction."
    return text


def profile_note(plan: Mapping, rows: list[dict], report_dir: Path) -> str:
    """Why the base point's numbers are not the profile report's: its steps and seeds against the
    report's (``<reports>/<profile>/metrics.json``, beside the sweep), where that report is there."""
    m = read_metrics(report_dir.parent / str(plan.get("profile")))
    base = next((r for r in rows if r["point"] == plan.get("default_point")), None)
    if not isinstance(m, dict) or base is None:
        return ""
    m = Metrics(m)
    steps = value(m.training, GOAL_CONDITIONED, "steps")
    seeds = value(m.training, GOAL_CONDITIONED, "n_seeds")
    auroc = m.auroc(GOAL_CONDITIONED, ID_BENCH)
    common = plan.get("common") or {}
    base_steps = common.get("max_steps", base.get("steps"))
    base_seeds = len(common["rm_seeds"]) if isinstance(common.get("rm_seeds"), list) else base.get("n_seeds")
    if steps == base_steps and seeds == base_seeds:
        return ""
    return (
        f"The {plan.get('profile')} report trains its RMs for {steps} steps with {seeds} "
        f"seed{'s' if seeds != 1 else ''} (goal-conditioned {ID_BENCH} AUROC at seed 0 {fmt.ci(*auroc.triple)}); every "
        f"point here trains {base_steps} steps with {base_seeds} seed{'s' if base_seeds != 1 else ''}, so the base "
        "point's numbers, and how the points rank (the goal-state methods among them), can differ from that report's "
        "pages."
    )


def _code(metrics: Any) -> str | None:
    """``abc1234`` (with ``, uncommitted changes`` where the tree was dirty) from a run's provenance."""
    git = section(metrics, "provenance", "git")
    commit = git.get("commit")
    if not isinstance(commit, str) or not commit:
        return None
    return commit[:7] + (" with uncommitted changes" if git.get("dirty") else "")


def code_note(plan: Mapping, report_dir: Path) -> str:
    """The code every point ran on, from their ``metrics.json`` provenance, and the code of the profile's
    report beside the sweep where there is one: numbers from different code are not comparable."""
    runs = {p["name"]: read_metrics(point_folder(report_dir, p["name"])) for p in plan["points"]}
    if plan.get("shared"):
        runs["shared"] = read_metrics(report_dir / "shared")
    by_code: dict[str, list[str]] = {}
    for name, m in runs.items():
        code = _code(m)
        if code:
            by_code.setdefault(code, []).append(name)
    if not by_code:
        return ""
    dates = sorted(d[:10] for m in runs.values() if isinstance(d := value(m, "provenance", "date"), str))
    points = [p["name"] for p in plan["points"]]

    def who(names: list[str]) -> str:
        ran = [n for n in names if n in points]
        said = ("every point" if len(ran) == len(points) else ", ".join(ran)) if ran else ""
        return " and ".join(filter(None, [said, "the shared stages" if "shared" in names else ""]))

    parts = [f"{who(names)} ran at {code}" for code, names in by_code.items()]
    said = (
        "Code: "
        + "; ".join(parts)
        + (f" ({dates[0]}" + (f" to {dates[-1]})" if dates[-1] != dates[0] else ")") if dates else "")
        + "."
    )
    report = read_metrics(report_dir.parent / str(plan.get("profile")))
    report_code = _code(report)
    if report_code and set(by_code) != {report_code}:
        said += (
            f" The {plan.get('profile')} report beside this sweep ran at {report_code}: its numbers come from other "
            "code (and another policy), so compare a figure here only with another on this page."
        )
    return said


def seeds_note(plan: Mapping, rows: list[dict]) -> str:
    """What a sweep's numbers support: with one RM seed per point, leads, not findings."""
    common = plan.get("common") or {}
    seeds = common.get("rm_seeds") if isinstance(common, Mapping) else None
    known = [r["n_seeds"] for r in rows if r.get("n_seeds")]
    n = len(seeds) if isinstance(seeds, (list, tuple)) else (max(known) if known else None)
    if n is None or n <= 1:
        return (
            "One seed per point gives leads, not findings: each point trains one RM seed, and its intervals are "
            "over questions, not over training seeds. A point that looks better is a lead to rerun with the "
            "seeds of a full report before it is a finding."
        )
    return (
        f"Each point trains {n} RM seeds; its table figures are of the seed-0 RMs (intervals over questions), so "
        "they give leads, not findings; where a Δ across seeds is shown, only its t-interval over seeds counts."
    )


def _link(report_dir: Path, target: str, text: str) -> str:
    if not (report_dir / target).exists():
        return ""
    return part("link", href=target, text=text)


def _table(header: list[str], rows: list[list[str]]) -> str:
    """An HTML table whose cells are already HTML (escaped text, or a link)."""
    return part("table", header=header, rows=rows)


Q_SERIES = "goal-conditioned Q"  # the cosine of the last token's state to the goal state (notebook 03)


def _point_cell(plan: Mapping, r: dict) -> str:
    return html.escape(r["point"]) + (
        " " + part("bold", text="(base point)") if r["point"] == plan.get("default_point") else ""
    )


def headline_table(plan: Mapping, rows: list[dict], report_dir: Path, report_links: bool) -> str:
    """The results, one row per point: the goal-conditioned RM's AUROC and its paired Δ against the
    base point, the baseline RM's AUROC, the paired goal-conditioned − baseline-RM Δ (and across seeds,
    where recorded), then :func:`training_table`'s Q, accuracy and savings columns."""
    across = any(r.get("delta_seeds") for r in rows)
    paired = {c["point"]: c for c in paired_comparisons(plan, rows)}
    header = [
        "point",
        f"{GOAL_CONDITIONED} RM AUROC",
        "Δ vs base point (paired), Holm p",
        "baseline RM AUROC",
        "Δ goal-conditioned − baseline RM",
        *(["same Δ across seeds"] if across else []),
    ]
    table = []
    for r in rows:
        c = paired.get(r["point"])
        vs_base = (
            "—"
            if r["point"] == plan.get("default_point")
            else "not recorded"
            if not c
            else fmt.signed_ci(c.get("delta"), c.get("ci_low"), c.get("ci_high"))
            + f", p = {fmt.p_value(c.get('p_holm'))}"
        )
        cells = [
            fmt.ci(*r["auroc"].get((GOAL_CONDITIONED, ID_BENCH), (None, None, None))),
            vs_base,
            fmt.ci(*r["auroc"].get(("baseline", ID_BENCH), (None, None, None))),
            fmt.signed_ci(*r["delta"]),
        ]
        if across:
            d = r.get("delta_seeds")
            k, total = (fmt.count(d.get("k")), fmt.count(d.get("n_seeds"))) if d else (None, None)
            seeds = f", positive in {k} of {total} seeds" if k is not None and total else ""
            cells.append((fmt.across(d) if d else "not recorded") + seeds)
        table.append([_point_cell(plan, r), *map(html.escape, cells)])
    return _table(header, table)


def training_table(plan: Mapping, rows: list[dict], report_dir: Path, report_links: bool) -> str:
    """Per point: the goal-conditioned Q's AUROC, each RM's held-out pair accuracy, the tokens the
    tuned Q filter saves, the status and the links."""
    e = html.escape
    header = [
        "point",
        f"{Q_SERIES} AUROC",
        *(f"{rm} RM held-out pair acc." for rm in RMS),
        "tokens saved",
        "status",
        "links",
    ]
    table = []
    for r in rows:
        saved, low, high = r["tokens_saved"]
        folder = r.get("folder", r["point"])
        links = [
            _link(report_dir, f"{folder}/index.html", "report") if report_links else "",
            _link(report_dir, f"{folder}/{METRICS_FILE}", METRICS_FILE),
        ]
        table.append(
            [
                _point_cell(plan, r),
                e(fmt.ci(*r["q_auroc"])),
                *(
                    e(fmt.undefined() if r["accuracy"].get(rm) is None else fmt.ci(*r["accuracy"][rm][:3]))
                    for rm in RMS
                ),
                e(fmt.interval(saved, low, high, 1, suffix=" %")),
                e(r["status"]),
                " · ".join(x for x in links if x),
            ]
        )
    return _table(header, table)


def config_table(plan: Mapping, rows: list[dict]) -> str:
    """Configuration, after the results: each point's value of every swept key, the changed ones in bold."""
    header = ["point", *plan["grid"]]
    body = []
    for r in rows:
        point = next((p for p in plan["points"] if p["name"] == r["point"]), {"values": {}})
        body.append(
            [
                _point_cell(plan, r),
                *(
                    (
                        part("bold", text=format_value(r["values"][k]))
                        if k in point["values"]
                        else html.escape(format_value(r["values"][k]))
                    )
                    for k in plan["grid"]
                ),
            ]
        )
    return _table(header, body)


def ood_table(rows: list[dict]) -> str:
    benches = fmt.order_benchmarks(b for r in rows for (_, b) in r["auroc"] if b != ID_BENCH)
    if not benches:
        return ""
    header = ["point", *(f"{rm} · {b}" for b in benches for rm in RMS)]
    return _table(
        header,
        [
            [
                html.escape(r["point"]),
                *(html.escape(fmt.ci(*r["auroc"].get((rm, b), (None, None, None)))) for b in benches for rm in RMS),
            ]
            for r in rows
        ],
    )


def key_figures(plan: Mapping, rows: list[dict]) -> str:
    """One figure per swept key: each RM's in-distribution AUROC against the key's values. One key
    at a time, the base point joins each key's points; in a product grid, each combination of the
    other keys is its own line."""
    parts = []
    for key in plan["grid"]:
        others = [k for k in plan["grid"] if k != key]
        records = []
        for r in rows:
            if plan.get("one_at_a_time"):
                point = next(p for p in plan["points"] if p["name"] == r["point"])
                if point["values"] and key not in point["values"]:
                    continue
            group = ", ".join(f"{k}={r['values'][k]}" for k in others) if not plan.get("one_at_a_time") else ""
            for series, score in [*((rm, r["auroc"].get((rm, ID_BENCH))) for rm in RMS), (Q_SERIES, r["q_auroc"])]:
                if score is None or fmt.is_undefined(score[0]):
                    continue
                low, high = (score[0] if fmt.is_undefined(v) else v for v in score[1:])
                records.append(
                    {
                        "x": r["values"][key],
                        "series": f"{series} · {group}" if group else series,
                        "value": score[0],
                        "ci_low": low,
                        "ci_high": high,
                    }
                )
        if len({json.dumps(rec["x"]) for rec in records}) < 2:
            continue
        fig = plots.sweep_curve(pd.DataFrame(records), key, title=f"{ID_BENCH} AUROC against {key} (95% CI)")
        parts.append(part("heading", level=3, text=key) + "\n" + png(fig))
    return "\n".join(parts)


def render_comparison(plan: Mapping, report_dir: Path, report_links: bool = True) -> str:
    """The page (``templates/sweep.html.j2``), results first: the verdict, the results tables, the OOD
    AUROCs and a figure per swept key; then the configuration of each point and what ran. An older sweep's
    keys and points (``contrastive_beta=0.1``) are shown under today's names, its folders found as they are."""
    plan = renamed_record(plan)
    rows = point_rows(plan, report_dir)
    return render(
        "sweep.html.j2",
        plan=plan,
        generated=timestamp(),
        n_done=sum(r["status"] == "complete" for r in rows),
        n_points=len(rows),
        verdict=verdict(plan, rows),
        seeds_note=seeds_note(plan, rows),
        note=profile_note(plan, rows, report_dir),
        code=code_note(plan, report_dir),
        bench=ID_BENCH,
        base=base_label(plan, rows),
        q_series=Q_SERIES,
        headline=headline_table(plan, rows, report_dir, report_links),
        training=training_table(plan, rows, report_dir, report_links),
        ood=ood_table(rows),
        figures=key_figures(plan, rows),
        config=config_table(plan, rows),
        mode="one key at a time around the base point"
        if plan.get("one_at_a_time")
        else "every combination (Cartesian product)",
        grid="; ".join(f"{k} ∈ {{{', '.join(map(str, v))}}}" for k, v in plan["grid"].items()),
        common=", ".join(f"{k}={v}" for k, v in plan.get("common", {}).items()) or "none",
        shared=", ".join(plan.get("shared", [])) or "none",
        plan_file=PLAN_FILE,
        shared_link=_link(report_dir, f"shared/{METRICS_FILE}", METRICS_FILE) if plan.get("shared") else "",
    )


def write_comparison(report_dir: Path, report_links: bool = True) -> Path:
    """(Re)write ``index.html`` from ``sweep.json`` and the points' metrics; return its path."""
    plan = _read(Path(report_dir) / PLAN_FILE)
    if not isinstance(plan, dict) or "points" not in plan:
        raise ValueError(f"{Path(report_dir) / PLAN_FILE} is missing or unreadable: run the sweep first")
    page = Path(report_dir) / "index.html"
    atomic_write_text(page, render_comparison(plan, Path(report_dir), report_links))
    return page
