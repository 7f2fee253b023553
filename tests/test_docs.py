"""The README stays one screenful per idea and sends reference material to docs/: every docs page is linked
from it, every relative link and anchor of the README and docs/ resolves, CI runs the README's test command,
and the README's timing table is generated from the committed records (scripts/suite_time.py)."""

import importlib.util
import re
from pathlib import Path

import pytest

from goalrm_core.paths import project_root

ROOT = project_root()
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _suite_time():
    spec = importlib.util.spec_from_file_location("suite_time", ROOT / "scripts" / "suite_time.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))
    return {_slug(m) for m in re.findall(r"(?m)^#{1,6} (.+)$", text)}


def test_slug_is_github_s():
    assert (
        _slug("Two designs: the demo and the paper's regime (`confident`)")
        == "two-designs-the-demo-and-the-papers-regime-confident"
    )
    assert _slug("Profile keys and the trainer's flags") == "profile-keys-and-the-trainers-flags"


def test_readme_is_at_most_250_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_every_docs_page_is_linked_from_the_readme():
    assert DOCS, "docs/ holds the reference pages"
    linked = {
        (README.parent / target.split("#")[0]).resolve() for target in LINK.findall(README.read_text(encoding="utf-8"))
    }
    assert [p.name for p in DOCS if p.resolve() not in linked] == []


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_and_anchors_resolve(page):
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert broken == []


def test_ci_runs_the_readme_s_test_command():
    fence = re.search(r"(?ms)^## Two commands\n+```bash\n(.*?)^```", README.read_text(encoding="utf-8"))
    assert fence, "README: a bash block under 'Two commands'"
    test_command = fence.group(1).splitlines()[0].split("#")[0].strip()
    assert test_command == "make test"
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci


def test_timing_table_is_generated_from_the_committed_records():
    st = _suite_time()
    assert st.block(ROOT) in README.read_text(encoding="utf-8"), "run: python scripts/suite_time.py --readme"
    assert st.update(README, st.block(ROOT), write=False) is False


def test_timing_table_names_each_command_with_the_machine_speed():
    st = _suite_time()
    suite = {
        "seconds": 75.2,
        "tests": 10,
        "passed": 8,
        "failed": 1,
        "errors": 0,
        "skipped": 1,
        "commit": "abc1234",
        "dirty": True,
        "date": "2026-01-01",
        "machine": {"cores": 4, "speed": {"matmul_gflops": 101.4, "threads": 4}},
    }
    status = {
        "stages": [
            {"name": "01_data", "duration_s": 30, "status": "ok"},
            {"name": "02_training", "duration_s": 45.5, "status": "kept"},
        ]
    }
    text = st.table(suite, {"provenance": {"machine": {"cores": 2}}}, status)
    make_test, make_report = text.splitlines()[2:]
    assert make_test.startswith(
        "| `make test` | 1 min 15 s of pytest (10 tests: 8 passed, 1 skipped, 1 failed; "
        "code `abc1234` with local changes"
    )
    assert make_test.endswith("| 4 cores, fp32 matmul 101 GFLOP/s at 4 threads |")
    assert "1 min 16 s" in make_report and "resumed" in make_report and make_report.endswith("| 2 cores |")
    assert st.table({}, {}, {}).count("\n") == 2  # nothing recorded: the header alone


def test_junit_counts(tmp_path):
    xml = tmp_path / "junit.xml"
    xml.write_text('<testsuites><testsuite tests="7" failures="1" errors="1" skipped="2"/></testsuites>')
    assert _suite_time().junit_counts(xml) == {"tests": 7, "passed": 3, "failed": 1, "errors": 1, "skipped": 2}


def test_update_refuses_a_readme_without_the_timing_block(tmp_path):
    plain = tmp_path / "README.md"
    plain.write_text("# nothing generated here\n")
    with pytest.raises(ValueError, match="no generated timing block"):
        _suite_time().update(plain, "x", write=False)


def test_the_recorded_suite_runs_pytest_as_make_test_does():
    """`suite_time.py --record` times the suite with the Makefile's own pytest arguments."""
    recipe = (ROOT / "Makefile").read_text(encoding="utf-8").split("\ntest:", 1)[1].split("\n\n", 1)[0]
    line = next(line for line in recipe.splitlines() if "-m pytest" in line)
    assert line.split("-m pytest", 1)[1].split("$(PYTEST_ARGS)")[0].split() == _suite_time().MAKE_TEST


def _docs_tables():
    spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "scripts" / "docs_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tables_the_code_defines_are_generated_from_it():
    """docs/'s tables of the official defaults, the renamed profile keys, the ToyMath benchmarks, the profile keys
    (notebook and command-line) and the contrastive strategies are their definitions in the code, one row per entry
    (``python scripts/docs_tables.py --write``)."""
    from goalrm_core.model.strategies import CONTRASTIVE_STRATEGIES
    from goalrm_core.pipeline.profile_rules import PROFILE_HELP
    from goalrm_core.recipes.profile_keys import COMMAND_LINE_KEYS
    from goalrm_core.study.recipe import OLD_KEYS, TRAINER_KEYS
    from goalrm_core.tasks.toymath.problems import CHAIN_BENCHMARKS
    from goalrm_core.train.config import OFFICIAL_DEFAULTS

    tables = _docs_tables()
    assert tables.stale(write=False) == [], "run: python scripts/docs_tables.py --write"
    firsts = {
        "OFFICIAL_DEFAULTS": [f"`--{name}`" for name in OFFICIAL_DEFAULTS],
        "OLD_KEYS": [f"`{key}`" for key in OLD_KEYS],
        "CHAIN_BENCHMARKS": [f"`{name}`" for name in CHAIN_BENCHMARKS],
        "PROFILE_RULES": [f"`{key}`" for key in PROFILE_HELP if key not in TRAINER_KEYS],
        "COMMAND_LINE_KEYS": [f"`{key}`" for key in COMMAND_LINE_KEYS],
        "CONTRASTIVE_STRATEGIES": [f"`{name}`" for name in CONTRASTIVE_STRATEGIES],
    }
    for (doc, source), _ in tables.TABLES.items():
        begin, end = tables.markers(source)
        block = (ROOT / doc).read_text(encoding="utf-8").split(begin, 1)[1].split(end, 1)[0]
        assert [line.split("|")[1].strip() for line in block.strip().splitlines()[2:]] == firsts[source.split()[0]], (
            source
        )


def test_a_drifted_table_is_found_and_rewritten(tmp_path):
    tables = _docs_tables()
    for doc in {doc for doc, _ in tables.TABLES}:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / doc).write_text(
            (ROOT / doc).read_text(encoding="utf-8").replace("| `toy-zero` |", "| `toy-0` |"), encoding="utf-8"
        )
    assert tables.stale(write=False, root=tmp_path) == [
        "docs/toymath.md: CHAIN_BENCHMARKS in goalrm_core/tasks/toymath/problems.py"
    ]
    assert tables.stale(write=True, root=tmp_path) != [] and tables.stale(write=False, root=tmp_path) == []


