"""One attempt's lineage for reading: its varied_from chain, oldest first, and what superseded it:
the attempts that vary it directly first, as the source project's query tool names them, then,
indented, the rest of what descends from it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..records.graph import Successor, ancestry, successors
from ..records.ledger import Shaped, in_ledger_order
from .queries import shown_status


def superseded_by(
    attempt_id: str, by_id: Mapping[str, Shaped]
) -> tuple[list[Successor[Shaped]], list[Successor[Shaped]]]:
    """What varies ``attempt_id`` directly, and the rest of what descends from it (each under
    the successor it descends from, depth first), both in the ledger's order."""
    ordered = {a.id: a for a in in_ledger_order(by_id.values())}
    later = successors(attempt_id, ordered)
    return [s for s in later if s.depth == 1], [s for s in later if s.depth > 1]


def lineage_json(attempt_id: str, by_id: Mapping[str, Shaped]) -> dict[str, Any]:
    chain = ancestry(attempt_id, by_id)
    direct, rest = superseded_by(attempt_id, by_id)
    return {
        "id": attempt_id,
        "chain": [{"id": a.id, "status": a.status, "varied_from": a.varied_from, "varied": a.varied} for a in chain],
        "missing_ancestor": chain[0].varied_from,
        "superseded_by": [
            {
                "id": s.attempt.id,
                "depth": s.depth,
                "status": s.attempt.status,
                "varied_from": s.attempt.varied_from,
                "varied": s.attempt.varied,
            }
            for s in direct + rest
        ],
    }


def lineage_lines(attempt_id: str, by_id: Mapping[str, Shaped], root: Path | None = None) -> list[str]:
    """The chain numbered oldest first, the attempt marked ``*``, each step with what it varied;
    then what supersedes it, direct successors first. With the registry's ``root``, a not-tried
    attempt with a run reads as awaiting its conclusion."""

    def status(a: Shaped) -> str:
        return a.status if root is None else shown_status(root, a.id, a.status)

    chain = ancestry(attempt_id, by_id)
    lines = []
    if chain[0].varied_from is not None:
        lines.append(f"   ({chain[0].varied_from}: not in this registry)")
    for step, a in enumerate(chain, start=1):
        marker = "*" if a.id == attempt_id else " "
        lines.append(f"{marker}{step:>2}. {a.id} [{status(a)}]")
        if a.varied is not None:
            lines.append(f"      varied: {a.varied}")
    direct, rest = superseded_by(attempt_id, by_id)
    if not direct:
        return [*lines, "superseded by: nothing yet"]
    lines.append("superseded by:")
    lines += [f"  {s.attempt.id} [{status(s.attempt)}]{_varied(s)}" for s in direct]
    if rest:
        lines.append("  and, descending from those:")
        lines += [
            f"  {'  ' * (s.depth - 1)}{s.attempt.id} [{status(s.attempt)}] varies {s.attempt.varied_from}{_varied(s)}"
            for s in rest
        ]
    return lines


def _varied(s: Successor[Shaped]) -> str:
    return f": {s.attempt.varied}" if s.attempt.varied else ""
