"""The derived query index: a SQLite file beside the records that answers the queries without
reading every record file. The record files stay the truth; the index is a working file
(``.ptreg-index.sqlite``, git-ignored, never exported) that can be deleted at any time.

It holds, per record file, the size, mtime, ctime, inode and SHA-256 it was built from; per
valid attempt, its shape, status, lineage edge (varied_from), question (and its tokens), lesson,
disposition and tracking issue, and the summary of each linked run; per unusable file, the
problems ``load_directory`` reports; and the vocabularies of ``registry.json`` once validated.

Never trusted blindly: every command that opens it first stats each file of the directory (one
``stat`` per file: the directory's mtime misses an edit made in place, so it is not a safe
signal) and re-reads exactly the files that are new, changed or gone. A file changed within
``RACY_NS`` of the moment the index saw it is re-hashed on the next check, since a change in
the same clock tick keeps its size and mtime (git's "racy clean" case). An index that is not
a SQLite file, belongs to another program or has another schema is deleted and rebuilt. ptreg's
own writes update it before they release the registry lock (``locks.py``); a writer killed in
between leaves stamps that no longer match, which the next command re-reads.

It also keeps results derived from all of them that a command would otherwise recompute from
every row (the streaks' chains, the admission's registry digest): each is stored as JSON under a
key naming what it is and the code that computed it (ptreg's version and the stamps of its
source files), and every change to the indexed files deletes them all, so a kept result is
always the one the rows as they stand give.

Nothing here imports pydantic: a command whose files have not changed never builds the models.
Parsing a changed file goes through ``record_file`` (imported only then).
"""

from __future__ import annotations

import array
import contextlib
import functools
import hashlib
import json
import operator
import os
import sqlite3
import stat
import struct
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .. import __version__
from ..errors import PtregError
from ..records.ledger import (
    NEGATIVE_STATUSES,
    TERMS_AS_JSON,
    TERMS_SEPARATOR,
    Filter,
    Link,
    Listed,
    Shaped,
    Summary,
    decode_terms,
    encode_terms,
    question_tokens,
)
from .faults import crash_point
from .jsonio import JsonError, read_bytes
from .names import INDEX_FILE, JOURNAL_FILE, RECORD_FILE_MAX_BYTES, REGISTRY_FILE
from .watch import ask
from .workfiles import ForeignFile, check_working_file, open_working_file

# PRAGMA user_version: a different one is rebuilt. Raised too when a record is held to a rule
# it was not (7: a condition's text and tree agree, integers fit SQLite; the counter of changes
# ptreg made), so that no row an older ptreg vouched for is believed under the new rules.
INDEX_SCHEMA = 7
APPLICATION_ID = 0x70747267  # PRAGMA application_id, "ptrg": any other is another program's file, refused
# A file whose ctime is this close to when the index last looked at it may have changed again in
# the same clock tick without changing its size or mtime, so it is re-hashed (git's racy clean).
RACY_NS = 2_000_000_000
BUSY_TIMEOUT_S = 30.0  # another ptreg updating the index holds it for one scan at most

