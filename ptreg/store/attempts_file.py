"""The single-file format, ``attempts.json``: a whole registry in one document.

schema_version 2 carries the vocabularies beside the attempts; schema_version 1 has none,
and its vocabularies stay unknown rather than being taken for ptreg's defaults.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import PtregError
from ..records.attempt import SCHEMA_VERSION, SUPPORTED_IMPORT_VERSIONS, RegistryMeta
from ..records.problems import Problem, pointer_join
from ..records.registry import Record, Registry, parse_record
from ..text import json_type, shorten
from .directory import parse_meta
from .jsonio import read_json


def load_attempts_file(path: Path) -> Registry:
    """Read a single-file registry (attempts.json, schema_version 1 or 2)."""
    raw = read_json(path)
    where = str(path)
    if not isinstance(raw, dict):
        raise PtregError(f"{where}: expected a JSON object with 'schema_version' and 'attempts', got {json_type(raw)}")
    version = raw.get("schema_version")
    if version not in SUPPORTED_IMPORT_VERSIONS or isinstance(version, bool):
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise PtregError(
                f"{where}: schema_version {version} is newer than this ptreg reads (1 and 2); upgrade ptreg"
            )
        raise PtregError(f"{where}: schema_version must be 1 or 2, got {shorten(version)}")
    attempts = raw.get("attempts")
    if not isinstance(attempts, list):
        raise PtregError(f"{where}#/attempts: expected an array of attempts, got {json_type(attempts)}")
    if version == 2:
        meta = parse_meta({k: v for k, v in raw.items() if k != "attempts"}, where)
    else:
        # A version 1 file has no vocabularies: they are unknown, not the defaults.
        meta = RegistryMeta(
            schema_version=SCHEMA_VERSION,
            confidence_vocabulary={},
            method_vocabulary={},
            objective_vocabulary={},
            kind_vocabulary={},
        )
    records: list[Record] = []
    problems: list[Problem] = []
    for index, item in enumerate(attempts):
        record, found = parse_record(item, file=where, pointer=pointer_join("/attempts", index))
        records.append(record)
        problems.extend(found)
    return Registry(source=where, meta=meta, records=records, problems=problems, schema_version=version)
