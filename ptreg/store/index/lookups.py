"""The index's queries: each answers as a full read of every file would (``store/full_read.py``
answers the same ones, and the tests hold the two to each other)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ...records.ledger import (
    NEGATIVE_STATUSES,
    TERMS_AS_JSON,
    TERMS_SEPARATOR,
    Filter,
    Link,
    Listed,
    Summary,
    decode_terms,
)
from ..reader import ListRow, RegistryReader
from .connection import connect_checked
from .gate_queries import GateQueries
from .rows import LEDGER_ORDER, LISTED_COLUMNS, SUMMARY_COLUMNS, Progress, RegistryVocabularies, summary_of_row

_IN_BATCH = 500  # ids bound into one `IN (...)`, well under SQLite's limit of parameters
# a filter of ``links``: the ids ``start`` selects and every id above them (UNION ends a cycle)
_AND_ABOVE = """AND id IN (WITH RECURSIVE up(id) AS (
    {start} UNION SELECT a.varied_from FROM attempts a JOIN up ON a.id = up.id WHERE a.varied_from IS NOT NULL
) SELECT id FROM up)"""


def _narrowing(query: Filter) -> tuple[str, list[Any]]:
    """The WHERE clause (and its parameters) that keeps the valid attempts `list`'s filter may
    match: exactly those it matches, but for terms stored as JSON, which it keeps."""
    where = ["+id IS NOT NULL"]  # +id: the id's own index would be walked, slower than a scan
    params: list[Any] = []
    for column, values in (
        ("status", query.statuses),
        ("family", query.families),
        ("kind", query.kinds),
        ("objective", query.objectives),
    ):
        if values:
            where.append(f"{column} IN ({','.join('?' * len(values))})")
            params.extend(values)
    if query.failures_only:
        where.append(f"status IN ({','.join('?' * len(NEGATIVE_STATUSES))})")
        params.extend(NEGATIVE_STATUSES)
    for column, terms in (("methods", query.methods), ("bases", query.bases)):
        for term in terms:
            params.extend((term, term))
        if terms:
            # a term is a whole element of the unit-separated list (records/ledger.py); the
            # plain instr() first spares most rows building the separated strings
            each = " OR ".join(
                f"(instr({column}, ?) > 0 AND instr(char(31) || {column} || char(31), char(31) || ? || char(31)) > 0)"
                for _ in terms
            )
            where.append(f"({each} OR substr({column}, 1, 1) = char(30))")
    return " AND ".join(where), params


class Index(GateQueries, RegistryReader):
    """An open index, checked against the directory; its queries answer as a full read would."""

    def records(self) -> int:
        """Record files, usable or not (what ``len(registry.records)`` counts)."""
        return int(self._one("SELECT count(*) FROM attempts")[0])

    def problems(self) -> list[tuple[str, str]]:
        """(location, message) of each problem of an unusable or misnamed file, in id order."""
        rows = self._rows("SELECT location, message FROM problems ORDER BY stem, position")
        return [(str(location), str(message)) for location, message in rows]

    def summaries(self) -> list[Summary]:
        """Every valid attempt, in the ledger's order."""
        return self._summaries_where()

    def _summaries_where(self, where: str = "", params: tuple[Any, ...] = ()) -> list[Summary]:
        """The valid attempts ``where`` selects (every one when empty), in the ledger's order."""
        # +id: the id's own index would be walked and every row looked up, slower than a scan
        sql = f"SELECT {SUMMARY_COLUMNS} FROM attempts WHERE +id IS NOT NULL {where} ORDER BY {LEDGER_ORDER}"
        return [summary_of_row(r) for r in self._rows(sql, params)]

    def candidates(self, query: Filter) -> list[Listed]:
        """What `list` reads of the valid attempts that may match its filter, in the ledger's
        order: every one that does, and no more, except a rare list of terms stored as JSON,
        which is passed on for ``query`` itself to decide (``views.queries.select``)."""
        where, params = _narrowing(query)
        rows = self._rows(f"SELECT {LISTED_COLUMNS} FROM attempts WHERE {where} ORDER BY {LEDGER_ORDER}", params)
        # decode_terms, inlined for the common case (one call per row cost a tenth of `list`)
        split, decode, sep, as_json = str.split, decode_terms, TERMS_SEPARATOR, TERMS_AS_JSON
        return [
            Listed(
                r[0], r[1], r[2], r[3], r[4], r[5],
                split(m, sep) if m and m[0] != as_json else decode(m),
                split(b, sep) if b and b[0] != as_json else decode(b),
                r[8] == 1, r[9], r[10] == 1,
            )
            for r in rows
            for m, b in ((r[6], r[7]),)
        ]  # fmt: skip

    def list_rows(self, query: Filter) -> list[ListRow] | None:
        """`list`'s table as it prints it (``views.queries.list_row``), straight from SQL: per
        matching attempt, in the ledger's order, its id, status, family, kind, objective ("" when
        none), methods joined by commas and lesson. None when SQL cannot decide every row: a
        method term that is empty or not printable, or a matching attempt whose methods are
        stored as JSON, or any base asked for; the caller then reads ``candidates`` and filters
        them itself. At 100,000
        attempts a `list` printing a quarter of them spent a third of its time building a
        ``Listed`` per row and filtering it again."""
        if query.bases or any(not term or not term.isprintable() for term in query.methods):
            return None
        where, params = _narrowing(query)
        rows = self._rows(
            # the mark is views.queries.DEVIATES, which list_row writes for a Listed row
            "SELECT id, CASE WHEN deviates = 1 THEN status || ' (deviates)' ELSE status END, family, kind, "
            "coalesce(objective, ''), "
            f"coalesce(replace(methods, char(31), ','), ''), lesson FROM attempts WHERE {where} "
            f"ORDER BY {LEDGER_ORDER}",
            params,
        )
        if TERMS_AS_JSON in "".join([r[5] for r in rows]):
            return None
        return rows

    def links(self) -> list[Link]:
        """Every valid attempt's lineage edge, objective and status, in the ledger's order: what
        finding the streaks reads of all of them."""
        return self._links_where()

    def _links_where(self, where: str = "", params: Sequence[Any] = ()) -> list[Link]:
        """``links`` of the valid attempts ``where`` selects."""
        sql = f"SELECT id, varied_from, objective, status, {LEDGER_ORDER} FROM attempts WHERE id IS NOT NULL {where}"
        new = Link
        return [
            new(r[0], r[1], r[2], r[3], (r[4], r[5], r[6], r[7], r[0]))
            for r in self._rows(f"{sql} ORDER BY {LEDGER_ORDER}", params)
        ]

    def links_up(self, attempt_id: str) -> list[Link]:
        """``links`` of ``attempt_id`` and of every attempt above it (each file giving one of
        those ids; a cycle ends the walk)."""
        return self._links_where(_AND_ABOVE.format(start="SELECT ?"), (attempt_id,))

    def links_of_objective(self, objective: str) -> list[Link]:
        """``links`` of the attempts of ``objective`` and of every attempt above them: all that
        finding that objective's streak reads."""
        start = "SELECT id FROM attempts WHERE objective = ? AND id IS NOT NULL"
        return self._links_where(_AND_ABOVE.format(start=start), (objective,))

    def links_of(self, ids: Sequence[str]) -> list[Link]:
        """``links`` of each file giving one of ``ids``."""
        return self._links_where("AND id IN (SELECT value FROM json_each(?))", (json.dumps(list(ids)),))

    def varying(self, attempt_id: str) -> list[Link]:
        """``links`` of the attempts that vary ``attempt_id`` directly."""
        return self._links_where("AND varied_from = ?", (attempt_id,))

    def summaries_of(self, ids: list[str]) -> list[Summary]:
        """The valid attempts among ``ids``, in the ledger's order."""
        return self._summaries_where("AND id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))

    def summary(self, attempt_id: str) -> Summary | None:
        """The attempt ``attempt_id`` as a full read's ``by_id`` holds it: of two files giving
        one id, the last by file name."""
        found = self._summaries_where("AND id = ?", (attempt_id,))
        return max(found, key=lambda a: a.stem or "") if found else None

    def ids(self) -> list[str]:
        """The id of every valid attempt."""
        return [r[0] for r in self._rows("SELECT id FROM attempts WHERE id IS NOT NULL ORDER BY stem")]

    def raw_ids(self) -> set[str]:
        """Every id a record file gives, valid record or not."""
        return {str(r[0]) for r in self._rows("SELECT raw_id FROM attempts WHERE raw_id IS NOT NULL")}

    def valid(self) -> int:
        """How many record files hold a valid attempt."""
        return int(self._one("SELECT count(*) FROM attempts WHERE id IS NOT NULL")[0])

    def with_condition(self) -> list[Summary]:
        """The attempts whose disposition carries a continue-if condition, by file name."""
        return sorted(self._summaries_where("AND has_condition"), key=lambda a: a.stem or "")

    def is_unusable(self, attempt_id: str) -> bool:
        """Whether a file names ``attempt_id`` (by its name or its id) without being a valid record of it."""
        row = self._one(
            "SELECT 1 FROM attempts WHERE (stem = ? OR raw_id = ?) AND (id IS NULL OR id != ?) LIMIT 1",
            (attempt_id, attempt_id, attempt_id),
        )
        return row is not None

    def lineage_ids(self, attempt_id: str) -> list[str]:
        """The attempt, its ancestors and everything that varies it, directly or not (ids of valid records)."""
        wanted = {attempt_id}
        node = self._parent(attempt_id)
        while node is not None and node not in wanted:
            if self._one("SELECT 1 FROM attempts WHERE id = ?", (node,)) is None:
                break
            wanted.add(node)
            node = self._parent(node)
        frontier, below = [attempt_id], {attempt_id}  # an ancestor may descend from it too (a cycle)
        while frontier:
            marks = ",".join("?" * len(frontier))
            children = [
                r[0]
                for r in self._rows(
                    f"SELECT id FROM attempts WHERE id IS NOT NULL AND varied_from IN ({marks})", frontier
                )
            ]
            frontier = [c for c in children if c not in below]
            below.update(frontier)
        return sorted(wanted | below)

    def vouched(self, ids: Sequence[str]) -> dict[str, str]:
        """id -> SHA-256, for each of ``ids`` whose own file held, when the index last read it, a
        valid record in exactly the JSON ptreg writes for it (``records/dumped.py``); a symlink
        never, and none while ``registry.json`` is not known valid."""
        if self._meta("registry") is None:
            return {}
        found: dict[str, str] = {}
        for start in range(0, len(ids), _IN_BATCH):
            batch = ids[start : start + _IN_BATCH]
            found.update(
                self._rows(
                    "SELECT id, sha256 FROM attempts JOIN files ON files.name = attempts.stem || '.json' "
                    f"WHERE stem IN ({','.join('?' * len(batch))}) AND id = stem AND dumped AND size >= 0",
                    batch,
                )
            )
        return found

    def _parent(self, attempt_id: str) -> str | None:
        # of two files giving the id, the one named by it: the file `show` reads
        row = self._one(
            "SELECT varied_from FROM attempts WHERE id = ? ORDER BY stem = ? DESC, stem DESC LIMIT 1",
            (attempt_id, attempt_id),
        )
        return None if row is None else row[0]

    def all_runs(self) -> dict[str, list[tuple[str, str]]]:
        """(run id, status) of each run linked to every attempt that has any, in the order they were linked,, in one query (one query per attempt scans the
        attempts table each time: 40 s at 10,000 attempts)."""
        rows = self._rows(
            "SELECT id, run_id, runs.status FROM runs JOIN attempts USING (stem) WHERE id IS NOT NULL "
            "ORDER BY stem, position"
        )
        found: dict[str, list[tuple[str, str]]] = {}
        for attempt_id, run_id, status in rows:
            found.setdefault(str(attempt_id), []).append((str(run_id), str(status)))
        return found

    def vocabularies(self) -> RegistryVocabularies:
        raw = json.loads(self._meta("registry") or "{}")
        return RegistryVocabularies(
            raw.get("method_vocabulary", {}),
            raw.get("objective_vocabulary", {}),
            raw.get("kind_vocabulary", {}),
            raw.get("confidence_vocabulary", {}),
        )

    def hashes(self) -> dict[str, str | None]:
        """name -> SHA-256 of each file's bytes as they are now (None: not read as a file)."""
        return {str(name): sha for name, sha in self._rows("SELECT name, sha256 FROM files")}


def open_index(root: Path, *, rebuild: bool = False, progress: Progress | None = None) -> Index:
    """The index of ``root``, checked against its files and brought up to date (``progress`` is
    told how many changed files are read); see ``connection.connect_checked``."""
    return Index(root, *connect_checked(root, rebuild=rebuild, progress=progress))


@contextlib.contextmanager
def opened(root: Path) -> Iterator[Index]:
    index = open_index(root)
    try:
        yield index
    finally:
        index.close()
