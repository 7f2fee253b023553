"""The project's root, paths resolved against it, and text shown relative to it: what a page or a
message shows must not depend on the machine it was made on."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def project_root() -> Path:
    """The directory holding ``pyproject.toml``, searched upward from the current directory.

    Notebooks opened interactively run in ``notebooks/`` while papermill runs them from the root;
    resolving every relative path against this one directory makes both see the same files. When
    no ``pyproject.toml`` is found (an installed package used elsewhere), the package's parent is used.
    """
    here = Path.cwd().resolve()
    for directory in (here, *here.parents):
        if (directory / "pyproject.toml").is_file():
            return directory
    return Path(__file__).resolve().parent.parent


def resolve_path(p: str | os.PathLike) -> Path:
    """``p`` itself when absolute, else ``p`` relative to :func:`project_root`."""
    path = Path(p).expanduser()
    return path if path.is_absolute() else project_root() / path


def shown_path(p: str | os.PathLike) -> str:
    """``p`` relative to the project root when it lies inside it (``params/demo.yaml``), else as it is:
    what a message names should not depend on where the project is checked out."""
    try:
        return str(Path(p).resolve().relative_to(project_root().resolve()))
    except ValueError:
        return str(p)


def relative_paths(text: str) -> str:
    """``text`` with the project's absolute path shown relative to it (``/…/repo/runs/x`` -> ``runs/x``)
    and the interpreter's and home folders abbreviated: what a page shows must not depend on the
    machine it was made on.

    >>> relative_paths(f"saved {project_root() / 'runs' / 'demo'}")
    'saved runs/demo'
    """
    root = str(project_root())
    text = text.replace(root + os.sep, "").replace(root, ".")
    venv = "<venv>" if sys.prefix != sys.base_prefix else "<python>"
    for folder, shown in ((sys.prefix, venv), (sys.base_prefix, "<python>"), (os.path.expanduser("~"), "~")):
        if len(folder) > 1:
            text = text.replace(folder, shown)
    return text
