"""What counts as a number in a metric, and how one is written. A number is a finite real (not a
bool); everything else (null, NaN, ±inf, a string, a bool) is undefined. Verdicts, the score checks,
the run comparison and the formatters (the pages', the README's, the command line's) read figures
through :func:`num`, so "defined" means one thing everywhere, and write them through :func:`fixed`
and :func:`interval`, so a number with its interval is written one way (the differences, such as the
README's typographic minus, are their arguments).

>>> num(3), num(0.5), num(None), num(float("nan")), num(True), num("1")
(3.0, 0.5, None, None, None, None)
>>> (
...     interval(0.125, 0.105, 0.145, 1, scale=100, suffix=" %"),
...     interval(0.61, None, None, 3, no_interval=" [interval undefined]"),
... )
('12.5 [10.5, 14.5] %', '0.610 [interval undefined]')
>>> interval(-0.05, -0.1, float("nan"), minus="−"), interval(-0.05, -0.1, float("nan"), minus="−", each_bound=True)
('−0.05', '−0.05 [−0.10, undefined]')
"""

from __future__ import annotations

import math
import numbers
from typing import Any

UNDEFINED = "undefined"


def num(x: Any) -> float | None:
    """``x`` as a float when it is a finite real number (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def is_undefined(*values: Any) -> bool:
    """Whether any of ``values`` is undefined: not a number by :func:`num`.

    >>> [is_undefined(v) for v in (None, float("nan"), "x", True, 0.0, 3)], is_undefined(0.5, None)
    ([True, True, True, True, False, False], True)
    """
    return any(num(v) is None for v in values)


def undefined(reason: Any = None) -> str:
    """``undefined``, or ``undefined (reason)`` when the reason is known.

    >>> undefined(), undefined("only one class among 12 solutions")
    ('undefined', 'undefined (only one class among 12 solutions)')
    """
    reason = None if reason is None or (isinstance(reason, float) and math.isnan(reason)) else str(reason).strip()
    return f"{UNDEFINED} ({reason})" if reason else UNDEFINED


def fixed(
    x: Any, digits: int = 2, reason: Any = None, signed: bool = False, *, scale: float = 1.0, minus: str = "-"
) -> str:
    """``x * scale`` with ``digits`` decimals: a sign when ``signed``, none on a value that rounds to zero
    (never ``-0.00``), a negative one written with ``minus``; ``undefined`` (with ``reason``) when ``x``
    is not a number.

    >>> fixed(-0.0004), fixed(0.1234, signed=True), fixed(-1.25, 1, minus="−"), fixed(None)
    ('0.00', '+0.12', '−1.2', 'undefined')
    """
    if is_undefined(x):
        return undefined(reason)
    value = float(x) * scale
    text = f"{value:.{max(0, digits)}f}"
    if float(text) == 0:
        return f"{0:.{max(0, digits)}f}"
    return f"+{text}" if signed and value > 0 else text.replace("-", minus)


def interval(
    value: Any,
    low: Any,
    high: Any,
    digits: int = 2,
    *,
    signed: bool = False,
    scale: float = 1.0,
    suffix: str = "",
    reason: Any = None,
    minus: str = "-",
    each_bound: bool = False,
    no_interval: str = "",
) -> str:
    """``value [low, high]`` (each as :func:`fixed` writes it) then ``suffix``; ``undefined (reason)`` when
    the value is undefined. An undefined interval (one seed, one class) is left out, ``no_interval``
    written in its place; with ``each_bound`` it is written all the same, an undefined bound as ``undefined``."""
    if is_undefined(value):
        return undefined(reason)
    shown = fixed(value, digits, signed=signed, scale=scale, minus=minus)
    if each_bound or not is_undefined(low, high):
        bounds = (fixed(b, digits, signed=signed, scale=scale, minus=minus) for b in (low, high))
        return shown + " [{}, {}]".format(*bounds) + suffix
    return shown + no_interval + suffix
