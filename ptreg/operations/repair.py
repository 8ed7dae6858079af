"""`ptreg repair`: put right what a killed ptreg left behind (``store/leftovers.py`` finds it).

A cut-short import is finished, an orphaned run is linked exactly as its run would have linked
it, and staged files and folders that never became part of the registry are removed.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..store.directory import load_directory, load_meta
from ..store.journal import recover
from ..store.leftovers import Leftover, find_leftovers, linked_runs
from ..store.locks import registry_lock
from ..store.runs import read_results
from .run import link_run


@dataclass
class RepairReport:
    journal_renames: int | None
    linked: list[Leftover] = field(default_factory=list)
    removed: list[Leftover] = field(default_factory=list)
    left: list[Leftover] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "journal_renames": self.journal_renames,
            "linked": [x.to_json() for x in self.linked],
            "removed": [x.to_json() for x in self.removed],
            "left": [x.to_json() for x in self.left],
        }


def repair(root: Path, dry_run: bool = False) -> RepairReport:
    """Finish a cut-short import, link orphaned runs (oldest first), remove staged leftovers.

    Under the registry lock, so nothing it removes can belong to a write in progress: every
    writer stages its files only while it holds that lock.
    """
    load_meta(root)  # a registry, not just a directory; finishes a journal first
    with registry_lock(root):
        report = RepairReport(journal_renames=None if dry_run else recover(root))
        registry = load_directory(root)
        for leftover in find_leftovers(root, linked_runs(registry.attempts)):
            if not leftover.fixable:
                report.left.append(leftover)
            elif leftover.kind == "orphaned-run":
                if not dry_run:
                    assert leftover.attempt_id is not None
                    link_run(root, leftover.attempt_id, read_results(leftover.path))
                report.linked.append(leftover)
            else:
                if not dry_run:
                    if leftover.kind == "staging-folder":
                        shutil.rmtree(leftover.path)
                    else:
                        os.unlink(leftover.path)
                report.removed.append(leftover)
    return report
