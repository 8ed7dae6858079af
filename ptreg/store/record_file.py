"""Reading one record file as ``load_directory`` reads it: a Record (usable or not) and its
problems. The full read and the query index (``index/``) share it, so both see a file alike."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import UnusableInput
from ..records.attempt import SCHEMA_VERSION, RegistryMeta
from ..records.problems import Problem, every_schema_error, shown_id
from ..records.registry import Record, parse_record
from ..text import json_type, shorten
from .jsonio import JsonError, decode_json, outside, read_json
from .names import RECORD_FILE_MAX_BYTES


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


def parse_meta(raw: Any, where: str) -> RegistryMeta:
    if not isinstance(raw, dict):
        raise UnusableInput(f"{where}: expected a JSON object, got {json_type(raw)}")
    version = raw.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise UnusableInput(
            f"{where}: schema_version {shorten(version)} is newer than this ptreg reads (up to {SCHEMA_VERSION}); upgrade ptreg"
        )
    try:
        return RegistryMeta.model_validate(raw)
    except ValidationError as exc:
        raise UnusableInput(every_schema_error(exc, where)) from None


def read_meta(path: Path) -> dict[str, Any]:
    """``registry.json`` validated, as JSON (for the query index to keep)."""
    return parse_meta(read_json(path), str(path)).model_dump(mode="json")
