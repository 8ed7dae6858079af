"""A budget reads as a person writes it, one limit after another."""

from __future__ import annotations

from types import SimpleNamespace

from ptreg.records.budgets import amount, describe_budget


def test_a_count_of_one_takes_the_singular_and_others_the_plural() -> None:
    assert amount("max_threads", 1) == "1 thread"
    assert amount("max_threads", 2) == "2 threads"
    assert amount("max_repeats", 1.0) == "1 repeat"
    assert amount("max_timed_steps", 1) == "1 timed step per repeat"
    assert amount("max_memory_mb", 1) == "1 MB peak memory"
    assert amount("wall_clock_seconds", 1.5) == "1.5 s"


def test_a_budget_lists_only_the_limits_it_sets() -> None:
    budget = SimpleNamespace(
        wall_clock_seconds=1500.0, max_timed_steps=None, max_repeats=None, max_threads=1, max_memory_mb=None
    )
    assert describe_budget(budget) == "1500 s wall clock, at most 1 thread"
