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

**Conclusions.** Each conclusion has a verdict in each run (passed/failed, better/worse/no difference,
holds/reversed/not shown/not tested, or undefined); it *holds in both* when both runs reach the same
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
:func:`load_metrics`. Exit 0 whenever the comparison was made (disagreement is a result, not an
error); a missing or malformed ``metrics.json`` is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Mapping

from goalrm_core.evaluation import verdicts
from goalrm_core.evaluation.auroc import delta_of
from goalrm_core.evaluation.numeric import num
from goalrm_core.flags import run_command
from goalrm_core.study.rms import ID_BENCH

Z95 = 1.959963984540054  # the normal 97.5% quantile
ALPHA = 0.05

# Top-level sections that are not stages.
NOT_STAGES = ("provenance", "timings", "schema_version")
# Keys of the evaluation section that are not scorers (``evaluation.<scorer>.<bench>.auroc``).
NOT_SCORERS = ("delta_auroc", "first_error", "gate", "seeds", "primary", "exploratory", "headline", "threads")

# Figure groups, in the order the report shows them.
GROUPS = {
    "across_seeds": "Primary figures (across RM seeds)",
    "seed0": "Seed-0 detail figures (bootstrap 95% CIs)",
    "over_seeds": "Figures over seeds (mean and t-interval)",
}
METHODS = {
    "welch_values": "Welch t (per-seed values)",
    "welch_summary": "Welch t (from each run's t-interval over seeds)",
    "normal": "normal approx. (from each run's 95% CI)",
}


# ------------------------------------------------------------------------------------- reading


def load_metrics(path: str | Path) -> dict:
    """The metrics of a report: ``path`` is a report folder (its ``metrics.json``) or the file.
    A missing file is a ``FileNotFoundError``, a malformed one a ``ValueError``, each naming it."""
    p = Path(path)
    if p.is_dir():
        p = p / "metrics.json"
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such metrics.json (give a report folder or its metrics.json)")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{p}: malformed metrics.json (not UTF-8 text)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: malformed metrics.json ({e.msg}, line {e.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: malformed metrics.json (expected a JSON object, got {type(data).__name__})")
    return data


def schema_version(m: Mapping) -> int | None:
    """1 when the file has no ``schema_version`` (the first schema), else the recorded integer."""
    v = m.get("schema_version", 1)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _dict(x: Any) -> Mapping:
    return x if isinstance(x, Mapping) else {}


def _is_across(x: Any) -> bool:
    return isinstance(x, Mapping) and "per_seed" in x and "mean" in x


def _summary(kind: str, value, low=None, high=None, *, per_seed=None, n=None) -> dict:
    """One run's figure: ``kind`` is ``per_seed`` (values per seed), ``t_interval`` (mean and its
    t-interval over ``n`` seeds) or ``interval`` (point estimate and 95% CI)."""
    out = {"kind": kind, "value": num(value), "ci_low": num(low), "ci_high": num(high)}
    if kind == "per_seed":
        out["per_seed"] = [num(v) for v in per_seed] if isinstance(per_seed, (list, tuple)) else []
        out["n"] = sum(v is not None for v in out["per_seed"])
    elif kind == "t_interval":
        out["n"] = int(n) if num(n) is not None else None
    return out


def _across_summary(a: Mapping) -> dict:
    return _summary("per_seed", a.get("mean"), a.get("ci_low"), a.get("ci_high"), per_seed=a.get("per_seed"))


# ------------------------------------------------------------------------------------- figures


