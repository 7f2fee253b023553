"""``goalrm compare``: two runs' metrics.json, figure by figure and conclusion by conclusion, on
hand-built metrics (schema 2 built with ``across_seeds`` on chosen per-seed values) and the committed
schema-1 report."""

import copy
import json
import math
from pathlib import Path

import pytest

from goalrm_core import cli
from goalrm_core.evaluation.stats import across_seeds
from goalrm_core.report import compare

DEMO = Path(__file__).resolve().parents[2] / "reports" / "demo" / "metrics.json"
RMS = ("baseline", "goal-conditioned")
STAGES = ("data", "training", "representations", "evaluation", "decoding")


def schema2(
    delta=(0.02, 0.03, 0.025),
    first_error=(-0.3, -0.25, -0.2),
    margin=(0.2, 0.25, 0.3),
    saved=(10.0, 12.0, 11.0),
    acc_change=(-0.02, -0.03, -0.025),
    ratio=(0.8, 0.85, 0.9),
    prune_acc=(0.0, -0.01, 0.01),
    auroc=0.80,
    threads=2,
) -> dict:
    """A schema-2 metrics tree: every RM gets the same per-seed values; seed-0 detail with bootstrap CIs."""

    def benches(a):
        return {
            "toy-id": {
                "auroc": a,
                "auroc_ci_low": None if a is None else a - 0.04,
                "auroc_ci_high": None if a is None else a + 0.04,
            }
        }

    primary = {
        "benchmark": "toy-id",
        "rm_seeds": [0, 1, 2],
        "n_seeds": 3,
        "headline": "sample0",
        "gate": {"state": "passed", "reason": None, "margin_over_length": {rm: across_seeds(margin) for rm in RMS}},
        "delta_auroc": across_seeds(delta),
        "first_error_did": {rm: across_seeds(first_error, expect="less") for rm in RMS},
        "filter": {
            rm: {
                "threshold": 0.0,
                "tokens_saved_pct": across_seeds(saved),
                "accuracy_change": across_seeds(acc_change, expect="less"),
            }
            for rm in RMS
        },
    }
    m = {
        "schema_version": 2,
        "data": {"threads": threads},
        "training": {"threads": threads},
        "representations": {"threads": threads},
        "evaluation": {
            "threads": threads,
            "primary": primary,
            "exploratory": {
                "delta_auroc": {"toy-zero": {**across_seeds(delta), "p_holm": 0.1}},
                "note": "leads, not findings",
            },
            "baseline": benches(auroc),
            "goal-conditioned": benches(auroc),
            "length only": benches(0.55 if auroc is not None else None),
            "delta_auroc": {"toy-id": {"delta": 0.01, "ci_low": -0.02, "ci_high": 0.04, "p_value": 0.5}},
            "gate": {"benchmark": "toy-id", "passed": True},
        },
        "decoding": {
            "threads": threads,
            "primary": {
                "pruning": {
                    "benchmark": "toy-id",
                    "threshold": [0.0, 0.0, 0.0],
                    "pruning_off": 0,
                    "tokens_ratio": across_seeds(ratio, null=1, expect="less"),
                    "accuracy_change": across_seeds(prune_acc, expect="less"),
                }
            },
        },
    }
    return m


def by_name(result, key="figures", field="name"):
    return {row[field]: row for row in result[key]}


def test_identical_runs_agree_on_every_figure_and_conclusion():
    r = compare.compare_runs(schema2(), schema2())
    figures, conclusions = by_name(r), by_name(r, "conclusions", "id")
    assert figures["evaluation.primary.delta_auroc"]["method"] == "welch_values"
    assert figures["evaluation.primary.delta_auroc"]["difference"] == pytest.approx(0.0)
    assert all(f["agree"] is True for f in figures.values())
    assert all(c["holds_in_both"] is True for c in conclusions.values())
    assert conclusions["delta_auroc.toy-id@seeds"]["a"] == "holds"
    assert conclusions["gate@seeds"]["a"] == "passed" and conclusions["gate@seed0"]["a"] == "passed"
    assert conclusions["first_error_did.goal-conditioned@seeds"]["a"] == "holds"
    assert conclusions["pruning.saves_tokens@seeds"]["a"] == "holds"  # ratio < 1 in every seed
    assert conclusions["pruning.costs_accuracy@seeds"]["a"] == "not shown"  # the interval straddles 0
    assert r["thread_mismatches"] == [] and r["lacking"] == {
        "a": {"figures": [], "conclusions": []},
        "b": {"figures": [], "conclusions": []},
    }
    assert r["schema"] == {"a": 2, "b": 2}


