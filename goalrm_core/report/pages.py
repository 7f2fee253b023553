"""Report pages: an executed notebook exported as a self-contained HTML page (inputs hidden,
no CDN scripts it does not need, paths made project-relative), with a navigation bar and a table of
contents built from its headings. ``goalrm_core.pipeline.runner`` calls these after each stage."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Collection

from goalrm_core.data.io import atomic_write_text
from goalrm_core.paths import relative_paths
from goalrm_core.report.templating import part

# The lab template, minus the scripts it loads from a CDN whatever the notebook holds: a page that
# needs none of them then works offline and as a mailed file. require.js is kept for notebooks with
# widgets or JavaScript outputs, MathJax for notebooks with math, mermaid for mermaid diagrams.
_PAGE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}
{%- if resources.goalrm_needs.requirejs -%}{{ super() }}{%- endif -%}
{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}
{%- if resources.goalrm_needs.mathjax -%}{{ super() }}{%- endif -%}
{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}
{%- if resources.goalrm_needs.mermaid -%}{{ super() }}{%- endif -%}
{%- endblock html_head_js_mermaidjs -%}
"""
_MATH = re.compile(r"\$[^$\n]+\$|\\\(|\\\[|\\begin\{")


def _needs(nb) -> dict[str, bool]:
    """Which of the template's external scripts a notebook's cells and outputs call for."""
    requirejs = "widgets" in nb.metadata
    mathjax = mermaid = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            mathjax |= bool(_MATH.search(cell.source))
            mermaid |= "```mermaid" in cell.source
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            requirejs |= "application/javascript" in data or "application/vnd.jupyter.widget-view+json" in data
            markdown = str(data.get("text/markdown", ""))
            mathjax |= "text/latex" in data or bool(_MATH.search(markdown))
            mermaid |= "```mermaid" in markdown
    return {"requirejs": requirejs, "mathjax": mathjax, "mermaid": mermaid}


def _relative_outputs(nb) -> None:
    """Machine paths in printed text, tracebacks and text displays, shown relative to the project
    (:func:`goalrm_core.paths.relative_paths`). The batch kernel already shows them so; this
    covers what a library prints by itself, such as the file names in an error's traceback."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if "text" in out:
                out["text"] = relative_paths(out["text"])
            if "traceback" in out:
                out["traceback"] = [relative_paths(line) for line in out["traceback"]]
            if "evalue" in out:
                out["evalue"] = relative_paths(out["evalue"])
            for mime in ("text/plain", "text/markdown", "text/html"):
                if mime in out.get("data", {}):
                    value = out["data"][mime]
                    out["data"][mime] = relative_paths(value if isinstance(value, str) else "".join(value))


def export_html(notebook: Path, output: Path, stages: list[str] | None = None, code: str | None = None) -> None:
    """Write the reader's view of an executed notebook: outputs only, no code, no prompts, no
    machine paths, with a navigation bar (index, previous and next of ``stages``, and ``code``, the
    code version the notebook ran on; see :func:`navigation_html`) and a table of contents."""
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    nb = nbformat.read(str(notebook), as_version=4)
    _relative_outputs(nb)
    nb.metadata["title"] = _first_heading(nb) or output.stem
    exporter = HTMLExporter(
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        extra_loaders=[jinja2.DictLoader({"goalrm_page.html.j2": _PAGE_TEMPLATE})],
        template_file="goalrm_page.html.j2",
    )
    # exclude_input already hides code; the tag rule also covers templates that ignore it, and
    # drops the injected-parameters cell's input explicitly, since it repeats the profile verbatim.
    tags = TagRemovePreprocessor(
        remove_input_tags={"injected-parameters", "parameters", "hide-input", "remove-input"},
        remove_cell_tags={"remove-cell"},
        enabled=True,
    )
    exporter.register_preprocessor(tags, enabled=True)
    body, _ = exporter.from_notebook_node(nb, resources={"goalrm_needs": _needs(nb)})
    name = output.stem
    stages = stages if stages is not None else [name]
    atomic_write_text(output, with_navigation(body, navigation_html(name, stages, output.parent, body, code)))


def _first_heading(nb) -> str | None:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#\s+(.+)$", cell.source, re.MULTILINE)
            if match:
                return match.group(1).strip()
    return None


# ------------------------------------------------------------------------------------- navigation

NAV_BEGIN, NAV_END = "<!-- goalrm:navigation -->", "<!-- /goalrm:navigation -->"
_NAV_CSS = """
.goalrm-nav { position: sticky; top: 0; z-index: 10; display: flex; gap: 1.2em; align-items: baseline;
  flex-wrap: wrap; padding: .45em 1em; background: #f5f7fa; border-bottom: 1px solid #d8dde3;
  font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; }
