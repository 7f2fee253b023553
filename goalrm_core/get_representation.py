"""``python -m goalrm_core.get_representation``: the official ``get_representation.py``'s command line, the same as
``goalrm get-representation``
(:mod:`goalrm_core.cli.get_representation`)."""

import sys

if __name__ == "__main__":
    from goalrm_core.cli import main

    sys.exit(main(["get-representation", *sys.argv[1:]]))
