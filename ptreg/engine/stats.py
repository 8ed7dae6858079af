"""Statistics of timing samples: medians and spread, kept apart from measuring them.

A machine shared with others is noisy, so a cell is summarised by its median and its spread
(min, max and interquartile range) over repeats, and flagged when the spread is too wide to
trust. Nothing here times anything or imports NumPy; the Summary itself is part of the
results record (``records/run.py``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ..records.run import Summary


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("no values to summarise")
    ordered = sorted(values)
    median = statistics.median(ordered)
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    spread = (ordered[-1] - ordered[0]) / median if len(ordered) >= 2 and median > 0 else None
    return Summary(n=len(ordered), median=median, min=ordered[0], max=ordered[-1], q1=q1, q3=q3, relative_spread=spread)


def inverted(summary: Summary, numerator: float) -> Summary:
    """Summary of ``numerator / x`` from a summary of positive x (e.g. tokens/s from s/step):
    the order reverses, so min and max swap and so do the quartiles."""
    return Summary(
        n=summary.n,
        median=numerator / summary.median,
        min=numerator / summary.max,
        max=numerator / summary.min,
        q1=numerator / summary.q3,
        q3=numerator / summary.q1,
        relative_spread=(numerator / summary.min - numerator / summary.max) / (numerator / summary.median)
        if summary.n >= 2
        else None,
    )


def too_wide(summary: Summary, limit: float) -> bool | None:
    """Whether the spread exceeds ``limit``; unknown with a single value."""
    if summary.relative_spread is None:
        return None
    return summary.relative_spread > limit


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """A ratio of two medians of the same run; unknown when either side is unknown or zero."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator
