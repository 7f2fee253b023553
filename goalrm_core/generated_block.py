"""A generated block in a hand-written document: the lines from a begin marker to an end marker (HTML
comments in Markdown), rewritten from records by a script while the prose around them stays as written.

>>> doc = "intro\\n<!-- b -->\\nold\\n<!-- e -->\\noutro\\n"
>>> replace_block(doc, "<!-- b -->", "<!-- e -->", "<!-- b -->\\nnew\\n<!-- e -->")
'intro\\n<!-- b -->\\nnew\\n<!-- e -->\\noutro\\n'
"""

from __future__ import annotations

from pathlib import Path


def replace_block(
    text: str, begin: str, end: str, block: str, where: str = "the text", what: str = "generated block"
) -> str:
    """``text`` with everything from the first ``begin`` to the ``end`` after it (both markers included)
    replaced by ``block``, which carries its own markers. A text without both markers is a ``ValueError``
    naming ``where`` and the markers it lacks."""
    if begin not in text or end not in text:
        raise ValueError(f"{where}: no {what} (the lines {begin!r} … {end!r})")
    head, rest = text.split(begin, 1)
    return head + block + rest.split(end, 1)[1]


def update_file(path: Path, begin: str, end: str, block: str, write: bool, what: str = "generated block") -> bool:
    """Put ``block`` where ``path``'s block is (see :func:`replace_block`), writing the file only when
    ``write`` and it changed; return whether it differed."""
    content = path.read_text(encoding="utf-8")
    new = replace_block(content, begin, end, block, where=str(path), what=what)
    if write and new != content:
        path.write_text(new, encoding="utf-8")
    return new != content
