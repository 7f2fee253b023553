"""The README's numbers come from the committed report."""

from goalrm_core.paths import project_root
from goalrm_core.report import readme

README = (project_root() / "README.md").read_text(encoding="utf-8")


def test_generated_block_matches_the_committed_report():
    text = readme.findings(project_root() / readme.REPORT, project_root() / readme.RERUNS)
    assert f"{readme.BEGIN}\n{text}{readme.END}" in README, "run `python -m goalrm_core.report.readme`"


def test_update_refuses_a_readme_without_the_block(tmp_path):
    plain = tmp_path / "README.md"
    plain.write_text("# nothing generated here\n")
    try:
        readme.update(plain, "x\n", write=False)
    except ValueError as e:
        assert "no generated block" in str(e)
    else:
        raise AssertionError("expected a ValueError")


def test_each_rerun_names_the_code_it_ran(tmp_path):
    """A rerun on other code differs by that code too: the block names every run's commit."""
    import json
    import shutil

    report = tmp_path / "demo"
    report.mkdir()
    committed = project_root() / readme.REPORT
    for name in ("metrics.json", "status.json"):
        shutil.copyfile(committed / name, report / name)
    metrics = json.loads((report / "metrics.json").read_text())
    metrics["provenance"]["git"] = {"commit": "a" * 40, "dirty": False}
    (report / "metrics.json").write_text(json.dumps(metrics))
    rerun = tmp_path / "reproducibility" / "other"
    rerun.mkdir(parents=True)
    metrics["provenance"]["git"] = {"commit": "b" * 40, "dirty": True}
    (rerun / "metrics.json").write_text(json.dumps(metrics))
    text = readme.findings(report, tmp_path / "reproducibility")
    assert "the committed report ran code `aaaaaaa`" in text
    assert "code `bbbbbbb` with local changes)" in text
