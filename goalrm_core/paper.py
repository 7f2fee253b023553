"""``python -m goalrm_core.paper ...``: the paper's command lines (docs/migration.md). The recipes
themselves are :mod:`goalrm_core.recipes.paper`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("goalrm_core.recipes.paper", run_name="__main__", alter_sys=True)