.goalrm-nav a { color: #27508f; text-decoration: none; } .goalrm-nav a:hover { text-decoration: underline; }
.goalrm-nav .here { font-weight: 600; color: #222; } .goalrm-nav .absent { color: #999; }
.goalrm-nav .spacer { flex: 1; } .goalrm-nav .code { color: #555; }
.goalrm-toc { margin: .8em 1em 0; padding: .5em 1em; border: 1px solid #e3e3e3; border-radius: .3em;
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 60em; }
.goalrm-toc summary { cursor: pointer; font-weight: 600; }
.goalrm-toc ul { margin: .3em 0; padding-left: 1.4em; } .goalrm-toc li.level-3 { margin-left: 1.4em; }
.goalrm-toc a { color: #27508f; text-decoration: none; }
"""
_HEADING = re.compile(r'<h([1-3])\b[^>]*\bid="([^"]+)"[^>]*>(.*?)</h\1>', re.DOTALL)


def _strip_navigation(page: str) -> str:
    begin, end = page.find(NAV_BEGIN), page.find(NAV_END)
    if begin < 0 or end < begin:
        return page
    return page[:begin] + page[end + len(NAV_END) :]


def table_of_contents(page: str) -> list[tuple[int, str, str]]:
    """(level, id, text) of the page's section headings (h2, h3; h1 only when there is no h2)."""
    found = []
    for level, anchor, inner in _HEADING.findall(_strip_navigation(page)):
        inner = re.sub(r'<a class="anchor-link".*?</a>', "", inner, flags=re.DOTALL)
        text = html.unescape(re.sub(r"<[^>]+>", "", inner)).replace("\u00b6", "").strip()
        if text:
            found.append((int(level), anchor, text))
    if any(level == 2 for level, _, _ in found):
        found = [h for h in found if h[0] > 1]
    return found


_CODE = re.compile(r'<span class="code" data-code="([^"]*)">')


def page_code(page: str) -> str | None:
    """The code version a stage page names in its navigation bar (:func:`navigation_html`), if any."""
    match = _CODE.search(page)
    return html.unescape(match.group(1)) if match else None


def navigation_html(name: str, stages: list[str], out_dir: Path, page: str, code: str | None = None) -> str:
    """The header bar of stage ``name``'s page (links to the index and to the previous and next stage
    whose page exists in ``out_dir``, and ``code``, the code version the stage ran on, when known) and
    its table of contents. Self-contained: no external URL."""

    def link(stage: str | None, label: str) -> tuple | None:
        if stage is None:
            return None
        return stage, label, (out_dir / f"{stage}.html").exists() or stage == name

    where = stages.index(name) if name in stages else -1
    previous = stages[where - 1] if where > 0 else None
    following = stages[where + 1] if 0 <= where < len(stages) - 1 else None
    return part(
        "navigation",
        begin=NAV_BEGIN,
        end=NAV_END,
        css=_NAV_CSS,
        name=name,
        back=link(previous, f"\u2190 {previous}"),
        forward=link(following, f"{following} \u2192"),
        code=code,
        position=f"stage {where + 1} of {len(stages)}" if where >= 0 else "",
        headings=table_of_contents(page),
    )


def with_navigation(page: str, nav: str) -> str:
    """``page`` with ``nav`` at the top of its body, replacing the navigation it had."""
    page = _strip_navigation(page)
    match = re.search(r"<main\b[^>]*>", page) or re.search(r"<body\b[^>]*>", page)
    at = match.end() if match else 0
    return page[:at] + nav + page[at:]


def refresh_navigation(out_dir: Path, stages: list[str], keep: Collection[str] = ()) -> None:
    """Point every stage page's previous/next links at the pages that exist now, each keeping the code
    version it names. A page is rewritten only when its navigation changed; the pages of ``keep`` (the stages
    a run keeps) are never rewritten: a kept stage's files stand as they are, links included."""
    for name in stages:
        path = out_dir / f"{name}.html"
        if name in keep or not path.exists():
            continue
        page = path.read_text(encoding="utf-8")
        updated = with_navigation(page, navigation_html(name, stages, out_dir, page, page_code(page)))
        if updated != page:
            atomic_write_text(path, updated)


# --------------------------------------------------------------------------- a reader's check

# What a reader must never meet as a cell's output: an object's repr or a pandas Series anywhere, and
# as a cell's value (its last expression) a bare dict, tuple or list, string or path. Each is
# (what, pattern on one plain-text output, whether printed text counts too).
RAW_REPRS: tuple[tuple[str, re.Pattern, bool], ...] = (
    ("config repr", re.compile(r"\b[A-Z]\w*(Config|Args|Arguments)\("), True),
    ("pandas Series", re.compile(r"^(Name|dtype): ", re.MULTILINE), True),
    ("object repr", re.compile(r"<[\w.]+ (object )?at 0x[0-9a-f]+>|<Figure size \d"), True),
    ("Python dict", re.compile(r"\A\s*\{\s*['\"]"), True),
    ("Python dict, tuple or list", re.compile(r"\A\s*[{(\[]"), False),
    ("bare string", re.compile(r"\A\s*'[^'\n]*'\s*\Z"), False),
    ("bare path", re.compile(r"\A\s*[\w./-]+\.(json|jsonl|csv|html|ipynb|npy|pt|safetensors)\s*\Z"), False),
)
_TEXT_OUTPUT = re.compile(
    r'<div class="([^"]*jp-RenderedText[^"]*jp-OutputArea-output[^"]*)"[^>]*data-mime-type="text/plain"'
    r"[^>]*>\s*<pre>(.*?)</pre>",
    re.DOTALL,
)
_TABLE = re.compile(r'<table\b[^>]*class="[^"]*dataframe[^"]*"[^>]*>(.*?)</table>', re.DOTALL)
_ROW_HEADER = re.compile(r"<tbody>.*?<tr[^>]*>\s*<th\b", re.DOTALL)
_BAD_CELL = re.compile(r"<td[^>]*>\s*(None|nan|NaN|NaT|<NA>|True|False)\s*</td>")
_HEADER = re.compile(r"<th\b[^>]*>(.*?)</th>", re.DOTALL)
# a header that is a data-frame key, not words: snake_case, or an interval split over two columns
_KEY_HEADER = re.compile(r"\w_\w|\bci (low|high)\b")


def raw_outputs(page: str) -> list[str]:
    """Every raw repr a reader would meet on a rendered page, one line each (``what: excerpt``): in a
    plain-text cell output a config or object repr or a pandas Series, and as a cell's value a Python
    dict/tuple/list or a bare string or path; in a pandas table the index printed as a column, a
    ``None``/``nan``/``True``/``False`` cell, or a header that is a key (``prefix_wrong``, ``pearson ci low``).
    Empty for a clean page."""
    found = []
    for match in _TEXT_OUTPUT.finditer(page):
        value = "executeResult" in match.group(1)  # a cell's value, not text it printed
        text = html.unescape(re.sub(r"<[^>]+>", "", match.group(2)))
        for what, pattern, printed in RAW_REPRS:
            if (value or printed) and pattern.search(text):
                found.append(f"{what}: {text.strip()[:120]!r}")
    for match in _TABLE.finditer(page):
        table = match.group(1)
        if _ROW_HEADER.search(table):
            words = re.sub(r"<[^>]+>|\s+", " ", table)[:120].strip()
            found.append(f"pandas index as a column: {words!r}")
        for cell in _BAD_CELL.finditer(table):
            found.append(f"'{cell.group(1)}' in a table cell")
        for head in _HEADER.finditer(table):
            text = html.unescape(re.sub(r"<[^>]+>", "", head.group(1))).strip()
            if _KEY_HEADER.search(text):
                found.append(f"a key as a column header: {text[:80]!r}")
    return found
