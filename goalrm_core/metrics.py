"""``python -m goalrm_core.metrics``: the official ``metrics.py``'s command line, the same as ``goalrm metrics``
(:mod:`goalrm_core.cli.metrics`)."""

import sys

if __name__ == "__main__":
    from goalrm_core.cli import main

    sys.exit(main(["metrics", *sys.argv[1:]]))
