"""Each conclusion worded once (52, item 2): the records of ``report.conclusions`` are what the front
page, the README block, the side-by-side table, the reruns and ``goalrm compare`` lay out, and the
wordings issue 50 found wrong stay fixed."""

import html
import json
from pathlib import Path

from goalrm_core.report import compare, conclusions, frontpage, readme, regimes
from goalrm_core.report.index_page import gate_html
from goalrm_core.study import evaluation as ev
from goalrm_core.study import step_bench

ROOT = Path(__file__).resolve().parents[2]


def committed(name: str) -> dict:
    return json.loads((ROOT / "reports" / name / "metrics.json").read_text(encoding="utf-8"))


def test_every_primary_conclusion_is_one_record_with_its_sentence_on_the_page():
    metrics = committed("demo")
    records = conclusions.conclusions(metrics)
    assert records and len({(c.claim_id) for c in records}) == len(records)
    page = html.unescape(frontpage.primary_findings(metrics))
    for c in records:
        assert c.sentence and c.sentence in page, c.claim_id  # the page lays out the records' sentences
        assert c.verdict in ("holds", "reversed", "not shown", "not tested", "cannot be judged")
        assert c.cell.endswith(c.verdict) or c.cell.startswith("undefined")


def test_the_layouts_read_the_records():
    metrics = committed("demo")
    records = conclusions.conclusions(metrics)
    block = readme.findings(ROOT / "reports" / "demo", ROOT / "reports" / "reproducibility")
    for c in records:
        assert f"| {c.claim} | {c.rm} | {c.interval} | {c.seeds} | {c.verdict_words} |" in block
    cells = regimes.claim_cells(metrics)
    assert all(cells[(c.claim, c.rm)] == c.cell for c in records)
    said = compare.collect_conclusions(metrics)
    for c in records:
        if not c.claim_id.startswith("gate.") and c.claim_id != "pruning.saves_wall_time":
            assert said[f"{c.claim_id}@seeds"]["verdict"] == c.state and said[f"{c.claim_id}@seeds"]["note"] == c.note


def test_the_gate_verdict_is_worded_once():
    primary = committed("confident")["evaluation"]["primary"]
    state, head, tail = conclusions.gate_words(primary["gate"])
    assert state == "failed" and head.lower() == conclusions.GATE_VERDICT["failed"]
    notice = html.unescape(gate_html(primary["gate"], benchmark="toy-id", n_seeds=5))
    sentence = conclusions.gate_sentence(primary)
    reading = ev.primary_reading(primary)
    for text in (notice.lower(), sentence, reading):
        assert conclusions.GATE_VERDICT["failed"] in text
    assert sentence in reading  # notebook 04 says what the front page says


def test_a_not_shown_never_reads_as_shown():
    primary = committed("confident")["evaluation"]["primary"]
    notice = html.unescape(gate_html(primary["gate"], benchmark="toy-id", n_seeds=5))
    scope = conclusions.design_scope(primary)
    for text in (notice, scope):
        assert "Not every" not in text and "measure noise" not in text and "less than a character count" not in text
        assert "no better than length" not in text
    # a ΔAUROC whose interval contains 0 is "not shown" in goalrm compare, never "no difference"
    seeds = compare.collect_conclusions(committed("demo"))
    assert "no difference" not in {c["verdict"] for c in seeds.values()}
    deltas = {
        "toy-id": {"delta": 0.0, "ci_low": -0.1, "ci_high": 0.1},
        "toy-zero": {"delta": 0.2, "ci_low": 0.1, "ci_high": 0.3},
    }
    assert "indistinguishable" not in conclusions.seed0_delta_sentence(deltas)


def test_an_f1_interval_stays_inside_its_range():
    assert step_bench.f1_figure({"mean": 0.99, "ci_low": 0.975, "ci_high": 1.004}) == "0.990 [0.975, 1.000]"
    assert step_bench.f1_figure({"mean": 0.01, "ci_low": -0.02, "ci_high": 0.04}) == "0.010 [0.000, 0.040]"
    assert (
        step_bench.f1_figure({"mean": -0.5, "ci_low": -1.2, "ci_high": 0.2}, signed=True) == "-0.500 [-1.200, +0.200]"
    )


# ------------------------------------------------- the front page tells the truth (issue 50, items 5 and 6)


def _delta(mean, low, high, verdict, mde=0.0412, n=5, n_seeds=5):
    return {
        "mean": mean,
        "ci_low": low,
        "ci_high": high,
        "verdict": verdict,
        "holds": verdict == "holds",
        "mde": mde,
        "n": n,
        "n_seeds": n_seeds,
        "k": 3,
        "null": 0.0,
        "expect": "greater",
        "interval": "seeds and questions",
        "reason": None,
    }


