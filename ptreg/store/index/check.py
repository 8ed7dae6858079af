"""The writes' hook into the index and `ptreg index check`: the index as it stands compared with
a full read of every file, without updating it."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import CheckFailed, PtregError
from ..names import INDEX_FILE, REGISTRY_FILE
from .file import check_index_files, connect, header_problem, index_path, is_current, usable_directory
from .freshness import record_bytes, reparse, scan
from .lookups import open_index
from .rows import reset, unusable


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
    (what differs, how many files were compared). Used by `ptreg index check`."""

    if not check_index_files(root):
        raise CheckFailed(f"{index_path(root)}: no index yet; `ptreg index rebuild` builds it")
    header = header_problem(root)
    # Not read-only: a hot journal left by a killed update must be rolled back before reading.
    db = connect(root)
    try:
        why = header or unusable(db)
        if why is not None:
            raise CheckFailed(f"{index_path(root)}: {why}; `ptreg index rebuild` builds it")
        fresh = sqlite3.connect(":memory:", isolation_level=None)
        fresh.execute("BEGIN")
        reset(fresh)
        names = scan(root)
        for n, (s, link) in sorted(names.items()):
            reparse(root, fresh, n, s, link, record_bytes(root / n), 0)
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
            where = (
                " WHERE key NOT IN ('checked', 'listing', 'watched', 'written', 'vocabulary')"
                if table == "meta"
                else ""
            )
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
            if not is_current(db, root):  # rows or kept results edited by another program
                differences.append(Difference(INDEX_FILE, "unsigned"))
        finally:
            db.execute("COMMIT")
        return _unique(differences), len(names)
    except sqlite3.DatabaseError as exc:
        raise PtregError(
            f"{index_path(root)}: not a usable index ({exc}); `ptreg index rebuild` builds it", 1
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
