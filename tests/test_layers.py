"""The package's layers: the core (``model``, ``train``, ``inference``, ``evaluation``, ``data``)
never imports the layers above it (``cli``, ``study``, ``report``, ``recipes``, ``tasks``), not even
through the top-level helper modules it uses, and holds no command line of its own."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "goalrm_core"
CORE = ("model", "train", "inference", "evaluation", "data")
ABOVE = ("cli", "study", "report", "recipes", "tasks")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(name: str) -> set[str]:
    """Every ``goalrm_core`` module that ``name`` imports anywhere in its source (functions included)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
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
    parsers = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "ArgumentParser"]
    assert "main" not in defined, f"{name} defines main: the command line belongs in goalrm_core.cli"
    assert not parsers or name in PARSER_OWNERS, f"{name} builds an ArgumentParser: the command line belongs in goalrm_core.cli"
