"""One attempt and its lineage as `show` renders them: off the files' JSON when the query index
vouches for every one of them (``records/dumped.py``), otherwise through the models."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..records.attempt_view import AttemptView
from ..records.dumped import dumped_attempt
from .jsonio import JsonError, decode_json, read_bytes
from .names import RECORD_FILE_MAX_BYTES

if TYPE_CHECKING:
    from ..records.attempt import Attempt
    from .reader import RegistryReader


@dataclass(frozen=True)
class Lineage:
    attempt: AttemptView
    by_id: dict[str, AttemptView]  # the attempt, its ancestors and what varies it
    record_file: str | None  # the file the attempt was read from
    # the attempt through the models (None: read off its vouched JSON): when a file was not
    # vouched for, or the attempt has runs, whose sections need the model
    model: Attempt | None

    @property
    def through_models(self) -> bool:
        return self.model is not None


def read_lineage(index: RegistryReader, attempt_id: str) -> Lineage:
    """``attempt_id`` (a valid record the index knows) with its lineage. A dossier with runs
    reads them through the run models, so its attempt is read through the models too."""
    ids = index.lineage_ids(attempt_id)
    vouched = index.vouched(ids)
    by_id = _read_vouched(index, vouched) if len(vouched) == len(ids) else None
    if by_id is not None and attempt_id in by_id and not by_id[attempt_id].runs:
        return Lineage(by_id[attempt_id], by_id, str(index.root / f"{attempt_id}.json"), model=None)
    from .lineage_files import load_ids  # the models: about 0.15 s to import and build

    registry = load_ids(index.root, ids)
    record = registry.record_of(attempt_id)
    assert record.attempt is not None
    models: dict[str, AttemptView] = dict(registry.by_id())
    return Lineage(record.attempt, models, record.file, model=record.attempt)


def _read_vouched(index: RegistryReader, vouched: dict[str, str]) -> dict[str, AttemptView] | None:
    """Each vouched attempt read off its file, when the file still holds the bytes the index
    validated; None as soon as one does not (it changed since, or cannot be read)."""
    found = {}
    for attempt_id, sha256 in vouched.items():
        path = index.root / f"{attempt_id}.json"
        try:
            data = read_bytes(path, RECORD_FILE_MAX_BYTES)
            if hashlib.sha256(data).hexdigest() != sha256:
                return None
            found[attempt_id] = dumped_attempt(decode_json(data, str(path)))
        except JsonError:
            return None
    return found
