"""`ptreg repair`: put right what a killed ptreg left behind (``store/leftovers.py`` finds it),
and bring an older registry up to date.

A cut-short import is finished, an orphaned run is linked exactly as its run would have linked
it (but never into an attempt concluded since: that run is kept apart and reported), and staged
files and folders that never became part of the registry are removed. Sources
that older versions wrote relative to the git repository are rewritten relative to the registry
directory, as every source is now.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.environment import git_state
from ..records.attempt import Attempt
from ..store.directory import (
    IGNORE_FILE,
    ignore_file_lacks_index,
    load_directory,
    load_meta,
    upgrade_ignore_file,
    write_attempt,
    write_ignore_file,
)
from ..store.journal import recover
from ..store.leftovers import Leftover, find_leftovers
from ..store.locks import registry_lock
from ..store.runs import read_results
from ..store.vocabulary_files import is_old_layout, migrate
from .running import link_runs


@dataclass(frozen=True)
class MovedSource:
    attempt_id: str
    field: str
    old: str
    new: str

    def to_json(self) -> dict[str, Any]:
        return {"attempt": self.attempt_id, "field": self.field, "old": self.old, "new": self.new}


@dataclass
class RepairReport:
    journal_renames: int | None
    linked: list[Leftover] = field(default_factory=list)
    removed: list[Leftover] = field(default_factory=list)
    left: list[Leftover] = field(default_factory=list)
    sources: list[MovedSource] = field(default_factory=list)
    ignore_file: bool = False  # whether the registry gained its .gitignore
    migrated: bool = False  # whether its vocabularies moved out of registry.json into term files

    def to_json(self) -> dict[str, Any]:
        return {
            "ignore_file": self.ignore_file,
            "migrated": self.migrated,
            "journal_renames": self.journal_renames,
            "linked": [x.to_json() for x in self.linked],
            "removed": [x.to_json() for x in self.removed],
            "left": [x.to_json() for x in self.left],
            "sources": [x.to_json() for x in self.sources],
        }


def repair(root: Path, dry_run: bool = False) -> RepairReport:
    """Finish a cut-short import, link orphaned runs of attempts not concluded (oldest first),
    remove staged leftovers, rewrite sources relative to the registry, move an older registry's
    vocabularies into term files (``store/vocabulary_files.py:migrate``).

    Under the registry lock, so nothing it removes can belong to a write in progress: every
    writer stages its files only while it holds that lock, but for a run that found the lock
    busy at its end, which stages its folder under its run lock, and whose staging folder
    ``find_leftovers`` therefore leaves out while that lock is held.
    """
    load_meta(root)  # a registry, not just a directory; finishes a journal first
    with registry_lock(root):
        report = RepairReport(journal_renames=None if dry_run else recover(root))
        # first: every write below needs the layout with term files
        report.migrated = is_old_layout(root) if dry_run else migrate(root)
        registry = load_directory(root)
        for leftover in find_leftovers(root, registry.attempts):
            if not leftover.fixable:
                report.left.append(leftover)
            elif leftover.kind == "orphaned-run":
                if not dry_run:
                    assert leftover.attempt_id is not None
                    link_runs(root, leftover.attempt_id, [read_results(leftover.path, root)])
                report.linked.append(leftover)
            else:
                if not dry_run:
                    if leftover.kind in ("staging-folder", "in-progress-folder"):
                        shutil.rmtree(leftover.path)
                    else:
                        os.unlink(leftover.path)
                report.removed.append(leftover)
        for attempt in load_directory(root).attempts:
            updated, moved = _relative_to_registry(root, attempt)
            if moved and not dry_run:
                write_attempt(root, updated)
            report.sources.extend(moved)
        if not (root / IGNORE_FILE).exists():
            report.ignore_file = dry_run or write_ignore_file(root)
        elif ignore_file_lacks_index(root):  # written before the query index existed
            if not dry_run:
                upgrade_ignore_file(root)
            report.ignore_file = True
    return report


def _relative_to_registry(root: Path, attempt: Attempt) -> tuple[Attempt, list[MovedSource]]:
    """The attempt with every local source that exists only relative to the git repository
    rewritten relative to the registry directory; a source found neither way is left alone."""
    top = git_state(root)["repository"]
    if top is None:
        return attempt, []
    moved: list[MovedSource] = []

    def relative(field: str, source: str) -> str:
        path, hash_, fragment = source.partition("#")
        if "://" in path or not path or (root / path).exists() or not (Path(top) / path).exists():
            return source
        new = os.path.relpath(Path(top) / path, root).replace(os.sep, "/") + hash_ + fragment
        moved.append(MovedSource(attempt.id, field, source, new))
        return new

    sources = [relative("evidence_sources", s) for s in attempt.evidence_sources or ()]
    source = relative("source", attempt.source) if attempt.source is not None else None
    if not moved:
        return attempt, []
    return attempt.model_copy(update={"evidence_sources": sources or None, "source": source}), moved
