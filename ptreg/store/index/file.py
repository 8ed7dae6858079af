"""The index file on disk: its name, its header read without disturbing SQLite's locks, its
deletion, and the signature by which ptreg knows the rows are those it last wrote."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from ..names import INDEX_FILE, JOURNAL_FILE, REGISTRY_FILE
from ..workfiles import ForeignFile, check_working_file, open_working_file
from .rows import APPLICATION_ID, BUSY_TIMEOUT_S


def index_path(root: Path) -> Path:
    return root / INDEX_FILE


def usable_directory(root: Path) -> bool:
    """Whether the index may answer for ``root`` now: a registry directory with no import
    journal to finish (the full read reports the other cases, and finishes the journal)."""
    return root.is_dir() and (root / REGISTRY_FILE).is_file() and not os.path.lexists(root / JOURNAL_FILE)


def connect(root: Path) -> sqlite3.Connection:
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


def header_problem(root: Path) -> str | None:
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


def change_counter(root: Path) -> int:
    """The file change counter of the index's SQLite header: SQLite adds one for each
    transaction that changes the file (in the rollback-journal mode ptreg keeps)."""
    head = _header(root) or b""
    return int.from_bytes(head[24:28], "big") if len(head) >= 28 else 0


def is_corrupt(exc: sqlite3.Error) -> bool:
    """Whether SQLite found the file damaged or not a database at all (the rest, such as a
    read-only directory or a full disk, says nothing about the file)."""
    return getattr(exc, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or "malformed" in str(exc)


def delete_index_file(root: Path) -> None:
    check_index_files(root)  # never a symlink, a folder or another user's file
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(index_path(root)) + suffix)


# Every transaction in which ptreg changes the index records, in it, the file change counter
# the commit will leave (SQLite adds one per changing transaction). Any other writer (a row
# inserted or a status edited by hand) moves the counter past the one recorded, and the index
# is then rebuilt from the files: nothing it holds is believed unless ptreg's check wrote it.


def sign(db: sqlite3.Connection, counter: int) -> None:
    """Record that this transaction, which changes the file, leaves the counter at ``counter + 1``."""
    db.execute("INSERT OR REPLACE INTO meta VALUES ('written', ?)", (str(counter + 1),))


def unwritten(db: sqlite3.Connection, counter: int) -> str | None:
    """Why the index's rows are not those ptreg last wrote (None: they are)."""
    row = db.execute("SELECT value FROM meta WHERE key = 'written'").fetchone()
    if row is None or str(row[0]) != str(counter):
        return "the index file was changed by another program since ptreg wrote it"
    return None


def is_current(db: sqlite3.Connection, root: Path) -> bool:
    """Within a read transaction (which keeps writers out from its first read until it ends):
    whether the index is still as ptreg last wrote it."""
    row = db.execute("SELECT value FROM meta WHERE key = 'written'").fetchone()  # the read lock first
    return row is not None and str(row[0]) == str(change_counter(root))


def file_size(root: Path) -> int | None:
    try:
        return os.lstat(index_path(root)).st_size
    except OSError:
        return None
