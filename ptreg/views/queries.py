"""Queries over attempts: filtered lists ("has anything shaped like this been tried?") and coverage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from ..records.ledger import COVERED_FIELDS, INFRASTRUCTURE_KIND, Filter, Filtered, Shaped, Vocabularies
from ..store.names import has_runs

# A whole record or the index's summary of one: a query gives back what it was given.
A = TypeVar("A", bound=Shaped)


F = TypeVar("F", bound=Filtered)


def select(attempts: Iterable[F], query: Filter) -> list[F]:
    return [a for a in attempts if query.matches(a)]


class Shown(Filtered, Protocol):
    """What `list`'s table shows of an attempt (a ``Listed`` row, or a whole record)."""

    @property
    def id(self) -> str: ...
    @property
    def lesson(self) -> str | None: ...
    @property
    def deviates(self) -> bool: ...


# A not-tried attempt with a run: its record says not-tried until `ptreg conclude`, and a reader
# must see that a run is there to conclude on (issue 35).
AWAITS_CONCLUSION = "not-tried (ran)"
AWAITS_LEGEND = "not-tried (ran): a run is there, and the attempt awaits `ptreg conclude ID`"
DEVIATES = " (deviates)"
DEVIATES_LEGEND = (
    "(deviates): the status departs from what the attempt's analysis plan decided; `ptreg show ID` says why"
)


def shown_status(root: Path, attempt_id: str, status: str) -> str:
    """The status as a reader sees it: not-tried with a run reads ``AWAITS_CONCLUSION``."""
    return AWAITS_CONCLUSION if status == "not-tried" and has_runs(root, attempt_id) else status


def list_row(a: Shown) -> tuple[str, str, str | None, str | None, str, str, str | None]:
    """`list`'s row of an attempt: id, status, family, kind, objective ("" when none), methods
    joined by commas, lesson (``Index.list_rows`` gives the same straight from SQL)."""
    status = a.status + DEVIATES if a.deviates else a.status
    return (a.id, status, a.family, a.kind, a.objective or "", ",".join(a.methods or ()), a.lesson)


@dataclass
class FieldCoverage:
    field: str
    carried: int
    total: int

    @property
    def share(self) -> float | None:
        return self.carried / self.total if self.total else None


@dataclass
class TermUse:
    vocabulary: str  # "method", "objective" or "kind"
    term: str
    count: int
    defined: bool | None  # False: used but missing from the vocabulary; None: no vocabulary (bases)
    # in the vocabulary, but imported without a definition (its ledger used it without defining it)
    without_definition: bool = False


@dataclass
class Coverage:
    shaped_total: int  # attempts that are not infrastructure
    fields: list[FieldCoverage]
    terms: list[TermUse] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "non_infrastructure_attempts": self.shaped_total,
            "fields": [{"field": f.field, "carried": f.carried, "total": f.total} for f in self.fields],
            "vocabulary": [t.__dict__ for t in self.terms],
        }


def coverage(attempts: Iterable[Shaped], meta: Vocabularies) -> Coverage:
    """How many non-infrastructure attempts carry each shape field, and which terms are in use."""
    all_attempts = list(attempts)
    shaped = [a for a in all_attempts if a.kind != INFRASTRUCTURE_KIND]
    fields = [
        FieldCoverage(name, sum(1 for a in shaped if getattr(a, name) not in (None, [])), len(shaped))
        for name in COVERED_FIELDS
    ]
    terms: list[TermUse] = []
    used = {
        "method": _count(m for a in all_attempts for m in a.methods or ()),
        "objective": _count(a.objective for a in all_attempts if a.objective is not None),
        "kind": _count(a.kind for a in all_attempts if a.kind is not None),
    }
    vocabularies = {
        "method": meta.method_vocabulary,
        "objective": meta.objective_vocabulary,
        "kind": meta.kind_vocabulary,
    }
    for name, vocabulary in vocabularies.items():
        counts = used[name]
        for term, definition in vocabulary.items():
            terms.append(TermUse(name, term, counts.get(term, 0), True, definition is None))
        for term in sorted(set(counts) - set(vocabulary)):
            terms.append(TermUse(name, term, counts[term], False))
    bases = _count(b for a in all_attempts for b in a.bases or ())
    terms.extend(TermUse("base", b, n, None) for b, n in sorted(bases.items(), key=lambda kv: (-kv[1], kv[0])))
    return Coverage(len(shaped), fields, terms)


def _count(values: Iterable[str]) -> dict[str, int]:
    return dict(Counter(values))
