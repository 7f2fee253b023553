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
from goalrm_core.report.conclusions import conclusions, exploratory_conclusions, gate_state
from goalrm_core.report.metrics_view import section
from goalrm_core.study.rms import ID_BENCH


def _delta_verdict(low, high) -> str:
    low, high = num(low), num(high)
    if low is None or high is None:
        return "undefined"
    return (
        "better" if low > 0 else "worse" if high < 0 else verdicts.NOT_SHOWN
    )  # a difference not shown: never "no difference"


#: The basis of every across-seed conclusion.
_ACROSS_SEEDS = "across seeds"


def _conclusion(label: str, basis: str, verdict: str, note: str | None = None) -> dict:
    return {"label": label, "basis": basis, "verdict": verdict, "note": note}


def _gate_across_seeds(primary: Mapping) -> dict[str, dict]:
    """The length gate's state across seeds and, where recorded, its well-formed condition's."""
    if not isinstance(primary.get("gate"), Mapping):
        return {}
    out: dict[str, dict] = {}
    bench = primary.get("benchmark", ID_BENCH)
    gate = primary["gate"]
    state, reason = gate_state(gate)
    out["gate@seeds"] = _conclusion(f"length gate ({bench}): every RM beats length only", _ACROSS_SEEDS, state, reason)
    if isinstance(
        gate.get("well_formed"), Mapping
    ):  # the gate's second condition: the RMs verify, not only spot malformed text
        wf = gate["well_formed"]
        wf_state, wf_reason = gate_state(wf)
        out["gate.well_formed@seeds"] = _conclusion(
            f"length gate, well-formed errors only ({bench}): every RM beats length by > "
            f"{wf.get('required_margin', 0.15):g}",
            _ACROSS_SEEDS,
            wf_state,
            wf_reason,
        )
    return out


def _across_seeds(m: Mapping, ev: Mapping) -> dict[str, dict]:
    """The across-seed conclusions (schema 2): the records of report.conclusions, each with its verdict as
    worded there, the gate's margins replaced by the gate's state."""
    out = _gate_across_seeds(section(ev, "primary"))
    records = [
        c
        for c in conclusions(m)
        if not c.claim_id.startswith("gate.")  # the gate's margins: the gate above
        and c.claim_id != "pruning.saves_wall_time"
    ]  # wall time: a property of the machine, not of the run
    for c in records + exploratory_conclusions(m):
        if is_across(c.figure):
            out[f"{c.claim_id}@seeds"] = _conclusion(
                c.claim if c.rm in ("both", "-") else f"{c.claim} ({c.rm})", _ACROSS_SEEDS, c.state, c.note
            )
    return out


def _seed0_gate(ev: Mapping) -> dict[str, dict]:
    """Seed 0's length gate, from either schema's record of it (a state, or the older passed flag)."""
    gate = ev.get("gate")
    if not (isinstance(gate, Mapping) and ("passed" in gate or "state" in gate)):
        return {}
    passed = gate.get("passed")
    state = (
        gate.get("state")
        if gate.get("state") in ("passed", "failed")
        else "passed"
        if passed is True
        else "failed"
        if passed is False
        else "undefined"
    )
    return {
        "gate@seed0": _conclusion(
            f"length gate ({gate.get('benchmark', 'toy-id')}): every RM beats length only",
            "seed 0 (point estimates)",
            state,
        )
    }


def _seed0_filters(ev: Mapping) -> dict[str, dict]:
    """Seed 0's filter conclusions per RM and benchmark: whether it saves tokens and whether it costs accuracy."""
    out: dict[str, dict] = {}
    for rm, benches in ev.items():
        if rm in NOT_SCORERS:
            continue
        for b, fig in section(benches).items():
            f = section(fig, "filter")
            if not f:
                continue
            saved = num(f.get("tokens_saved_pct"))
            out[f"filter.{rm}.{b}.saves_tokens@seed0"] = _conclusion(
                f"filter saves tokens ({rm}, {b})",
                "seed 0 (point estimate)",
                "undefined" if saved is None else "holds" if saved > 0 else "does not hold",
            )
            acc, unf, p = num(f.get("accuracy")), num(f.get("accuracy_unfiltered")), num(f.get("p_value"))
            if acc is None or unf is None:
                verdict = "undefined"
            elif acc >= unf:
                verdict = "does not hold"
            else:
                verdict = "undefined" if p is None else "holds" if p < ALPHA else "does not hold"
            out[f"filter.{rm}.{b}.costs_accuracy@seed0"] = _conclusion(
                f"filter costs accuracy ({rm}, {b})", "seed 0 (paired test, p < 0.05)", verdict
            )
    return out


def _seed0_pruning(dec: Mapping) -> dict[str, dict]:
    """Seed 0's pruning conclusions per benchmark: whether it saves tokens and whether it costs accuracy."""
    out: dict[str, dict] = {}
    for b, pr in section(dec, "pruning").items():
        pr = section(pr)
        if not pr:
            continue
        saved = num(pr.get("tokens_saved_pct"))
        out[f"pruning.{b}.saves_tokens@seed0"] = _conclusion(
            f"pruning saves tokens ({b})",
            "seed 0 (point estimate)",
            "undefined" if saved is None else "holds" if saved > 0 else "does not hold",
        )
        acc, unp = num(pr.get("accuracy")), num(pr.get("accuracy_unpruned"))
        out[f"pruning.{b}.costs_accuracy@seed0"] = _conclusion(
            f"pruning costs accuracy ({b})",
            "seed 0 (point estimate)",
            "undefined" if acc is None or unp is None else "holds" if acc < unp else "does not hold",
        )
    return out


def _at_seed0(ev: Mapping, dec: Mapping) -> dict[str, dict]:
    """The seed-0 conclusions (both schemas): the gate, ΔAUROC, Q at the first error, filtering and pruning."""
    out = _seed0_gate(ev)
    for b, d in section(ev, "delta_auroc").items():
        if isinstance(d, Mapping) and not is_across(d) and ("ci_low" in d or delta_of(d) is not None):
            out[f"delta_auroc.{b}@seed0"] = _conclusion(
                f"ΔAUROC goal-conditioned − baseline ({b})",
                "seed 0 (bootstrap CI)",
                _delta_verdict(d.get("ci_low"), d.get("ci_high")),
            )
    for rm, fe in section(ev, "first_error").items():
        fe = section(fe)
        if "mean_delta" in fe:
            low, high = num(fe.get("delta_ci_low")), num(fe.get("delta_ci_high"))
            verdict = "undefined" if low is None or high is None else "holds" if high < 0 else "does not hold"
            out[f"first_error.{rm}@seed0"] = _conclusion(
                f"Q falls at the first error ({rm})", "seed 0 (bootstrap CI)", verdict
            )
    out.update(_seed0_filters(ev))
    out.update(_seed0_pruning(dec))
    return out


def collect_conclusions(m: Mapping) -> dict[str, dict]:
    """Every conclusion of one run, ``{id: {label, basis, verdict, note}}``: the across-seed ones
    (schema 2's ``primary`` and ``exploratory`` sections), then the seed-0 ones (both schemas)."""
    ev, dec = section(m, "evaluation"), section(m, "decoding")
    out = _across_seeds(m, ev)
    out.update(_at_seed0(ev, dec))
    return out