_SCHEMA = """
CREATE TABLE files (
    name TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL, sha256 TEXT, seen_ns INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE attempts (
    stem TEXT PRIMARY KEY, raw_id TEXT, id TEXT, status TEXT, family TEXT, kind TEXT, objective TEXT,
    methods TEXT, bases TEXT, data_rows INTEGER, varied_from TEXT, varied TEXT, question TEXT,
    question_tokens TEXT, lesson TEXT, next_action TEXT, tracking_issue TEXT, has_condition INTEGER,
    ledger_time TEXT, ledger_made INTEGER, ledger_import INTEGER, ledger_position INTEGER,
    dumped INTEGER  -- the file holds exactly what ptreg writes for the record (records/dumped.py)
) WITHOUT ROWID;
CREATE INDEX attempts_by_parent ON attempts (varied_from);
CREATE INDEX attempts_by_id ON attempts (id);
CREATE INDEX attempts_by_family ON attempts (family);
CREATE INDEX attempts_by_objective ON attempts (objective);
CREATE INDEX attempts_by_tracking_issue ON attempts (tracking_issue);
CREATE INDEX files_unstamped ON files (name) WHERE size < 0;
-- the ledger's order, then every column `list` reads: it walks this alone, sorting nothing
CREATE INDEX attempts_in_ledger_order ON attempts (
    ledger_time, ledger_made, ledger_import, ledger_position, id, stem,
    status, family, kind, objective, methods, bases, has_condition, lesson
);
CREATE TABLE runs (stem TEXT, position INTEGER, run_id TEXT, status TEXT, PRIMARY KEY (stem, position)) WITHOUT ROWID;
CREATE TABLE problems (
    stem TEXT, position INTEGER, location TEXT, message TEXT, PRIMARY KEY (stem, position)
) WITHOUT ROWID;
-- Rowid tables, their keys in an index of their own: in a WITHOUT ROWID table a lookup compares
-- whole rows, and a row that spills to overflow pages (the kept listing, megabytes at 100,000
-- files, or a large derived result) is read whole each time a lookup passes it.
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE derived (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_TABLES = {"files", "attempts", "runs", "problems", "meta", "derived"}
# the attempts table's columns, in the order of _SCHEMA (a test holds them to it)
ATTEMPT_COLUMNS = (
    "stem", "raw_id", "id", "status", "family", "kind", "objective", "methods", "bases", "data_rows",
    "varied_from", "varied", "question", "question_tokens", "lesson", "next_action", "tracking_issue",
    "has_condition", "ledger_time", "ledger_made", "ledger_import", "ledger_position", "dumped",
)  # fmt: skip
_IN_BATCH = 500  # ids bound into one `IN (...)`, well under SQLite's limit of parameters
KEEP_TIMEOUT_MS = 100  # keeping a derived result is never worth waiting on another writer for
_SUMMARY_COLUMNS = (
    "id, status, family, kind, objective, methods, bases, data_rows, varied_from, varied, question, lesson, "
    "next_action, tracking_issue, ledger_time, ledger_made, ledger_import, ledger_position, has_condition, stem"
)
_LISTED_COLUMNS = "id, status, lesson, family, kind, objective, methods, bases, has_condition, stem"
# the file's name last: of two files giving one id at one place, the full read's order (by name)
_LEDGER_ORDER = "ledger_time, ledger_made, ledger_import, ledger_position, id, stem"
# a filter of ``links``: the ids ``start`` selects and every id above them (UNION ends a cycle)
_AND_ABOVE = """AND id IN (WITH RECURSIVE up(id) AS (
    {start} UNION SELECT a.varied_from FROM attempts a JOIN up ON a.id = up.id WHERE a.varied_from IS NOT NULL
) SELECT id FROM up)"""

Stamp = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode
# progress(what, done, total), as store.directory.Progress (which this module cannot import)
Progress = Callable[[str, int, int], None]
PROGRESS_EVERY = 500


@dataclass(frozen=True)
class Vocabularies:
    """The vocabularies of ``registry.json``, as validated when it last changed."""

    method_vocabulary: dict[str, str | None]
    objective_vocabulary: dict[str, str | None]
    kind_vocabulary: dict[str, str | None]
    confidence_vocabulary: dict[str, str | None]


@dataclass
class Refresh:
    """What checking the index against the directory found."""

    rebuilt: str | None = None  # why the index was built from nothing, if it was
    reread: list[str] = field(default_factory=list)  # files parsed again (new or changed)
    rehashed: int = 0  # files whose stamp moved but whose bytes had not changed
    removed: list[str] = field(default_factory=list)  # files gone since
    in_memory: bool = False  # the file could not be used (e.g. a read-only registry)
    watched: bool = False  # a change watcher named the files to look at (store/watch.py)


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


class Index:
    """An open index, checked against the directory; its queries answer as a full read would."""

    def __init__(self, root: Path, connection: sqlite3.Connection, refresh: Refresh):
        self.root = root
        self.db = connection
        self.refresh = refresh

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.db.close()

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one query. Damage that only a query reaches (a page the check did not
        read) makes the index be rebuilt and the query asked again; any other failure of the
        file makes an index in memory answer."""
        try:
            return self.db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            self.close()
            if self.refresh.in_memory:
                raise
            if _corrupt(exc):
                _delete(self.root)
                fresh = open_index(self.root)
                fresh.refresh.rebuilt = fresh.refresh.rebuilt or "the index file was corrupt"
            else:
                fresh = _in_memory(self.root)
            self.db, self.refresh = fresh.db, fresh.refresh
            return self.db.execute(sql, params).fetchall()

    # ------------------------------------------------------------------ queries

    def records(self) -> int:
        """Record files, usable or not (what ``len(registry.records)`` counts)."""
        return int(self._one("SELECT count(*) FROM attempts")[0])

    def problems(self) -> list[tuple[str, str]]:
        """(location, message) of each problem of an unusable or misnamed file, in id order."""
        rows = self._rows("SELECT location, message FROM problems ORDER BY stem, position")
        return [(str(location), str(message)) for location, message in rows]

    def summaries(self, where: str = "", params: tuple[Any, ...] = ()) -> list[Summary]:
        """Every valid attempt (or those ``where`` selects), in the ledger's order."""
        # +id: the id's own index would be walked and every row looked up, slower than a scan
        sql = f"SELECT {_SUMMARY_COLUMNS} FROM attempts WHERE +id IS NOT NULL {where} ORDER BY {_LEDGER_ORDER}"
        return [_summary(r) for r in self._rows(sql, params)]

    def candidates(self, query: Filter) -> list[Listed]:
        """What `list` reads of the valid attempts that may match its filter, in the ledger's
        order: every one that does, and no more, except a rare list of terms stored as JSON,
        which is passed on for ``query`` itself to decide (``views.queries.select``)."""
        where, params = _narrowing(query)
        rows = self._rows(f"SELECT {_LISTED_COLUMNS} FROM attempts WHERE {where} ORDER BY {_LEDGER_ORDER}", params)
        # decode_terms, inlined for the common case (one call per row cost a tenth of `list`)
        split, decode, sep, as_json = str.split, decode_terms, TERMS_SEPARATOR, TERMS_AS_JSON
        return [
            Listed(
                r[0], r[1], r[2], r[3], r[4], r[5],
                split(m, sep) if m and m[0] != as_json else decode(m),
                split(b, sep) if b and b[0] != as_json else decode(b),
                r[8] == 1, r[9],
            )
            for r in rows
            for m, b in ((r[6], r[7]),)
        ]  # fmt: skip

    def list_rows(self, query: Filter) -> list[tuple[str, str, str | None, str | None, str, str, str | None]] | None:
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
            "SELECT id, status, family, kind, coalesce(objective, ''), "
            f"coalesce(replace(methods, char(31), ','), ''), lesson FROM attempts WHERE {where} "
            f"ORDER BY {_LEDGER_ORDER}",
            params,
        )
        if TERMS_AS_JSON in "".join([r[5] for r in rows]):
            return None
        return rows

    def links(self, where: str = "", params: Sequence[Any] = ()) -> list[Link]:
        """Every valid attempt's lineage edge, objective and status (or those ``where`` selects),
        in the ledger's order: what finding the streaks reads of all of them."""
        sql = f"SELECT id, varied_from, objective, status, {_LEDGER_ORDER} FROM attempts WHERE id IS NOT NULL {where}"
        new = Link
        return [
            new(r[0], r[1], r[2], r[3], (r[4], r[5], r[6], r[7], r[0]))
            for r in self._rows(f"{sql} ORDER BY {_LEDGER_ORDER}", params)
        ]

    def links_up(self, attempt_id: str) -> list[Link]:
        """``links`` of ``attempt_id`` and of every attempt above it (each file giving one of
        those ids; a cycle ends the walk)."""
        return self.links(_AND_ABOVE.format(start="SELECT ?"), (attempt_id,))

    def links_of_objective(self, objective: str) -> list[Link]:
        """``links`` of the attempts of ``objective`` and of every attempt above them: all that
        finding that objective's streak reads."""
        start = "SELECT id FROM attempts WHERE objective = ? AND id IS NOT NULL"
        return self.links(_AND_ABOVE.format(start=start), (objective,))

    def links_of(self, ids: Sequence[str]) -> list[Link]:
        """``links`` of each file giving one of ``ids``."""
        return self.links("AND id IN (SELECT value FROM json_each(?))", (json.dumps(list(ids)),))

    def varying(self, attempt_id: str) -> list[Link]:
        """``links`` of the attempts that vary ``attempt_id`` directly."""
        return self.links("AND varied_from = ?", (attempt_id,))

    def gate_candidates(self, attempt: Shaped) -> list[Summary]:
        """The valid attempts the gate's checks of ``attempt`` can read, in the ledger's order:
        its lineage (every attempt below the oldest ancestor of it or of what it varies) and its
        tracking issue, with every ancestor of each, and the attempts of its family that ask a
        question (those that ask none are counted: ``unasked``; its objective's streak is
        found apart: ``gate/reading.py``). The checks give the same answer on these as on every
        attempt (tests/store/test_index.py)."""
        sql = f"""
            WITH RECURSIVE
            up(id) AS (
                SELECT value FROM json_each(?)
                UNION SELECT a.varied_from FROM attempts a JOIN up ON a.id = up.id WHERE a.varied_from IS NOT NULL
            ),
            lineage(id) AS (
                SELECT id FROM up
                UNION SELECT a.id FROM attempts a JOIN lineage ON a.varied_from = lineage.id WHERE a.id IS NOT NULL
            ),
            alike(id) AS (
                SELECT id FROM lineage
                UNION SELECT id FROM attempts WHERE id IS NOT NULL AND tracking_issue = ?
            ),
            wanted(id) AS (
                SELECT id FROM alike
                UNION SELECT a.varied_from FROM attempts a JOIN wanted ON a.id = wanted.id
                WHERE a.varied_from IS NOT NULL
            )
            SELECT {_SUMMARY_COLUMNS} FROM attempts
            WHERE id IS NOT NULL AND (
                id IN (SELECT id FROM wanted)
                OR id IN (SELECT id FROM attempts WHERE family = ? AND question IS NOT NULL)
            ) ORDER BY {_LEDGER_ORDER}"""
        start = [attempt.id] if attempt.varied_from is None else [attempt.id, attempt.varied_from]
        params = (json.dumps(start), attempt.tracking_issue, attempt.family)
        return [_summary(r) for r in self._rows(sql, params)]

    def unasked(self, family: str, read: Collection[str]) -> int:
        """How many attempts of ``family`` ask no question, but those in ``read``: each id as
        the last of its files in the ledger's order gives it, as a full read's ``by_id`` holds it."""
        shared = self.remembered(
            "ids given by more than one file",
            lambda: [
                r[0] for r in self._rows("SELECT id FROM attempts WHERE id IS NOT NULL GROUP BY id HAVING count(*) > 1")
            ],
        )
        skip = json.dumps(sorted({*read, *shared}))
        alone = self._one(
            "SELECT count(*) FROM attempts WHERE family = ? AND question IS NULL AND id NOT IN "
            "(SELECT value FROM json_each(?))",
            (family, skip),
        )
        rows = self._rows(
            "SELECT id, family, question IS NULL FROM attempts WHERE id IN (SELECT value FROM json_each(?)) "
            f"ORDER BY {_LEDGER_ORDER}",
            (json.dumps(shared),),
        )
        last = {i: (f, unasked) for i, f, unasked in rows}
        return int(alone[0]) + sum(1 for i, (f, unasked) in last.items() if f == family and unasked and i not in read)

    def summaries_of(self, ids: list[str]) -> list[Summary]:
        """The valid attempts among ``ids``, in the ledger's order."""
        return self.summaries("AND id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))

    def summary(self, attempt_id: str) -> Summary | None:
        """The attempt ``attempt_id`` as a full read's ``by_id`` holds it: of two files giving
        one id, the last by file name."""
        found = self.summaries("AND id = ?", (attempt_id,))
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
        return sorted(self.summaries("AND has_condition"), key=lambda a: a.stem or "")

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

    def runs(self, attempt_id: str) -> list[tuple[str, str]]:
        """(run id, status) of each run linked to the attempt, in the order they were linked."""
        rows = self._rows(
            "SELECT run_id, runs.status FROM runs JOIN attempts USING (stem) WHERE id = ? ORDER BY position",
            (attempt_id,),
        )
        return [(str(run_id), str(status)) for run_id, status in rows]

    def all_runs(self) -> dict[str, list[tuple[str, str]]]:
        """``runs`` of every attempt that has any, in one query (one query per attempt scans the
        attempts table each time: 40 s at 10,000 attempts)."""
        rows = self._rows(
            "SELECT id, run_id, runs.status FROM runs JOIN attempts USING (stem) WHERE id IS NOT NULL "
            "ORDER BY stem, position"
        )
        found: dict[str, list[tuple[str, str]]] = {}
        for attempt_id, run_id, status in rows:
            found.setdefault(str(attempt_id), []).append((str(run_id), str(status)))
        return found

    def vocabularies(self) -> Vocabularies:
        raw = json.loads(self._meta("registry") or "{}")
        return Vocabularies(
            raw.get("method_vocabulary", {}),
            raw.get("objective_vocabulary", {}),
            raw.get("kind_vocabulary", {}),
            raw.get("confidence_vocabulary", {}),
        )

    def hashes(self) -> dict[str, str | None]:
        """name -> SHA-256 of each file's bytes as they are now (None: not read as a file)."""
        return {str(name): sha for name, sha in self._rows("SELECT name, sha256 FROM files")}

    def remembered(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, a JSON value derived from the indexed rows alone, as JSON gives it back:
        kept under ``key`` until any indexed file changes, or ptreg's code does."""
        stored = self._one("SELECT value FROM derived WHERE key = ?", (f"{key} {code_stamp()}",))
        if stored is not None:
            with contextlib.suppress(ValueError):  # damaged by another program: computed again
                return json.loads(stored[0])
        text = json.dumps(compute())
        self._keep(f"{key} {code_stamp()}", text)
        return json.loads(text)

    def _keep(self, key: str, text: str) -> None:
        """Store a derived result within the transaction its rows were read in (so it matches
        them), unless another writer holds the file: it is computed again next time."""
        try:
            self.db.execute(f"PRAGMA busy_timeout = {KEEP_TIMEOUT_MS}")
            # read within the transaction, which no other writer can have committed into
            counter = None if self.refresh.in_memory else _change_counter(self.root)
            self.db.execute("INSERT OR REPLACE INTO derived VALUES (?, ?)", (key, text))
            if counter is not None:
                _sign(self.db, counter)
            self.db.execute("COMMIT")
        except (sqlite3.Error, PtregError):
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
        finally:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
                self.db.execute("BEGIN")
        if not self.refresh.in_memory and not _current(self.db, self.root):
            # another program wrote the file between the two transactions: checked again
            self.close()
            fresh = open_index(self.root)
            self.db, self.refresh = fresh.db, fresh.refresh

    def _meta(self, key: str) -> str | None:
        row = self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return None if row is None else str(row[0])


def _summary(r: Sequence[Any]) -> Summary:
    """A row of ``_SUMMARY_COLUMNS`` as the summary it holds."""
    terms = decode_terms
    return Summary(
        r[0], r[1], r[2], r[3], r[4], terms(r[5]), terms(r[6]), r[7], r[8], r[9], r[10], r[11], r[12],
        r[13], (r[14], r[15], r[16], r[17], r[0]), r[18] == 1, r[19],
    )  # fmt: skip


@functools.cache
def code_stamp() -> str:
    """ptreg's version and the size and mtime of each of its source files: a derived result
    kept by one build of ptreg is never read by another, even within one version."""
    package = Path(__file__).resolve().parent.parent
    stamps = [__version__]
    for folder, _, files in sorted(os.walk(package)):
        for name in sorted(files):
            if name.endswith(".py"):
                info = os.stat(os.path.join(folder, name))
                stamps.append(f"{os.path.relpath(folder, package)}/{name} {info.st_size} {info.st_mtime_ns}")
    return hashlib.blake2b("\n".join(stamps).encode(), digest_size=12).hexdigest()


# ---------------------------------------------------------------------------- opening


def index_path(root: Path) -> Path:
    return root / INDEX_FILE


def usable_directory(root: Path) -> bool:
    """Whether the index may answer for ``root`` now: a registry directory with no import
    journal to finish (the full read reports the other cases, and finishes the journal)."""
    return root.is_dir() and (root / REGISTRY_FILE).is_file() and not os.path.lexists(root / JOURNAL_FILE)


def open_index(root: Path, *, rebuild: bool = False, progress: Progress | None = None) -> Index:
    """The index of ``root``, checked against its files and brought up to date (``progress`` is
    told how many changed files are read). When the file cannot be used at all (a read-only
    registry, a full disk), an index in memory answers. A symlink, a folder or another user's
    file under the index's names, or another program's database, is refused (ForeignFile) and
    left as it is."""
    why = _header_problem(root)  # refuses what is not ptreg's before SQLite opens anything
    if rebuild or why is not None:
        _delete(root)
    try:
        index = _open(root, _connect(root), progress)
    except sqlite3.Error as exc:
        if not _corrupt(exc):  # read-only, full, busy for too long: answered without the file
            return _in_memory(root, progress)
        _delete(root)
        why = "the index file was corrupt"
        try:
            index = _open(root, _connect(root), progress)
        except sqlite3.Error:
            return _in_memory(root, progress)
    index.refresh.rebuilt = why or index.refresh.rebuilt
    return index


def _connect(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(index_path(root), timeout=BUSY_TIMEOUT_S, isolation_level=None)


_ADVICE = "move it away; ptreg then builds its index anew"
_SQLITE_MAGIC = b"SQLite format 3\0"


def check_index_files(root: Path) -> bool:
    """Whether the index file exists; ForeignFile when its name, or that of a journal SQLite
    keeps beside it, holds a symlink, a folder or another user's file (SQLite would follow a
    symlink and write the database it points to)."""
    exists = check_working_file(index_path(root), _ADVICE)
    for suffix in ("-journal", "-wal", "-shm"):
        check_working_file(Path(str(index_path(root)) + suffix), _ADVICE)
    return exists


# One descriptor per index file, kept open for as long as the process runs: SQLite holds its
# locks as POSIX record locks, which belong to the process and the file, and closing *any*
# descriptor of the file drops every one of them, those of this process's open connections
# included (SQLite's own documentation warns of it). A header read through a descriptor that
# is opened and closed would leave a transaction in flight unlocked, so that another process
# could take its journal for a hot one and roll it back.
_HEADER_FDS: dict[str, tuple[int, int, int]] = {}  # path -> (fd, st_dev, st_ino), oldest first
# A process reads a handful of registries at most; tests read thousands, one after the other.
# The oldest is closed past this many (its registry's commands have ended, their connections too).
HEADER_FDS_KEPT = 16


def _header_fd(path: Path) -> int | None:
    """A descriptor of the index file as it is now (None when there is none), opened without
    following a symlink and reused while the name holds the same file."""
    key = str(path)
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return None
    kept = _HEADER_FDS.get(key)
    if kept is not None and kept[1:] == (now.st_dev, now.st_ino):
        return kept[0]
    try:
        fd = open_working_file(path, os.O_RDONLY, _ADVICE)
    except FileNotFoundError:
        return None
    opened = os.fstat(fd)
    if kept is not None:  # a file since removed: closing it drops no lock of the one there now
        os.close(_HEADER_FDS.pop(key)[0])
    _HEADER_FDS[key] = (fd, opened.st_dev, opened.st_ino)
    while len(_HEADER_FDS) > HEADER_FDS_KEPT:
        os.close(_HEADER_FDS.pop(next(iter(_HEADER_FDS)))[0])
    return fd


def _header(root: Path) -> bytes | None:
    """The first 100 bytes of the index file (its SQLite header), read without following a
    symlink; None when there is no file."""
    if not check_index_files(root):
        return None
    fd = _header_fd(index_path(root))
    return None if fd is None else os.pread(fd, 100, 0)


def _header_problem(root: Path) -> str | None:
    """Why the index file must be rebuilt before SQLite opens it (None: it may be opened);
    ForeignFile when it is another program's database, which is left alone."""
    head = _header(root)
    if not head:
        return None
    if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
        return "the index file was not a SQLite database"
    application = int.from_bytes(head[68:72], "big")
    pages = int.from_bytes(head[28:32], "big")
    if application != APPLICATION_ID and (application != 0 or pages > 1):
        raise ForeignFile(
            index_path(root), f"a SQLite database of another program (application_id {application})", _ADVICE
        )
    if head[18] != 1 or head[19] != 1:  # WAL mode, which ptreg never sets: its change counter says nothing
        return "the index file was changed by another program (WAL mode)"
    return None


def _change_counter(root: Path) -> int:
    """The file change counter of the index's SQLite header: SQLite adds one for each
    transaction that changes the file (in the rollback-journal mode ptreg keeps)."""
    head = _header(root) or b""
    return int.from_bytes(head[24:28], "big") if len(head) >= 28 else 0


def _corrupt(exc: sqlite3.Error) -> bool:
    """Whether SQLite found the file damaged or not a database at all (the rest, such as a
    read-only directory or a full disk, says nothing about the file)."""
    return getattr(exc, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or "malformed" in str(exc)


def _in_memory(root: Path, progress: Progress | None = None) -> Index:
    index = _open(root, sqlite3.connect(":memory:", isolation_level=None), progress, on_disk=False)
    index.refresh.in_memory = True
    return index


def _delete(root: Path) -> None:
    check_index_files(root)  # never a symlink, a folder or another user's file
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(index_path(root)) + suffix)


def _open(root: Path, db: sqlite3.Connection, progress: Progress | None = None, *, on_disk: bool = True) -> Index:
    try:
        for _ in range(3):
            db.execute("BEGIN IMMEDIATE")  # one updater at a time; readers of an unchanged index wait briefly
            before = db.total_changes
            counter = _change_counter(root) if on_disk else 0
            why = _unusable(db) or (_unwritten(db, counter) if on_disk else None)
            if why is not None:
                _reset(db)
            refresh = _refresh(root, db, progress)
            refresh.rebuilt = why
            if on_disk and (why is not None or db.total_changes > before):
                _sign(db, counter)
            crash_point()  # the files are read and the index updated, not yet committed
            db.execute("COMMIT")
            db.execute("BEGIN")  # the queries of one command read one state of the index
            if not on_disk or _current(db, root):
                break
            db.execute("ROLLBACK")  # another program wrote it since the commit: checked again
        else:
            raise PtregError(f"{index_path(root)}: changed by another program while ptreg checked it; try again")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.close()
        raise
    return Index(root, db, refresh)


# Every transaction in which ptreg changes the index records, in it, the file change counter
# the commit will leave (SQLite adds one per changing transaction). Any other writer (a row
# inserted or a status edited by hand) moves the counter past the one recorded, and the index
# is then rebuilt from the files: nothing it holds is believed unless ptreg's check wrote it.


def _sign(db: sqlite3.Connection, counter: int) -> None:
    """Record that this transaction, which changes the file, leaves the counter at ``counter + 1``."""
    db.execute("INSERT OR REPLACE INTO meta VALUES ('written', ?)", (str(counter + 1),))


def _unwritten(db: sqlite3.Connection, counter: int) -> str | None:
    """Why the index's rows are not those ptreg last wrote (None: they are)."""
    row = db.execute("SELECT value FROM meta WHERE key = 'written'").fetchone()
    if row is None or str(row[0]) != str(counter):
        return "the index file was changed by another program since ptreg wrote it"
    return None


def _current(db: sqlite3.Connection, root: Path) -> bool:
    """Within a read transaction (which keeps writers out from its first read until it ends):
    whether the index is still as ptreg last wrote it."""
    row = db.execute("SELECT value FROM meta WHERE key = 'written'").fetchone()  # the read lock first
    return row is not None and str(row[0]) == str(_change_counter(root))


def _unusable(db: sqlite3.Connection) -> str | None:
    """Why this file cannot serve as the index (None: it can). Reading its header raises
    DatabaseError when it is not a SQLite file at all."""
    application = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if application == 0 and version == 0 and not tables:
        return "no index yet"
    if application != APPLICATION_ID:
        return "the index file belongs to another program"
    if version != INDEX_SCHEMA or tables != _TABLES:
        return f"the index has schema {version}, this ptreg uses {INDEX_SCHEMA}"
    return None


def _reset(db: sqlite3.Connection) -> None:
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        db.execute(f'DROP TABLE "{name}"')
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute(f"PRAGMA user_version = {INDEX_SCHEMA}")


# ---------------------------------------------------------------------------- checking


@dataclass
class Listing:
    """The ``*.json`` names of a registry directory, in the directory's own order, and the
    ``lstat`` of each; ``infos`` is None when a file went away between the two."""

    names: list[str]
    infos: list[os.stat_result] | None

    @functools.cached_property
    def encoded(self) -> bytes:
        """The names, NUL-separated, as the digest and the kept listing hold them."""
        return "\0".join(self.names).encode("utf-8", "surrogateescape")


def listing(root: Path) -> Listing:
    # os.stat relative to the directory's descriptor (no path joined per file) and mapped in C:
    # at 100,000 files the per-file Python loop cost as much as the system calls.
    fd = os.open(root, os.O_RDONLY)
    try:
        names = [name for name in os.listdir(fd) if name.endswith(".json")]
        try:
            infos = list(map(functools.partial(os.stat, dir_fd=fd, follow_symlinks=False), names))
        except OSError:
            return Listing(names, None)  # gone since it was listed: scan() looks again, file by file
    finally:
        os.close(fd)
    return Listing(names, infos)


def scan(root: Path, found: Listing | None = None) -> dict[str, tuple[Stamp | None, bool]]:
    """name -> (stamp, is a symlink) of registry.json and of each record file, as
    ``load_directory`` lists them. A symlink has no stamp: it is always read again."""
    seen = found if found is not None and found.infos is not None else listing(root)
    if seen.infos is None:
        fd = os.open(root, os.O_RDONLY)
        try:
            pairs = []
            for name in seen.names:
                with contextlib.suppress(OSError):  # gone since it was listed
                    pairs.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
        finally:
            os.close(fd)
    else:
        pairs = list(zip(seen.names, seen.infos, strict=True))
    return {name: entry for name, info in pairs if (entry := _on_disk(info)) is not None}


def _on_disk(info: os.stat_result) -> tuple[Stamp | None, bool] | None:
    """(stamp, is a symlink) of a listed file; None for what is neither a file nor a symlink.
    A symlink has no stamp: it is always read again."""
    if stat.S_ISLNK(info.st_mode):
        return None, True
    if stat.S_ISREG(info.st_mode):
        return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino), False
    return None


Columns = list[array.array]  # size, mtime, ctime and inode of each listed file, in its order


def _columns(found: Listing) -> Columns | None:
    """The stamps of ``found`` as four arrays, each gathered in C; None when a file went away
    since it was listed or is not a regular one (a symlink is always re-read)."""
    infos = found.infos
    if infos is None or not all(map(stat.S_ISREG, map(_MODE, infos))):
        return None
    return [array.array("q", map(field_of, infos)) for field_of in (_SIZE, _MTIME, _CTIME, _INO)]


def _stamps_digest(found: Listing, since_ns: int, columns: Columns | None = None) -> str | None:
    """One digest of every file's name and stamp, in the directory's own order (a directory
    that lists its files in another order is merely checked file by file), which answers "has
    anything changed?" without reading the files table. None when it cannot: a file that is not
    a regular one, or one changed within RACY_NS of ``since_ns``, the last full check."""
    columns = _columns(found) if columns is None else columns
    if columns is None:
        return None
    size, mtime, ctime, ino = columns
    if ctime and max(ctime) >= since_ns - RACY_NS:
        return None
    stamps = size.tobytes() + mtime.tobytes() + ino.tobytes() + ctime.tobytes()
    return hashlib.blake2b(found.encoded + stamps, digest_size=20).hexdigest()


# The listing a check left, kept in the meta table in the same transaction as the files table it
# matches: when the digest differs, comparing it with the new listing names the few files to
# look at, instead of comparing every file's stamp with its row (0.6 s at 100,000 files).
_LISTING_MAGIC = b"ptreg-listing-1" + sys.byteorder[0].encode()
_LISTING_HEAD = struct.Struct("<qqq")  # since_ns, file count, bytes of the names


def _listing_blob(found: Listing, columns: Columns, since_ns: int) -> bytes:
    head = _LISTING_HEAD.pack(since_ns, len(found.names), len(found.encoded))
    return _LISTING_MAGIC + head + found.encoded + b"".join(c.tobytes() for c in columns)


def _read_listing(blob: Any) -> tuple[int, bytes, Columns] | None:
    """(since_ns, the names as ``Listing.encoded``, columns) of a kept listing; None when it is
    not one this ptreg wrote."""
    if not isinstance(blob, bytes) or not blob.startswith(_LISTING_MAGIC):
        return None
    at = len(_LISTING_MAGIC)
    try:
        since, count, size = _LISTING_HEAD.unpack_from(blob, at)
    except struct.error:
        return None
    at += _LISTING_HEAD.size
    names = blob[at : at + size]
    at += size
    if len(names) != size or (names.count(b"\0") + 1 if count else 0) != count or len(blob) - at != 4 * 8 * count:
        return None
    columns = []
    for k in range(4):
        column = array.array("q")
        column.frombytes(blob[at + k * 8 * count : at + (k + 1) * 8 * count])
        columns.append(column)
    return since, names, columns


def _to_look_at(kept: tuple[int, bytes, Columns], found: Listing, columns: Columns) -> tuple[list[int], set[str]]:
    """Against the listing a check kept: the positions in ``found`` of the files that are new,
    whose stamp moved, or that changed within RACY_NS of that check; and the names gone since."""
    since, old_encoded, old_columns = kept
    look = set(_at_least(columns[2], since - RACY_NS))
    if old_encoded == found.encoded:
        for old, new in zip(old_columns, columns, strict=True):
            look.update(_differing(old, new))
        return sorted(look), set()
    old_names = old_encoded.decode("utf-8", "surrogateescape").split("\0") if old_columns[0] else []
    old_at = {name: i for i, name in enumerate(old_names)}
    for i, name in enumerate(found.names):
        j = old_at.get(name)
        if j is None or any(new[i] != old[j] for old, new in zip(old_columns, columns, strict=True)):
            look.add(i)
    return sorted(look), set(old_at).difference(found.names)


# Columns are compared a slice at a time in C, and element by element only in a slice that
# differs: a pull of 100 files into 100,000 touches a few thousand elements, not 400,000.
_SLICE = 64


def _differing(old: array.array, new: array.array) -> Iterator[int]:
    """The positions where two columns of equal length differ."""
    for start in range(0, len(new), _SLICE):
        before, after = old[start : start + _SLICE], new[start : start + _SLICE]
        if before != after:
            yield from (start + k for k, (a, b) in enumerate(zip(before, after, strict=True)) if a != b)


def _at_least(column: array.array, floor: int) -> Iterator[int]:
    """The positions of ``column`` that hold ``floor`` or more."""
    for start in range(0, len(column), _SLICE):
        part = column[start : start + _SLICE]
        if max(part) >= floor:
            yield from (start + k for k, value in enumerate(part) if value >= floor)


_MODE, _SIZE, _MTIME, _CTIME, _INO = map(
    operator.attrgetter, ("st_mode", "st_size", "st_mtime_ns", "st_ctime_ns", "st_ino")
)


def _refresh(root: Path, db: sqlite3.Connection, progress: Progress | None = None) -> Refresh:
    now = time.time_ns()  # before any look at the files: a change after it moves the stamps
    kept = db.execute("SELECT value FROM meta WHERE key = 'watched'").fetchone()
    seq, watcher = _watched(kept)
    answer = ask(root, watcher, seq)  # asked before the files are looked at, as ``now`` is taken
    if answer is not None and answer.changed is not None:
        result = _check_named(root, db, answer.changed, now, progress)
    else:
        result = _check_every_file(root, db, now, progress)
    if answer is not None and (answer.seq, answer.watcher) != (seq, watcher):
        # the files table now holds at least every change that watcher had seen when it answered
        db.execute("INSERT OR REPLACE INTO meta VALUES ('watched', ?)", (f"{answer.seq} {answer.watcher}",))
    return result


def _watched(kept: Any) -> tuple[int | None, str | None]:
    """(number, watcher) the files table was last brought up to date at; (None, None) if never
    or not readable."""
    number, _, watcher = str(kept[0] if kept is not None else "").partition(" ")
    return (int(number), watcher) if number.isdigit() and watcher else (None, None)


def _check_named(root: Path, db: sqlite3.Connection, names: list[str], now: int, progress: Progress | None) -> Refresh:
    """Bring the index up to date by looking only at ``names`` (those a watcher saw change) and
    at the files that are never taken as unchanged (symlinks, files that could not be read)."""
    unstamped = [str(r[0]) for r in db.execute("SELECT name FROM files WHERE size < 0")]
    look = sorted({*names, *unstamped})
    result = Refresh(watched=True)
    if not look:
        return result
    on_disk: dict[str, tuple[Stamp | None, bool]] = {}
    fd = os.open(root, os.O_RDONLY)
    try:
        for name in look:
            with contextlib.suppress(OSError):  # gone
                entry = _on_disk(os.stat(name, dir_fd=fd, follow_symlinks=False))
                if entry is not None:
                    on_disk[name] = entry
    finally:
        os.close(fd)
    _bring_up_to_date(root, db, on_disk, set(look).difference(on_disk), _rows_of(db, look), now, progress, result)
    # What the last full check kept ('checked', 'listing') still holds for a later one: a file
    # changed since has a later ctime than that listing names, so it is looked at again.
    return result


_FILE_COLUMNS = "name, size, mtime_ns, ctime_ns, ino, sha256, seen_ns"


def _rows_of(db: sqlite3.Connection, names: Collection[str]) -> list[Any]:
    wanted = json.dumps(sorted(names))
    return db.execute(
        f"SELECT {_FILE_COLUMNS} FROM files WHERE name IN (SELECT value FROM json_each(?))", (wanted,)
    ).fetchall()


def _check_every_file(root: Path, db: sqlite3.Connection, now: int, progress: Progress | None) -> Refresh:
    found = listing(root)
    columns = _columns(found)
    last = db.execute("SELECT value FROM meta WHERE key = 'checked'").fetchone()
    if last is not None:
        since, stored = str(last[0]).split(" ", 1)
        if _stamps_digest(found, int(since), columns) == stored:
            return Refresh()  # every file as the last full check left it, and none racily so
    kept = db.execute("SELECT value FROM meta WHERE key = 'listing'").fetchone()
    plan = None if kept is None or columns is None else _read_listing(kept[0])
    db.execute("DELETE FROM meta WHERE key IN ('checked', 'listing')")
    if plan is None:  # every file's stamp against its row
        on_disk = scan(root, found)
        rows = db.execute(f"SELECT {_FILE_COLUMNS} FROM files").fetchall()
        gone = {str(r[0]) for r in rows} - set(on_disk)
    else:  # only the files the kept listing does not vouch for
        look, gone = _to_look_at(plan, found, cast(Columns, columns))
        size, mtime, ctime, ino = cast(Columns, columns)
        on_disk = {found.names[i]: ((size[i], mtime[i], ctime[i], ino[i]), False) for i in look}
        rows = _rows_of(db, {*on_disk, *gone})
    result = Refresh()
    unreadable = _bring_up_to_date(root, db, on_disk, gone, rows, now, progress, result)
    if unreadable or columns is None:
        return result  # the next check compares every file's stamp with its row
    db.execute("INSERT INTO meta VALUES ('listing', ?)", (_listing_blob(found, columns, now),))
    digest = _stamps_digest(found, now + RACY_NS, columns)  # racy files are checked by hash
    if digest is not None:
        db.execute("INSERT INTO meta VALUES ('checked', ?)", (f"{now} {digest}",))
    return result


def _bring_up_to_date(
    root: Path,
    db: sqlite3.Connection,
    on_disk: dict[str, tuple[Stamp | None, bool]],
    gone: set[str],
    rows: list[Any],
    now: int,
    progress: Progress | None,
    result: Refresh,
) -> bool:
    """Forget the rows of ``gone`` and re-read the files of ``on_disk`` whose stamp moved (or
    that changed within RACY_NS of when they were read), given the files table's ``rows`` of
    both; whether a file could not be read."""
    known = {str(r[0]): ((r[1], r[2], r[3], r[4]), r[5], r[6]) for r in rows}
    for name in sorted(gone & set(known)):
        _forget(db, name)
        result.removed.append(name)
    changed: list[tuple[str, Stamp | None, bool, str | None]] = []
    for name, (stamp, link) in on_disk.items():
        old = known.get(name)
        if old is not None and stamp is not None and old[0] == stamp and stamp[2] < old[2] - RACY_NS:
            continue  # unchanged, and not racily so
        changed.append((name, stamp, link, old[1] if old is not None else None))
    unreadable = False
    for done, (name, stamp, link, old_sha) in enumerate(changed):
        if progress is not None and done % PROGRESS_EVERY == 0 and len(changed) > PROGRESS_EVERY:
            progress("indexing records", done, len(changed))
        data = _bytes(root / name)  # read once: hashed, and parsed when it changed
        sha = None if data is None else hashlib.sha256(data).hexdigest()
        if old_sha is not None and sha == old_sha and not link:
            db.execute(
                "UPDATE files SET size = ?, mtime_ns = ?, ctime_ns = ?, ino = ?, seen_ns = ? WHERE name = ?",
                (*(stamp or (-1, -1, -1, -1)), now, name),
            )
            result.rehashed += 1
        else:
            _reparse(root, db, name, stamp, link, data, now)
            result.reread.append(name)
            unreadable = unreadable or data is None or stamp is None
    result.reread.sort()
    return unreadable


def _bytes(path: Path) -> bytes | None:
    """The file's bytes, whose SHA-256 the admission's registry digest takes; None when it
    cannot be read as a record file (the reader then says why, as the full read does)."""
    try:
        return read_bytes(path, RECORD_FILE_MAX_BYTES)
    except JsonError:
        return None


def _forget(db: sqlite3.Connection, name: str) -> None:
    db.execute("DELETE FROM derived")  # every change of an indexed file passes here
    db.execute("DELETE FROM files WHERE name = ?", (name,))
    if name == REGISTRY_FILE:
        db.execute("DELETE FROM meta WHERE key = 'registry'")
        return
    stem = name[: -len(".json")]
    for table in ("attempts", "runs", "problems"):
        db.execute(f"DELETE FROM {table} WHERE stem = ?", (stem,))


def _reparse(
    root: Path, db: sqlite3.Connection, name: str, stamp: Stamp | None, link: bool, data: bytes | None, now: int
) -> None:
    """Index the file ``name`` anew from ``data``, its bytes (None: it could not be read)."""
    # The models cost about 0.1 s to build; only a command that finds a changed file pays it.
    from . import record_file

    path = root / name
    if name == REGISTRY_FILE:
        _forget(db, name)
        # Validated as every command validates it; an invalid one stops the command, as before.
        meta = record_file.read_meta(path)
        db.execute("INSERT INTO meta VALUES ('registry', ?)", (json.dumps(meta),))
    else:
        db.execute("DELETE FROM derived")  # every change of an indexed file passes here or in _forget
        _put_record(db, name, *record_file.read_record(root, path, link, None if link else data))
    sha = None if data is None else hashlib.sha256(data).hexdigest()
    # A symlink, or a file that could not be read, is never taken as unchanged.
    db.execute(
        "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
        (name, *(stamp if stamp is not None and sha is not None else (-1, -1, -1, -1)), sha, now),
    )


def _put_record(db: sqlite3.Connection, name: str, record: Any, problems: list[Any]) -> None:
    """The rows of one record file, written over what the index held for it. Only the columns
    that differ are updated, so an edit of one field rewrites the indexes that hold that field
    and no other (a pull that edits 100 records at 100,000 spent most of its writes on them)."""
    stem = name[: -len(".json")]
    row = _attempt_row(stem, record)
    old = db.execute(f"SELECT {', '.join(ATTEMPT_COLUMNS)} FROM attempts WHERE stem = ?", (stem,)).fetchone()
    if old is None:
        db.execute(f"INSERT INTO attempts VALUES ({', '.join('?' * len(row))})", row)
    elif tuple(old) != row:
        changed = [(column, new) for column, was, new in zip(ATTEMPT_COLUMNS, old, row, strict=True) if was != new]
        assignments = ", ".join(f"{column} = ?" for column, _ in changed)
        db.execute(f"UPDATE attempts SET {assignments} WHERE stem = ?", (*(new for _, new in changed), stem))
    runs = [(stem, n, run.run_id, run.status) for n, run in enumerate((record.attempt and record.attempt.runs) or ())]
    _replace_rows(db, "runs", stem, runs)
    _replace_rows(db, "problems", stem, [(stem, n, p.location(), p.message) for n, p in enumerate(problems)])


def _replace_rows(db: sqlite3.Connection, table: str, stem: str, rows: list[tuple[Any, ...]]) -> None:
    """``table``'s rows of ``stem`` made ``rows``, in place when they are those already."""
    old = db.execute(f"SELECT * FROM {table} WHERE stem = ? ORDER BY position", (stem,)).fetchall()
    if [tuple(r) for r in old] != rows:
        db.execute(f"DELETE FROM {table} WHERE stem = ?", (stem,))
        db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * 4)})", rows)


