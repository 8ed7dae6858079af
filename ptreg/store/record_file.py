"""Reading one record file as ``load_directory`` reads it: a Record (usable or not) and its
problems. The full read and the query index (``index/``) share it, so both see a file alike."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..records.problems import Problem, shown_id
from ..records.registry import Record, parse_record
from ..text import shorten
from .jsonio import JsonError, decode_json, outside, read_json
from .names import RECORD_FILE_MAX_BYTES
from .vocabulary_files import parse_meta as parse_meta
from .vocabulary_files import read_meta_json


def symlink_problem(root: Path, path: Path) -> str | None:
    """Why the symlink ``path`` is not read: it leads out of the registry, or nowhere."""
    target = outside(root, path)
    if target is not None:
        return f"a symlink to {target}, outside the registry; not read"
    if not path.exists():
        return f"a symlink to {os.readlink(path)}, which does not exist"
    return None


def read_record(root: Path, path: Path, is_symlink: bool, data: bytes | None = None) -> tuple[Record, list[Problem]]:
    """The record in ``path`` and what is wrong with it; a file that cannot be read at all is a
    Record without raw JSON, so that no file goes unmentioned. ``data``: the file's bytes, when
    the caller has read them already (the index hashes them too)."""
    shown = str(path)
    unread: Problem | None = None
    link_problem = symlink_problem(root, path) if is_symlink else None
    if link_problem is not None:
        unread = Problem("symlink", link_problem, shown_id(path.stem), "", shown)
    else:
        try:
            raw = read_json(path, RECORD_FILE_MAX_BYTES) if data is None else decode_json(data, shown)
        except JsonError as exc:
            unread = Problem("json", exc.problem, shown_id(path.stem), exc.pointer, shown)
    if unread is not None:
        return Record(None, None, shown), [unread]
    record, problems = parse_record(raw, file=shown)
    if record.raw_id is not None and record.raw_id != path.stem:
        problems.append(
            Problem(
                "file-name",
                f"id {shorten(record.raw_id)} does not match the file name "
                f"(expected {path.stem}.json to hold id {path.stem!r})",
                shown_id(record.raw_id),
                "/id",
                shown,
            )
        )
    return record, problems


def read_meta(path: Path) -> dict[str, Any]:
    """The vocabularies of the registry whose ``registry.json`` is ``path``, validated, as JSON
    (for the query index to keep)."""
    return read_meta_json(path.parent)
