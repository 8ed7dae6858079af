"""All-or-nothing changes of many files: staged files, a journal, then the renames.

An import writes every record to a temporary file first (fsynced), then writes the journal,
which lists each rename still to do. The journal's own atomic rename is the commit point:
killed before it, the registry holds none of the new files (the staged ones are leftovers
that `ptreg repair` removes); killed after it, the next ptreg command to open the registry
finishes the renames before it reads anything, as SQLite finishes a hot journal. Either way
every command sees all of the import or none of it, and records it did not touch keep every
byte.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import UnusableInput
from ..text import printable
from .faults import crash_point
from .jsonio import STAGED_NAME, atomic_write_text, decode_json, dumps_pretty, fsync_directory
from .locks import registry_lock
from .names import JOURNAL_FILE
from .workfiles import check_working_file, inside, read_working_file

JOURNAL_VERSION = 1
# An import of 100,000 records lists about 10 MB of renames.
JOURNAL_MAX_BYTES = 256 * 1024 * 1024
# What a journal may name: staged files are plain names in the registry root; a target is a JSON
# file in it or in a folder below it (a bundle's evaluators and runs), never through "..".
_TARGET = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._@-]*/)*[^/\x00.][^/\x00]*\.json")


def commit(root: Path, renames: list[tuple[str, str]], operation: str) -> None:
    """Rename each staged file (a name in ``root``) over its target, all of them or none."""
    journal = root / JOURNAL_FILE
    check_working_file(journal, "move it away and run `ptreg validate`")
    _check(root, renames, str(journal))  # before the commit point: a refusal leaves no journal behind
    atomic_write_text(
        journal,
        dumps_pretty(
            {
                "journal_version": JOURNAL_VERSION,
                "operation": operation,
                "pid": os.getpid(),
                "renames": [[staged, target] for staged, target in renames],
            }
        ),
    )
    _roll_forward(root, renames, str(journal))
    _finish(journal)


def _check(root: Path, renames: list[tuple[str, str]], what: str) -> None:
    """Refuse renames that would leave ``root``: both paths are checked to stay inside it
    (``workfiles.inside``: a target may be a symlinked record, which the rename replaces, but no
    folder on its way may be a symlink), and a staged name must hold a regular file of ours or
    nothing (renamed already), so that a journal can neither move a symlink among the records
    nor write through a symlinked folder."""
    for staged, target in renames:
        inside(root, target, what, link_at_end=True)
        check_working_file(inside(root, staged, what), "move it away and run `ptreg validate`")


def _roll_forward(root: Path, renames: list[tuple[str, str]], what: str) -> None:
    """Each staged file renamed over its target, once ``_check`` holds for all of them."""
    _check(root, renames, what)
    folders = {(root / target).parent for _, target in renames} - {root}
    for staged, target in renames:
        (root / target).parent.mkdir(parents=True, exist_ok=True)
        destination = inside(root, target, what, link_at_end=True)  # its folders now exist, and are real ones
        with contextlib.suppress(FileNotFoundError):  # renamed before the crash: a rename consumes it
            os.replace(root / staged, destination)
        crash_point()
    for folder in sorted(folders):
        fsync_directory(folder)
    fsync_directory(root)


def _finish(journal: Path) -> None:
    os.unlink(journal)
    crash_point()
    fsync_directory(journal.parent)


def _renames(journal: Path) -> list[tuple[str, str]]:
    advice = "move it away and run `ptreg validate`"
    data = read_working_file(journal, JOURNAL_MAX_BYTES, advice)  # never through a symlink, never a folder
    if data is None:
        raise UnusableInput(f"{journal}: removed while ptreg was reading it; run the command again")
    raw: Any = decode_json(data, str(journal))
    pairs = raw.get("renames") if isinstance(raw, dict) and raw.get("journal_version") == JOURNAL_VERSION else None
    if not isinstance(pairs, list) or not all(
        isinstance(p, list)
        and len(p) == 2
        and all(isinstance(n, str) for n in p)
        and STAGED_NAME.fullmatch(p[0])
        and _TARGET.fullmatch(p[1])
        for p in pairs
    ):
        raise UnusableInput(
            f"{journal}: not a journal this ptreg wrote (version {JOURNAL_VERSION}); "
            "move it away and run `ptreg validate`"
        )
    return [(a, b) for a, b in pairs]


def recover(root: Path) -> int | None:
    """Finish a change that was cut short after its commit point; how many renames it listed.

    Called whenever a registry is opened. Without a journal this is one stat.
    """
    journal = root / JOURNAL_FILE
    if not os.path.lexists(journal):
        return None
    with registry_lock(root):
        if not os.path.lexists(journal):
            return None  # another process finished it while we waited
        renames = _renames(journal)
        _roll_forward(root, renames, str(journal))
        _finish(journal)
    print(
        f"ptreg: note: {printable(str(root))}: finished an import that was cut short ({len(renames)} files)",
        file=sys.stderr,
    )
    return len(renames)
