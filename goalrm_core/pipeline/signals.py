"""Ctrl-C and SIGTERM during a report run: SIGTERM raised like Ctrl-C, so a run it stops says so,
and both held back while files that belong together are written."""

from __future__ import annotations

import contextlib


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a batch scheduler), raised like Ctrl-C so that a run it stops
    says so in ``status.json`` and the index (:func:`sigterm_as_interrupt`)."""


_DEFERRED_SIGNALS = ("SIGINT", "SIGTERM")


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises :class:`Terminated` (in the main thread; elsewhere nothing changes)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def interrupts_deferred():
    """Hold Ctrl-C (and SIGTERM) back until the block is done, then act on it as the handler in place
    would have, so that files written together are written together. Outside the main thread, where
    no signal handler can be set, a plain block."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {}
    for name in _DEFERRED_SIGNALS:
        number = getattr(signal, name)
        previous[number] = signal.signal(number, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)
        for number in dict.fromkeys(caught):
            handler = previous[number]
            if callable(handler):
                handler(number, None)  # raises KeyboardInterrupt (SIGINT) or Terminated (SIGTERM)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(number)
