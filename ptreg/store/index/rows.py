"""The index's tables, what their rows hold, and what checking the index against the
directory found: the part of the index every other module of it reads."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...records.ledger import Summary, decode_terms

# PRAGMA user_version: a different one is rebuilt. Raised too when a record is held to a rule
# it was not (7: a condition's text and tree agree, integers fit SQLite; the counter of changes
# ptreg made; 8: a record's name, hypothesis and deviation from its plan, and the plan's rules),
# so that no row an older ptreg vouched for is believed under the new rules.
INDEX_SCHEMA = 8
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
    dumped INTEGER,  -- the file holds exactly what ptreg writes for the record (records/dumped.py)
    name TEXT, hypothesis TEXT, deviates INTEGER
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
TABLES = {"files", "attempts", "runs", "problems", "meta", "derived"}
# the attempts table's columns, in the order of _SCHEMA (a test holds them to it)
ATTEMPT_COLUMNS = (
    "stem", "raw_id", "id", "status", "family", "kind", "objective", "methods", "bases", "data_rows",
    "varied_from", "varied", "question", "question_tokens", "lesson", "next_action", "tracking_issue",
    "has_condition", "ledger_time", "ledger_made", "ledger_import", "ledger_position", "dumped",
    "name", "hypothesis", "deviates",
)  # fmt: skip
SUMMARY_COLUMNS = (
    "id, status, family, kind, objective, methods, bases, data_rows, varied_from, varied, question, lesson, "
    "next_action, tracking_issue, ledger_time, ledger_made, ledger_import, ledger_position, has_condition, stem, "
    "name, hypothesis, deviates"
)
LISTED_COLUMNS = "id, status, lesson, family, kind, objective, methods, bases, has_condition, stem, deviates"
# the file's name last: of two files giving one id at one place, the full read's order (by name)
LEDGER_ORDER = "ledger_time, ledger_made, ledger_import, ledger_position, id, stem"

Stamp = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode
# progress(what, done, total), as store.directory.Progress (which this module cannot import)
Progress = Callable[[str, int, int], None]
PROGRESS_EVERY = 500


@dataclass(frozen=True)
class RegistryVocabularies:
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


def summary_of_row(r: Sequence[Any]) -> Summary:
    """A row of ``SUMMARY_COLUMNS`` as the summary it holds."""
    terms = decode_terms
    return Summary(
        r[0], r[1], r[2], r[3], r[4], terms(r[5]), terms(r[6]), r[7], r[8], r[9], r[10], r[11], r[12],
        r[13], (r[14], r[15], r[16], r[17], r[0]), r[18] == 1, r[19], r[20], r[21], r[22] == 1,
    )  # fmt: skip


def unusable(db: sqlite3.Connection) -> str | None:
    """Why this file cannot serve as the index (None: it can). Reading its header raises
    DatabaseError when it is not a SQLite file at all."""
    application = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if application == 0 and version == 0 and not tables:
        return "no index yet"
    if application != APPLICATION_ID:
        return "the index file belongs to another program"
    if version != INDEX_SCHEMA or tables != TABLES:
        return f"the index has schema {version}, this ptreg uses {INDEX_SCHEMA}"
    return None


def reset(db: sqlite3.Connection) -> None:
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        db.execute(f'DROP TABLE "{name}"')
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute(f"PRAGMA user_version = {INDEX_SCHEMA}")
