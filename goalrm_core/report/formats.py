"""How the README block and the designs table write a number: fixed digits, a typographic minus,
"undefined" for what is missing or not finite, and an across-seeds figure with its interval.

>>> fixed(-0.004), fixed(0.123, signed=True), fixed(float("nan"))
('0.00', '+0.12', 'undefined')
>>> ci(0.61, 0.55, 0.67), ci(None, 0.1, 0.2)
('0.61 [0.55, 0.67]', 'undefined')
>>> across({"mean": -0.05, "ci_low": -0.1, "ci_high": 0.0})
'−0.05 [−0.10, 0.00]'
>>> across({"mean": 0.2, "ci_low": None, "reason": "one seed"}, signed=False)
'0.20 (no interval: one seed)'
"""

from __future__ import annotations

from typing import Any, Mapping

from goalrm_core.evaluation.numeric import num
from goalrm_core.study import formatting as fmt


def fixed(x: Any, digits: int = 2, signed: bool = False, scale: float = 1.0) -> str:
    """``x * scale`` as :func:`goalrm_core.study.formatting.interval` writes it (a sign when ``signed``;
    no sign on a rounded zero), with a typographic minus."""
    v = num(x)
    return "undefined" if v is None else fmt.interval(v, None, None, digits, signed=signed, scale=scale).replace("-", "−")


def ci(mean, low, high, digits: int = 2, signed: bool = False, scale: float = 1.0) -> str:
    """``mean [low, high]``, each as :func:`fixed` writes it; "undefined" without a mean."""
    if num(mean) is None:
        return "undefined"
    return f"{fixed(mean, digits, signed, scale)} [{fixed(low, digits, signed, scale)}, {fixed(high, digits, signed, scale)}]"


def across(s: Mapping, signed: bool = True, scale: float = 1.0) -> str:
    """An across-seeds summary (``mean``, ``ci_low``, ``ci_high``, ``reason``) with its interval, or why it has none."""
    if num(s.get("mean")) is None:
        return f"undefined ({s.get('reason') or 'no seed defined'})"
    if num(s.get("ci_low")) is None:
        return f"{fixed(s['mean'], signed=signed, scale=scale)} (no interval: {s.get('reason') or 'undefined'})"
    return ci(s["mean"], s.get("ci_low"), s.get("ci_high"), signed=signed, scale=scale)
