"""One attempt's lineage for reading: its varied_from chain, oldest first, and what superseded it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.attempt import Attempt
from ..records.graph import ancestry, successors


def lineage_json(attempt_id: str, by_id: Mapping[str, Attempt]) -> dict[str, Any]:
    chain = ancestry(attempt_id, by_id)
    return {
        "id": attempt_id,
        "chain": [{"id": a.id, "status": a.status, "varied_from": a.varied_from, "varied": a.varied} for a in chain],
        "missing_ancestor": chain[0].varied_from,
        "superseded_by": [
            {"id": s.attempt.id, "depth": s.depth, "status": s.attempt.status, "varied": s.attempt.varied}
            for s in successors(attempt_id, by_id)
        ],
    }


def lineage_lines(attempt_id: str, by_id: Mapping[str, Attempt]) -> list[str]:
    """The chain numbered oldest first, the attempt marked ``*``, each step with what it varied."""
    chain = ancestry(attempt_id, by_id)
    lines = []
    if chain[0].varied_from is not None:
        lines.append(f"   ({chain[0].varied_from}: not in this registry)")
    for step, a in enumerate(chain, start=1):
        marker = "*" if a.id == attempt_id else " "
        lines.append(f"{marker}{step:>2}. {a.id} [{a.status}]")
        if a.varied is not None:
            lines.append(f"      varied: {a.varied}")
    later = successors(attempt_id, by_id)
    if not later:
        return [*lines, "superseded by: nothing yet"]
    lines.append("superseded by:")
    for s in later:
        varied = f": {s.attempt.varied}" if s.attempt.varied else ""
        lines.append(f"  {'  ' * (s.depth - 1)}{s.attempt.id} [{s.attempt.status}]{varied}")
    return lines