def collect_figures(m: Mapping) -> dict[str, dict]:
    """Every comparable figure of one run, ``{dotted path: summary + group}``, in report order:
    the across-seed figures (any ``across_seeds`` dict), then the seed-0 bootstrap figures, then the
    means over seeds."""
    out: dict[str, dict] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if _is_across(node):
            out[".".join(path)] = {**_across_summary(node), "group": "across_seeds"}
            return
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, path + (str(k),))

    for section, node in m.items():
        if section not in NOT_STAGES:
            walk(node, (str(section),))

    def add(path: str, group: str, summary: dict) -> None:
        out.setdefault(path, {**summary, "group": group})

    ev = _dict(m.get("evaluation"))
    for scorer, benches in ev.items():
        if scorer in NOT_SCORERS:
            continue
        for bench, fig in _dict(benches).items():
            fig = _dict(fig)
            if "auroc" in fig and not _is_across(fig):
                add(f"evaluation.{scorer}.{bench}.auroc", "seed0", _summary("interval", fig["auroc"], fig.get("auroc_ci_low"), fig.get("auroc_ci_high")))
            fv = _dict(fig.get("filter_validation"))
            if "tokens_saved_pct" in fv and "tokens_saved_ci_low" in fv:
                add(f"evaluation.{scorer}.{bench}.filter_validation.tokens_saved_pct", "seed0",
                    _summary("interval", fv["tokens_saved_pct"], fv.get("tokens_saved_ci_low"), fv.get("tokens_saved_ci_high")))
    for bench, d in _dict(ev.get("delta_auroc")).items():
        if isinstance(d, Mapping) and not _is_across(d) and delta_of(d) is not None:
            add(f"evaluation.delta_auroc.{bench}", "seed0", _summary("interval", delta_of(d), d.get("ci_low"), d.get("ci_high")))
    for rm, fe in _dict(ev.get("first_error")).items():
        fe = _dict(fe)
        if "mean_delta" in fe:
            add(f"evaluation.first_error.{rm}.mean_delta", "seed0", _summary("interval", fe["mean_delta"], fe.get("delta_ci_low"), fe.get("delta_ci_high")))
        if "prefix_error_auroc" in fe:
            add(f"evaluation.first_error.{rm}.prefix_error_auroc", "seed0",
                _summary("interval", fe["prefix_error_auroc"], fe.get("prefix_error_auroc_ci_low"), fe.get("prefix_error_auroc_ci_high")))
    for rm, rep in _dict(m.get("representations")).items():
        rep = _dict(rep)
        if "separation_auroc" in rep:
            add(f"representations.{rm}.separation_auroc", "seed0",
                _summary("interval", rep["separation_auroc"], rep.get("separation_auroc_ci_low"), rep.get("separation_auroc_ci_high")))

    for rm, tr in _dict(m.get("training")).items():
        tr = _dict(tr)
        if "eval_accuracy" in tr:
            ci = tr.get("eval_accuracy_ci")
            low, high = (ci[0], ci[1]) if isinstance(ci, (list, tuple)) and len(ci) == 2 else (tr.get("eval_accuracy_ci_low"), tr.get("eval_accuracy_ci_high"))
            add(f"training.{rm}.eval_accuracy", "over_seeds", _summary("t_interval", tr["eval_accuracy"], low, high, n=tr.get("n_seeds")))
    for rm, benches in _dict(ev.get("seeds")).items():
        for bench, s in _dict(benches).items():
            s = _dict(s)
            if "auroc_mean" in s:
                add(f"evaluation.seeds.{rm}.{bench}.auroc_mean", "over_seeds",
                    _summary("t_interval", s["auroc_mean"], s.get("ci_low"), s.get("ci_high"), n=s.get("n_seeds")))
    return out


def _t_quantile(df: float) -> float:
    from scipy import stats  # lazily: the module stays light to import

    return float(stats.t.ppf(1 - ALPHA / 2, df))


def _welch(mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float, n_b: int) -> tuple[float, float, float]:
    """Welch's 95% t interval of mean_b − mean_a, from each side's sample variance and size."""
    d = mean_b - mean_a
    va, vb = var_a / n_a, var_b / n_b
    se2 = va + vb
    if se2 <= 0:
        return d, d, d  # no spread on either side: the difference is exact
    df = se2 ** 2 / (va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1))
    half = _t_quantile(df) * math.sqrt(se2)
    return d, d - half, d + half


