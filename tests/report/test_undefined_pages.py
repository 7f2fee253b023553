"""Undefined is a state, never a crash or a verdict: every page renders from a metrics.json in which
every number is undefined (null, or NaN as ``json`` writes it), in schema 1 (the committed demo
metrics, no ``schema_version``) and schema 2 (``evaluation.primary`` and friends), and says
"undefined" where a number would be, never "nan"."""

import json
import math
import re
from pathlib import Path

import pytest

from goalrm_core.evaluation.stats import across_seeds
from goalrm_core.report import frontpage
from goalrm_core.report.index_page import gate_html, render_index
from goalrm_core.report.sweep_page import render_comparison
from goalrm_core.study import formatting as fmt

DEMO_METRICS = Path(__file__).resolve().parents[2] / "reports" / "demo" / "metrics.json"
RMS = ("baseline", "goal-conditioned")
BENCHES = ("toy-id", "toy-zero", "toy-times", "toy-unseen")


def undefine(tree, value):
    """Every number of ``tree`` (not booleans, not strings) replaced by ``value`` (None or NaN)."""
    if isinstance(tree, dict):
        return {k: undefine(v, value) for k, v in tree.items()}
    if isinstance(tree, list):
        return [undefine(v, value) for v in tree]
    if isinstance(tree, (int, float)) and not isinstance(tree, bool):
        return value
    return tree


def schema1() -> dict:
    """The committed demo metrics with any schema-2 section taken out (they stay schema 1 if regenerated)."""
    m = json.loads(DEMO_METRICS.read_text(encoding="utf-8"))
    m.pop("schema_version", None)
    for stage, key in (("evaluation", "primary"), ("evaluation", "exploratory"), ("decoding", "primary")):
        m.get(stage, {}).pop(key, None)
    m.get("timings", {}).get("decoding", {}).pop("pruning_across_seeds", None)
    return m


def schema2() -> dict:
    """The demo's seed-0 detail plus every schema-2 section, from seeds whose figures are all undefined."""
    m = schema1()
    none = [None] * 5

    def over(**kw):
        return across_seeds(none, **kw)

    m["schema_version"] = 2
    for stage in ("data", "training", "representations", "evaluation", "decoding"):
        m[stage]["threads"] = 2
    m["evaluation"]["primary"] = {
        "benchmark": "toy-id",
        "rm_seeds": [0, 1, 2, 3, 4],
        "n_seeds": 5,
        "headline": "sample0",
        "gate": {
            "state": "undefined",
            "reason": "baseline: 0 of 5 seeds defined: no spread over seeds to judge by",
            "margin_over_length": {rm: over() for rm in RMS},
        },
        "delta_auroc": over(),
        "first_error_did": {rm: over(expect="less") for rm in RMS},
        "filter": {
            rm: {"threshold": 0.0, "tokens_saved_pct": over(), "accuracy_change": over(expect="less")} for rm in RMS
        },
    }
    m["evaluation"]["exploratory"] = {
        "delta_auroc": {b: over() | {"p_holm": math.nan} for b in BENCHES[1:]},
        "note": "comparisons other than the primary ones: leads, not findings",
    }
    m["decoding"]["primary"] = {
        "pruning": {
            "benchmark": "toy-id",
            "rm_seeds": [0, 1, 2, 3, 4],
            "threshold": none,
            "pruning_off": 0,
            "tokens_ratio": over(null=1, expect="less"),
            "accuracy_change": over(expect="less"),
        }
    }
    m.setdefault("timings", {}).setdefault("decoding", {})["pruning_across_seeds"] = {
        "wall_ratio": over(null=1, expect="less")
    }
    return m


def all_undefined(schema: int, value) -> dict:
    """Written and read back as metrics.json is (NaN survives as json's NaN)."""
    tree = schema1() if schema == 1 else schema2()
    provenance = tree.pop("provenance", None)  # what produced the run (profile parameters), not a metric
    tree = undefine(tree, value) | ({"provenance": provenance} if provenance is not None else {})
    return json.loads(json.dumps(tree))


def readable(page: str) -> str:
    """The page without its embedded images (base64 could spell anything)."""
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]*", "", page)


def assert_honest(page: str) -> None:
    text = readable(page)
    found = re.search(r".{0,80}\bnan\b.{0,40}", text, flags=re.I | re.S)
    assert not found, found.group(0)
    assert "−0.00" not in text and not re.search(r"(?<![\d.])-0\.0+(?!\d*[1-9])\b", text)
    assert "undefined" in text
    assert "could not be drawn" not in text


CASES = [pytest.param(s, v, id=f"schema{s}-{'null' if v is None else 'nan'}") for s in (1, 2) for v in (None, math.nan)]