def test_welch_interval_on_hand_chosen_seeds():
    # means 2 and 5, variance 1 on each side, n = 3: se² = 2/3, df = 4, t = 2.7764 -> 3 ± 2.2669
    r = compare.compare_runs(schema2(delta=(1.0, 2.0, 3.0)), schema2(delta=(4.0, 5.0, 6.0)))
    f = by_name(r)["evaluation.primary.delta_auroc"]
    assert f["difference"] == pytest.approx(3.0)
    assert f["ci_low"] == pytest.approx(3.0 - 2.7764 * math.sqrt(2 / 3), abs=1e-3)
    assert f["ci_high"] == pytest.approx(3.0 + 2.7764 * math.sqrt(2 / 3), abs=1e-3)
    assert f["agree"] is False and f["method"] == "welch_values"


def test_runs_that_disagree_on_a_figure_and_a_conclusion():
    a = schema2(delta=(0.02, 0.03, 0.025))
    b = schema2(delta=(-0.03, -0.02, -0.025))
    r = compare.compare_runs(a, b)
    f = by_name(r)["evaluation.primary.delta_auroc"]
    assert f["agree"] is False and f["difference"] == pytest.approx(-0.05)
    c = by_name(r, "conclusions", "id")["delta_auroc.toy-id@seeds"]
    assert (c["a"], c["b"], c["holds_in_both"]) == ("holds", "reversed", False)
    # a figure that moves within its spread agrees, and its conclusion holds in both
    near = compare.compare_runs(a, schema2(delta=(0.021, 0.029, 0.027)))
    assert by_name(near)["evaluation.primary.delta_auroc"]["agree"] is True
    assert by_name(near, "conclusions", "id")["delta_auroc.toy-id@seeds"]["holds_in_both"] is True
    page = compare.render_markdown(r, "reports/demo", "reports/rerun")
    assert "| evaluation.primary.delta_auroc |" in page and "**no**" in page
    assert "| conclusion | basis | A | B | holds in both? |" in page
    assert "| figure | run A | run B | difference B − A [95% CI] | agree? | method |" in page


def test_normal_approximation_for_bootstrap_figures():
    # se = 0.08 / (2·1.96) on each side: the difference's half-width is 1.96·√2·se = 0.0566
    r = compare.compare_runs(schema2(auroc=0.80), schema2(auroc=0.85))
    f = by_name(r)["evaluation.baseline.toy-id.auroc"]
    assert f["method"] == "normal" and f["group"] == "seed0"
    assert f["difference"] == pytest.approx(0.05)
    assert f["ci_high"] - f["difference"] == pytest.approx(0.04 * math.sqrt(2), rel=1e-6)
    assert f["agree"] is True
    far = by_name(compare.compare_runs(schema2(auroc=0.80), schema2(auroc=0.90)))["evaluation.baseline.toy-id.auroc"]
    assert far["agree"] is False
    assert "normal approx." in compare.render_markdown(r)


def test_thread_mismatch_is_flagged_per_stage():
    a, b = schema2(threads=2), schema2(threads=2)
    b["evaluation"]["threads"] = 1
    r = compare.compare_runs(a, b)
    assert r["thread_mismatches"] == ["evaluation"]
    rows = by_name(r, "threads", "stage")
    assert (rows["evaluation"]["a"], rows["evaluation"]["b"], rows["evaluation"]["mismatch"]) == (2, 1, True)
    assert rows["decoding"]["mismatch"] is False
    assert "mismatch in evaluation" in compare.render_markdown(r)


def schema1(metrics):
    """The committed report as a schema-1 run wrote it: no schema version, no across-seed sections, no per-stage
    threads."""
    m = {k: v for k, v in copy.deepcopy(metrics).items() if k != "schema_version"}
    m["evaluation"].pop("primary", None), m["evaluation"].pop("exploratory", None), m["decoding"].pop("primary", None)
    for section in m.values():
        if isinstance(section, dict):
            section.pop("threads", None) if isinstance(section.get("threads"), int) else None
    return m


