"""Every verdict state (holds, reversed, not shown with its minimum detectable effect, not tested,
undefined) through each piece of code that words verdicts: the verdict module, the report's primary
findings and tables, the README's rows, the reproduction column and `goalrm compare`."""

import copy
import html

import pytest

from goalrm_core.evaluation import hierarchical, verdicts
from goalrm_core.evaluation.stats import across_seeds
from goalrm_core.report import compare, frontpage, readme, reproduction
from goalrm_core.study import evaluation as ev
from goalrm_core.study.decoding import pruning_seeds_frame
from goalrm_core.study.rms import RMS


def summary(state: str) -> dict:
    """A recorded across-seeds-and-questions summary in ``state`` (expect "greater", null 0)."""
    base = {
        "per_seed": [0.1] * 5,
        "n_seeds": 5,
        "n": 5,
        "k": 5,
        "null": 0.0,
        "expect": "greater",
        "reason": None,
        "interval": "seeds and questions",
        "se": 0.01,
        "se_seeds": 0.006,
        "se_questions": 0.008,
        "df": 30.0,
    }
    shapes = {
        "holds": (0.05, 0.03, 0.07, True),
        "reversed": (-0.05, -0.07, -0.03, False),
        "not shown": (0.01, -0.01, 0.03, False),
    }
    if state in shapes:
        mean, low, high, holds = shapes[state]
        return {**base, "mean": mean, "ci_low": low, "ci_high": high, "holds": holds, "verdict": state, "mde": 0.0523}
    if state == "not tested":
        return hierarchical.not_tested(
            {**base, "mean": 0.0, "ci_low": 0.0, "ci_high": 0.0, "holds": False},
            "every seed's tuning chose pruning off: nothing was pruned",
        )
    return {
        **base,
        "per_seed": [0.1, None, None, None, None],
        "n": 1,
        "mean": 0.1,
        "ci_low": None,
        "ci_high": None,
        "holds": None,
        "verdict": "undefined",
        "reason": "1 of 5 seeds defined: no spread over seeds to judge by",
    }


STATES = ("holds", "reversed", "not shown", "not tested", "undefined")


@pytest.mark.parametrize("state", STATES)
def test_the_verdict_module_words_each_state(state):
    s = summary(state)
    assert verdicts.state(s) == state
    text = verdicts.words(s)
    assert text.startswith(state)
    if state == "not shown":
        assert text == "not shown (an effect of 0.05 would have been seen with 80% power)"
    if state in ("not tested", "undefined"):
        assert verdicts.reason(s) in text


def test_older_summaries_get_the_same_states_from_their_interval():
    # no `verdict`, no `mde`: the states follow from `holds` and the interval, never a crash
    assert verdicts.state(across_seeds([0.2, 0.25, 0.22])) == "holds"
    assert verdicts.state(across_seeds([-0.03, -0.02, -0.025, -0.028])) == "reversed"
    assert verdicts.state(across_seeds([0.01, -0.02, 0.03])) == "not shown"
    assert verdicts.state(across_seeds([0.1, None])) == "undefined"
    assert verdicts.state(across_seeds([-0.0067] * 5, expect="less")) == "undefined"  # zero width over seeds alone
    assert verdicts.state(across_seeds([1.0] * 3, null=1.0, expect="less"), switched_off=True) == "not tested"
    old = {k: v for k, v in across_seeds([0.01, -0.02, 0.03]).items() if k not in ("mde", "se")}
    assert "would have been seen with 80% power" in verdicts.words(old)  # from its own t-interval
    assert verdicts.words({"holds": False, "ci_low": -1, "ci_high": 1}) == "not shown"  # nothing to derive it from
    for broken in (None, {}, {"holds": True}, {"verdict": "no such state", "holds": None}):
        assert verdicts.state(broken) == "undefined"


def primary_with(state: str) -> dict:
    s = summary(state)
    less = {
        **s,
        "expect": "less",
        "mean": -s["mean"] if isinstance(s["mean"], float) else s["mean"],
        "ci_low": -s["ci_high"] if s["ci_high"] is not None else None,
        "ci_high": -s["ci_low"] if s["ci_low"] is not None else None,
    }
    return {
        "benchmark": "toy-id",
        "rm_seeds": [0, 1, 2, 3, 4],
        "n_seeds": 5,
        "headline": "sample0",
        "policy_seeds": [0],
        "gate": {"state": "passed", "reason": None, "margin_over_length": {rm: summary("holds") for rm in RMS}},
        "delta_auroc": s,
        "first_error_did": {rm: less for rm in RMS},
        "filter": {rm: {"threshold": 0.0, "tokens_saved_pct": s, "accuracy_change": less} for rm in RMS},
    }


EXPECTED_WORDS = {  # what the report's sentences say for each state
    "holds": ("the goal-conditioned RM ranks better", "Q falls at the first error", "the filter costs accuracy"),
    "reversed": ("reversed: the baseline RM ranks better", "reversed: Q rises", "reversed: accuracy rises"),
    "not shown": (
        "a difference is not shown (an effect of 0.05 would have been seen with 80% power)",
        "not shown that Q falls (an effect of 0.05",
        "a cost is not shown (an effect of 5.23 points",
    ),
    "not tested": ("not tested: every seed's tuning chose pruning off",) * 3,
    "undefined": ("cannot be judged: 1 of 5 seeds defined",) * 3,
}


