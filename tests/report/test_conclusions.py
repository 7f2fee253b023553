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
    deltas = {"toy-id": {"delta": 0.0, "ci_low": -0.1, "ci_high": 0.1}, "toy-zero": {"delta": 0.2, "ci_low": 0.1, "ci_high": 0.3}}
    assert "indistinguishable" not in conclusions.seed0_delta_sentence(deltas)


def test_an_f1_interval_stays_inside_its_range():
    assert step_bench.f1_figure({"mean": 0.99, "ci_low": 0.975, "ci_high": 1.004}) == "0.990 [0.975, 1.000]"
    assert step_bench.f1_figure({"mean": 0.01, "ci_low": -0.02, "ci_high": 0.04}) == "0.010 [0.000, 0.040]"
    assert step_bench.f1_figure({"mean": -0.5, "ci_low": -1.2, "ci_high": 0.2}, signed=True) == "-0.500 [-1.200, +0.200]"
