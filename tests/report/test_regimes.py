"""The two designs' claims side by side: every cell comes from the reports' metrics.json."""

import copy
import json
from pathlib import Path

import pytest

from goalrm_core.report import conclusions, regimes

DEMO = Path(__file__).resolve().parents[2] / "reports" / "demo" / "metrics.json"


@pytest.fixture()
def two_reports(tmp_path):
    if not DEMO.is_file():
        pytest.skip("no committed demo report")
    demo = json.loads(DEMO.read_text())
    confident = copy.deepcopy(demo)
    gate = confident["evaluation"]["primary"]["gate"]["margin_over_length"]["baseline"]
    gate.update(mean=-0.5, ci_low=-0.6, ci_high=-0.4, k=0, holds=False)
    gate.pop("verdict", None)  # the stored verdict is of the real interval: let it be read from this one
    del confident["decoding"]["steering"]
    for name, metrics in (("demo", demo), ("confident", confident)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(metrics))
    return tmp_path


def test_rows_put_each_design_in_its_column(two_reports):
    designs, rows = regimes.side_by_side(regimes.read_reports(two_reports))
    assert designs == ["demo", "confident"]
    gate = next(values for claim, rm, values in rows if claim.startswith("gate: AUROC") and rm == "baseline")
    demo_gate = json.loads(DEMO.read_text())["evaluation"]["primary"]["gate"]["margin_over_length"]["baseline"]
    assert gate[0] == conclusions.Conclusion("gate.baseline", "gate", "baseline", demo_gate).cell
    assert gate[1] == "−0.50 [−0.60, −0.40], 0 of 5 seeds: reversed"  # wholly below 0: the other way
    steering = next(values for claim, _, values in rows if claim.startswith("steering"))
    assert steering[0] != "absent" and steering[1] == "absent"
    claims = [claim for claim, _, _ in rows]
    assert len(claims) == len(set(zip(claims, [rm for _, rm, _ in rows])))


def test_markdown_and_html_need_both_designs(two_reports, tmp_path):
    both = regimes.read_reports(two_reports)
    table = regimes.markdown(both)
    assert table.count("\n") == len(regimes.side_by_side(both)[1]) + 3
    assert regimes.markdown({"demo": both["demo"]}) == ""
    page = regimes.regimes_html("confident", two_reports / "confident")
    assert "confident (this report)" in page and "−0.50 [−0.60, −0.40]" in page
    alone = tmp_path / "alone"
    (alone / "demo").mkdir(parents=True)
    (alone / "demo" / "metrics.json").write_text(DEMO.read_text())
    assert regimes.regimes_html("demo", alone / "demo") == ""


def test_reruns_belong_to_their_own_profile(tmp_path):
    """The demo's reruns under reports/reproducibility/ are not reruns of the confident report beside it."""
    from goalrm_core.report.reproduction import reruns_of

    def write(path, profile):
        path.mkdir(parents=True)
        (path / "metrics.json").write_text(json.dumps({"provenance": {"profile": {"name": profile}}}))

    write(tmp_path / "demo", "demo")
    write(tmp_path / "confident", "confident")
    write(tmp_path / "reproducibility" / "demo-seed1", "demo")
    assert list(reruns_of(tmp_path / "demo")) == ["demo-seed1"]
    assert reruns_of(tmp_path / "confident") == {}
