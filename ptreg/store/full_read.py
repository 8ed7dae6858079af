"""The queries of ``RegistryReader`` (``store/reader.py``) answered by reading every record file, as ptreg did before it
kept an index: what ``PTREG_INDEX=off`` gives, and what the tests hold the index to."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import CheckFailed, UnknownAttempt
from ..records.attempt import Attempt, RegistryMeta
from ..records.ledger import Filter, Link, Listed, Shaped, Summary, in_ledger_order, listed
from ..records.refs import check_id
from .directory import load_directory
from .index.rows import Refresh
from .reader import RegistryReader
from .record_file import read_record

OFF_ENV = "PTREG_INDEX"  # "off": read every file, use no index


class FullRead(RegistryReader):
    """Every record file read and parsed; the same questions as ``Index`` asks of its tables."""

    def __init__(self, root: Path):
        self.root = root
        self.registry = load_directory(root)
        self.refresh = Refresh(rebuilt=f"{OFF_ENV}=off: every file read, no index used", in_memory=True)
        self._summaries = in_ledger_order(
            r.attempt.summary()._replace(stem=Path(r.file).stem if r.file else None)
            for r in self.registry.records
            if r.attempt is not None
        )
        self._by_id = {a.id: a for a in sorted(self._summaries, key=lambda a: a.stem or "")}

    def close(self) -> None:
        pass

    def records(self) -> int:
        return len(self.registry.records)

    def valid(self) -> int:
        return len(self._summaries)

    def problems(self) -> list[tuple[str, str]]:
        return [(p.location(), p.message) for p in self.registry.problems]

    def summaries(self) -> list[Summary]:
        return list(self._summaries)

    def links(self) -> list[Link]:
        return [Link(a.id, a.varied_from, a.objective, a.status, a.ledger) for a in self._summaries]

    def links_up(self, attempt_id: str) -> list[Link]:
        above: set[str] = set()
        frontier = {attempt_id}
        while frontier:  # every file's edge counts, as in the index's walk
            above |= frontier
            frontier = {a.varied_from for a in self._summaries if a.id in frontier and a.varied_from} - above
        return [link for link in self.links() if link.id in above]

    def links_of_objective(self, objective: str) -> list[Link]:
        return self.links()  # every attempt: more than the streak of one objective reads

    def links_of(self, ids: Sequence[str]) -> list[Link]:
        wanted = set(ids)
        return [link for link in self.links() if link.id in wanted]

    def varying(self, attempt_id: str) -> list[Link]:
        return [link for link in self.links() if link.varied_from == attempt_id]

    def candidates(self, query: Filter) -> list[Listed]:
        """Every attempt: the caller's own filter decides (``Index.candidates`` narrows first)."""
        return [listed(a) for a in self._summaries]

    def list_rows(self, query: Filter) -> None:
        """None: the caller reads ``candidates`` and filters them itself (``Index.list_rows``)."""
        return None

    def gate_candidates(self, attempt: Shaped) -> list[Summary]:
        """Every attempt (``Index.gate_candidates`` narrows to those the gate's checks read)."""
        return list(self._summaries)

    def summaries_of(self, ids: list[str]) -> list[Summary]:
        wanted = set(ids)
        return [a for a in self._summaries if a.id in wanted]

    def summary(self, attempt_id: str) -> Summary | None:
        return self._by_id.get(attempt_id)

    def ids(self) -> list[str]:
        return sorted(self._by_id)

    def raw_ids(self) -> set[str]:
        return {r.raw_id for r in self.registry.records if r.raw_id is not None}

    def is_unusable(self, attempt_id: str) -> bool:
        return any(
            (r.raw_id == attempt_id or (r.file is not None and Path(r.file).stem == attempt_id))
            and (r.attempt is None or r.attempt.id != attempt_id)
            for r in self.registry.records
        )

    def lineage_ids(self, attempt_id: str) -> list[str]:
        """As ``Index.lineage_ids``: every valid record counts, and of two giving one id, the
        one in the file named by it is the parent's."""
        parent: dict[str, str | None] = {}
        for a in sorted(self._summaries, key=lambda a: (a.stem == a.id, a.stem or "")):
            parent[a.id] = a.varied_from  # the file named by its id, else the last by name, wins
        wanted = {attempt_id}
        node = parent.get(attempt_id)
        while node is not None and node not in wanted and node in parent:
            wanted.add(node)
            node = parent[node]
        children: dict[str, list[str]] = {}
        for a in self._summaries:
            if a.varied_from is not None:
                children.setdefault(a.varied_from, []).append(a.id)
        below, frontier = {attempt_id}, [attempt_id]
        while frontier:
            frontier = [c for f in frontier for c in children.get(f, ()) if c not in below]
            below.update(frontier)
        return sorted(wanted | below)

    def with_condition(self) -> list[Summary]:
        return sorted((a for a in self._summaries if a.has_condition), key=lambda a: a.stem or "")

    def vocabularies(self) -> RegistryMeta:
        return self.registry.meta

    def all_runs(self) -> dict[str, list[tuple[str, str]]]:
        """As ``Index.all_runs``: of files giving one id, every file's runs, by file name."""
        found: dict[str, list[tuple[str, str]]] = {}
        for r in sorted(self.registry.records, key=lambda r: Path(r.file).stem if r.file else ""):
            if r.attempt is not None and r.attempt.runs:
                found.setdefault(r.attempt.id, []).extend((run.run_id, run.status) for run in r.attempt.runs)
        return found

    def vouched(self, ids: Sequence[str]) -> dict[str, str]:
        return {}  # nothing kept to vouch with: every record is read through the models

    def hashes(self) -> dict[str, str | None]:
        return {}  # the admission's digest then reads every file itself

    def remembered(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` as the index gives it back (through JSON), computed every time."""
        return json.loads(json.dumps(compute()))


def indexed_attempt(index: RegistryReader, attempt_id: str) -> Attempt:
    """The whole record of ``attempt_id``, read from its file once the index knows it is a valid
    one; otherwise the error a full read gives (not valid, or no such attempt and the closest ids)."""
    check_id(attempt_id)
    if index.summary(attempt_id) is None:
        if index.is_unusable(attempt_id):
            raise CheckFailed(
                f"attempt {attempt_id!r} in {index.root} is not a valid record; run `ptreg validate` to see why",
            )
        raise UnknownAttempt(attempt_id, str(index.root), sorted(index.raw_ids()))
    return read_summarized(index.root, index.summary(attempt_id))


def read_summarized(root: Path, summary: Summary | Listed | None) -> Attempt:
    """The whole record of an attempt the index summarises, read from its own file (which holds
    it even when misnamed: the file a full read took it from)."""
    if summary is None or summary.stem is None:
        raise CheckFailed(f"{root}: an attempt the index named is gone; run the command again")
    record, problems = read_record(root, root / f"{summary.stem}.json", (root / f"{summary.stem}.json").is_symlink())
    if record.attempt is None or record.attempt.id != summary.id:
        where = problems[0].location() if problems else f"{root}/{summary.stem}.json"
        raise CheckFailed(f"{where}: changed while it was read; run the command again")
    return record.attempt
