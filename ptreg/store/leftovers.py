"""What a killed ptreg can leave behind in a registry directory.

Every write is atomic, so a kill never leaves a partial record; what it can leave is:
- an orphaned run: the run folder is complete (it is renamed into place whole) but the kill
  came before the attempt's link was written. Linking it is what the run would have done.
- a staged file (``.<name>.<random>.tmp``) or a run's staging folder (``.tmp-<run>-<pid>``),
  from a write killed before its rename. It never became part of the registry.
- an import's journal, which any command finishes on its own (``journal.recover``).

`ptreg validate` reports these as warnings, never errors: none of them blocks work, and
`ptreg repair` (``operations/repair.py``) puts them right.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..records.attempt import Attempt
from ..records.vocabulary import VOCABULARIES
from .evaluator_files import evaluators_dir
from .jsonio import STAGED_NAME
from .names import VOCABULARY_DIR
from .runs import RUNS_DIR, STAGING_PREFIX, check_folder


@dataclass
class Leftover:
    kind: str  # orphaned-run | staged-file | staging-folder
    path: Path
    message: str
    attempt_id: str | None = None
    run_id: str | None = None
    fixable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": str(self.path),
            "message": self.message,
            "attempt": self.attempt_id,
            "run_id": self.run_id,
            "fixable": self.fixable,
        }


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def find_leftovers(root: Path, linked: dict[str, set[str]]) -> list[Leftover]:
    """What killed writes left in ``root``; ``linked`` maps each valid attempt to its linked run ids."""
    found: list[Leftover] = []
    # a symlinked term folder is never listed: reading the vocabularies refuses it
    terms = [root / VOCABULARY_DIR / v for v in VOCABULARIES if not (root / VOCABULARY_DIR / v).is_symlink()]
    for directory in (root, evaluators_dir(root), *([] if (root / VOCABULARY_DIR).is_symlink() else terms)):
        for entry in _entries(directory):
            if STAGED_NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                found.append(
                    Leftover(
                        "staged-file",
                        Path(entry.path),
                        "a staged file of a write that was killed before its rename; never part of the registry",
                    )
                )
    for attempt_dir in _entries(root / RUNS_DIR):
        if attempt_dir.name.startswith(".") or not attempt_dir.is_dir(follow_symlinks=False):
            continue
        attempt_id = attempt_dir.name
        for run_dir in _entries(Path(attempt_dir.path)):
            path = Path(run_dir.path)
            if not run_dir.is_dir(follow_symlinks=False):
                continue
            if run_dir.name.startswith(STAGING_PREFIX):
                found.append(
                    Leftover(
                        "staging-folder",
                        path,
                        "a run folder whose writing was killed before it was renamed into place",
                        attempt_id,
                    )
                )
            elif not run_dir.name.startswith(".") and run_dir.name not in linked.get(attempt_id, set()):
                found.append(_orphan(root, path, attempt_id, run_dir.name, attempt_id in linked))
    return found


def _orphan(root: Path, path: Path, attempt_id: str, run_id: str, attempt_known: bool) -> Leftover:
    if not attempt_known:
        return Leftover(
            "orphaned-run",
            path,
            f"run folder of {attempt_id!r}, which is not a valid attempt of this "
            "registry; restore the attempt or move the folder away",
            attempt_id,
            run_id,
            fixable=False,
        )
    broken = check_folder(root, attempt_id, run_id)
    if broken is not None:
        return Leftover(
            "orphaned-run",
            path,
            f"run folder not linked from {attempt_id} and not a whole run ({broken}); move it away",
            attempt_id,
            run_id,
            fixable=False,
        )
    return Leftover(
        "orphaned-run",
        path,
        f"a complete run that {attempt_id} does not link (the writer was killed "
        "before the link); `ptreg repair` links it",
        attempt_id,
        run_id,
    )


def linked_runs(attempts: Iterable[Attempt]) -> dict[str, set[str]]:
    return {a.id: {r.run_id for r in (a.runs or ())} for a in attempts}
