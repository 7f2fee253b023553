"""The notebooks' ``parameters`` cells are the demo profile: generated from ``params/demo.yaml``.

A notebook opened in JupyterLab runs with the defaults in its ``parameters`` cell, so those defaults
must be the profile the report is named after, or an interactive run is another experiment under the
demo's name. Each notebook declares which keys it reads (the names assigned in that cell); this
module writes their values from the profile, and ``goalrm sync-notebooks --check`` (a test runs it)
fails when a cell has drifted.

Three keys are the runner's to set, and their notebook defaults are deliberately *not* the profile's:
``profile``, ``run_dir`` and ``reports_dir``. An interactive run writes under ``runs/interactive/``
(git-ignored), never into ``reports/<profile>/``: a notebook run by hand cannot overwrite a committed
report.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any, Mapping

SOURCE_PROFILE = "demo"
INTERACTIVE_ROOT = "runs/interactive"
RUNNER_KEYS = ("profile", "run_dir", "reports_dir")
_HEADER = (f"# generated from params/{SOURCE_PROFILE}.yaml by `goalrm sync-notebooks` (edit the profile, not this cell);\n"
           f"# run by hand, this notebook writes under {INTERACTIVE_ROOT}/, never into reports/\n")


def interactive_defaults(profile: str = SOURCE_PROFILE) -> dict[str, str]:
    """The runner-owned keys' values for a notebook run outside ``goalrm report``."""
    run_dir = f"{INTERACTIVE_ROOT}/{profile}"
    return {"profile": profile, "run_dir": run_dir, "reports_dir": f"{run_dir}/report"}


def _parameters_cell(notebook: Mapping[str, Any], path: Path) -> dict:
    cells = [c for c in notebook.get("cells", []) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"{path}: expected one cell tagged 'parameters', found {len(cells)}")
    return cells[0]


def declared_keys(source: str, path: Path) -> list[str]:
    """The names a parameters cell assigns, in order; every statement must be ``name = <literal>``."""
    keys = []
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ValueError(f"{path}: line {e.lineno} of the parameters cell is not Python ({e.msg})") from None
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"{path}: line {node.lineno} of the parameters cell is not `name = literal`")
        keys.append(node.targets[0].id)
    return keys


def declared_parameters(path: Path) -> dict[str, dict[str, Any]]:
    """A notebook's parameters as ``papermill.inspect_notebook`` reports them (``name``,
    ``inferred_type_name``, ``default`` as source text, ``help``), read from the file itself: a
    parameters cell here is ``name = literal`` lines (:func:`declared_keys` holds it to that), so
    there is no annotation to infer from, and a sweep's or a report's checks need not import
    papermill (seconds) before they refuse a bad value."""
    path = Path(path)
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable notebook ({e})") from None
    cell = _parameters_cell(notebook, path)
    source = "".join(cell["source"]) if isinstance(cell.get("source"), list) else str(cell.get("source", ""))
    declared_keys(source, path)  # every statement is `name = literal`
    out = {}
    for node in ast.parse(source).body:
        name = node.targets[0].id
        out[name] = {"name": name, "inferred_type_name": "None", "default": ast.get_source_segment(source, node.value), "help": ""}
    return out


def _literal(value: Any) -> str:
    """A flat profile value as Python source, strings in double quotes as people write them."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


def cell_source(keys: list[str], profile: Mapping[str, Any], profile_name: str = SOURCE_PROFILE) -> str:
    """The parameters cell for ``keys``: the runner's three first, then the profile's values in the
    profile's own order."""
    runner = interactive_defaults(profile_name)
    missing = [k for k in keys if k not in runner and k not in profile]
    if missing:
        raise ValueError(f"params/{profile_name}.yaml sets no value for {', '.join(map(repr, missing))}, "
                         f"which the notebook declares")
    ordered = [k for k in RUNNER_KEYS if k in keys] + [k for k in profile if k in keys and k not in RUNNER_KEYS]
    lines = [f"{k} = {_literal(runner[k] if k in runner else profile[k])}" for k in ordered]
    return _HEADER + "\n".join(lines) + "\n"


def sync_notebook(path: Path, profile: Mapping[str, Any], write: bool) -> bool:
    """Rewrite ``path``'s parameters cell from ``profile``; return whether it differed."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cell = _parameters_cell(notebook, path)
    source = "".join(cell["source"])
    wanted = cell_source(declared_keys(source, path), profile)
    if source == wanted:
        return False
    if write:
        cell["source"] = wanted.splitlines(keepends=True)
        from goalrm_core.data.io import atomic_write_text

        atomic_write_text(path, json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    return True


def sync_notebooks(notebooks_dir: Path, profile: Mapping[str, Any], write: bool) -> list[Path]:
    """Every stage notebook whose parameters cell differs from ``profile`` (rewritten when ``write``)."""
    return [p for p in sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb")) if sync_notebook(p, profile, write)]


def missing_keys(profile: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``key (notebook)`` for every key a notebook declares that the profile does not set, runner keys aside:
    a notebook profile never silently inherits a notebook default."""
    return [f"{key} ({nb})" for nb, params in declared.items() for key in params
            if key not in profile and key not in RUNNER_KEYS]


def main(argv: list[str] | None = None) -> int:
    from goalrm_core.report.profiles import load_profile, resolve_path

    parser = argparse.ArgumentParser(prog="goalrm sync-notebooks",
                                     description=f"Write the notebooks' parameters cells from params/{SOURCE_PROFILE}.yaml.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a cell differs")
    parser.add_argument("--notebooks-dir", default="notebooks")
    parser.add_argument("--params-dir", default="params")
    args = parser.parse_args(argv)
    profile = load_profile(SOURCE_PROFILE, args.params_dir)
    changed = sync_notebooks(resolve_path(args.notebooks_dir), profile, write=not args.check)
    for path in changed:
        print(f"{'differs' if args.check else 'rewrote'}: {path}")
    if args.check and changed:
        print(f"run `goalrm sync-notebooks` to write them from params/{SOURCE_PROFILE}.yaml", file=sys.stderr)
        return 1
    return 0
