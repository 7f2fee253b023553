"""The package's layers: the core (``model``, ``train``, ``inference``, ``evaluation``, ``data``)
never imports the layers above it (``cli``, ``study``, ``report``, ``pipeline``, ``recipes``, ``tasks``),
not even through the top-level helper modules it uses, and holds no command line of its own; the task
package never imports the study or the report; the pages (``report``) never import the pipeline that runs
the notebooks, and read ``metrics.json`` only through their accessor (``report.metrics_view``); and no two
modules import each other, directly or around a circle (an import under ``if TYPE_CHECKING:`` does not
count: it never runs)."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "goalrm_core"
CORE = ("model", "train", "inference", "evaluation", "data")
ABOVE = ("cli", "study", "report", "pipeline", "recipes", "tasks")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The nodes under an ``if TYPE_CHECKING:`` block: imports for annotations, never run."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def imported(name: str, runtime_only: bool = False) -> set[str]:
    """Every ``goalrm_core`` module that ``name`` imports anywhere in its source (functions included);
    with ``runtime_only``, not those under ``if TYPE_CHECKING:``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {t for t in targets if t in MODULES}
    return found


def reached_from(name: str) -> dict[str, str]:
    """Every project module ``name`` loads, directly or through others: module -> the module importing it."""
    seen, todo = {name: ""}, [name]
    while todo:
        current = todo.pop()
        for other in sorted(imported(current)):
            if other not in seen:
                seen[other] = current
                todo.append(other)
    return seen


def layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


CORE_MODULES = sorted(n for n in MODULES if layer(n) in CORE)


def test_the_walk_sees_imports():
    """The walker finds a known import, so an empty result below means something."""
    assert "goalrm_core.model.losses" in imported("goalrm_core.model.objective")
    assert "goalrm_core.study.live" in reached_from("goalrm_core.study.training")
    assert "goalrm_core.flags" in reached_from("goalrm_core.train.trainer")


@pytest.mark.parametrize("name", CORE_MODULES)
def test_the_core_never_imports_the_layers_above(name):
    reached = reached_from(name)
    above = {m: by for m, by in reached.items() if layer(m) in ABOVE}
    assert not above, f"{name} loads {sorted(above)} (imported by {sorted(set(above.values()))})"


# The typed config builds its own parser: its command-line form is part of it (to_argv / from_argv).
PARSER_OWNERS = {"goalrm_core.train.config"}


@pytest.mark.parametrize("name", CORE_MODULES)
def test_the_core_holds_no_command_line(name):
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    parsers = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "ArgumentParser"
    ]
    assert "main" not in defined, f"{name} defines main: the command line belongs in goalrm_core.cli"
    assert not parsers or name in PARSER_OWNERS, (
        f"{name} builds an ArgumentParser: the command line belongs in goalrm_core.cli"
    )


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def runtime_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports when run; a package's ``__init__`` importing its own
    modules is how a package is built, not a circle."""
    graph = {}
    for name, path in MODULES.items():
        children = name + "." if path.name == "__init__.py" else None
        graph[name] = {
            m for m in imported(name, runtime_only=True) if m != name and not (children and m.startswith(children))
        }
    return graph


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    circles = _circles(runtime_graph())
    assert not circles, "modules that import each other (directly or around a circle): " + "; ".join(
        " <-> ".join(c) for c in circles
    )


def test_the_task_package_never_imports_the_study_or_the_report():
    for name in (n for n in MODULES if layer(n) == "tasks"):
        above = {m for m in reached_from(name) if layer(m) in ("study", "report", "recipes", "cli")}
        assert not above, f"{name} loads {sorted(above)}: calibration scripts belong in scripts/"


# ------------------------------------------------------------------------ the pages apart from the pipeline

REPORT_MODULES = sorted(n for n in MODULES if layer(n) == "report")
METRICS_ACCESSOR = "goalrm_core.report.metrics_view"


@pytest.mark.parametrize("name", REPORT_MODULES)
def test_the_pages_never_import_the_pipeline(name):
    """``report`` turns records into pages: it never loads ``goalrm_core.pipeline``, which runs the
    notebooks (the pipeline calls on the pages, not the other way round)."""
    reached = reached_from(name)
    pipeline = {m: by for m, by in reached.items() if layer(m) == "pipeline"}
    assert not pipeline, f"{name} loads {sorted(pipeline)} (imported by {sorted(set(pipeline.values()))})"


def test_loading_every_page_module_loads_no_pipeline_module():
    """The same at run time, in a fresh interpreter: whatever the imports above miss (an import by name)."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {REPORT_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('goalrm_core.pipeline'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