@pytest.mark.parametrize("state", STATES)
def test_the_report_words_each_state(state):
    primary = primary_with(state)
    metrics = {"schema_version": 2, "evaluation": {"primary": primary}}
    findings = html.unescape(frontpage.primary_findings(metrics))
    delta_words, q_words, filter_words = EXPECTED_WORDS[state]
    assert delta_words in findings and q_words in findings and filter_words in findings
    assert "for this policy (policy seed 0)" in findings
    if state != "not shown":
        assert "not shown" not in findings.split("<ul>")[1].split("Reward comparison")[1].split("It is the one")[0]
    # the notebook's table and reading
    frame = ev.primary_frame(primary)
    row = frame[frame["figure"].str.startswith("ΔAUROC")].iloc[0]
    assert row["conclusion"].startswith({"undefined": "cannot be judged"}.get(state, state))
    reading = ev.primary_reading(primary)  # the same sentences as the page: each conclusion worded once
    assert "for this policy (policy seed 0)" in reading
    assert delta_words in reading and q_words in reading and filter_words in reading


@pytest.mark.parametrize("state", STATES)
def test_the_readme_rows_and_the_reproduction_column_word_each_state(state, tmp_path):
    primary = primary_with(state)
    metrics = {
        "schema_version": 2,
        "evaluation": {"primary": primary},
        "provenance": {"profile": {"name": "demo", "parameters": {"seed": 0}}},
    }
    rows = {(label, rm): s for label, rm, s, _, _ in reproduction.primary_rows(metrics)}
    s = rows[("ΔAUROC goal-conditioned − baseline on toy-id (> 0)", "both")]
    short = {"undefined": "cannot be judged"}.get(state, state)
    assert reproduction.verdict_text(s) == short
    assert reproduction.verdict_text(s, full=True).startswith(short)
    report = tmp_path / "reports" / "demo"
    report.mkdir(parents=True)
    (report / "metrics.json").write_text(__import__("json").dumps(metrics))
    other = copy.deepcopy(metrics)
    other["evaluation"]["primary"]["delta_auroc"] = summary("reversed" if state != "reversed" else "holds")
    rerun = tmp_path / "reports" / "reproducibility" / "demo-seed1"
    rerun.mkdir(parents=True)
    (rerun / "metrics.json").write_text(__import__("json").dumps(other))
    block = readme.findings(report, tmp_path / "reports" / "reproducibility")
    line = next(row for row in block.splitlines() if row.startswith("| ΔAUROC"))
    assert f"| {short}" in line and "| no: " in line  # the rerun's verdict differs, whichever way
    assert "for this policy (policy seed 0)" in block
    seen = reproduction.verdicts("ΔAUROC goal-conditioned − baseline on toy-id (> 0)", "both", [metrics, other])
    assert seen[0] == short and seen[1] in ("reversed", "holds")


@pytest.mark.parametrize("state", STATES)
def test_compare_words_each_state(state):
    metrics = {"schema_version": 2, "evaluation": {"primary": primary_with(state)}}
    c = compare.collect_conclusions(metrics)
    q = c[f"first_error_did.{RMS[0]}@seeds"]
    assert q["verdict"] == state
    assert c["delta_auroc.toy-id@seeds"]["verdict"] == state  # a difference not shown is never "no difference"
    if state == "not shown":
        assert "would have been seen with 80% power" in q["note"]
    result = compare.compare_runs(metrics, metrics)
    row = next(r for r in result["conclusions"] if r["id"] == f"first_error_did.{RMS[0]}@seeds")
    assert row["holds_in_both"] is (None if state in ("not tested", "undefined") else True)
    page = compare.render_markdown(result)
    assert f"| {state}" in page


def test_compare_reads_pruning_switched_off_in_every_seed_as_not_tested():
    pruning = {
        "benchmark": "toy-id",
        "rm_seeds": [0, 1, 2],
        "pruning_off": 3,
        "threshold": [-1.0] * 3,
        "tokens_ratio": across_seeds([1.0] * 3, null=1.0, expect="less"),
        "accuracy_change": across_seeds([0.0] * 3, expect="less"),
    }
    metrics = {"schema_version": 2, "decoding": {"primary": {"pruning": pruning}}}
    c = compare.collect_conclusions(metrics)
    assert c["pruning.saves_tokens@seeds"]["verdict"] == "not tested"
    assert "pruning off" in c["pruning.saves_tokens@seeds"]["note"]
    sentence = html.unescape(frontpage.primary_findings(metrics))
    assert "not tested: every seed" in sentence and "a saving is not shown" not in sentence
    rows = reproduction.primary_rows(metrics)
    assert all(reproduction.verdict_text(s) == "not tested" for *_, s, _, _ in rows)
    frame = pruning_seeds_frame(pruning, {"wall_ratio": across_seeds([1.0, 1.02, 0.98], null=1.0, expect="less")})
    assert all(c.startswith("not tested") for c in frame["conclusion"][:3])


