"""Constants and path rules are defined in one place in the package: a second definition could
drift from the first."""

import ast
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "goalrm_core"
TREES = {
    path.relative_to(PACKAGE.parent).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
    for path in PACKAGE.rglob("*.py")
}

# name -> the module that defines it
ONCE = {
    "HELPSTEER_ATTRIBUTES": "goalrm_core/data/adapters.py",
    "HEADLINE_SETS": "goalrm_core/study/rms.py",
    "ID_BENCH": "goalrm_core/study/rms.py",
    "SKIP_FIRST": "goalrm_core/evaluation/voting.py",
    "TRAIN_SUMMARY": "goalrm_core/data/rundir.py",
    "STRATEGY": "goalrm_core/study/rms.py",
    # the named choices of flags and profile keys (imported without torch)
    "ENCODINGS": "goalrm_core/choices.py",
    "READOUTS": "goalrm_core/choices.py",
    "GOAL_METHODS": "goalrm_core/choices.py",
    "VALUE_HEAD_STRATEGIES": "goalrm_core/choices.py",
    "PERCENTILE_WINDOWS": "goalrm_core/choices.py",
    "PAIR_FORMS": "goalrm_core/choices.py",
    "CONTRASTIVE_STRATEGIES": "goalrm_core/model/strategies.py",
    "PACKAGED_MODELS": "goalrm_core/model/pretrained.py",
    "PRUNING_OFF": "goalrm_core/inference/pruning.py",
    "PLAN_FILE": "goalrm_core/report/sweep_layout.py",
    "GATE_VERDICT": "goalrm_core/report/conclusions.py",  # the length gate's verdict in words (52, item 2)
    "POINT_MANIFEST": "goalrm_core/report/sweep_layout.py",
}
# file names and suffixes of a trained RM, spelled once (data.rundir)
PATH_LITERALS = ("train_summary.json", ".metrics.jsonl", ".checkpoints")


def top_level_assignments() -> Counter:
    found = Counter()
    for module, tree in TREES.items():
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id, module] += 1
    return found


def docstrings(tree) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return {
        id(n.body[0].value)
        for n in nodes
        if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
    }


def test_each_constant_is_defined_once():
    found = top_level_assignments()
    for name, module in ONCE.items():
        where = sorted(m for (n, m), count in found.items() for _ in range(count) if n == name)
        assert where == [module], f"{name} is defined in {where}; only {module} should define it"


def test_path_rules_are_spelled_once():
    uses = Counter()
    for module, tree in TREES.items():
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                for literal in PATH_LITERALS:
                    if node.value == literal:
                        uses[literal, module] += 1
    for literal in PATH_LITERALS:
        where = sorted(m for (lit, m) in uses if lit == literal)
        assert where == ["goalrm_core/data/rundir.py"], f"{literal!r} is written out in {where}"


def test_no_skip_first_default_is_a_bare_number():
    """Every default of a ``skip_first`` (a parameter, a field or a flag) is ``SKIP_FIRST``, not a literal."""
    bare = []
    for module, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.args + node.args.kwonlyargs
                defaults = (
                    [None] * (len(node.args.args) - len(node.args.defaults))
                    + node.args.defaults
                    + node.args.kw_defaults
                )
                bare += [
                    f"{module}:{node.lineno}"
                    for a, d in zip(args, defaults)
                    if a.arg == "skip_first" and isinstance(d, ast.Constant) and d.value != 0
                ]
            if isinstance(node, ast.Call) and any(
                isinstance(a, ast.Constant) and a.value == "--skip_first" for a in node.args
            ):
                bare += [
                    f"{module}:{node.lineno}"
                    for k in node.keywords
                    if k.arg == "default" and isinstance(k.value, ast.Constant)
                ]
    assert bare == [], f"skip_first defaults written as numbers: {bare}"