def test_a_strategy_registered_after_the_list_was_written_makes_it_stale(monkeypatch, tmp_path):
    """docs/profiles.md's list of contrastive strategies is the registry's: a new strategy, registered as
    docs/design.md says, leaves the list out of date until the tables are rewritten, and then it is a row."""
    from goalrm_core.model import strategies

    tables = _docs_tables()
    source = "CONTRASTIVE_STRATEGIES in goalrm_core/model/strategies.py"
    assert ("docs/profiles.md", source) in tables.TABLES
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "profiles.md").write_text(
        (ROOT / "docs" / "profiles.md").read_text(encoding="utf-8"), encoding="utf-8"
    )
    monkeypatch.setattr(
        tables, "TABLES", {key: table for key, table in tables.TABLES.items() if key[0] == "docs/profiles.md"}
    )
    assert tables.stale(write=False, root=tmp_path) == []
    monkeypatch.setitem(
        strategies.CONTRASTIVE_STRATEGIES,
        "cosine_tempered",
        strategies.ContrastiveStrategy(strategies.cosine_matrix, ("contrastive_temperature",), "sigma(cos / T)"),
    )
    assert tables.stale(write=False, root=tmp_path) == [f"docs/profiles.md: {source}"]
    tables.stale(write=True, root=tmp_path)
    assert (
        "| `cosine_tempered` | sigma(cos / T) | `contrastive_temperature` | each one |"
        in (tmp_path / "docs" / "profiles.md").read_text()
    )
