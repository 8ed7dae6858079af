"""``RegistryReader``: the questions every read command asks of a registry, answered alike by
the query index (``store/index/``) and by a full read of every file (``store/full_read.py``,
``PTREG_INDEX=off``). Callers name this protocol, never one of the two."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..records.ledger import Filter, Link, Listed, Shaped, Summary, Vocabularies
from .index.rows import Refresh

# `list`'s table as SQL prints it (``Index.list_rows``): id, status, family, kind, objective,
# methods joined by commas, lesson
ListRow = tuple[str, str, str | None, str | None, str, str, str | None]


class RegistryReader(Protocol):
    """A registry as read: its attempts' summaries, lineage edges, problems and kept results."""

    root: Path
    refresh: Refresh  # what checking the index found (a full read says it used none)

    def close(self) -> None: ...

    def records(self) -> int:
        """Record files, usable or not."""
        ...

    def valid(self) -> int:
        """Record files that hold a valid attempt."""
        ...

    def problems(self) -> list[tuple[str, str]]:
        """(location, message) of each problem of an unusable or misnamed file."""
        ...

    def summaries(self) -> list[Summary]:
        """Every valid attempt, in the ledger's order."""
        ...

    def summaries_of(self, ids: list[str]) -> list[Summary]: ...

    def summary(self, attempt_id: str) -> Summary | None:
        """The attempt as a full read's ``by_id`` holds it (of two files, the last by name)."""
        ...

    def with_condition(self) -> list[Summary]: ...

    def links(self) -> list[Link]: ...

    def links_up(self, attempt_id: str) -> list[Link]: ...

    def links_of_objective(self, objective: str) -> list[Link]:
        """At least the links that finding ``objective``'s streak reads."""
        ...

    def links_of(self, ids: Sequence[str]) -> list[Link]: ...

    def varying(self, attempt_id: str) -> list[Link]: ...

    def candidates(self, query: Filter) -> list[Listed]:
        """At least every attempt ``query`` matches; the caller's filter decides."""
        ...

    def list_rows(self, query: Filter) -> list[ListRow] | None:
        """`list`'s rows straight from the reader, or None: filter ``candidates`` instead."""
        ...

    def gate_candidates(self, attempt: Shaped) -> list[Summary]:
        """At least the attempts the gate's checks of ``attempt`` read."""
        ...

    def ids(self) -> list[str]: ...

    def raw_ids(self) -> set[str]: ...

    def is_unusable(self, attempt_id: str) -> bool: ...

    def lineage_ids(self, attempt_id: str) -> list[str]: ...

    def all_runs(self) -> dict[str, list[tuple[str, str]]]:
        """(run id, status) of each linked run, per attempt that has any."""
        ...

    def vocabularies(self) -> Vocabularies: ...

    def vouched(self, ids: Sequence[str]) -> dict[str, str]:
        """id -> SHA-256 of each of ``ids`` whose file may be read without the models."""
        ...

    def hashes(self) -> dict[str, str | None]:
        """name -> SHA-256 of each file as checked (empty: the caller reads them itself)."""
        ...

    def remembered(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` as JSON gives it back, kept while nothing changes where it can be."""
        ...
