"""What a killed ptreg can leave behind in a registry directory.

Every write is atomic, so a kill never leaves a partial record; what it can leave is:
- an orphaned run: the run folder is complete (it is renamed into place whole) but the kill
  came before the attempt's link was written, or the run found the registry locked for too
  long at its end and kept its folder unlinked. Linking it is what the run would have done;
  but never into an attempt concluded since: such a run is kept apart, unlinked, and reported.
- a staged file (``.<name>.<random>.tmp``) or a run's staging folder (``.tmp-<run>-<pid>``),
  from a write killed before its rename. It never became part of the registry.
- an import's journal, which any command finishes on its own (``journal.recover``).
- a run's in-progress folder (``.running-<run>``, ``rounds_journal.py``) whose ptreg is gone: after
  its run was written, an empty leftover; before, the journal of a lost run, which
  ``ptreg run ID --resume`` continues and repair leaves alone.

`ptreg validate` reports these as warnings, never errors: none of them blocks work, and
`ptreg repair` (``operations/repair.py``) puts them right. A symlink where run folders are kept
is no leftover of ptreg's but planted: an error, which repair leaves for a person.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PtregError
from ..records.attempt import Attempt
from ..records.vocabulary import VOCABULARIES
from .evaluator_files import evaluators_dir
from .jsonio import STAGED_NAME
from .locks import run_in_progress
from .names import VOCABULARY_DIR
from .rounds_journal import has_journal, read_journal, running_run_id, written
from .runs import RUNS_DIR, STAGING_PREFIX, check_folder, runs_dir


@dataclass
class Leftover:
    kind: str  # orphaned-run | staged-file | staging-folder | in-progress-folder | lost-run | symlink
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


def find_leftovers(root: Path, attempts: Iterable[Attempt]) -> list[Leftover]:
    """What killed writes left in ``root``, given its valid attempts."""
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
    by_id = {a.id: a for a in attempts}
    if (root / RUNS_DIR).is_symlink():
        return [*found, _foreign(root / RUNS_DIR, "the runs folder")]
    for attempt_dir in _entries(root / RUNS_DIR):
        if attempt_dir.is_symlink() and not attempt_dir.name.startswith("."):
            found.append(_foreign(Path(attempt_dir.path), f"the run folders of {attempt_dir.name!r}"))
        if attempt_dir.name.startswith(".") or not attempt_dir.is_dir(follow_symlinks=False):
            continue
        found.extend(_in_runs_of(root, attempt_dir.name, by_id.get(attempt_dir.name)))
    return found


def _foreign(path: Path, where: str) -> Leftover:
    """A symlink where ptreg keeps run folders: never written by ptreg, never followed (nor
    bundled: ``export --bundle`` refuses it), and not ptreg's to remove."""
    return Leftover(
        "symlink",
        path,
        f"a symlink where ptreg keeps {where}, to {os.readlink(path)}; ptreg never follows one (and "
        "`export --bundle` refuses it): move it away, and put what it leads to in its place if it is this registry's",
        fixable=False,
    )


def orphaned_runs(root: Path, attempt: Attempt) -> list[Leftover]:
    """The run folders of ``attempt`` that it does not link, oldest first (none through a
    symlinked folder, which ``find_leftovers`` never lists either)."""
    if runs_dir(root, attempt.id).is_symlink():
        return []
    return [x for x in _in_runs_of(root, attempt.id, attempt) if x.kind == "orphaned-run"]


def _in_runs_of(root: Path, attempt_id: str, attempt: Attempt | None) -> list[Leftover]:
    """What is left in ``runs/<attempt_id>/``; ``attempt`` is None when no valid attempt has the id."""
    found: list[Leftover] = []
    linked = {r.run_id for r in (attempt.runs or ())} if attempt is not None else set()
    for run_dir in _entries(runs_dir(root, attempt_id)):
        path = Path(run_dir.path)
        if run_dir.is_symlink() and not run_dir.name.startswith("."):
            found.append(_foreign(path, f"a run folder of {attempt_id!r}"))
        if not run_dir.is_dir(follow_symlinks=False):
            continue
        if run_dir.name.startswith(STAGING_PREFIX):
            # a run writing its folder holds its run lock: what it stages is no leftover
            if not run_in_progress(root, attempt_id):
                found.append(
                    Leftover(
                        "staging-folder",
                        path,
                        "a run folder whose writing was killed before it was renamed into place",
                        attempt_id,
                    )
                )
        elif running_run_id(run_dir.name) is not None:
            # a run measuring holds its run lock: its folder is no leftover
            if not run_in_progress(root, attempt_id):
                found.append(_lost(root, path, attempt_id, running_run_id(run_dir.name)))
        elif not run_dir.name.startswith(".") and run_dir.name not in linked:
            found.append(_orphan(root, path, attempt_id, run_dir.name, attempt))
    return found


def _lost(root: Path, path: Path, attempt_id: str, run_id: str | None) -> Leftover:
    """The in-progress folder of a run whose ptreg is gone. Once its run was written, or when it
    measured no round, only the folder is left, which repair removes; otherwise it holds the
    journal of a run lost before it was written, which ``ptreg run ID --resume`` continues and
    repair never deletes."""
    assert run_id is not None
    try:
        rounds = 0 if written(root, attempt_id, run_id) or not has_journal(path) else len(read_journal(path).rounds)
    except PtregError as exc:
        return Leftover(
            "lost-run",
            path,
            f"the in-progress folder of run {run_id} of {attempt_id}, whose journal cannot be read ({exc.message}); "
            "move it away",
            attempt_id,
            run_id,
            fixable=False,
        )
    if rounds == 0:
        return Leftover(
            "in-progress-folder",
            path,
            f"the in-progress folder of run {run_id}, which was written or measured no round; only the folder was left",
            attempt_id,
            run_id,
        )
    return Leftover(
        "lost-run",
        path,
        f"the journal of run {run_id} of {attempt_id} ({rounds} round(s) of an arm measured), whose ptreg was stopped "
        f"before it wrote the run: `ptreg run {attempt_id} --resume` continues it (or move the folder away)",
        attempt_id,
        run_id,
        fixable=False,
    )


def _orphan(root: Path, path: Path, attempt_id: str, run_id: str, attempt: Attempt | None) -> Leftover:
    if attempt is None:
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
    if attempt.status != "not-tried":
        return Leftover(
            "orphaned-run",
            path,
            f"run {run_id} of {attempt_id} is kept apart, unlinked: {attempt_id} was concluded "
            f"(status {attempt.status}) without it, and a concluded record gains no run. Its numbers "
            f"count only under a new attempt (`ptreg new --varied-from {attempt_id}`); move the folder away to clear this",
            attempt_id,
            run_id,
            fixable=False,
        )
    return Leftover(
        "orphaned-run",
        path,
        f"a complete run that {attempt_id} does not link (its writer was killed, or found the registry "
        "locked, before the link); `ptreg repair` links it",
        attempt_id,
        run_id,
    )