def _gate(state: str, well_formed: str | None) -> dict:
    margin = summary("holds" if state == "passed" else "not shown")
    gate = {"state": state, "reason": None, "margin_over_length": {rm: margin for rm in RMS}}
    if well_formed is not None:
        gate["well_formed"] = {
            "state": well_formed,
            "reason": None,
            "required_margin": 0.15,
            "margin_over_length": {rm: summary("holds" if well_formed == "passed" else "not shown") for rm in RMS},
        }
    return gate


@pytest.mark.parametrize("state", STATES[:3] + STATES[4:])
@pytest.mark.parametrize(
    "gate, well_formed, says",
    [
        ("failed", None, "cannot test the question"),
        ("passed", "failed", "cannot test whether it helps one verify arithmetic"),
        ("passed", "passed", "tests whether goal-conditioning helps a reward model verify"),
        ("passed", None, "tests ranking, not verification"),
    ],
)
def test_the_page_opens_with_the_answer_and_what_the_design_can_test(state, gate, well_formed, says):
    metrics = {
        "schema_version": 2,
        "evaluation": {
            "primary": {
                "benchmark": "toy-id",
                "policy_seeds": [0],
                "delta_auroc": summary(state),
                "gate": _gate(gate, well_formed),
            }
        },
    }
    page = html.unescape(frontpage.answer(metrics))
    assert page.startswith('<p class="answer"><b>Does goal-conditioning help here?') and says in page
    assert "for this policy (policy seed 0)" in page
    # the first sentence: the verdict, then ΔAUROC with its interval, the paired seeds and the MDE (50, item 5)
    words = {
        "holds": "Yes (holds): ΔAUROC (goal-conditioned − baseline RM, toy-id) "
        "+0.050 [+0.030, +0.070] over 5 paired RM seeds, MDE 0.052.",
        "reversed": "No, reversed (the baseline RM ranks better): "
        "ΔAUROC (goal-conditioned − baseline RM, toy-id) −0.050 [−0.070, −0.030]",
        # its whole interval lies inside ±0.05: equivalent within it, and still "not shown", never "shown equal"
        "not shown": "Not shown; equivalent within ±0.05: "
        "ΔAUROC (goal-conditioned − baseline RM, toy-id) +0.010 [−0.010, +0.030] over 5",
        "undefined": "Cannot be judged (1 of 5 seeds defined: no spread over seeds to judge by): "
        "ΔAUROC (goal-conditioned − baseline RM, "
        "toy-id) +0.100 (no interval: undefined) over 1 of 5 paired RM seeds (4 undefined), MDE not recorded.",
    }
    assert page.startswith(f'<p class="answer"><b>Does goal-conditioning help here? {words[state]}'), page[:400]
    assert frontpage.answer({"schema_version": 2, "evaluation": {}}) == ""  # before notebook 04: nothing to answer


@pytest.mark.parametrize("state", STATES)
def test_the_front_pages_step_sentence_words_each_state(state):
    """The step-verifier sentence (second on the front page) says the difference's verdict, a null with its MDE."""
    f1 = {
        "goal-conditioned Q": {"mean": 0.41, "ci_low": 0.30, "ci_high": 0.52},
        "baseline partial reward": {"mean": 0.37, "ci_low": 0.25, "ci_high": 0.49},
        "goal-conditioned Q − baseline partial reward": summary(state),
    }
    metrics = {
        "evaluation": {
            "step_verifiers": {"bench": "toy-id", "reference": "baseline partial reward", "figures": {"f1": f1}}
        }
    }
    text = html.unescape(frontpage.step_answer(metrics))
    assert (
        "goal-conditioned Q's first-error F1 is 0.410 [0.300, 0.520], baseline partial reward's 0.370 [0.250, 0.490]"
        in text
    )
    assert f": {state}" in text
    assert ("would have been seen with 80% power" in text) == (state == "not shown")
    if state in ("undefined", "not tested"):
        assert f"({summary(state)['reason']})" in text
    assert frontpage.step_answer({"evaluation": {}}) == ""
    # what label noise costs: from the design's calibration rows where they measured it, else said to be unmeasured
    assert "label noise (rollout-estimated against exact step labels) costs is not measured for this design" in text
    twins = "rollout-label PRM (2,000 pairs) partial reward − exact-label PRM (2,000 pairs) partial reward"
    rows = [
        {
            "kind": "summary",
            "metric": "f1",
            "name": "val",
            "run_dir": "runs/calibration/confident/v",
            "seeds": [0, 1],
            "verifier": twins,
            **summary(state),
        }
    ]
    text = html.unescape(frontpage.step_answer(metrics, rows, "confident"))
    assert (
        "Label noise, measured in this design's calibration, not in this run" in text and "is not measured" not in text
    )
    assert f": {state}" in text.split("Label noise")[1]
