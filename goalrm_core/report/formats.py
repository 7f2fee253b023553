"""How the README block and the designs table write a number: :mod:`goalrm_core.study.formatting`'s
formatters with the README's arguments (a typographic minus, each bound of an interval written even when
undefined, and an across-seeds figure that says why it has no interval), under the names and argument
order the README code calls them by.

>>> fixed(-0.004), fixed(0.123, signed=True), fixed(float("nan"))
('0.00', '+0.12', 'undefined')
>>> ci(0.61, 0.55, 0.67), ci(None, 0.1, 0.2), ci(-0.05, -0.1, None)
('0.61 [0.55, 0.67]', 'undefined', '−0.05 [−0.10, undefined]')
>>> across({"mean": -0.05, "ci_low": -0.1, "ci_high": 0.0})
'−0.05 [−0.10, 0.00]'
>>> across({"mean": 0.2, "ci_low": None, "reason": "one seed"}, signed=False), across({"mean": None})
('0.20 (no interval: one seed)', 'undefined (no seed defined)')
"""

from __future__ import annotations

from functools import partial

from goalrm_core.study import formatting as fmt

MINUS = "−"

fixed = partial(fmt.num, minus=MINUS)  # fixed(x, digits=2)
ci = partial(fmt.interval, minus=MINUS, each_bound=True)  # ci(mean, low, high, digits=2, *, signed=False, scale=1.0)
across = partial(
    fmt.across, minus=MINUS, each_bound=True, no_interval="no interval: {}", no_seed="no seed defined"
)  # across(s, signed=True, scale=1.0)