# what opens or lists a file by its path: a path to metrics.json handed to one of these is a read of it
PATH_TAKERS = {
    "open",
    "Path",
    "PurePath",
    "glob",
    "rglob",
    "joinpath",
    "join",
    "read_text",
    "read_bytes",
    "load",
    "loads",
}


def _names_metrics_file(node: ast.AST) -> bool:
    """``"metrics.json"``, ``"x/metrics.json"``, ``METRICS_FILE``, or an f-string that ends in either."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value == "metrics.json" or node.value.endswith("/metrics.json")
    if isinstance(node, (ast.Name, ast.Attribute)):
        return getattr(node, "id", getattr(node, "attr", None)) == "METRICS_FILE"
    if isinstance(node, ast.JoinedStr) and node.values:
        last = node.values[-1]
        return _names_metrics_file(last.value if isinstance(last, ast.FormattedValue) else last)
    return False


def metrics_paths_built(source: str) -> list[int]:
    """The lines of ``source`` that build a path to a ``metrics.json`` (``folder / "metrics.json"``,
    ``folder / METRICS_FILE``) or hand its name to something that opens or lists files (``open``, ``Path``,
    ``glob`` …). A message or a link that names the file builds no path."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _names_metrics_file(node.right):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            called = getattr(node.func, "id", getattr(node.func, "attr", None))
            if called in PATH_TAKERS and any(
                _names_metrics_file(a) for a in [*node.args, *(k.value for k in node.keywords)]
            ):
                lines.append(node.lineno)
    return sorted(set(lines))


def test_the_metrics_path_finder_finds_a_path():
    """The finder sees the ways a module would open the file, and not a message or a link naming it."""
    built = (
        "p = d / 'metrics.json'\nq = d / METRICS_FILE\nr = root.glob(f'*/{METRICS_FILE}')\n"
        "s = open('x/metrics.json')\nt = Path(d, 'metrics.json')"
    )
    assert metrics_paths_built(built) == [1, 2, 3, 4, 5]
    named = (
        "raise ValueError(f'{p}: malformed metrics.json')\nlink(d, f'{point}/{METRICS_FILE}', METRICS_FILE)\n"
        "help = 'a report folder or its metrics.json'"
    )
    assert metrics_paths_built(named) == []


@pytest.mark.parametrize("name", [n for n in REPORT_MODULES if n != METRICS_ACCESSOR])
def test_the_pages_read_metrics_json_only_through_its_accessor(name):
    """Only ``report.metrics_view`` opens a ``metrics.json`` (``load_metrics``, ``read_metrics``,
    ``reports_under``): no other page module builds a path to one, so none reads the file by itself.
    (``status.json``, the sweep's plan and the executed notebooks are other records, read where they are used.)"""
    built = metrics_paths_built(MODULES[name].read_text(encoding="utf-8"))
    assert not built, (
        f"{name} builds a path to metrics.json on line(s) {built}: read it through "
        f"{METRICS_ACCESSOR} (load_metrics, read_metrics, reports_under)"
    )


def test_the_accessor_is_where_metrics_json_is_opened():
    """The rule above has something to hold to: the accessor itself builds the file's path."""
    assert metrics_paths_built(MODULES[METRICS_ACCESSOR].read_text(encoding="utf-8"))