def test_schema_1_against_schema_2_compares_what_both_have():
    demo = schema1(json.loads(DEMO.read_text(encoding="utf-8")))
    b = copy.deepcopy(demo)
    b2 = schema2()
    b["schema_version"] = 2
    b["evaluation"].update(primary=b2["evaluation"]["primary"], exploratory=b2["evaluation"]["exploratory"], threads=1)
    b["decoding"].update(primary=b2["decoding"]["primary"], threads=2)
    r = compare.compare_runs(demo, b)
    assert r["schema"] == {"a": 1, "b": 2}
    figures, conclusions = by_name(r), by_name(r, "conclusions", "id")
    # the seed-0 detail exists in both and is identical here
    seed0 = figures["evaluation.baseline.toy-id.auroc"]
    assert seed0["method"] == "normal" and seed0["agree"] is True and seed0["difference"] == 0
    assert figures["evaluation.delta_auroc.toy-unseen"]["agree"] is True
    assert figures["training.baseline.eval_accuracy"]["method"] == "welch_summary"
    unseen = demo["evaluation"]["delta_auroc"]["toy-unseen"]  # the committed seed-0 Δ and its CI decide the verdict
    expected = (
        "better" if unseen["ci_low"] > 0 else "worse" if unseen["ci_high"] < 0 else "not shown"
    )  # never "no difference"
    assert conclusions["delta_auroc.toy-unseen@seed0"]["a"] == expected
    assert conclusions["gate@seed0"]["holds_in_both"] is True
    # what schema 1 lacks: the across-seed figures and conclusions
    assert "evaluation.primary.delta_auroc" in r["lacking"]["a"]["figures"]
    assert "decoding.primary.pruning.tokens_ratio" in r["lacking"]["a"]["figures"]
    assert any("length gate" in c and "across seeds" in c for c in r["lacking"]["a"]["conclusions"])
    assert r["lacking"]["b"]["figures"] == []
    assert "evaluation.primary.delta_auroc" not in figures and "gate@seeds" not in conclusions
    # schema 1's threads come from provenance: 2 there, 1 in B's evaluation stage
    rows = by_name(r, "threads", "stage")
    assert rows["evaluation"]["a_source"] == "provenance" and rows["evaluation"]["a"] == 2
    assert r["thread_mismatches"] == ["evaluation"]
    page = compare.render_markdown(r, "reports/demo", "rerun")
    assert "run A lacks" in page and "schema 1" in page and "2 (provenance)" in page


def test_all_undefined_metrics_are_undefined_not_errors():
    none3 = (None, None, None)
    m = schema2(
        delta=none3,
        first_error=none3,
        margin=none3,
        saved=none3,
        acc_change=none3,
        ratio=none3,
        prune_acc=none3,
        auroc=None,
    )
    m["evaluation"]["primary"]["gate"].update(state="undefined", reason="baseline: 0 of 3 seeds defined")
    m["evaluation"]["gate"]["passed"] = None
    m["evaluation"]["delta_auroc"]["toy-id"] = {"delta": None, "ci_low": None, "ci_high": None, "p_value": None}
    r = compare.compare_runs(m, copy.deepcopy(m))
    assert r["figures"] and all(f["agree"] is None for f in r["figures"])
    assert all("undefined" in f["reason"] for f in r["figures"])
    assert r["conclusions"] and all(c["holds_in_both"] is None and c["a"] == "undefined" for c in r["conclusions"])
    page = compare.render_markdown(r)
    assert "undefined" in page and "0 agree" in page
    # one defined side against an undefined one: undefined, named
    f = by_name(compare.compare_runs(schema2(), m))["evaluation.primary.delta_auroc"]
    assert f["agree"] is None and f["reason"] == "undefined in run B"
    # nothing at all: an empty comparison
    empty = compare.compare_runs({}, {})
    assert empty["figures"] == [] and empty["conclusions"] == [] and empty["threads"] == []
    assert "No figure is recorded in both runs." in compare.render_markdown(empty)