@pytest.mark.parametrize("schema, value", CASES)
def test_the_index_page_renders_every_metric_undefined(tmp_path, schema, value):
    metrics = all_undefined(schema, value)
    page = render_index(
        "demo", "now", [{"name": "04_evaluation", "status": "ok", "duration_s": None}], metrics, tmp_path
    )
    assert_honest(page)
    assert "Cannot be judged whether both reward models beat the length-only scorer</b> on toy-id" in page
    assert "The gate cannot be judged: " in page and "Both reward models beat" not in page
    assert "Not every reward model" not in page and "measure noise" not in page  # undefined is no failure


@pytest.mark.parametrize("schema, value", CASES)
def test_the_front_page_sections_state_no_verdict_from_undefined(schema, value):
    metrics = all_undefined(schema, value)
    sections = frontpage.result_sections(metrics)
    assert_honest(sections)
    for part in (frontpage.summary(metrics), frontpage.decoding_table(metrics), frontpage.delta_table(metrics)):
        assert not re.search(r"\bnan\b", readable(part), flags=re.I)
    for verdict in (
        ": no detectable difference",
        "better on",
        "worse on",
        "costs accuracy",
        "Q falls at the first error.",
        "Gate passed",
        "Gate failed",
        "a lead)",
    ):
        assert verdict not in sections, verdict
    assert "cannot be judged" in sections
    if schema == 2:
        findings = frontpage.primary_findings(metrics)
        assert findings.count("cannot be judged") >= 7  # gate, Δ, 2x Q, 2x filter, pruning: every one
        assert "Exploratory" in sections and "Holm" in sections


@pytest.mark.parametrize("schema, value", CASES)
def test_the_gate_has_a_third_state(schema, value):
    ev = all_undefined(schema, value)["evaluation"]
    gate = ev["primary"]["gate"] if schema == 2 else ev["gate"]
    notice = gate_html(gate)
    assert_honest(notice)
    assert "cannot be judged" in notice and "#2e7d32" not in notice and "#c62828" not in notice
    assert frontpage.gate_state(gate)[0] == "undefined"


def test_a_seed0_gate_with_one_undefined_auroc_cannot_be_judged():
    gate = {
        "benchmark": "toy-id",
        "passed": False,
        "length_only": {"auroc": 0.55, "ci_low": 0.5, "ci_high": 0.6},
        "baseline": {"auroc": 0.8, "ci_low": 0.75, "ci_high": 0.85},
        "goal-conditioned": {
            "auroc": math.nan,
            "ci_low": math.nan,
            "ci_high": math.nan,
            "undefined_reason": "only one class among 30 solutions",
        },
    }
    notice = gate_html(gate)
    assert "cannot be judged: goal-conditioned AUROC undefined (only one class among 30 solutions)" in notice
    assert "0.80 [0.75, 0.85]" in notice and "measure noise" not in notice


@pytest.mark.parametrize("schema, value", CASES)
def test_the_sweep_page_renders_every_metric_undefined(tmp_path, schema, value):
    metrics = all_undefined(schema, value)
    plan = {
        "profile": "demo",
        "name": "t",
        "grid": {"contrastive_loss_beta": [0.1, 1.0]},
        "one_at_a_time": True,
        "stages": ["02_training"],
        "shared": ["01_data"],
        "common": {},
        "base_values": {"contrastive_loss_beta": 0.5},
        "default_point": "base",
        "n_eval_pairs": None,
        "points": [
            {"name": "base", "values": {}},
            {"name": "contrastive_loss_beta=0.1", "values": {"contrastive_loss_beta": 0.1}},
        ],
    }
    for point in plan["points"]:
        (tmp_path / point["name"]).mkdir()
        (tmp_path / point["name"] / "metrics.json").write_text(json.dumps(metrics))
        (tmp_path / point["name"] / "point.json").write_text("{}")
    page = render_comparison(plan, tmp_path)
    assert_honest(page)
    assert "leads, not findings" in page and "One seed per point" in page
    assert "No point has finished yet" in page or "cannot" in page  # no AUROC to rank by: no best point


def test_the_formatter_never_prints_nan_or_negative_zero():
    for value in (None, math.nan, math.inf, "x"):
        assert fmt.num(value).startswith("undefined") and fmt.ci(value, 0.1, 0.2) == "undefined"
        assert fmt.pct(value, reason="no samples") == "undefined (no samples)"
    assert (
        fmt.across({"mean": math.nan, "ci_low": None, "ci_high": None, "reason": "0 of 5 seeds defined"})
        == "undefined (0 of 5 seeds defined)"
    )
    assert fmt.signed_ci(-0.004, -0.0049, 0.001) == "0.00 [0.00, 0.00]"
    assert fmt.interval(-0.0004, -0.0001, 0.0002, 1, scale=100, suffix=" points") == "0.0 [0.0, 0.0] points"
