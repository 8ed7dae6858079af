"""What the queries read of an attempt, without the models: the status words, the shape fields,
the ledger's order, and ``Summary``, the part of a record the derived index keeps.

Nothing here imports pydantic, so that `list`, `streaks` and `lineage`, answered from the index
(``store/index/``), never pay for building the models (about 0.1 s of a 0.25 s command).
An ``Attempt`` has every attribute of ``Summary``, so each view takes either.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

STATUSES = ("worked", "worked-with-caveat", "failed", "regressed", "inconclusive", "not-tried")
# What `list --failures-only` and the streak count treat as a negative outcome.
NEGATIVE_STATUSES = ("failed", "regressed", "inconclusive")
# Fields that describe the shape of a training or evaluation attempt; infrastructure has none.
# Lineage (varied_from) is not shape: an infrastructure attempt may vary another.
SHAPE_FIELDS = ("methods", "bases", "objective", "data_rows")
# What `coverage` counts on the attempts that have a shape: the shape, and whether they vary another.
COVERED_FIELDS = (*SHAPE_FIELDS, "varied_from")
INFRASTRUCTURE_KIND = "infrastructure"

# A streak (``views/streaks.py``): this many negatives at a chain's tip earn a CAUTION, and
# this many a STOP AND RETHINK, which the gate refuses unless the axis changes.
CAUTION_AT = 2
STOP_AT = 3

# Where a record stands in the ledger (``ledger_key``).
LedgerKey = tuple[str, int, int, int, str]


class Linked(Protocol):
    """An attempt as the lineage graph sees it."""

    @property
    def id(self) -> str: ...
    @property
    def varied_from(self) -> str | None: ...


class Step(Linked, Protocol):
    """An attempt as the search for streaks sees it."""

    @property
    def status(self) -> str: ...
    @property
    def objective(self) -> str | None: ...
    @property
    def ledger(self) -> LedgerKey: ...


class Outcome(Step, Protocol):
    """An attempt as a streak shows it."""

    @property
    def lesson(self) -> str | None: ...


class Filtered(Protocol):
    """An attempt as a `list` filter sees it (a ``Shaped`` one, or the index's ``Listed`` row)."""

    @property
    def status(self) -> str: ...
    @property
    def objective(self) -> str | None: ...
    @property
    def family(self) -> str | None: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def methods(self) -> Sequence[str] | None: ...
    @property
    def bases(self) -> Sequence[str] | None: ...


class Shaped(Outcome, Filtered, Protocol):
    """An attempt as the queries, precedents and the gate's registry-wide checks see it."""

    @property
    def data_rows(self) -> int | None: ...
    @property
    def varied(self) -> str | None: ...
    @property
    def question(self) -> str | None: ...
    @property
    def next_action(self) -> str | None: ...
    @property
    def tracking_issue(self) -> str | None: ...


class Link(NamedTuple):
    """The least of a record that finding the streaks needs, read from the index for every
    attempt (a whole ``Summary`` is read only for the attempts of the streaks found)."""

    id: str
    varied_from: str | None
    objective: str | None
    status: str
    ledger: LedgerKey


class Summary(NamedTuple):
    """A valid record as the index holds it: its shape, status, lineage edge, question and
    disposition. Everything else (evidence, admission, runs, condition) is read from its file.
    A named tuple: 100,000 of them are made per query, and a tuple is the cheapest to make."""

    id: str
    status: str
    family: str | None
    kind: str | None
    objective: str | None
    methods: list[str] | None
    bases: list[str] | None
    data_rows: int | None
    varied_from: str | None
    varied: str | None
    question: str | None
    lesson: str | None
    next_action: str | None
    tracking_issue: str | None
    ledger: LedgerKey
    has_condition: bool = False
    # the record file's name without ".json", which may differ from the id in a misnamed file
    stem: str | None = None
    # what the gate compares a new question with where the record asks none (an imported one)
    name: str | None = None
    hypothesis: str | None = None
    deviates: bool = False  # its status departs from its analysis plan's decision


class Listed(NamedTuple):
    """The least of a record that `list` filters on and shows: what the index reads of each
    attempt its filter may match (a whole ``Summary`` of 23,000 attempts costs twice as much)."""

    id: str
    status: str
    lesson: str | None
    # the shape its filters ask about
    family: str | None
    kind: str | None
    objective: str | None
    methods: list[str] | None
    bases: list[str] | None
    has_condition: bool
    stem: str | None
    deviates: bool = False


class Vocabularies(Protocol):
    """The vocabularies of ``registry.json`` (a ``RegistryMeta``, or the index's copy of it)."""

    @property
    def method_vocabulary(self) -> Mapping[str, str | None]: ...
    @property
    def objective_vocabulary(self) -> Mapping[str, str | None]: ...
    @property
    def kind_vocabulary(self) -> Mapping[str, str | None]: ...
    @property
    def confidence_vocabulary(self) -> Mapping[Any, str | None]: ...  # keyed by the confidence words


def listed(a: Summary) -> Listed:
    return Listed(
        a.id, a.status, a.lesson, a.family, a.kind, a.objective, a.methods, a.bases, a.has_condition, a.stem, a.deviates
    )


@dataclass(frozen=True)
class Filter:
    """Each given criterion must hold (AND); several methods, or several bases, OR-match."""

    statuses: Sequence[str] = ()
    families: Sequence[str] = ()
    kinds: Sequence[str] = ()
    methods: Sequence[str] = ()
    bases: Sequence[str] = ()
    objectives: Sequence[str] = ()
    failures_only: bool = False

    def matches(self, a: Filtered) -> bool:
        if self.statuses and a.status not in self.statuses:
            return False
        if self.failures_only and a.status not in NEGATIVE_STATUSES:
            return False
        if self.families and a.family not in self.families:
            return False
        if self.kinds and a.kind not in self.kinds:
            return False
        if self.objectives and a.objective not in self.objectives:
            return False
        if self.methods and not set(self.methods) & set(a.methods or ()):
            return False
        return not (self.bases and not set(self.bases) & set(a.bases or ()))


T = TypeVar("T", bound=Step)


def ledger_key(attempt: Any) -> LedgerKey:
    """Where a record stands in the ledger: imported records in the order of their imports and
    of their files, records made by ptreg in the order they were admitted, each at its time.
    A record that says neither (written by hand) comes first, by id. ``attempt``: an
    ``attempt.Attempt``, or one read off a vouched file (``dumped.py``)."""
    origin = attempt.origin
    if origin is not None and origin.imported_at is not None:
        return (origin.imported_at, 0, origin.import_number or 0, origin.position, attempt.id)
    if attempt.admission is not None:
        return (attempt.admission.admitted_at, 1, 0, 0, attempt.id)
    return ("", 0, 0, 0, attempt.id)


def lacks(attempt: Any, field: str) -> bool:
    """Whether ``field`` of ``attempt`` is unknown because the format the record came in had no
    such field."""
    return attempt.origin is not None and field in attempt.origin.lacks and getattr(attempt, field) is None


def in_ledger_order(attempts: Iterable[T]) -> list[T]:
    return sorted(attempts, key=lambda a: a.ledger)


# Terms (methods, bases) as the index stores a list of them: joined by a unit separator, which no
# term holds; a list where a term holds a control character is stored as JSON after a record
# separator. None stays NULL, and an empty list is the empty string (a term is never empty).
TERMS_SEPARATOR, TERMS_AS_JSON = "\x1f", "\x1e"


def encode_terms(terms: Sequence[str] | None) -> str | None:
    if terms is None:
        return None
    if any(not t.isprintable() for t in terms):
        return TERMS_AS_JSON + json.dumps(list(terms))
    return TERMS_SEPARATOR.join(terms)


def decode_terms(text: str | None) -> list[str] | None:
    if text is None:
        return None
    if text.startswith(TERMS_AS_JSON):
        return list(json.loads(text[1:]))
    return text.split(TERMS_SEPARATOR) if text else []


S = TypeVar("S", bound=Step)


def trailing_negatives(chain: list[S], objective: str) -> list[S]:
    """The negatives at the tip of ``chain``, oldest first. Proposals not yet tried at the tip
    are passed over: they have no outcome, so they neither break nor extend a streak (else
    proposing would be a way to clear a STOP AND RETHINK)."""
    trailing: list[S] = []
    outcomes = list(reversed(chain))
    while outcomes and outcomes[0].status == "not-tried" and outcomes[0].objective == objective:
        outcomes.pop(0)
    for a in outcomes:
        if a.objective != objective or a.status not in NEGATIVE_STATUSES:
            break
        trailing.append(a)
    trailing.reverse()
    return trailing


def question_tokens(question: str) -> list[str]:
    """Case, punctuation and whitespace do not make a question new."""
    text = unicodedata.normalize("NFKC", question).casefold()
    return re.sub(r"[\W_]+", " ", text).split()
