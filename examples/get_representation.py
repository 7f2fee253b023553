#!/usr/bin/env python
"""The official ``examples/get_representation.py``: ``goalrm get-representation`` with the same flags
(docs/migration.md)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the project's root, when goalrm is not installed
from goalrm_core.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["get-representation", *sys.argv[1:]]))
