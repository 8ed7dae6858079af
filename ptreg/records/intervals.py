"""Student's t quantiles, and a recorded 95% interval taken to another level.

Every interval a run records is a t-interval, symmetric about its centre on the scale it was
taken on: the values themselves for a mean or a difference, their logarithms for a time or a
ratio. Such an interval at another level is the same centre with its half-width scaled by the
ratio of the two quantiles, so a condition can be decided at the level its multiplicity rule
asks for (``decision.py``) from what the run recorded, without its samples. scipy is imported
only where a quantile is computed.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Literal

LEVEL = 0.95  # the level of every interval a run records
Scale = Literal["linear", "log"]


@cache
def t_quantile(n: int, level: float = LEVEL) -> float:
    """The two-sided ``level`` quantile of Student's t for ``n`` values (n - 1 degrees of freedom)."""
    from scipy.stats import t  # 0.7 s to import: only where an interval is computed

    return float(t.ppf(0.5 + level / 2, n - 1))


def at_level(low: float, high: float, n: int, scale: Scale, level: float) -> tuple[float, float]:
    """The recorded 95% t-interval (low, high) of ``n`` values taken to ``level``.

    An interval recorded by an adaptive plan was already taken at a wider quantile; scaled the
    same way it stays wider than ``level`` asks, which errs on the side of caution."""
    if level == LEVEL or n < 2:
        return low, high
    factor = t_quantile(n, level) / t_quantile(n, LEVEL)
    if scale == "log":
        if not (low > 0 and high > 0):
            return low, high
        centre, half = (math.log(low) + math.log(high)) / 2, (math.log(high) - math.log(low)) / 2
        return math.exp(centre - half * factor), math.exp(centre + half * factor)
    centre, half = (low + high) / 2, (high - low) / 2
    return centre - half * factor, centre + half * factor
