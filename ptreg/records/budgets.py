"""A resource budget in words, without the models: the dossier of a record the query index
vouches for is rendered without pydantic (``records/dumped.py``)."""

from __future__ import annotations

from typing import Any

# each optional limit of a budget, and the unit it is read in
_LIMITS = (
    ("max_timed_steps", "timed steps per repeat"),
    ("max_repeats", "repeats"),
    ("max_threads", "threads"),
    ("max_memory_mb", "MB peak memory"),
)
UNITS = {"wall_clock_seconds": "s", **dict(_LIMITS)}
# a count of one takes the singular of its unit
_SINGULAR = {"timed steps per repeat": "timed step per repeat", "repeats": "repeat", "threads": "thread"}


def amount(limit: str, value: float) -> str:
    """One limit of a budget as a person writes it: ``300 s``, ``4 threads``, ``1 thread``, ``1.5 MB peak memory``."""
    number = f"{value:.0f}" if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"
    unit = UNITS[limit]
    return f"{number} {_SINGULAR.get(unit, unit) if number == '1' else unit}"


def describe_budget(budget: Any) -> str:
    """``budget`` (an ``attempt.Budget``, or the same fields read off its JSON) in one line."""
    parts = [f"{amount('wall_clock_seconds', budget.wall_clock_seconds)} wall clock"]
    for name, _ in _LIMITS:
        value = getattr(budget, name)
        if value is not None:
            parts.append(f"at most {amount(name, value)}")
    return ", ".join(parts)