def _with_delta(d: dict) -> dict:
    return {
        "schema_version": 2,
        "evaluation": {"primary": {"benchmark": "toy-id", "policy_seeds": [0], "delta_auroc": d}},
    }


def test_the_first_sentence_answers_with_the_verdict_the_interval_the_seeds_and_the_mde():
    say = lambda d: conclusions.answer_sentence(_with_delta(d))  # noqa: E731
    head = "Does goal-conditioning help here? "
    delta = "ΔAUROC (goal-conditioned − baseline RM, toy-id)"
    assert (
        say(_delta(0.09, 0.03, 0.15, "holds"))
        == f"{head}Yes (holds): {delta} +0.090 [+0.030, +0.150] over 5 paired RM seeds, MDE 0.041."
    )
    assert say(_delta(-0.09, -0.15, -0.03, "reversed")) == (
        f"{head}No, reversed (the baseline RM ranks better): {delta} −0.090 [−0.150, −0.030] "
        f"over 5 paired RM seeds, MDE 0.041."
    )
    # not shown, its interval reaching past ±0.05: plain "not shown", never "equivalent" nor "shown equal"
    wide = say(_delta(0.0619, -0.0270, 0.1508, "not shown", mde=0.1226))
    assert wide == f"{head}Not shown: {delta} +0.062 [−0.027, +0.151] over 5 paired RM seeds, MDE 0.123."
    # not shown, the whole interval inside ±0.05: equivalent within it
    assert say(_delta(-0.001, -0.016, 0.014, "not shown", mde=0.0219)) == (
        f"{head}Not shown; equivalent within ±0.05: {delta} −0.001 [−0.016, +0.014] over 5 paired RM seeds, MDE 0.022."
    )
    assert "equivalent" not in say(_delta(0.0, -0.05, 0.03, "not shown"))  # a bound on ±0.05 is not inside it
    assert "equivalent" not in say(_delta(0.01, 0.005, 0.03, "holds"))  # only a null can read equivalent
    for d in (_delta(0.09, 0.03, 0.15, "holds"), _delta(0.0, -0.02, 0.02, "not shown")):
        assert "shown equal" not in say(d) and "no difference" not in say(d)


def test_the_first_sentence_of_both_committed_front_pages():
    assert conclusions.answer_sentence(committed("confident")) == (
        "Does goal-conditioning help here? Not shown: ΔAUROC (goal-conditioned − baseline RM, toy-id) "
        "+0.062 [−0.027, +0.151] "
        "over 5 paired RM seeds, MDE 0.123."
    )
    assert conclusions.answer_sentence(committed("demo")).startswith(
        "Does goal-conditioning help here? Not shown; equivalent within ±0.05: "
        "ΔAUROC (goal-conditioned − baseline RM, toy-id) "
        "−0.001 [−0.016, +0.014] over 5 paired RM seeds, MDE 0.022."
    )
    for name in ("confident", "demo"):
        page = (ROOT / "reports" / name / "index.html").read_text(encoding="utf-8")
        first = html.escape(conclusions.answer_sentence(committed(name)))
        assert f'<p class="answer"><b>{first}</b>' in page, (
            f"reports/{name}/index.html: re-render it (scripts/rerender_check.py)"
        )


def test_the_first_sentence_survives_null_and_nan_figures():
    for broken in (
        {"mean": None, "ci_low": None, "ci_high": None, "holds": None, "reason": "no seed defined"},
        {"mean": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "n_seeds": 5, "n": 0},
        {},
    ):
        text = conclusions.answer_sentence(_with_delta(broken))
        assert text.startswith("Does goal-conditioning help here? Cannot be judged") and "nan" not in text.lower()
    assert conclusions.answer_sentence({"schema_version": 2, "evaluation": {}}) == ""
    assert frontpage.answer(_with_delta({"mean": float("nan")})).startswith('<p class="answer">')


def test_the_sd_bound_is_the_chi_square_upper_bound():
    import math

    from scipy import stats

    from goalrm_core.evaluation.stats import sd_upper

    values = [0.611, 0.685, 0.786, 0.618, 0.650]
    n, mean = len(values), sum(values) / len(values)
    s2 = sum((v - mean) ** 2 for v in values) / (n - 1)
    assert math.isclose(sd_upper(values), math.sqrt((n - 1) * s2 / stats.chi2.ppf(0.2, n - 1)))
    assert sd_upper(values) > math.sqrt(s2)
    assert math.isnan(sd_upper([0.5])) and math.isnan(sd_upper([0.5, None, float("nan")]))
    from goalrm_core.study import power

    assert power.sd_upper is sd_upper  # one bound, in the core; the study reads it from there


