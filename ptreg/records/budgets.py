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


def describe_budget(budget: Any) -> str:
    """``budget`` (an ``attempt.Budget``, or the same fields read off its JSON) in one line."""
    parts = [f"{budget.wall_clock_seconds:g} s wall clock"]
    for name, unit in _LIMITS:
        value = getattr(budget, name)
        if value is not None:
            parts.append(f"at most {value:g} {unit}")
    return ", ".join(parts)
