"""What a command writes for ptreg: its metrics and per-item results, one JSON object a line in
the files ``$PTREG_METRICS`` and ``$PTREG_ITEMS`` name. Hostile like every file ptreg reads:
never through a symlink, bounded, and a line that is not a JSON object, a metric nobody declared
or a value that is not a finite number is one line naming the problem."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ...records.evaluator import MetricDeclaration
from ...store.jsonio import JsonError, read_bytes
from ...text import shorten

# What a command may write before it is not believed: far above any real metric or item file.
MAX_METRICS_BYTES = 16 * 1024 * 1024
MAX_ITEM_ID = 200


def _number(value: Any) -> float | None:
    """A finite JSON number; None for anything else (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        return None
    return number if math.isfinite(number) else None


def _lines(path: Path, what: str) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a file the command wrote, with their line numbers; ValueError naming
    the line and the problem otherwise."""
    # Read without following a symlink, refusing anything but a regular file, and bounded: a
    # child the command left running (in a session of its own) may swap or grow the file.
    if not os.path.lexists(path):
        return []
    try:
        data = read_bytes(path, MAX_METRICS_BYTES, follow=False)
    except JsonError as exc:
        raise ValueError(f"its {what} file: {exc.problem}") from None
    found = []
    text = data.decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line, parse_constant=lambda c: None)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number} of its {what} is not JSON ({exc.msg})") from None
        except ValueError:  # a number too long to convert
            raise ValueError(f"line {number} of its {what} is not JSON") from None
        except RecursionError:
            raise ValueError(f"line {number} of its {what} is nested too deeply") from None
        if not isinstance(value, dict):
            raise ValueError(f"line {number} of its {what} is not a JSON object")
        found.append((number, value))
    return found


def read_metrics(path: Path, declared: dict[str, MetricDeclaration]) -> dict[str, float]:
    """A command's metrics file, which holds a value of every declared metric."""
    values = written_metrics(path, declared)
    problem = missing_metric(values, declared)
    if problem is not None:
        raise ValueError(problem)
    return values


def missing_metric(values: dict[str, float], declared: dict[str, MetricDeclaration]) -> str | None:
    """Why a repeat's metrics are not whole: none written, or a declared one not."""
    if not values:
        return "it wrote no metrics"
    missing = [m for m in declared if m not in values]
    return f"it wrote no value of {missing[0]}" if missing else None


def written_metrics(path: Path, declared: dict[str, MetricDeclaration]) -> dict[str, float]:
    """The declared metrics a file gives a value of (a stage may write some of them)."""
    values: dict[str, float] = {}
    for number, line in _lines(path, "metrics"):
        for name, value in line.items():
            if name not in declared:
                raise ValueError(
                    f"line {number} of its metrics names {shorten(name, 40)}, which the evaluator does not declare"
                )
            found = _number(value)
            if found is None:
                raise ValueError(f"line {number} of its metrics: {name} is not a finite number")
            values[name] = found  # the last value written stands
    return values


def read_items(path: Path, declared: dict[str, MetricDeclaration]) -> dict[str, dict[str, float]] | None:
    items: dict[str, dict[str, float]] = {}
    for number, line in _lines(path, "items"):
        item = line.get("item")
        if not isinstance(item, str) or not 0 < len(item) <= MAX_ITEM_ID:
            raise ValueError(f"line {number} of its items has no item id (a string of 1 to {MAX_ITEM_ID} characters)")
        for name, value in line.items():
            if name == "item":
                continue
            if name not in declared:
                raise ValueError(
                    f"line {number} of its items names {shorten(name, 40)}, which the evaluator does not declare"
                )
            found = _number(value)
            if found is None:
                raise ValueError(f"line {number} of its items: {name} of {shorten(item, 40)} is not a finite number")
            by_item = items.setdefault(name, {})
            if item in by_item:
                raise ValueError(f"line {number} of its items scores {shorten(item, 40)} on {name} a second time")
            by_item[item] = found
    return items or None
