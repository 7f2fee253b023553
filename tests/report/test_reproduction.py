"""A primary conclusion is stated only where the report's reruns reach the same verdict."""

import json

from goalrm_core.evaluation.stats import across_seeds
from goalrm_core.report import reproduction as rep
from goalrm_core.report.index_page import reproduction_html


def metrics(fall):
    gate = {"state": "passed", "reason": None, "margin_over_length": {"baseline": across_seeds([0.2, 0.21, 0.19])}}
    return {
        "schema_version": 2,
        "evaluation": {
            "primary": {
                "gate": gate,
                "delta_auroc": across_seeds([0.01, -0.01, 0.0]),
                "first_error_did": {"goal-conditioned": across_seeds(fall, expect="less")},
                "filter": {},
            }
        },
    }


def write(path, m):
    path.mkdir(parents=True)
    (path / "metrics.json").write_text(json.dumps(m))


def test_a_conclusion_the_reruns_disagree_on_is_dropped(tmp_path):
    report = tmp_path / "reports" / "demo"
    write(report, metrics([-0.3, -0.31, -0.29]))
    write(tmp_path / "reports" / "reproducibility" / "demo-seed1", metrics([-0.3, -0.31, -0.29]))
    write(tmp_path / "reports" / "reproducibility" / "demo-threads1", metrics([0.1, -0.2, 0.05]))
    reruns = rep.reruns_of(report)
    assert list(reruns) == ["demo-seed1", "demo-threads1"]
    lost = rep.dropped(metrics([-0.3, -0.31, -0.29]), reruns)
    assert [(label.startswith("Q's change at the first wrong line"), rm, seen) for label, rm, seen in lost] == [
        (True, "goal-conditioned", ["holds", "holds", "not shown"])
    ]
    page = reproduction_html(metrics([-0.3, -0.31, -0.29]), report)
    assert "Reproduced?" in page and "2 of 3 primary conclusions" in page and "dropped: the runs disagree" in page
    # every column is named, the verdict across the runs included
    assert "<th>across the runs</th>" in page and "<th></th>" not in page


def test_no_reruns_no_section(tmp_path):
    assert reproduction_html(metrics([-0.3, -0.31, -0.29]), tmp_path / "reports" / "demo") == ""
    assert rep.primary_rows({}) == []
