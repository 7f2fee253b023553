"""A running command's live output in a notebook cell: :func:`tail_view` is
:func:`goalrm_core.train.launch.run_streaming`'s ``show`` for the notebooks."""

from __future__ import annotations

from typing import Callable, Sequence

from goalrm_core.train.launch import TailPrinter


class NotebookTail(TailPrinter):
    """The last lines of a running command in one display area of a Jupyter cell, updated in place."""

    def __init__(self, n_lines: int, desc: str | None = None, every_s: float = 1.0):
        from IPython.display import display  # lazy: only a notebook kernel needs it

        super().__init__(n_lines, desc, every_s)
        self.handle = display({"text/plain": ""}, raw=True, display_id=True)

    def show(self, lines: Sequence[str], final: bool = False) -> None:
        if not self.due(final):
            return
        tail = list(lines)[-self.n_lines :]
        self.handle.update({"text/plain": "\n".join([self.prefix.strip(), *tail] if self.prefix else tail)}, raw=True)


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (a display area can be updated in place)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in shell.config


def tail_view(n_lines: int = 5, desc: str | None = None) -> Callable[[Sequence[str], bool], None]:
    """``run_streaming``'s ``show``: a display area in a notebook kernel, status lines elsewhere."""
    return (NotebookTail if in_kernel() else TailPrinter)(n_lines, desc).show
