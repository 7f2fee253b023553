#!/usr/bin/env python
"""The official ``examples/train_rm.py``: ``goalrm train-rm --official_defaults`` with the same flags, so every
default is the official code's (docs/migration.md)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the project's root, when goalrm is not installed
from goalrm_core.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["train-rm", "--official_defaults", *sys.argv[1:]]))
