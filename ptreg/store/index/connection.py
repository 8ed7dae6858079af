"""An open connection to the index, checked against the directory before its first query, and
the base of every query: a damaged page met later rebuilds it, a file that cannot be used is
replaced by an index in memory, and results derived from the rows are kept beside them."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ... import __version__
from ...errors import PtregError, UnusableInput
from ..faults import crash_point
from .file import (
    change_counter,
    connect,
    delete_index_file,
    header_problem,
    index_path,
    is_corrupt,
    is_current,
    sign,
    unwritten,
)
from .freshness import check_files
from .rows import BUSY_TIMEOUT_S, Progress, Refresh, reset, unusable

KEEP_TIMEOUT_MS = 100  # keeping a derived result is never worth waiting on another writer for


@functools.cache
def code_stamp() -> str:
    """ptreg's version and the size and mtime of each of its source files: a derived result
    kept by one build of ptreg is never read by another, even within one version."""
    package = Path(__file__).resolve().parents[2]
    stamps = [__version__]
    for folder, _, files in sorted(os.walk(package)):
        for name in sorted(files):
            if name.endswith(".py"):
                info = os.stat(os.path.join(folder, name))
                stamps.append(f"{os.path.relpath(folder, package)}/{name} {info.st_size} {info.st_mtime_ns}")
    return hashlib.blake2b("\n".join(stamps).encode(), digest_size=12).hexdigest()


def connect_checked(
    root: Path, *, rebuild: bool = False, progress: Progress | None = None
) -> tuple[sqlite3.Connection, Refresh]:
    """A connection to the index of ``root``, checked against its files and brought up to date
    (``progress`` is told how many changed files are read), within a read transaction. When the
    file cannot be used at all (a read-only registry, a full disk), an index in memory answers.
    A symlink, a folder or another user's file under the index's names, or another program's
    database, is refused (ForeignFile) and left as it is."""
    why = header_problem(root)  # refuses what is not ptreg's before SQLite opens anything
    if rebuild or why is not None:
        delete_index_file(root)
    try:
        db, refresh = _open(root, connect(root), progress)
    except sqlite3.Error as exc:
        if not is_corrupt(exc):  # read-only, full, busy for too long: answered without the file
            return in_memory(root, progress)
        delete_index_file(root)
        why = "the index file was corrupt"
        try:
            db, refresh = _open(root, connect(root), progress)
        except sqlite3.Error:
            return in_memory(root, progress)
    refresh.rebuilt = why or refresh.rebuilt
    return db, refresh


def in_memory(root: Path, progress: Progress | None = None) -> tuple[sqlite3.Connection, Refresh]:
    db, refresh = _open(root, sqlite3.connect(":memory:", isolation_level=None), progress, on_disk=False)
    refresh.in_memory = True
    return db, refresh


def _open(
    root: Path, db: sqlite3.Connection, progress: Progress | None = None, *, on_disk: bool = True
) -> tuple[sqlite3.Connection, Refresh]:
    try:
        for _ in range(3):
            db.execute("BEGIN IMMEDIATE")  # one updater at a time; readers of an unchanged index wait briefly
            before = db.total_changes
            counter = change_counter(root) if on_disk else 0
            why = unusable(db) or (unwritten(db, counter) if on_disk else None)
            if why is not None:
                reset(db)
            refresh = check_files(root, db, progress)
            refresh.rebuilt = why
            if on_disk and (why is not None or db.total_changes > before):
                sign(db, counter)
            crash_point()  # the files are read and the index updated, not yet committed
            db.execute("COMMIT")
            db.execute("BEGIN")  # the queries of one command read one state of the index
            if not on_disk or is_current(db, root):
                break
            db.execute("ROLLBACK")  # another program wrote it since the commit: checked again
        else:
            raise UnusableInput(f"{index_path(root)}: changed by another program while ptreg checked it; try again")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.close()
        raise
    return db, refresh


class Connected:
    """An open index, checked against the directory: what every query of it is asked through."""

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
            if is_corrupt(exc):
                delete_index_file(self.root)
                self.db, self.refresh = connect_checked(self.root)
                self.refresh.rebuilt = self.refresh.rebuilt or "the index file was corrupt"
            else:
                self.db, self.refresh = in_memory(self.root)
            return self.db.execute(sql, params).fetchall()

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
            counter = None if self.refresh.in_memory else change_counter(self.root)
            self.db.execute("INSERT OR REPLACE INTO derived VALUES (?, ?)", (key, text))
            if counter is not None:
                sign(self.db, counter)
            self.db.execute("COMMIT")
        except (sqlite3.Error, PtregError):
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
        finally:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
                self.db.execute("BEGIN")
        if not self.refresh.in_memory and not is_current(self.db, self.root):
            # another program wrote the file between the two transactions: checked again
            self.close()
            self.db, self.refresh = connect_checked(self.root)

    def _meta(self, key: str) -> str | None:
        row = self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return None if row is None else str(row[0])
