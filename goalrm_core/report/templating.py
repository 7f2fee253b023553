"""The report's HTML pages from jinja2 templates (``report/templates``, shipped as package data),
autoescaped: text is escaped by the template, and the sections already written as HTML are passed
through ``|safe``. The pieces of a page (a paragraph, a caption, the gate's notice, a table) are the
macros of ``templates/parts.html.j2``, called through :func:`part`: the Python of ``report/`` holds no
HTML tag of its own (``tests/report/test_no_html_in_python.py``). jinja2 is imported on first use, so ``goalrm report
--help`` does without it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping


@lru_cache(maxsize=None)
def _environment():
    import html

    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("goalrm_core.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    # the escaping of the pieces in parts.html.j2: html.escape's, quotes included (&#x27;, &quot;), as the
    # pages have always written them
    env.filters["esc"] = lambda text: Markup(html.escape(str(text)))
    return env


def render(template: str, **context: Any) -> str:
    """``templates/<template>`` filled with ``context``."""
    return _environment().get_template(template).render(**context)


@lru_cache(maxsize=None)
def _parts():
    return _environment().get_template("parts.html.j2").module


def part(macro: str, **context: Any) -> str:
    """One piece of a page: the macro ``macro`` of ``templates/parts.html.j2`` called with ``context``
    (values are escaped there; a piece passed into another is marked ``|safe``)."""
    return str(getattr(_parts(), macro)(**context))


def stage_view(stage: Any, out_dir: Path) -> dict:
    """One row of a page's stage table: the stage's name, a link to its page where that page exists,
    status, duration, start and the error excerpt (its cell, where known). Whatever a damaged
    ``status.json`` holds reads as text, so the fallback page can draw it too."""
    stage = stage if isinstance(stage, Mapping) else {"name": stage, "status": "?"}
    link = stage.get("html")
    duration = stage.get("duration_s")
    error = stage.get("error") if isinstance(stage.get("error"), Mapping) else {}
    excerpt = ""
    if error:
        message = f"{error.get('ename', '')}: {error.get('evalue', '')}"
        excerpt = message if len(message) <= 400 else message[:397] + "..."
        excerpt += f" (cell {error['cell_index']})" if error.get("cell_index") is not None else ""
    status = str(stage.get("status", "?"))
    return {
        "name": str(stage.get("name", "")),
        "status": status,
        "css": status.replace(" ", "-"),
        "link": link if isinstance(link, str) and link and (out_dir / link).exists() else None,
        "duration": f"{duration:.1f} s"
        if isinstance(duration, (int, float)) and not isinstance(duration, bool)
        else "",
        "started": "" if stage.get("started") is None else str(stage["started"]),
        "error": excerpt,
    }
