"""No HTML in Python (52, item 2): the pages' HTML lives in the jinja templates of
``goalrm_core/report/templates/`` (the pieces in ``parts.html.j2``, called through
``templating.part``); no string literal under ``goalrm_core/`` holds an HTML tag, except the ones
listed in :data:`EXCEPTIONS`, each with why."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "goalrm_core"
TAGS = (
    "a abbr b br code details div em h1 h2 h3 h4 h5 h6 i img li main nav ol p pre small span strong style sub summary "
    "sup table tbody td th thead tr tt u ul script body html head title meta link figure figcaption caption section"
).split()
TAG = re.compile(r"</?(?:%s)(?=[\s>/])|<!--" % "|".join(TAGS), re.IGNORECASE)

#: (file, a fragment of the literal) -> why the tag may stay in Python
EXCEPTIONS = {
    # patterns that *read* HTML, not write it: a page's headings, its code version, and what a reader must
    # never meet in a rendered notebook (pages.raw_outputs)
    ("report/pages.py", '<a class="anchor-link"'): "reads a heading's anchor link away",
    ("report/pages.py", '<span class="code" data-code='): "reads the code version a stage page names",
    ("report/pages.py", "<Figure size"): "reads a matplotlib repr, not a tag",
    ("report/pages.py", "jp-RenderedText"): "reads a notebook's text outputs",
    ("report/pages.py", "<table\\b"): "reads a notebook's data frames",
    ("report/pages.py", "<tbody>"): "reads a data frame's index column",
    ("report/pages.py", "<td[^>]*>"): "reads a data frame's cells",
    ("report/pages.py", "<th\\b"): "reads a data frame's headers",
    # markers that delimit a generated block, found and replaced by text search
    ("report/pages.py", "<!-- goalrm:navigation -->"): "marks the navigation block of a stage page",
    ("report/pages.py", "<!-- /goalrm:navigation -->"): "marks the navigation block's end",
    ("report/readme.py", "<!-- begin: generated from reports/demo"): "marks the README's generated block (Markdown)",
    ("report/readme.py", "<!-- end: generated from reports/demo -->"): "marks the README's generated block (Markdown)",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def html_literals() -> list[tuple[str, int, str]]:
    """(file under goalrm_core/, line, literal) of every string literal (f-string parts included, docstrings
    not) that holds an HTML tag."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
                and TAG.search(node.value)
            ):
                out.append((path.relative_to(PACKAGE).as_posix(), node.lineno, node.value))
    return out


def _excused(where: str, literal: str) -> bool:
    return any(where == file and fragment in literal for file, fragment in EXCEPTIONS)


def test_no_html_tag_in_a_python_string_literal():
    found = [
        f"goalrm_core/{where}:{line}: {literal[:80]!r}"
        for where, line, literal in html_literals()
        if not _excused(where, literal)
    ]
    assert not found, "HTML in Python (put it in report/templates/parts.html.j2):\n" + "\n".join(found)


def test_every_exception_is_still_needed():
    literals = html_literals()
    stale = [
        key for key in EXCEPTIONS if not any(where == key[0] and key[1] in literal for where, _, literal in literals)
    ]
    assert not stale, f"exceptions that excuse nothing any more: {stale}"
