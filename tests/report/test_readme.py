"""The README's numbers come from the committed report, and its alias table from the code."""

import re

from goalrm_core.report import readme
from goalrm_core.paths import project_root
from goalrm_core.study.training import RMRecipe

README = (project_root() / "README.md").read_text(encoding="utf-8")


def test_generated_block_matches_the_committed_report():
    text = readme.findings(project_root() / readme.REPORT, project_root() / readme.RERUNS)
    assert f"{readme.BEGIN}\n{text}{readme.END}" in README, "run `python -m goalrm_core.report.readme`"


def test_alias_table_is_the_recipe_s():
    table = dict(re.findall(r"^\| `(\w+)` \| `--(\w+)` \|$", README, flags=re.M))
    assert table == RMRecipe.aliases()


def test_update_refuses_a_readme_without_the_block(tmp_path):
    plain = tmp_path / "README.md"
    plain.write_text("# nothing generated here\n")
    try:
        readme.update(plain, "x\n", write=False)
    except ValueError as e:
        assert "no generated block" in str(e)
    else:
        raise AssertionError("expected a ValueError")