def _attempt_row(stem: str, record: Any) -> tuple[Any, ...]:
    """The attempts table's row of a record file (``ATTEMPT_COLUMNS``); only the id it gives
    when it is not a valid record."""
    if record.attempt is None:
        return (stem, record.raw_id, *(None,) * (len(ATTEMPT_COLUMNS) - 2))
    a = record.attempt.summary()
    time_, made, imported, position, _ = a.ledger
    return (
        stem, record.raw_id, a.id, a.status, a.family, a.kind, a.objective,
        encode_terms(a.methods), encode_terms(a.bases),
        a.data_rows, a.varied_from, a.varied, a.question,
        None if a.question is None else " ".join(question_tokens(a.question)),
        a.lesson, a.next_action, a.tracking_issue, int(a.has_condition),
        time_, made, imported, position, int(record.attempt.is_dumped_as(record.raw)),
    )  # fmt: skip


# ---------------------------------------------------------------------------- writers and checks


def update_after_write(root: Path) -> None:
    """Bring an existing index up to date with what a write just changed (called under the
    registry lock). No index yet: the next read builds one. It is only ever a cache, so a
    failure here is left for the next command's check to repair."""
    if not os.path.lexists(index_path(root)) or not usable_directory(root):
        return
    with contextlib.suppress(sqlite3.Error, OSError, PtregError):
        open_index(root).close()