def _sample(s: dict) -> tuple[float, float, int] | None:
    """(mean, sample variance, n) of a per-seed or t-interval summary, or None when it has no spread."""
    if s["kind"] == "per_seed":
        values = [v for v in s["per_seed"] if v is not None]
        if len(values) < 2:
            return None
        mean = sum(values) / len(values)
        return mean, sum((v - mean) ** 2 for v in values) / (len(values) - 1), len(values)
    if s["kind"] == "t_interval":
        n, low, high = s.get("n"), s["ci_low"], s["ci_high"]
        if s["value"] is None or low is None or high is None or not n or n < 2:
            return None
        sem = (high - low) / (2 * _t_quantile(n - 1))
        return s["value"], sem * sem * n, n
    return None


def compare_figure(a: dict, b: dict) -> dict:
    """The difference B − A of one figure with its 95% interval, the method, and whether they agree
    (``agree``: True/False, or None with ``reason`` when either side is undefined)."""
    out = {"difference": None, "ci_low": None, "ci_high": None, "method": None, "agree": None, "reason": None}
    undefined = [side for side, s in (("A", a), ("B", b)) if s["value"] is None]
    if undefined:
        out["reason"] = f"undefined in run {' and '.join(undefined)}"
        return out
    sa, sb = _sample(a), _sample(b)
    if a["kind"] in ("per_seed", "t_interval") and b["kind"] in ("per_seed", "t_interval") and sa and sb:
        both_values = a["kind"] == b["kind"] == "per_seed"
        d, low, high = _welch(*sa, *sb)
        out["method"] = "welch_values" if both_values else "welch_summary"
    else:
        no_ci = [side for side, s in (("A", a), ("B", b)) if s["ci_low"] is None or s["ci_high"] is None]
        if no_ci:
            few = all(s["kind"] == "per_seed" and s["n"] < 2 for side, s in (("A", a), ("B", b)) if side in no_ci)
            out["reason"] = (f"fewer than 2 seeds defined in run {' and '.join(no_ci)}" if few
                             else f"no interval in run {' and '.join(no_ci)}")
            return out
        se_a, se_b = ((s["ci_high"] - s["ci_low"]) / (2 * Z95) for s in (a, b))
        d = b["value"] - a["value"]
        half = Z95 * math.hypot(se_a, se_b)
        low, high = d - half, d + half
        out["method"] = "normal"
    out.update(difference=d, ci_low=low, ci_high=high, agree=bool(low <= 0 <= high))
    return out


# ----------------------------------------------------------------------------------- conclusions


def _holds(across: Mapping, switched_off: bool = False) -> str:
    """An across-seeds conclusion's two-sided verdict (`evaluation.verdicts`): holds, reversed (the
    interval wholly on the unexpected side), not shown, not tested (the mechanism switched off), or
    undefined."""
    return verdicts.state(across, switched_off)


def _note(across: Mapping, switched_off: bool = False) -> str | None:
    """What a verdict needs beside it: the reason it is undefined or not tested, or the effect a "not
    shown" would have seen with 80% power (where the run recorded one)."""
    state = verdicts.state(across, switched_off)
    if state in (verdicts.UNDEFINED, verdicts.NOT_TESTED):
        return verdicts.reason(across, switched_off)
    m = verdicts.mde(across)
    if state == verdicts.NOT_SHOWN and m is not None:
        return f"an effect of {m:.3g} would have been seen with 80% power"
    return None


def _delta_verdict(low, high) -> str:
    low, high = num(low), num(high)
    if low is None or high is None:
        return "undefined"
    return "better" if low > 0 else "worse" if high < 0 else "no difference"


