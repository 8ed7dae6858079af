"""What the site is built from, read the way the read commands read it: the query index for the
summaries, the lineage edges, the runs of each attempt and the problems of broken records; a
whole record from its own file only for the pages that show it; runs and evaluators through the
store. Every file a page depends on is named relative to the registry, and digested, so the
site's manifest can say which pages changed."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import PtregError
from ..records.attempt import Attempt, RegistryMeta
from ..records.graph import lineage_roots
from ..records.ledger import Summary
from ..records.run_results import RunResults
from ..store.directory import REGISTRY_FILE, load_meta
from ..store.evaluator_files import evaluator_files
from ..store.full_read import read_summarized
from ..store.runs import ENVIRONMENT_FILE, RESULTS_FILE, RUNS_DIR, apart_files_in, read_results, run_folder
from ..store.vocabulary_files import term_files

if TYPE_CHECKING:
    from ..store.reader import RegistryReader

ABSENT = "absent"


class Inputs:
    """The registry as the site reads it, each file read at most once."""

    def __init__(self, index: RegistryReader):
        self.index = index
        self.root: Path = index.root
        self.summaries: list[Summary] = index.summaries()
        self.by_id: dict[str, Summary] = {s.id: s for s in self.summaries}
        self.problems: list[tuple[str, str]] = index.problems()
        self._hashes = index.hashes()
        self._attempts: dict[str, Attempt | None] = {}
        self._results: dict[tuple[str, str], RunResults | str] = {}
        self._meta: RegistryMeta | None = None
        self._registry_files: list[str] | None = None
        self._runs: dict[str, list[tuple[str, str]]] = index.all_runs()
        self.evaluators: dict[str, Path] = {p.name.removesuffix(".json"): p for p in evaluator_files(self.root)}
        # each lineage (an attempt, its ancestors, what varies them) keyed by its root's id
        roots = lineage_roots(self.by_id)
        self.tree_of: dict[str, str] = roots
        self.trees: dict[str, list[str]] = {}
        for s in self.summaries:
            self.trees.setdefault(roots.get(s.id, s.id), []).append(s.id)

    @property
    def meta(self) -> RegistryMeta:
        if self._meta is None:
            self._meta = load_meta(self.root)
        return self._meta

    def record_name(self, attempt_id: str) -> str:
        return f"{self.by_id[attempt_id].stem or attempt_id}.json"

    def attempt(self, attempt_id: str) -> Attempt | None:
        """The whole record, or None when its file no longer holds it (changed while read)."""
        if attempt_id not in self._attempts:
            try:
                self._attempts[attempt_id] = read_summarized(self.root, self.by_id.get(attempt_id))
            except PtregError:
                self._attempts[attempt_id] = None
        return self._attempts[attempt_id]

    def runs(self, attempt_id: str) -> list[tuple[str, str]]:
        """(run id, status) of the attempt's linked runs, in the order they were linked."""
        return self._runs.get(attempt_id, [])

    def results(self, attempt_id: str, run_id: str) -> RunResults | str:
        """The run's results, or why they cannot be read."""
        key = (attempt_id, run_id)
        if key not in self._results:
            try:
                self._results[key] = read_results(run_folder(self.root, attempt_id, run_id), self.root)
            except PtregError as exc:
                self._results[key] = exc.message
        return self._results[key]

    def run_files(self, attempt_id: str, run_id: str) -> list[str]:
        folder = f"{RUNS_DIR}/{attempt_id}/{run_id}"
        apart = apart_files_in(run_folder(self.root, attempt_id, run_id))
        return [f"{folder}/{RESULTS_FILE}", f"{folder}/{ENVIRONMENT_FILE}", *(f"{folder}/{name}" for name in apart)]

    def file_hash(self, name: str) -> str:
        """SHA-256 of a registry file's bytes: as the index has just checked it for a record,
        read here for the rest (runs, evaluators)."""
        known = self._hashes.get(name)
        if known is not None:
            return known
        try:
            with open(os.path.join(self.root, name), "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
        except OSError:
            digest = ABSENT
        self._hashes[name] = digest
        return digest

    def digest(self, names: Iterable[str], *extra: str) -> str:
        """One digest of the named files' contents (and of ``extra`` strings)."""
        h = hashlib.sha256()
        for name in sorted(set(names)):
            h.update(f"{name}\0{self.file_hash(name)}\n".encode())
        for value in extra:
            h.update(f"{value}\n".encode())
        return h.hexdigest()

    def registry_files(self) -> list[str]:
        """The files the vocabularies are read from: ``registry.json`` and every term file, so
        that a term added, defined or removed rebuilds the pages that show it."""
        if self._registry_files is None:
            terms = [p.relative_to(self.root).as_posix() for _, p in term_files(self.root)]
            self._registry_files = [REGISTRY_FILE, *terms]
        return self._registry_files