@dataclass
class Difference:
    name: str
    what: str  # "missing", "extra", "stale", "differs" or "unsigned" (the index file itself)


def compare_with_files(root: Path) -> tuple[list[Difference], int]:
    """Compare the index as it stands (without updating it) with a full read of every file:
    (what differs, how many files were compared). Used by `ptreg index --check`."""

    if not check_index_files(root):
        raise PtregError(f"{index_path(root)}: no index yet; `ptreg index --rebuild` builds it", 1)
    header = _header_problem(root)
    # Not read-only: a hot journal left by a killed update must be rolled back before reading.
    db = _connect(root)
    try:
        why = header or _unusable(db)
        if why is not None:
            raise PtregError(f"{index_path(root)}: {why}; `ptreg index --rebuild` builds it", 1)
        fresh = sqlite3.connect(":memory:", isolation_level=None)
        fresh.execute("BEGIN")
        _reset(fresh)
        names = scan(root)
        for n, (s, link) in sorted(names.items()):
            _reparse(root, fresh, n, s, link, _bytes(root / n), 0)
        differences: list[Difference] = []
        for table, key in (
            ("files", "name"),
            ("attempts", "stem"),
            ("runs", "stem"),
            ("problems", "stem"),
            ("meta", "key"),
        ):
            skip = ", seen_ns" if table == "files" else ""
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})") if f", {r[1]}" != skip]
            # the last check's digest and listing, the watcher's number and the change counter
            # ptreg left are the index's own
            # bookkeeping, not the files'
            where = " WHERE key NOT IN ('checked', 'listing', 'watched', 'written')" if table == "meta" else ""
            select = f"SELECT {', '.join(columns)} FROM {table}{where}"
            stored = _grouped(db.execute(select).fetchall(), columns.index(key))
            wanted = _grouped(fresh.execute(select).fetchall(), columns.index(key))
            for k in sorted(set(stored) | set(wanted)):
                if k not in stored:
                    differences.append(Difference(_shown(table, k), "missing"))
                elif k not in wanted:
                    differences.append(Difference(_shown(table, k), "extra"))
                elif stored[k] != wanted[k]:
                    differences.append(Difference(_shown(table, k), "stale" if table == "files" else "differs"))
        db.execute("BEGIN")  # briefly: no writer commits between reading the value and the counter
        try:
            if not _current(db, root):  # rows or kept results edited by another program
                differences.append(Difference(INDEX_FILE, "unsigned"))
        finally:
            db.execute("COMMIT")
        return _unique(differences), len(names)
    except sqlite3.DatabaseError as exc:
        raise PtregError(
            f"{index_path(root)}: not a usable index ({exc}); `ptreg index --rebuild` builds it", 1
        ) from None
    finally:
        db.close()


def _grouped(rows: list[tuple[Any, ...]], key: int) -> dict[str, list[tuple[Any, ...]]]:
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        grouped.setdefault(str(row[key]), []).append(row)
    return {k: sorted(v, key=repr) for k, v in grouped.items()}


def _shown(table: str, key: str) -> str:
    if table == "files" or table == "meta":
        return REGISTRY_FILE if key == "registry" else key
    return f"{key}.json"


def _unique(differences: list[Difference]) -> list[Difference]:
    seen: dict[str, Difference] = {}
    for d in differences:
        seen.setdefault(d.name, d)
    return sorted(seen.values(), key=lambda d: d.name)


@contextlib.contextmanager
def opened(root: Path) -> Iterator[Index]:
    index = open_index(root)
    try:
        yield index
    finally:
        index.close()


def file_size(root: Path) -> int | None:
    try:
        return os.lstat(index_path(root)).st_size
    except OSError:
        return None
