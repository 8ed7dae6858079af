"""What a command's harness imports to hand ptreg its numbers: ``report`` and ``item``.

``from ptreg.harness import report, item``; ``report(score=0.8)`` records a metric of the
repeat, ``item("q17", score=1)`` one item's score. Each call appends one JSON line to the file
ptreg names in ``$PTREG_METRICS`` or ``$PTREG_ITEMS``, in the form the command workload reads
(``engine/workloads/command.py``): ``{"score": 0.8}`` and ``{"item": "q17", "score": 1}``.

A value ptreg would refuse after the command ends is refused here, at the call that made it,
with a ValueError: a value that is not a finite number, a name that is not a metric name, a name
the evaluator does not declare (ptreg lists them in ``$PTREG_DECLARED``), an item scored twice
on one metric. Run outside ptreg (no ``$PTREG_METRICS``), a call prints to stderr what it
would record, so the same script runs by hand.

The module imports only the standard library: a harness loads it in every repeat, and a
command may run in an environment with nothing else installed.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from typing import Any

__all__ = ["item", "report"]

# The forms ptreg accepts (records/evaluator.py's metric names, command.py's item ids), repeated
# here because importing them would load pydantic into every harness.
_METRIC_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_MAX_ITEM_ID = 200

_scored: set[tuple[str, str]] = set()  # (item, metric) recorded by this process


def report(**metrics: float) -> None:
    """Record metrics of this repeat (the last value written of a metric stands)."""
    line = _checked(metrics)
    _write("PTREG_METRICS", "metrics", line)


def item(item_id: str, **metrics: float) -> None:
    """Record one item's metrics; each (item, metric) once per repeat."""
    if not isinstance(item_id, str) or not 0 < len(item_id) <= _MAX_ITEM_ID:
        raise ValueError(f"an item id is a string of 1 to {_MAX_ITEM_ID} characters, not {item_id!r:.60}")
    if "item" in metrics:
        raise ValueError("'item' names the item in ptreg's items file; it cannot be a metric")
    line = _checked(metrics)
    again = [name for name in line if (item_id, name) in _scored]
    if again:
        raise ValueError(f"item {item_id!r:.60} was already scored on {again[0]}")
    _write("PTREG_ITEMS", "items", {"item": item_id, **line})
    _scored.update((item_id, name) for name in line)


def _checked(metrics: dict[str, Any]) -> dict[str, float]:
    if not metrics:
        raise ValueError("no metric given: name each, as in report(score=0.8)")
    declared = _declared()
    for name, value in metrics.items():
        if not _METRIC_NAME.fullmatch(name):
            raise ValueError(f"{name!r:.70} is not a metric name (lower case, digits and _, 1 to 64 characters)")
        if declared is not None and name not in declared:
            listed = ", ".join(sorted(declared)) or "none"
            raise ValueError(f"{name} is not a metric the evaluator declares (it declares: {listed})")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name} is {type(value).__name__}, not a number")
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an integer too large for a float
            finite = False
        if not finite:
            raise ValueError(f"{name} is {value!r:.40}, not a finite number")
    return dict(metrics)


def _declared() -> set[str] | None:
    """The metric names ptreg accepts from this command; None when it does not say (a script run
    by hand, or an older ptreg)."""
    raw = os.environ.get("PTREG_DECLARED")
    if raw is None:
        return None
    try:
        names = json.loads(raw)
    except ValueError:
        names = None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("$PTREG_DECLARED is not a JSON list of metric names")
    return set(names)


def _write(variable: str, what: str, line: dict[str, Any]) -> None:
    text = json.dumps(line, allow_nan=False)
    path = os.environ.get(variable)
    if not path:
        if os.environ.get("PTREG_METRICS"):
            # under ptreg, a file it does not name is one it does not read: nothing is recorded
            raise ValueError(f"${variable} is not set, so ptreg reads no {what} of this command")
        print(f"ptreg.harness: outside ptreg, would record {what}: {text}", file=sys.stderr)
        return
    # appended whole and closed at once, so a harness that dies later keeps what it reported; a
    # symlink put in its place is not followed
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text + "\n")
