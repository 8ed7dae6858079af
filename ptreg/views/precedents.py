"""Precedents: the prior attempts most like a proposal, so history is read before budget is spent.

Ranking is by shared shape, compared as a tuple so that each criterion outweighs every one
after it: a shared objective first, then sharing a method and sharing a base (each counts once,
however many terms are shared, as in the source project's query tool), then the same lineage,
then the same family. Among equals, negative outcomes come first: they are
what a proposer most needs to have read; then the ledger's order, as the source project's own
query tool keeps it (docs/registry.md says where the two rank differently, and why).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..errors import UnusableInput
from ..records.arguments import named
from ..records.ledger import NEGATIVE_STATUSES, Shaped

# A whole record or the index's summary of one: a precedent holds what it was given.
A = TypeVar("A", bound=Shaped)

DEFAULT_LIMIT = 10


@dataclass(frozen=True)
class Shape:
    """What a proposal is, for comparing it with the record."""

    objective: str | None = None
    methods: Sequence[str] = ()
    bases: Sequence[str] = ()
    family: str | None = None
    lineage: Sequence[str] = ()  # ids of the lineage the proposal joins

    @classmethod
    def of(cls, attempt: Shaped, lineage: Iterable[str] = ()) -> Shape:
        return cls(attempt.objective, attempt.methods or (), attempt.bases or (), attempt.family, tuple(lineage))

    def is_empty(self) -> bool:
        return not (self.objective or self.methods or self.bases or self.family or self.lineage)

    def given(self) -> Shape:
        """The shape, refused in one line when it says nothing to compare (in the caller's names)."""
        if self.is_empty():
            asked = f"{named('objective')}, {named('methods')}, {named('bases')} or {named('family')}"
            raise UnusableInput(f"say what the proposal is: give {asked}")
        return self


@dataclass(frozen=True)
class Precedent(Generic[A]):
    attempt: A
    objective: bool
    methods: list[str] = field(default_factory=list)
    bases: list[str] = field(default_factory=list)
    lineage: bool = False
    family: bool = False

    @property
    def rank(self) -> tuple[int, int, int, int, int]:
        negative = self.attempt.status in NEGATIVE_STATUSES
        return (
            int(self.objective),
            int(bool(self.methods)) + int(bool(self.bases)),
            int(self.lineage),
            int(self.family),
            int(negative),
        )

    def shares(self) -> str:
        parts = []
        if self.objective:
            parts.append(f"objective {self.attempt.objective}")
        if self.methods:
            parts.append("method " + ", ".join(self.methods))
        if self.bases:
            parts.append("base " + ", ".join(self.bases))
        if self.lineage:
            parts.append("lineage")
        if self.family:
            parts.append(f"family {self.attempt.family}")
        return "; ".join(parts)

    def to_json(self) -> dict:
        a = self.attempt
        return {
            "id": a.id,
            "status": a.status,
            "lesson": a.lesson,
            "next_action": a.next_action,
            "shared": {
                "objective": self.objective,
                "methods": self.methods,
                "bases": self.bases,
                "lineage": self.lineage,
                "family": self.family,
            },
        }


def compare(shape: Shape, attempt: A) -> Precedent[A]:
    return Precedent(
        attempt,
        objective=shape.objective is not None and attempt.objective == shape.objective,
        methods=[m for m in shape.methods if m in (attempt.methods or ())],
        bases=[b for b in shape.bases if b in (attempt.bases or ())],
        lineage=attempt.id in shape.lineage,
        family=shape.family is not None and attempt.family == shape.family,
    )


def precedents(shape: Shape, attempts: Iterable[A], limit: int | None = DEFAULT_LIMIT) -> list[Precedent[A]]:
    """Attempts sharing anything with ``shape``, most alike first (failures first among equals,
    then in the order of ``attempts``: the ledger's, as every reader gives them)."""
    found = [p for p in (compare(shape, a) for a in attempts) if any(p.rank[:4])]
    found.sort(key=lambda p: tuple(-x for x in p.rank))  # stable: ties keep the ledger's order
    return found if limit is None else found[:limit]
