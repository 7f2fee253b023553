"""The notebooks' ``parameters`` cells are the demo profile: generated from ``params/demo.yaml``.

A notebook opened in JupyterLab runs with the defaults in its ``parameters`` cell, so those defaults
must be the profile the report is named after, or an interactive run is another experiment under the
demo's name. This module writes each cell whole, names and values, from the resolved demo profile:
a notebook keeps the keys it declares, and a key the profile sets that no notebook declares yet is
added to the notebook that reads its kind (a trainer setting of the ``rm:`` block, under its own name, to
notebook 02, :data:`TRAINING_STAGE`).
Comment lines written in a cell stay above the key they precede. ``goalrm sync-notebooks --check``
(a test runs it) fails when a cell has drifted.

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
#: every folder of stage notebooks, with the profile its parameters cells are generated from
NOTEBOOK_SOURCES = {"notebooks": SOURCE_PROFILE, "notebooks/real-lm": "real-lm"}
INTERACTIVE_ROOT = "runs/interactive"
RUNNER_KEYS = ("profile", "run_dir", "reports_dir")
#: the notebook that trains the RMs: it declares every trainer setting the demo profile gives, and receives
#: every one a profile gives (``runner.stage_parameters``)
TRAINING_STAGE = "02_training"


def _header(profile_name: str) -> str:
    return (
        f"# generated from params/{profile_name}.yaml by `goalrm sync-notebooks` (edit the profile, not this cell);\n"
        f"# run by hand, this notebook writes under {INTERACTIVE_ROOT}/, never into reports/\n"
    )


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
        try:  # a literal, not code: the cell would otherwise run in the kernel before any check of it
            ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            shown = ast.get_source_segment(source, node.value) or "..."
            raise ValueError(
                f"{path}: line {node.lineno} of the parameters cell: {node.targets[0].id} = "
                f"{shown if len(shown) <= 60 else shown[:59] + '…'} is not a literal"
            ) from None
        keys.append(node.targets[0].id)
    return keys


def declared_parameters(path: Path) -> dict[str, dict[str, Any]]:
    """A notebook's parameters as ``papermill.inspect_notebook`` reports them (``name``,
    ``inferred_type_name``, ``default`` as source text, ``help``), read from the file itself: a
    parameters cell here is ``name = literal`` lines (:func:`declared_keys` holds it to that), so
    there is no annotation to infer from, and a sweep's or a report's checks need not import
    papermill (seconds) before they refuse a bad value."""
    path = Path(path)
    _, cell, source = _cell_of(path)
    declared_keys(source, path)  # every statement is `name = literal`
    out = {}
    for node in ast.parse(source).body:
        name = node.targets[0].id
        out[name] = {
            "name": name,
            "inferred_type_name": "None",
            "default": ast.get_source_segment(source, node.value),
            "help": "",
        }
    return out


def _literal(value: Any) -> str:
    """A flat profile value as Python source, strings in double quotes as people write them."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


def _cell_comments(source: str) -> dict[str | None, list[str]]:
    """The comment lines of a cell, by the key they stand above (``None``: after the last key); the
    generated header is not a comment of the cell's own."""
    lines = source.splitlines()
    first = source.split("\n", 1)[0]
    header = len(_header("").splitlines()) if first.startswith("# generated from params/") else 0
    starts = {}
    try:
        starts = {
            node.lineno: node.targets[0].id
            for node in ast.parse(source).body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
        }
    except SyntaxError:
        pass
    out: dict[str | None, list[str]] = {}
    pending: list[str] = []
    for number, line in enumerate(lines[header:], header + 1):
        if number in starts:
            if pending:
                out[starts[number]] = pending
            pending = []
        elif line.lstrip().startswith("#"):
            pending.append(line)
    if pending:
        out[None] = pending
    return out


def cell_source(
    keys: list[str],
    profile: Mapping[str, Any],
    profile_name: str = SOURCE_PROFILE,
    comments: Mapping[str | None, list[str]] | None = None,
) -> str:
    """The parameters cell for ``keys``: the runner's three first, then the profile's values in the
    profile's own order, each under the comment lines ``comments`` holds for it."""
    runner = interactive_defaults(profile_name)
    missing = [k for k in keys if k not in runner and k not in profile]
    if missing:
        raise ValueError(
            f"params/{profile_name}.yaml sets no value for {', '.join(map(repr, missing))}, which the notebook declares"
        )
    comments = comments or {}
    ordered = [k for k in RUNNER_KEYS if k in keys] + [k for k in profile if k in keys and k not in RUNNER_KEYS]
    lines = [
        line
        for k in ordered
        for line in [*comments.get(k, []), f"{k} = {_literal(runner[k] if k in runner else profile[k])}"]
    ]
    return _header(profile_name) + "\n".join([*lines, *comments.get(None, [])]) + "\n"


