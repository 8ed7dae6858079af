"""Checking the index against the directory: one ``stat`` per file (or the files a watcher
names), and each file that is new, changed or gone read again into its rows."""

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
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...records.ledger import encode_terms, question_tokens
from ..jsonio import JsonError, read_bytes
from ..names import RECORD_FILE_MAX_BYTES, REGISTRY_FILE, VOCABULARY_DIR
from ..watch import ask
from .rows import ATTEMPT_COLUMNS, PROGRESS_EVERY, RACY_NS, Progress, Refresh, Stamp


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


def check_files(root: Path, db: sqlite3.Connection, progress: Progress | None = None) -> Refresh:
    now = time.time_ns()  # before any look at the files: a change after it moves the stamps
    kept = db.execute("SELECT value FROM meta WHERE key = 'watched'").fetchone()
    seq, watcher = _watched(kept)
    answer = ask(root, watcher, seq)  # asked before the files are looked at, as ``now`` is taken
    if answer is not None and answer.changed is not None:
        result = _check_named(root, db, answer.changed, now, progress)
    else:
        result = _check_every_file(root, db, now, progress)
    _check_vocabulary(root, db, now)
    if answer is not None and (answer.seq, answer.watcher) != (seq, watcher):
        # the files table now holds at least every change that watcher had seen when it answered
        db.execute("INSERT OR REPLACE INTO meta VALUES ('watched', ?)", (f"{answer.seq} {answer.watcher}",))
    return result


def _vocabulary_entries(root: Path) -> list[tuple[str, os.stat_result | None]]:
    """(path relative to the registry, lstat) of the term folder and everything in it, two
    levels deep; None for a folder that is absent or cannot be listed."""
    found: list[tuple[str, os.stat_result | None]] = []
    folders = [VOCABULARY_DIR]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(root / folder) as entries:
                listed = sorted((f"{folder}/{e.name}", e.stat(follow_symlinks=False)) for e in entries)
        except OSError:
            found.append((folder, None))
            continue
        for name, info in listed:
            found.append((name, info))
            if folder == VOCABULARY_DIR and stat.S_ISDIR(info.st_mode):
                folders.append(name)
    return found


def _vocabulary_stamp(entries: list[tuple[str, os.stat_result | None]], now: int) -> str | None:
    """One digest of the name and stamp of every entry of the term folder; None when one
    changed within RACY_NS of ``now`` (its bytes then decide)."""
    digest = hashlib.blake2b(digest_size=20)
    for name, info in entries:
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
        if info is None:
            digest.update(b"-\0")
            continue
        if info.st_ctime_ns >= now - RACY_NS:
            return None
        fields = (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
        digest.update(" ".join(map(str, fields)).encode() + b"\0")
    return digest.hexdigest()


def _vocabulary_content(root: Path, entries: list[tuple[str, os.stat_result | None]]) -> str:
    """One digest of the name and bytes of every term file (and the kind of anything else)."""
    digest = hashlib.blake2b(digest_size=20)
    for name, info in entries:
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
        if info is not None and stat.S_ISREG(info.st_mode):
            data = record_bytes(root / name)
            digest.update(b"?" if data is None else hashlib.sha256(data).digest())
        else:
            digest.update(b"-" if info is None else str(stat.S_IFMT(info.st_mode)).encode())
    return digest.hexdigest()


def _check_vocabulary(root: Path, db: sqlite3.Connection, now: int) -> None:
    """Read the vocabularies again when a term file was added, removed or changed (by a
    checkout, a merge or ptreg) since the index last read them: a few dozen files, whatever the
    number of records, so looked at by every check, watcher or not (``registry.json`` itself is
    a file of the files table). Unchanged stamps say "unchanged" without reading a file; when
    they moved, the files' bytes decide, as for records (a racy file is re-hashed, not re-parsed)."""
    kept = db.execute("SELECT value FROM meta WHERE key = 'vocabulary'").fetchone()
    kept_stamp, _, kept_content = str(kept[0] if kept is not None else "").partition(" ")
    entries = _vocabulary_entries(root)
    stamp = _vocabulary_stamp(entries, now)
    if stamp is not None and stamp == kept_stamp:
        return
    content = _vocabulary_content(root, entries)
    if content != kept_content and db.execute("SELECT 1 FROM meta WHERE key = 'registry'").fetchone() is not None:
        from .. import record_file

        # read before anything is dropped: an unusable term file stops the command, as an
        # unusable registry.json does
        meta = record_file.read_meta(root / REGISTRY_FILE)
        db.execute("DELETE FROM derived")
        db.execute("INSERT OR REPLACE INTO meta VALUES ('registry', ?)", (json.dumps(meta),))
    value = f"{stamp or '-'} {content}"
    if kept is None or str(kept[0]) != value:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('vocabulary', ?)", (value,))


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
    if plan is None or columns is None:  # every file's stamp against its row
        on_disk = scan(root, found)
        rows = db.execute(f"SELECT {_FILE_COLUMNS} FROM files").fetchall()
        gone = {str(r[0]) for r in rows} - set(on_disk)
    else:  # only the files the kept listing does not vouch for
        look, gone = _to_look_at(plan, found, columns)
        size, mtime, ctime, ino = columns
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
        data = record_bytes(root / name)  # read once: hashed, and parsed when it changed
        sha = None if data is None else hashlib.sha256(data).hexdigest()
        if old_sha is not None and sha == old_sha and not link:
            db.execute(
                "UPDATE files SET size = ?, mtime_ns = ?, ctime_ns = ?, ino = ?, seen_ns = ? WHERE name = ?",
                (*(stamp or (-1, -1, -1, -1)), now, name),
            )
            result.rehashed += 1
        else:
            reparse(root, db, name, stamp, link, data, now)
            result.reread.append(name)
            unreadable = unreadable or data is None or stamp is None
    result.reread.sort()
    return unreadable


def record_bytes(path: Path) -> bytes | None:
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


def reparse(
    root: Path, db: sqlite3.Connection, name: str, stamp: Stamp | None, link: bool, data: bytes | None, now: int
) -> None:
    """Index the file ``name`` anew from ``data``, its bytes (None: it could not be read)."""
    # The models cost about 0.1 s to build; only a command that finds a changed file pays it.
    from .. import record_file

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
        a.name, a.hypothesis, int(a.deviates),
    )  # fmt: skip