def _across_delta_verdict(d: Mapping) -> str:
    """ΔAUROC over seeds: better / worse / no difference (two-sided by nature), undefined where it is."""
    state = verdicts.state(d)
    return {verdicts.HOLDS: "better", verdicts.REVERSED: "worse", verdicts.NOT_SHOWN: "no difference"}.get(state, state)


def _conclusion(label: str, basis: str, verdict: str, note: str | None = None) -> dict:
    return {"label": label, "basis": basis, "verdict": verdict, "note": note}


def collect_conclusions(m: Mapping) -> dict[str, dict]:
    """Every conclusion of one run, ``{id: {label, basis, verdict, note}}``: the across-seed ones
    (schema 2's ``primary`` and ``exploratory`` sections), then the seed-0 ones (both schemas)."""
    out: dict[str, dict] = {}
    ev, dec = _dict(m.get("evaluation")), _dict(m.get("decoding"))
    seeds = "across seeds"

    # -- across seeds (schema 2)
    primary = _dict(ev.get("primary"))
    bench = primary.get("benchmark", ID_BENCH)
    if "gate" in primary:
        gate = _dict(primary["gate"])
        state = gate.get("state") if gate.get("state") in ("passed", "failed") else "undefined"
        out["gate@seeds"] = _conclusion(f"length gate ({bench}): every RM beats length only", seeds, state, gate.get("reason"))
        if "well_formed" in gate:  # the gate's second condition: the RMs verify, not only spot malformed text
            wf = _dict(gate["well_formed"])
            wf_state = wf.get("state") if wf.get("state") in ("passed", "failed") else "undefined"
            out["gate.well_formed@seeds"] = _conclusion(
                f"length gate, well-formed errors only ({bench}): every RM beats length by > {wf.get('required_margin', 0.15):g}",
                seeds, wf_state, wf.get("reason"))
    if _is_across(primary.get("delta_auroc")):
        d = primary["delta_auroc"]
        out[f"delta_auroc.{bench}@seeds"] = _conclusion(f"ΔAUROC goal-conditioned − baseline ({bench}, primary)", seeds,
                                                       _across_delta_verdict(d), _note(d))
    for b, d in _dict(_dict(ev.get("exploratory")).get("delta_auroc")).items():
        if _is_across(d):
            out[f"delta_auroc.{b}@seeds"] = _conclusion(f"ΔAUROC goal-conditioned − baseline ({b}, exploratory)", seeds,
                                                       _across_delta_verdict(d), _note(d))
    for rm, d in _dict(primary.get("first_error_delta_q")).items():
        if _is_across(d):
            out[f"first_error.{rm}@seeds"] = _conclusion(f"Q falls at the first error ({rm})", seeds, _holds(d), _note(d))
    for rm, d in _dict(primary.get("first_error_delta_q_well_formed")).items():
        if _is_across(d):
            out[f"first_error_well_formed.{rm}@seeds"] = _conclusion(f"Q falls at the first error, well-formed errors only ({rm})",
                                                                    seeds, _holds(d), _note(d))
    for rm, f in _dict(primary.get("filter")).items():
        f = _dict(f)
        if _is_across(f.get("tokens_saved_pct")):
            out[f"filter.{rm}.saves_tokens@seeds"] = _conclusion(f"filter saves tokens ({rm}, {bench})", seeds, _holds(f["tokens_saved_pct"]), _note(f["tokens_saved_pct"]))
        if _is_across(f.get("accuracy_change")):
            out[f"filter.{rm}.costs_accuracy@seeds"] = _conclusion(f"filter costs accuracy ({rm}, {bench})", seeds, _holds(f["accuracy_change"]), _note(f["accuracy_change"]))
    pruning = _dict(_dict(dec.get("primary")).get("pruning"))
    pbench = pruning.get("benchmark", ID_BENCH)
    why = verdicts.pruning_switched_off(pruning)  # every seed's tuning chose pruning off: nothing was tested
    if why:
        pruning = {**pruning, **{k: verdicts.mark_not_tested(pruning[k], why) for k in ("tokens_ratio", "accuracy_change") if k in pruning}}
    off = False
    if _is_across(pruning.get("tokens_ratio")):
        out["pruning.saves_tokens@seeds"] = _conclusion(f"pruning saves tokens ({pbench})", seeds, _holds(pruning["tokens_ratio"], off), _note(pruning["tokens_ratio"], off))
    if _is_across(pruning.get("accuracy_change")):
        out["pruning.costs_accuracy@seeds"] = _conclusion(f"pruning costs accuracy ({pbench})", seeds, _holds(pruning["accuracy_change"], off), _note(pruning["accuracy_change"], off))

    # -- seed 0 (both schemas)
    gate = ev.get("gate")
    if isinstance(gate, Mapping) and ("passed" in gate or "state" in gate):
        passed = gate.get("passed")
        state = gate.get("state") if gate.get("state") in ("passed", "failed") else "passed" if passed is True else "failed" if passed is False else "undefined"
        out["gate@seed0"] = _conclusion(f"length gate ({gate.get('benchmark', 'toy-id')}): every RM beats length only", "seed 0 (point estimates)", state)
    for b, d in _dict(ev.get("delta_auroc")).items():
        if isinstance(d, Mapping) and not _is_across(d) and ("ci_low" in d or delta_of(d) is not None):
            out[f"delta_auroc.{b}@seed0"] = _conclusion(f"ΔAUROC goal-conditioned − baseline ({b})", "seed 0 (bootstrap CI)", _delta_verdict(d.get("ci_low"), d.get("ci_high")))
    for rm, fe in _dict(ev.get("first_error")).items():
        fe = _dict(fe)
        if "mean_delta" in fe:
            low, high = num(fe.get("delta_ci_low")), num(fe.get("delta_ci_high"))
            verdict = "undefined" if low is None or high is None else "holds" if high < 0 else "does not hold"
            out[f"first_error.{rm}@seed0"] = _conclusion(f"Q falls at the first error ({rm})", "seed 0 (bootstrap CI)", verdict)
    for rm, benches in ev.items():
        if rm in NOT_SCORERS:
            continue
        for b, fig in _dict(benches).items():
            f = _dict(_dict(fig).get("filter"))
            if not f:
                continue
            saved = num(f.get("tokens_saved_pct"))
            out[f"filter.{rm}.{b}.saves_tokens@seed0"] = _conclusion(
                f"filter saves tokens ({rm}, {b})", "seed 0 (point estimate)",
                "undefined" if saved is None else "holds" if saved > 0 else "does not hold")
            acc, unf, p = num(f.get("accuracy")), num(f.get("accuracy_unfiltered")), num(f.get("p_value"))
            if acc is None or unf is None:
                verdict = "undefined"
            elif acc >= unf:
                verdict = "does not hold"
            else:
                verdict = "undefined" if p is None else "holds" if p < ALPHA else "does not hold"
            out[f"filter.{rm}.{b}.costs_accuracy@seed0"] = _conclusion(f"filter costs accuracy ({rm}, {b})", "seed 0 (paired test, p < 0.05)", verdict)
    for b, pr in _dict(dec.get("pruning")).items():
        pr = _dict(pr)
        if not pr:
            continue
        saved = num(pr.get("tokens_saved_pct"))
        out[f"pruning.{b}.saves_tokens@seed0"] = _conclusion(f"pruning saves tokens ({b})", "seed 0 (point estimate)",
                                                             "undefined" if saved is None else "holds" if saved > 0 else "does not hold")
        acc, unp = num(pr.get("accuracy")), num(pr.get("accuracy_unpruned"))
        out[f"pruning.{b}.costs_accuracy@seed0"] = _conclusion(f"pruning costs accuracy ({b})", "seed 0 (point estimate)",
                                                               "undefined" if acc is None or unp is None else "holds" if acc < unp else "does not hold")
    return out