def _cell_of(path: Path) -> tuple[dict, dict, str]:
    """(the notebook, its parameters cell, the cell's source); a file that is no notebook (truncated,
    not JSON) is one error naming it."""
    try:
        notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable notebook ({e})") from None
    cell = _parameters_cell(notebook, path)
    source = cell.get("source", "")
    return notebook, cell, "".join(source) if isinstance(source, list) else str(source)


def notebook_keys(paths: list[Path], profile: Mapping[str, Any]) -> dict[Path, list[str]]:
    """The keys each notebook's cell holds: those it declares now and, for the training notebook,
    every trainer setting of the profile's ``rm:`` block it does not hold yet."""
    from goalrm_core.study.recipe import RM_KEYS

    keys = {path: declared_keys(_cell_of(path)[2], path) for path in paths}
    for path in paths:
        if path.stem == TRAINING_STAGE:
            keys[path] += [k for k in profile if k in RM_KEYS and k not in keys[path]]
    return keys


def sync_notebook(
    path: Path,
    profile: Mapping[str, Any],
    write: bool,
    keys: list[str] | None = None,
    profile_name: str = SOURCE_PROFILE,
) -> bool:
    """Rewrite ``path``'s parameters cell from ``profile`` (its ``keys``: by default those it declares);
    return whether it differed."""
    notebook, cell, source = _cell_of(path)
    wanted = cell_source(
        keys if keys is not None else declared_keys(source, path),
        profile,
        profile_name,
        comments=_cell_comments(source),
    )
    if source == wanted:
        return False
    if write:
        cell["source"] = wanted.splitlines(keepends=True)
        from goalrm_core.data.io import atomic_write_text

        atomic_write_text(path, json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    return True


def stage_notebooks(notebooks_dir: Path) -> list[Path]:
    """The stage notebooks (``NN_topic.ipynb``), in order."""
    return sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb"))


def sync_notebooks(
    notebooks_dir: Path, profile: Mapping[str, Any], write: bool, profile_name: str = SOURCE_PROFILE
) -> list[Path]:
    """Every stage notebook whose parameters cell differs from ``profile`` (rewritten when ``write``)."""
    paths = stage_notebooks(notebooks_dir)
    keys = notebook_keys(paths, profile)
    return [p for p in paths if sync_notebook(p, profile, write, keys[p], profile_name)]


def missing_keys(profile: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``key (notebook)`` for every key a notebook declares that the profile does not set, runner keys aside:
    a notebook profile never silently inherits a notebook default."""
    return [
        f"{key} ({nb})"
        for nb, params in declared.items()
        for key in params
        if key not in profile and key not in RUNNER_KEYS
    ]


def main(argv: list[str] | None = None) -> int:
    from goalrm_core.paths import resolve_path
    from goalrm_core.pipeline.profile_files import load_profile

    parser = argparse.ArgumentParser(
        prog="goalrm sync-notebooks",
        description="Write the notebooks' parameters cells (names and values) from their profile: "
        + "; ".join(f"{folder}/ from params/{name}.yaml" for folder, name in NOTEBOOK_SOURCES.items()),
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a cell differs")
    parser.add_argument("--notebooks-dir", default=None, help="one folder only (default: every folder above)")
    parser.add_argument("--params-dir", default="params")
    args = parser.parse_args(argv)
    folders = (
        {args.notebooks_dir: NOTEBOOK_SOURCES.get(args.notebooks_dir.rstrip("/"), SOURCE_PROFILE)}
        if args.notebooks_dir
        else NOTEBOOK_SOURCES
    )
    failed = False
    for folder, name in folders.items():
        profile = load_profile(name, args.params_dir)
        changed = sync_notebooks(resolve_path(folder), profile, write=not args.check, profile_name=name)
        for path in changed:
            print(f"{'differs' if args.check else 'rewrote'}: {path}")
        if not changed:  # say what was checked, so that a silent success is not mistaken for nothing done
            n = len(stage_notebooks(resolve_path(folder)))
            print(
                f"{'checked' if args.check else 'nothing to write'}: the parameters cells of the {n} notebooks in "
                f"{folder}/ match params/{name}.yaml (names and values)"
            )
        if args.check and changed:
            print(f"run `goalrm sync-notebooks` to write them from params/{name}.yaml", file=sys.stderr)
            failed = True
    return 1 if failed else 0
