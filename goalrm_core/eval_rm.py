"""``python -m goalrm_core.eval_rm``: the official ``eval_rm.py``'s command line, the same as ``goalrm eval-rm``
(:mod:`goalrm_core.cli.eval_rm`)."""

import sys

if __name__ == "__main__":
    from goalrm_core.cli import main

    sys.exit(main(["eval-rm", *sys.argv[1:]]))