# --------------------------------------------------------------------------------------- threads


def stage_threads(m: Mapping) -> dict[str, tuple[int | None, str | None]]:
    """``{stage: (threads, where it was read)}`` of one run: the stage's own ``threads`` (schema 2),
    else the run's ``provenance.threads.used`` (schema 1); plus a ``provenance`` row of its own."""
    recorded = _dict(_dict(m.get("provenance")).get("threads")).get("used")
    run_threads = recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else None
    out: dict[str, tuple[int | None, str | None]] = {}
    for stage, section in m.items():
        if stage in NOT_STAGES or not isinstance(section, Mapping):
            continue
        t = section.get("threads")
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
    a, b = _dict(a), _dict(b)
    fa, fb = collect_figures(a), collect_figures(b)
    figures = []
    for name, sa in fa.items():
        if name in fb:
            sb = fb[name]
            group = sa["group"] if sa["group"] == sb["group"] else "across_seeds" if "across_seeds" in (sa["group"], sb["group"]) else sa["group"]
            figures.append({"name": name, "group": group, "a": sa, "b": sb, **compare_figure(sa, sb)})
    figures.sort(key=lambda f: list(GROUPS).index(f["group"]))  # stable: report order within a group

    ca, cb = collect_conclusions(a), collect_conclusions(b)
    conclusions = []
    for cid, x in ca.items():
        if cid in cb:
            y = cb[cid]
            defined = not {"undefined", "not tested"} & {x["verdict"], y["verdict"]}  # a switched-off mechanism is no finding
            conclusions.append({"id": cid, "label": x["label"], "basis": x["basis"], "a": x["verdict"], "b": y["verdict"],
                                "holds_in_both": (x["verdict"] == y["verdict"]) if defined else None,
                                "note_a": x["note"], "note_b": y["note"]})

    ta, tb = stage_threads(a), stage_threads(b)
    threads = []
    for stage in list(ta) + [s for s in tb if s not in ta]:
        (na, src_a), (nb, src_b) = ta.get(stage, (None, None)), tb.get(stage, (None, None))
        threads.append({"stage": stage, "a": na, "b": nb, "a_source": src_a, "b_source": src_b,
                        "mismatch": None if na is None or nb is None else na != nb})

    lacking = {"a": {"figures": [n for n in fb if n not in fa], "conclusions": [cb[c]["label"] + f" [{cb[c]['basis']}]" for c in cb if c not in ca]},
               "b": {"figures": [n for n in fa if n not in fb], "conclusions": [ca[c]["label"] + f" [{ca[c]['basis']}]" for c in ca if c not in cb]}}
    summary = {
        "figures": len(figures),
        "figures_agree": sum(f["agree"] is True for f in figures),
        "figures_disagree": sum(f["agree"] is False for f in figures),
        "figures_undefined": sum(f["agree"] is None for f in figures),
        "conclusions": len(conclusions),
        "conclusions_hold_in_both": sum(c["holds_in_both"] is True for c in conclusions),
        "conclusions_differ": sum(c["holds_in_both"] is False for c in conclusions),
        "conclusions_undefined": sum(c["holds_in_both"] is None for c in conclusions),
    }
    return {"schema": {"a": schema_version(a), "b": schema_version(b)}, "figures": figures, "conclusions": conclusions,
            "threads": threads, "thread_mismatches": [t["stage"] for t in threads if t["mismatch"]], "lacking": lacking, "summary": summary}


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


