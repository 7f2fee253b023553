"""What counts as a number in a metric: a finite real (not a bool). Everything else (null, NaN, ±inf,
a string, a bool) is undefined. Verdicts, the score checks, the run comparison and the report's
formatters all read figures through :func:`num`, so "defined" means one thing everywhere.

>>> num(3), num(0.5), num(None), num(float("nan")), num(True), num("1")
(3.0, 0.5, None, None, None, None)
"""

from __future__ import annotations

import math
import numbers
from typing import Any


def num(x: Any) -> float | None:
    """``x`` as a float when it is a finite real number (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None
    x = float(x)
    return x if math.isfinite(x) else None
