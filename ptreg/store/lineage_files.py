"""Reading one lineage without parsing the whole registry.

`show` and `lineage` need only an attempt, its ancestors and everything that varies it. Each
record file is read once as bytes and searched for its varied_from value; only the attempts
of the lineage are then parsed and validated. Records that are not valid are left out, as
``load_directory`` leaves them out of the usable attempts.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import PtregError
from ..records.refs import ID_RE
from ..records.registry import Record, Registry, parse_record
from .directory import RECORD_FILE_MAX_BYTES, REGISTRY_FILE, load_meta, read_attempt, symlink_problem
from .jsonio import outside, parse_json, read_json

_VARIED_FROM = re.compile(rb'"varied_from"\s*:\s*"((?:[^"\\]|\\.)*)"')


def load_lineage(root: Path, attempt_id: str) -> Registry:
    """The attempt, its ancestors and everything that varies it, as a registry of those alone."""
    meta = load_meta(root)
    target = read_attempt(root, attempt_id)
    parent_of = _parents(root)
    wanted = {attempt_id}
    node = target.varied_from
    while node is not None and node not in wanted and ID_RE.fullmatch(node) and (root / f"{node}.json").exists():
        wanted.add(node)
        node = parent_of.get(node)
    wanted |= _descendants(attempt_id, parent_of)
    return Registry(source=str(root), meta=meta, records=_read_valid(root, sorted(wanted)), root=root)


def _parents(root: Path) -> dict[str, str]:
    """id -> the varied_from its file names, for every record file that names one."""
    # Plain strings and os.scandir here: at 10k records pathlib's overhead was a third of the scan.
    # Only regular files (is_file follows symlinks; a FIFO would block the read), and a
    # symlink only when it stays inside the registry: what `load_directory` would read.
    with os.scandir(root) as entries:
        names = [
            e.name
            for e in entries
            if e.name.endswith(".json")
            and e.name != REGISTRY_FILE
            and e.is_file()
            and not (e.is_symlink() and outside(root, Path(e.path)) is not None)
        ]
    parent_of: dict[str, str] = {}
    for name in names:
        try:
            with open(os.path.join(root, name), "rb") as handle:
                data = handle.read(RECORD_FILE_MAX_BYTES + 1)
        except OSError:
            continue  # an unreadable record cannot be part of the lineage; validate reports it
        if len(data) > RECORD_FILE_MAX_BYTES:
            continue  # refused by every read; validate reports it
        found = _VARIED_FROM.search(data) if b'"varied_from"' in data else None
        if found:
            try:
                parent_of[name[: -len(".json")]] = parse_json('"' + found.group(1).decode("utf-8") + '"', name)
            except (PtregError, UnicodeDecodeError):
                continue
    return parent_of


def _descendants(attempt_id: str, parent_of: dict[str, str]) -> set[str]:
    children: dict[str, list[str]] = {}
    for child, parent in parent_of.items():
        children.setdefault(parent, []).append(child)
    found: set[str] = set()
    stack = [attempt_id]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found and child != attempt_id:
                found.add(child)
                stack.append(child)
    return found


def load_ids(root: Path, ids: list[str]) -> Registry:
    """The valid records of ``ids`` alone (the query index names a lineage's ids)."""
    return Registry(source=str(root), meta=load_meta(root), records=_read_valid(root, sorted(ids)), root=root)


def _read_valid(root: Path, ids: list[str]) -> list[Record]:
    records = []
    for attempt_id in ids:
        path = root / f"{attempt_id}.json"
        if path.is_symlink() and symlink_problem(root, path) is not None:
            continue
        try:
            record, _ = parse_record(read_json(path, RECORD_FILE_MAX_BYTES), file=str(path))
        except PtregError:
            continue
        if record.attempt is not None and record.attempt.id == attempt_id:
            records.append(record)
    return records
