"""The single-file format, ``attempts.json``: a whole registry in one document.

Every version of it is read: schema_version 2 as it is now (the vocabularies beside the
attempts), schema_version 2 as it was before it had vocabularies, and schema_version 1. A
vocabulary the file lacks is taken from the terms its records use, each without a definition,
never from ptreg's defaults; each record gets its ``origin`` (the file, its version, its place,
its key order and the fields its format did not have).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import UnusableInput
from ..records.attempt import (
    FIELDS_OF_VOCABULARIES,
    SCHEMA_VERSION,
    SUPPORTED_IMPORT_VERSIONS,
    V1_FIELDS,
    V2_FIELDS,
    VOCABULARY_KEYS,
    Attempt,
    Origin,
)
from ..records.problems import Problem, pointer_join
from ..records.registry import Record, Registry, parse_record
from ..text import json_type, shorten
from .directory import parse_meta
from .jsonio import read_json

CONFIDENCE_KEY = "confidence_vocabulary"
ALL_VOCABULARY_KEYS = (CONFIDENCE_KEY, *VOCABULARY_KEYS)


def load_attempts_file(path: Path, origin_name: str | None = None) -> Registry:
    """Read a single-file registry (attempts.json, schema_version 1 or 2); ``origin_name`` is
    what each record's origin calls the file (default: ``path`` as given)."""
    raw = read_json(path)
    where = str(path)
    if not isinstance(raw, dict):
        raise UnusableInput(
            f"{where}: expected a JSON object with 'schema_version' and 'attempts', got {json_type(raw)}"
        )
    version = raw.get("schema_version")
    if version not in SUPPORTED_IMPORT_VERSIONS or isinstance(version, bool):
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise UnusableInput(
                f"{where}: schema_version {version} is newer than this ptreg reads (1 and 2); upgrade ptreg"
            )
        raise UnusableInput(f"{where}: schema_version must be 1 or 2, got {shorten(version)}")
    attempts = raw.get("attempts")
    if not isinstance(attempts, list):
        raise UnusableInput(f"{where}#/attempts: expected an array of attempts, got {json_type(attempts)}")
    # schema_version 1 had no vocabularies at all; version 2 first came without method,
    # objective and kind vocabularies, and without the kind and shape fields that use them.
    given = {k: v for k, v in raw.items() if k != "attempts"} if version == 2 else {}
    missing = [key for key in ALL_VOCABULARY_KEYS if key not in given]
    lacks = _lacks(version, missing)
    meta = parse_meta({**given, **{key: {} for key in missing}, "schema_version": SCHEMA_VERSION}, where)
    name = origin_name or where
    records: list[Record] = []
    problems: list[Problem] = []
    for index, item in enumerate(attempts):
        record, found = parse_record(item, file=where, pointer=pointer_join("/attempts", index))
        if record.attempt is not None:
            origin = Origin(
                file=name,
                schema_version=version,
                position=index,
                keys=[key for key in item if key != "origin"],
                lacks=list(lacks),
            )
            record.attempt = record.attempt.model_copy(update={"origin": origin})
        records.append(record)
        problems.extend(found)
    usable = [r.attempt for r in records if r.attempt is not None]
    for key in missing:
        # used without a definition: the terms are known, what they mean is not
        getattr(meta, key).update(dict.fromkeys(_terms(key, usable)))
    return Registry(
        source=where,
        meta=meta,
        records=records,
        problems=problems,
        schema_version=version,
        inferred_vocabularies=missing,
    )


def _lacks(version: int, missing: list[str]) -> list[str]:
    """The fields of a complete record that the file's format did not have."""
    if version == 1:
        return [f for f in V2_FIELDS if f not in V1_FIELDS]
    if all(key in missing for key in VOCABULARY_KEYS):
        return list(FIELDS_OF_VOCABULARIES)
    return []


def _terms(key: str, attempts: list[Attempt]) -> Iterable[str]:
    """The terms the records use from the vocabulary ``key``, in the order they first appear."""
    used: Iterable[Any]
    if key == CONFIDENCE_KEY:
        used = (a.failure_reason_confidence for a in attempts)
    elif key == "method_vocabulary":
        used = (m for a in attempts for m in a.methods or ())
    elif key == "objective_vocabulary":
        used = (a.objective for a in attempts)
    else:
        used = (a.kind for a in attempts)
    return dict.fromkeys(term for term in used if term is not None)
