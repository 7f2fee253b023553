"""``python -m goalrm_core.cli <command> ...``: the same as ``goalrm <command> ...``."""

import sys

from goalrm_core.cli import main

sys.exit(main())
