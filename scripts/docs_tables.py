"""The tables of docs/ that the code defines, generated from the one definition each has.

    python scripts/docs_tables.py            # says which tables are out of date (exit 1 if any)
    python scripts/docs_tables.py --write    # rewrites them

Each table sits between a begin and an end marker naming its source; tests/test_docs.py fails when one
drifts from the code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core.generated_block import update_file  # noqa: E402
from goalrm_core.model.strategies import strategies_table  # noqa: E402
from goalrm_core.pipeline.profile_rules import profile_keys_table  # noqa: E402
from goalrm_core.recipes.profile_keys import command_line_keys_table  # noqa: E402
from goalrm_core.study.recipe import old_keys_table  # noqa: E402
from goalrm_core.tasks.toymath.problems import benchmark_table  # noqa: E402
from goalrm_core.train.config import official_defaults_table  # noqa: E402

COMMAND = "python scripts/docs_tables.py --write"

#: (document, the source its markers name) -> the function that writes the table
TABLES = {
    ("docs/migration.md", "OFFICIAL_DEFAULTS in goalrm_core/train/config.py"): official_defaults_table,
    ("docs/migration.md", "OLD_KEYS in goalrm_core/study/recipe.py"): old_keys_table,
    ("docs/toymath.md", "CHAIN_BENCHMARKS in goalrm_core/tasks/toymath/problems.py"): benchmark_table,
    ("docs/profiles.md", "PROFILE_RULES and PROFILE_HELP in goalrm_core/pipeline/profile_rules.py"): profile_keys_table,
    ("docs/profiles.md", "COMMAND_LINE_KEYS in goalrm_core/recipes/profile_keys.py"): command_line_keys_table,
    ("docs/profiles.md", "CONTRASTIVE_STRATEGIES in goalrm_core/model/strategies.py"): strategies_table,
}


def markers(source: str) -> tuple[str, str]:
    return (
        f"<!-- begin: generated from {source} by `{COMMAND}`; do not edit by hand -->",
        f"<!-- end: generated from {source} -->",
    )


def block(source: str, table: str) -> str:
    begin, end = markers(source)
    return f"{begin}\n{table}\n{end}"


def stale(write: bool, root: Path = ROOT) -> list[str]:
    """The tables that differ from their source (rewritten when ``write``), as 'doc: source'."""
    out = []
    for (doc, source), table in TABLES.items():
        if update_file(root / doc, *markers(source), block(source, table()), write=write, what=f"table of {source}"):
            out.append(f"{doc}: {source}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/docs_tables.py", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the tables that are out of date")
    args = parser.parse_args(argv)
    changed = stale(args.write)
    for line in changed:
        print(f"{line}: {'rewritten' if args.write else 'out of date'}")
    if not changed:
        print(f"{len(TABLES)} tables up to date")
    return 1 if changed and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
