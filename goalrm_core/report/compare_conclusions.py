"""The conclusions ``goalrm compare`` holds two runs to: each conclusion of one run with its verdict
(the length gate, ΔAUROC, Q at the first error, filtering and pruning), read across seeds where the
run has schema 2's ``primary`` and ``exploratory`` sections, and from seed 0 in both schemas.
"""

from __future__ import annotations

from typing import Mapping

from goalrm_core.evaluation import verdicts
from goalrm_core.evaluation.auroc import delta_of
from goalrm_core.evaluation.numeric import num
from goalrm_core.report.compare_figures import ALPHA, NOT_SCORERS, is_across
from goalrm_core.report.metrics_view import section
from goalrm_core.study.rms import ID_BENCH


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
    ev, dec = section(m, "evaluation"), section(m, "decoding")
    seeds = "across seeds"

    # -- across seeds (schema 2)
    primary = section(ev, "primary")
    bench = primary.get("benchmark", ID_BENCH)
    if "gate" in primary:
        gate = section(primary["gate"])
        state = gate.get("state") if gate.get("state") in ("passed", "failed") else "undefined"
        out["gate@seeds"] = _conclusion(f"length gate ({bench}): every RM beats length only", seeds, state, gate.get("reason"))
        if "well_formed" in gate:  # the gate's second condition: the RMs verify, not only spot malformed text
            wf = section(gate["well_formed"])
            wf_state = wf.get("state") if wf.get("state") in ("passed", "failed") else "undefined"
            out["gate.well_formed@seeds"] = _conclusion(
                f"length gate, well-formed errors only ({bench}): every RM beats length by > {wf.get('required_margin', 0.15):g}",
                seeds, wf_state, wf.get("reason"))
    if is_across(primary.get("delta_auroc")):
        d = primary["delta_auroc"]
        out[f"delta_auroc.{bench}@seeds"] = _conclusion(f"ΔAUROC goal-conditioned − baseline ({bench}, primary)", seeds,
                                                       _across_delta_verdict(d), _note(d))
    for b, d in section(ev, "exploratory", "delta_auroc").items():
        if is_across(d):
            out[f"delta_auroc.{b}@seeds"] = _conclusion(f"ΔAUROC goal-conditioned − baseline ({b}, exploratory)", seeds,
                                                       _across_delta_verdict(d), _note(d))
    for rm, d in section(primary, "first_error_did").items():
        if is_across(d):
            out[f"first_error_did.{rm}@seeds"] = _conclusion(f"Q falls at the first wrong line, against correct solutions ({rm})",
                                                            seeds, _holds(d), _note(d))
    for rm, f in section(primary, "filter").items():
        f = section(f)
        if is_across(f.get("tokens_saved_pct")):
            out[f"filter.{rm}.saves_tokens@seeds"] = _conclusion(f"filter saves tokens ({rm}, {bench})", seeds, _holds(f["tokens_saved_pct"]), _note(f["tokens_saved_pct"]))
        if is_across(f.get("accuracy_change")):
            out[f"filter.{rm}.costs_accuracy@seeds"] = _conclusion(f"filter costs accuracy ({rm}, {bench})", seeds, _holds(f["accuracy_change"]), _note(f["accuracy_change"]))
    pruning = section(dec, "primary", "pruning")
    pbench = pruning.get("benchmark", ID_BENCH)
    why = verdicts.pruning_switched_off(pruning)  # every seed's tuning chose pruning off: nothing was tested
    if why:
        pruning = {**pruning, **{k: verdicts.mark_not_tested(pruning[k], why) for k in ("tokens_ratio", "accuracy_change") if k in pruning}}
    off = False
    if is_across(pruning.get("tokens_ratio")):
        out["pruning.saves_tokens@seeds"] = _conclusion(f"pruning saves tokens ({pbench})", seeds, _holds(pruning["tokens_ratio"], off), _note(pruning["tokens_ratio"], off))
    if is_across(pruning.get("accuracy_change")):
        out["pruning.costs_accuracy@seeds"] = _conclusion(f"pruning costs accuracy ({pbench})", seeds, _holds(pruning["accuracy_change"], off), _note(pruning["accuracy_change"], off))

    # -- seed 0 (both schemas)
    gate = ev.get("gate")
    if isinstance(gate, Mapping) and ("passed" in gate or "state" in gate):
        passed = gate.get("passed")
        state = gate.get("state") if gate.get("state") in ("passed", "failed") else "passed" if passed is True else "failed" if passed is False else "undefined"
        out["gate@seed0"] = _conclusion(f"length gate ({gate.get('benchmark', 'toy-id')}): every RM beats length only", "seed 0 (point estimates)", state)
    for b, d in section(ev, "delta_auroc").items():
        if isinstance(d, Mapping) and not is_across(d) and ("ci_low" in d or delta_of(d) is not None):
            out[f"delta_auroc.{b}@seed0"] = _conclusion(f"ΔAUROC goal-conditioned − baseline ({b})", "seed 0 (bootstrap CI)", _delta_verdict(d.get("ci_low"), d.get("ci_high")))
    for rm, fe in section(ev, "first_error").items():
        fe = section(fe)
        if "mean_delta" in fe:
            low, high = num(fe.get("delta_ci_low")), num(fe.get("delta_ci_high"))
            verdict = "undefined" if low is None or high is None else "holds" if high < 0 else "does not hold"
            out[f"first_error.{rm}@seed0"] = _conclusion(f"Q falls at the first error ({rm})", "seed 0 (bootstrap CI)", verdict)
    for rm, benches in ev.items():
        if rm in NOT_SCORERS:
            continue
        for b, fig in section(benches).items():
            f = section(fig, "filter")
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
    for b, pr in section(dec, "pruning").items():
        pr = section(pr)
        if not pr:
            continue
        saved = num(pr.get("tokens_saved_pct"))
        out[f"pruning.{b}.saves_tokens@seed0"] = _conclusion(f"pruning saves tokens ({b})", "seed 0 (point estimate)",
                                                             "undefined" if saved is None else "holds" if saved > 0 else "does not hold")
        acc, unp = num(pr.get("accuracy")), num(pr.get("accuracy_unpruned"))
        out[f"pruning.{b}.costs_accuracy@seed0"] = _conclusion(f"pruning costs accuracy ({b})", "seed 0 (point estimate)",
                                                               "undefined" if acc is None or unp is None else "holds" if acc < unp else "does not hold")
    return out
