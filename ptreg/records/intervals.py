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
from functools import cache, lru_cache
from typing import Literal

LEVEL = 0.95  # the level of every interval a run records
Scale = Literal["linear", "log"]

# From this results version on a metric's intervals say what they are over.
VARIANCE_FROM_VERSION = 8
# What the variance of a metric's interval is over (version 8). "items and seeds": per-item
# results crossed with seeds, both drawn from populations (engine/stats.py crossed_mean);
# "items only": one seed's items, which leave the variance between seeds unknown; "seeds": one
# value per seed (a metric without items); "rounds": a time or memory, over the rounds.
VarianceOf = Literal["items and seeds", "items only", "seeds", "rounds"]
# Why an interval over one seed's items decides nothing: each seed trains a model of its own,
# and how far another seed's model lands is not in one seed's items.
ONE_SEED = "one seed: seed variance unknown; take 2 or more rounds"


def variance_text(variance: VarianceOf) -> str:
    """What an interval is over, as a table or a message says it."""
    return "items only; seed variance unknown" if variance == "items only" else variance


@cache
def t_quantile(n: int, level: float = LEVEL) -> float:
    """The two-sided ``level`` quantile of Student's t for ``n`` values (n - 1 degrees of freedom)."""
    from scipy.stats import t  # 0.7 s to import: only where an interval is computed

    return float(t.ppf(0.5 + level / 2, n - 1))


@lru_cache(maxsize=1024)  # degrees of freedom that need not be whole take many values: a bounded cache
def t_quantile_df(df: float, level: float = LEVEL) -> float:
    """The two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom, which
    need not be whole (Satterthwaite's, for a variance made of several parts)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, df))


def at_level(
    low: float, high: float, n: int, scale: Scale, level: float, df: float | None = None
) -> tuple[float, float]:
    """The recorded 95% t-interval (low, high) of ``n`` values taken to ``level``; with ``df``,
    the interval's own degrees of freedom where they are not n - 1 (an interval over items and
    seeds).

    An interval recorded by an adaptive plan was already taken at a wider quantile; scaled the
    same way it stays wider than ``level`` asks, which errs on the side of caution."""
    if level == LEVEL or (df is None and n < 2):
        return low, high
    if df is not None:
        factor = t_quantile_df(df, level) / t_quantile_df(df, LEVEL)
    else:
        factor = t_quantile(n, level) / t_quantile(n, LEVEL)
    if scale == "log":
        if not (low > 0 and high > 0):
            return low, high
        centre, half = (math.log(low) + math.log(high)) / 2, (math.log(high) - math.log(low)) / 2
        return math.exp(centre - half * factor), math.exp(centre + half * factor)
    centre, half = (low + high) / 2, (high - low) / 2
    return centre - half * factor, centre + half * factor
