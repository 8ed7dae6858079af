"""A run in progress: its folder ``runs/<attempt id>/.running-<run id>/`` and the journal of
what it measured, ``samples.jsonl``.

The folder (made by ``progress.py``, which keeps ``progress.json`` there) exists from the run's
start until its run folder is written, and is then removed; one left behind with a journal of
rounds belongs to a ptreg that was killed (or lost with its machine) before it wrote its run,
and ``ptreg run ID --resume`` continues from it. It is never used through a symlink or when its
name holds anything but a folder of this user.

The journal is JSON lines: a head (``records/run_journal.py`` JournalHead), written whole when
the run starts, then one line per arm and round measured whole, appended and fsynced before the
next repeat is asked for. Read back, it is hostile input like any file: bounded in size, each
line parsed and validated on its own; a torn or unreadable last line (a write the kill cut
short) is skipped with a note, any other bad line refuses the journal, naming it and its line.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from pydantic import ValidationError

from ..errors import UnusableInput
from ..records.problems import first_schema_error
from ..records.refs import RUN_ID_PATTERN
from ..records.run_journal import JOURNAL_VERSION, JournalHead, JournalRound
from .jsonio import JsonError, create_text_exclusive, fsync_directory, parse_json
from .names import RUNNING_PREFIX
from .progress import folder_problem, in_progress_folder
from .runs import RUN_FILE_MAX_BYTES, run_folder, runs_dir
from .workfiles import ForeignFile, open_working_file, read_working_file

JOURNAL_FILE = "samples.jsonl"
# A journal holds a run's samples, which results.json (with what it keeps apart) holds too.
JOURNAL_MAX_BYTES = 4 * RUN_FILE_MAX_BYTES
_ADVICE = "move it away; ptreg makes the folders of runs in progress itself"


def running_run_id(name: str) -> str | None:
    """The run id of an in-progress folder's name; None for any other name."""
    if not name.startswith(RUNNING_PREFIX):
        return None
    run_id = name[len(RUNNING_PREFIX) :]
    return run_id if re.fullmatch(RUN_ID_PATTERN, run_id) else None


def _check_folder(folder: Path) -> None:
    problem = folder_problem(folder)
    if problem is not None:
        raise ForeignFile(folder, problem, _ADVICE)


def remove_folder(root: Path, attempt_id: str, run_id: str) -> None:
    """The in-progress folder gone (its run is written, or it never measured anything); a
    symlink in its place is left alone, not followed."""
    folder = in_progress_folder(root, attempt_id, run_id)
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(folder)
        fsync_directory(folder.parent)


class Journal:
    """The journal of one run, open for appending for the length of the run."""

    def __init__(self, folder: Path, head: JournalHead):
        self.path = folder / JOURNAL_FILE
        self.rounds = 0  # lines of rounds appended
        create_text_exclusive(self.path, head.model_dump_json() + "\n")
        self._fd: int | None = open_working_file(self.path, os.O_WRONLY | os.O_APPEND, _ADVICE)

    def append(self, line: JournalRound) -> None:
        """One round of one arm, on disk before this returns. A journal that cannot be written
        (a full disk) stops there, its last line torn at worst (which a reader leaves out): the
        measurement goes on and is written whole at its end; only a resume after a crash would
        lack the rounds that follow."""
        if self._fd is None:
            return
        data = (line.model_dump_json(exclude_none=True) + "\n").encode()
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError:
            self.close()
            return
        self.rounds += 1

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass
class JournalRead:
    """A journal as read back: its head, its rounds, and a note of a last line left out."""

    head: JournalHead
    rounds: list[JournalRound] = field(default_factory=list)
    note: str | None = None


def read_journal(folder: Path) -> JournalRead:
    """The journal of an in-progress folder, every line checked (module docstring)."""
    _check_folder(folder)
    path = folder / JOURNAL_FILE
    data = read_working_file(path, JOURNAL_MAX_BYTES, _ADVICE)
    if data is None:
        raise UnusableInput(f"{path}: no such file; the run left no journal to continue from")
    lines = data.split(b"\n")
    whole = data.endswith(b"\n")
    if whole:
        lines.pop()
    read: JournalRead | None = None
    for number, raw in enumerate(lines, 1):
        last = number == len(lines)
        try:
            entry = _line(raw, f"{path} line {number}", JournalRound if number > 1 else JournalHead)
        except UnusableInput as exc:
            if last and number > 1:  # a write the kill cut short, or one planted at the end
                assert read is not None
                read.note = f"{path} line {number} left out: {exc.message}"
                break
            raise
        if isinstance(entry, JournalHead):
            if entry.journal != JOURNAL_VERSION:
                raise UnusableInput(f"{path} line 1: journal version {entry.journal}, not {JOURNAL_VERSION}")
            read = JournalRead(entry)
        else:
            assert read is not None and isinstance(entry, JournalRound)
            read.rounds.append(entry)
    if read is None:
        raise UnusableInput(f"{path}: empty; the run left no journal to continue from")
    if not whole and read.note is None and read.rounds:  # the last line's newline never made it
        read.note = f"{path} line {len(lines)}: its line end was not written; its round is measured again"
        read.rounds.pop()
    return read


def _line(raw: bytes, where: str, model: type[JournalHead] | type[JournalRound]) -> JournalHead | JournalRound:
    try:
        value = parse_json(raw.decode("utf-8"), where)
    except UnicodeDecodeError:
        raise UnusableInput(f"{where}: not UTF-8 text") from None
    except JsonError as exc:
        raise UnusableInput(exc.message) from None
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise UnusableInput(first_schema_error(exc, where)) from None


def has_journal(folder: Path) -> bool:
    """Whether the folder holds a journal at all (a run killed as it started has none yet)."""
    return os.path.lexists(folder / JOURNAL_FILE)


def in_progress_runs(root: Path, attempt_id: str) -> Iterator[tuple[str, Path]]:
    """The run id and folder of each in-progress folder of the attempt (none through a
    symlinked folder of runs), oldest first."""
    parent = runs_dir(root, attempt_id)
    if parent.is_symlink():
        return
    try:
        names = sorted(os.listdir(parent))
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        run_id = running_run_id(name)
        if run_id is not None:
            yield run_id, parent / name


def this_process_started() -> float:
    return psutil.Process().create_time()


def written(root: Path, attempt_id: str, run_id: str) -> bool:
    """Whether the run's folder is written (its in-progress folder is then only left to remove)."""
    return os.path.lexists(run_folder(root, attempt_id, run_id))