def render_markdown(result: Mapping, name_a: str = "A", name_b: str = "B") -> str:
    """The comparison as a Markdown report: the verdict in a sentence, threads, conclusions, figures
    (one table per group) and what each run lacks."""
    s, lines = result["summary"], []
    lines += [f"# Do the runs agree? A = `{name_a}`, B = `{name_b}`", "",
              f"- run A: {_schema_text(result['schema']['a'])}",
              f"- run B: {_schema_text(result['schema']['b'])}",
              f"- figures: {s['figures']} compared, {s['figures_agree']} agree, {s['figures_disagree']} disagree, "
              f"{s['figures_undefined']} undefined (a figure agrees when the 95% interval of B − A includes 0)",
              f"- conclusions: {s['conclusions']} compared, {s['conclusions_hold_in_both']} hold in both, "
              f"{s['conclusions_differ']} differ, {s['conclusions_undefined']} undefined"]
    mismatches = result["thread_mismatches"]
    lines.append(f"- threads: **mismatch in {', '.join(mismatches)}**: floats depend on the thread count, so differences there "
                 "may come from it" if mismatches else "- threads: no mismatch recorded")
    lines.append("")

    lines += ["## Threads", "", "| stage | run A | run B | match? |", "|---|---|---|---|"]
    for t in result["threads"]:
        def th(n, src):
            return "not recorded" if n is None else f"{n}" + (" (provenance)" if src == "provenance" else "")
        match = "not recorded" if t["mismatch"] is None else "**no**" if t["mismatch"] else "yes"
        lines.append(f"| {_esc(t['stage'])} | {th(t['a'], t['a_source'])} | {th(t['b'], t['b_source'])} | {match} |")
    if not result["threads"]:
        lines.append("| (none recorded) | | | |")
    lines.append("")

    lines += ["## Conclusions", "", "A conclusion holds in both when both runs reach the same verdict.", "",
              "| conclusion | basis | A | B | holds in both? |", "|---|---|---|---|---|"]
    for c in result["conclusions"]:
        both = "undefined" if c["holds_in_both"] is None else "yes" if c["holds_in_both"] else "**no**"
        va = c["a"] + (f" ({_esc(c['note_a'])})" if c.get("note_a") else "")
        vb = c["b"] + (f" ({_esc(c['note_b'])})" if c.get("note_b") else "")
        lines.append(f"| {_esc(c['label'])} | {c['basis']} | {va} | {vb} | {both} |")
    if not result["conclusions"]:
        lines.append("| (no conclusion both runs record) | | | | |")
    lines.append("")

    lines += ["## Figures", ""]
    for group, title in GROUPS.items():
        rows = [f for f in result["figures"] if f["group"] == group]
        if not rows:
            continue
        lines += [f"### {title}", "", "| figure | run A | run B | difference B − A [95% CI] | agree? | method |", "|---|---|---|---|---|---|"]
        for f in rows:
            if f["agree"] is None:
                diff, agree = f"— ({f['reason']})", "undefined"
            else:
                diff = f"{_g(f['difference'], True)} [{_g(f['ci_low'], True)}, {_g(f['ci_high'], True)}]"
                agree = "yes" if f["agree"] else "**no**"
            lines.append(f"| {_esc(f['name'])} | {_cell(f['a'])} | {_cell(f['b'])} | {diff} | {agree} | {METHODS.get(f['method'], '—')} |")
        lines.append("")
    if not result["figures"]:
        lines += ["No figure is recorded in both runs.", ""]

    lack = result["lacking"]
    if any(lack[side][kind] for side in ("a", "b") for kind in ("figures", "conclusions")):
        lines += ["## What one run lacks", ""]
        for side, other in (("a", "B"), ("b", "A")):
            for kind in ("figures", "conclusions"):
                names = lack[side][kind]
                if names:
                    lines.append(f"- run {side.upper()} lacks {len(names)} {kind} that run {other} has: "
                                 + ", ".join(f"`{_esc(n)}`" for n in names))
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="goalrm compare", description="Do two runs of the report agree? Compares two metrics.json.")
    p.add_argument("run_a", help="run A: a report folder (e.g. reports/demo) or its metrics.json")
    p.add_argument("run_b", help="run B: a report folder or its metrics.json (a rerun: another seed, another thread count)")
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