def test_each_arms_spread_against_its_targets():
    spread = {s.rm: s for s in conclusions.spreads(committed("confident"))}
    assert spread["baseline"].clearing == 1 and spread["goal-conditioned"].clearing == 3  # seeds at length-only + 0.15
    assert round(spread["baseline"].sd, 3) == 0.071 and round(spread["goal-conditioned"].sd, 3) == 0.041
    assert all(s.sd_upper > s.sd and s.sd_state == "missed" for s in spread.values())
    text = conclusions.spread_sentence(committed("confident"))
    assert "baseline SD 0.071 (80% upper bound 0.110): missed; 1 of 5 seeds clear length-only + 0.15" in text
    assert all(s.sd_state == "met" for s in conclusions.spreads(committed("demo")))
    # the SD within the target but its upper bound above it: not shown; undefined margins are left out
    tree = {
        "evaluation": {
            "primary": {
                "gate": {
                    "margin_over_length": {
                        "baseline": {"per_seed": [0.20, 0.22, 0.24]},
                        "goal-conditioned": {"per_seed": [0.2, None, float("nan")]},
                    }
                }
            }
        }
    }
    spread = {s.rm: s for s in conclusions.spreads(tree)}
    assert spread["baseline"].sd_state == "not shown" and spread["baseline"].clearing == 3
    assert spread["goal-conditioned"].sd_state == "undefined" and spread["goal-conditioned"].n == 1
    assert "goal-conditioned SD undefined (1 seed defined)" in conclusions.spread_sentence(tree)
    assert conclusions.spread_sentence({"evaluation": {}}) == ""


def test_a_claim_the_design_cannot_test_reads_not_testable_here():
    confident = committed("confident")
    why = conclusions.filter_untestable(confident)
    assert why and "saves only 0.27% of toy-id tokens" in why and "every sample is wrong" in why
    records = [c for c in conclusions.conclusions(confident) if c.claim_id.startswith("filter.")]
    assert records and all(c.verdict == "not testable here" and c.state == "not tested" for c in records)
    assert all(c.verdict_words.startswith("not testable here: the oracle filter") for c in records)
    page = html.unescape(frontpage.primary_findings(confident))
    assert page.count("toy-id): not testable here: the oracle filter") == 2 and "a saving is not shown" not in page
    # the rule, not the profile: the same run with an oracle that saves 1% or more is judged as before
    tree = json.loads(json.dumps(confident))
    tree["evaluation"]["filter_rules"]["toy-id"]["oracle (first error)"]["tokens_saved_pct"] = (
        conclusions.FILTER_TESTABLE_PCT
    )
    assert conclusions.filter_untestable(tree) is None
    assert all(c.verdict != "not testable here" for c in conclusions.conclusions(tree))
    assert conclusions.filter_untestable(committed("demo")) is None  # its oracle saves 20%
    for broken in (None, float("nan")):
        tree["evaluation"]["filter_rules"]["toy-id"]["oracle (first error)"]["tokens_saved_pct"] = broken
        assert conclusions.filter_untestable(tree) is None  # nothing recorded: no rule to apply


def test_the_page_reads_one_gate_verdict():
    """``evaluation.gate.passed: true`` (the detail seed's point estimates) beside ``primary.gate.state: failed``
    (over seeds): the page reads failed, and words the other as the detail seed's reading."""
    from goalrm_core.report.index_page import render_index

    confident = committed("confident")
    assert (
        confident["evaluation"]["gate"]["passed"] is True
        and confident["evaluation"]["primary"]["gate"]["state"] == "failed"
    )
    reading = conclusions.detail_gate_reading(confident)
    assert reading.startswith("RM seed 10 alone") and reading.endswith("over all 5 RM seeds: failed.")
    page = html.unescape(render_index("confident", "now", [], confident, ROOT / "reports" / "confident"))
    assert "gate-failed" in page and "gate-passed" not in page and reading in page
    assert "True (RM seed 10 alone; over seeds the gate failed" in page
    assert conclusions.detail_gate_reading(committed("demo")) == ""  # the two agree: nothing to add


def test_pruning_that_saves_tokens_but_not_wall_time_says_why():
    """(54, item 3) Where pruning's token saving holds and its wall-time ratio lies wholly at or above 1, the
    sentence says that a sampling step costs the same however many rows run; elsewhere it says nothing of it."""
    import json
    from pathlib import Path

    from goalrm_core.report import conclusions

    metrics = json.loads((Path(__file__).resolve().parents[2] / "reports" / "confident" / "metrics.json").read_text())
    assert "saves tokens but not wall time" in conclusions.pruning_sentence(metrics)
    wall = metrics["timings"]["decoding"]["pruning_across_seeds"]["wall_ratio"]
    faster = {
        **metrics,
        "timings": {
            **metrics["timings"],
            "decoding": {
                **metrics["timings"]["decoding"],
                "pruning_across_seeds": {"wall_ratio": {**wall, "mean": 0.8, "ci_low": 0.7, "ci_high": 0.9}},
            },
        },
    }
    assert "saves tokens but not wall time" not in conclusions.pruning_sentence(faster)