def test_cli_on_report_folders(tmp_path, capsys):
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    run_a.mkdir(), run_b.mkdir()
    (run_a / "metrics.json").write_text(json.dumps(schema2(delta=(0.02, 0.03, 0.025))), encoding="utf-8")
    (run_b / "metrics.json").write_text(json.dumps(schema2(delta=(-0.03, -0.02, -0.025))), encoding="utf-8")
    out = tmp_path / "compare.md"
    # disagreement is a result: exit 0, the report on stdout and in --out; a folder or its metrics.json
    assert cli.main(["compare", str(run_a), str(run_b / "metrics.json"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("# Do the runs agree?") and "**no**" in printed
    assert out.read_text(encoding="utf-8").strip() == printed.strip()

    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    for other in (tmp_path / "missing", tmp_path / "bad", tmp_path / "list.json"):
        assert cli.main(["compare", str(run_a), str(other)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("goalrm compare: error:") and "metrics.json" in lines[0]


def test_a_figure_with_one_defined_seed_is_undefined():
    r = compare.compare_runs(schema2(), schema2(ratio=(0.9, None, None)))
    f = by_name(r)["decoding.primary.pruning.tokens_ratio"]
    assert f["agree"] is None and f["reason"] == "fewer than 2 seeds defined in run B"
    c = by_name(r, "conclusions", "id")["pruning.saves_tokens@seeds"]
    assert (c["a"], c["b"], c["holds_in_both"]) == ("holds", "undefined", None)
    assert "0.9 (1 seed)" in compare.render_markdown(r)


def test_an_older_file_with_the_seed0_delta_under_mean_compares_the_same():
    """metrics.json files written before ``delta`` name the seed-0 paired difference ``mean``; a
    comparison reads either, and the figure is there."""
    new = schema2()
    old = copy.deepcopy(new)
    old["evaluation"]["delta_auroc"]["toy-id"] = {
        "mean" if k == "delta" else k: v for k, v in new["evaluation"]["delta_auroc"]["toy-id"].items()
    }
    assert (
        "mean" in old["evaluation"]["delta_auroc"]["toy-id"]
        and "delta" not in old["evaluation"]["delta_auroc"]["toy-id"]
    )
    assert compare.compare_runs(old, new) == compare.compare_runs(new, new)
    figures = by_name(compare.compare_runs(old, old))
    assert figures["evaluation.delta_auroc.toy-id"]["a"]["value"] == pytest.approx(0.01)


def test_the_gates_well_formed_condition_is_compared():
    """The gate's second condition (RMs beat length by the margin on well-formed errors) is a conclusion of its
    own: a run where the RMs only spot malformed text disagrees with one where they verify."""

    def with_well_formed(state):
        m = schema2()
        primary = m["evaluation"]["primary"]
        primary["gate"]["well_formed"] = {
            "state": state,
            "reason": None,
            "required_margin": 0.15,
            "margin_over_length": {
                rm: across_seeds((0.3, 0.35, 0.4) if state == "passed" else (0.0, 0.05, 0.02), null=0.15) for rm in RMS
            },
        }
        return m

    r = compare.compare_runs(with_well_formed("passed"), with_well_formed("failed"))
    conclusions = by_name(r, "conclusions", "id")
    gate = conclusions["gate.well_formed@seeds"]
    assert (gate["a"], gate["b"], gate["holds_in_both"]) == ("passed", "failed", False)
    assert conclusions["gate@seeds"]["holds_in_both"] is True  # the first condition is unchanged


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"schema_version": 99}', "schema_version 99 is not one this goalrm reads (1 to 2)"),
        ('{"schema_version": true}', "schema_version true is not one"),
        ('{"schema_version": "2"}', 'schema_version "2" is not one'),
        ('{"evaluation": ' + '{"a": ' * 5000 + "{}" + "}" * 5000 + "}", "nested too deeply"),
    ],
)
def test_a_metrics_file_goalrm_did_not_write_is_refused_in_one_line(tmp_path, text, says):
    path = tmp_path / "metrics.json"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        compare.load_metrics(path)
    assert str(caught.value).startswith(f"{path}: ") and says in str(caught.value) and "\n" not in str(caught.value)
