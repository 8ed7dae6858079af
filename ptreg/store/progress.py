"""Where a run stands while it measures: ``progress.json`` in its in-progress folder
``runs/<attempt id>/.running-<run id>/``, which exists from the run's start until its run folder
is written.

The run rewrites ``progress.json`` whole (``jsonio.atomic_write_text``) as its progress events
come, at most every ``WRITE_EVERY`` seconds unless the round changed. ``ptreg runs`` and the MCP
tool ``list_runs`` read every such folder of a registry. What they read is hostile like any
file: bounded, checked field by field, never followed through a symlink; and the process it
names is believed to be the run only while psutil shows that pid with the create time recorded
(a pid reused by another process, or a forged one, reads "process gone").

A detached run keeps its output in ``log.txt`` beside it (linked into the run folder when the
run is written, where no reader of a run folder looks); one submitted as a Ray job records the
job in ``job.json``, written once by the process that submitted it.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from ..clock import utc_now
from ..errors import PtregError, UnusableInput
from ..records.refs import RUN_ID_PATTERN, check_run_id
from ..text import printable
from .jsonio import JsonError, atomic_write_text, decode_json, dumps_pretty
from .locks import run_in_progress
from .names import RUNNING_PREFIX, RUNS_DIR
from .workfiles import ForeignFile, check_working_file, read_working_file

PROGRESS_FILE = "progress.json"
LOG_FILE = "log.txt"
JOB_FILE = "job.json"
PROGRESS_MAX_BYTES = 64 * 1024  # what ptreg writes there is well under 2 KiB
WRITE_EVERY = 0.5  # seconds between two writes, unless the round changed
LINE_MAX = 200  # characters of the last output line kept
TEXT_MAX = 300  # characters of any other text field kept
# The create time psutil reports is a float of the kernel's clock ticks: compared within this.
CREATE_TIME_SLACK = 0.01
_RUN_ID = re.compile(RUN_ID_PATTERN)
_ADVICE = "ptreg writes progress.json itself; move the folder away if it is not a run's"


def in_progress_folder(root: Path, attempt_id: str, run_id: str) -> Path:
    return root / RUNS_DIR / attempt_id / f"{RUNNING_PREFIX}{run_id}"


def make_in_progress_folder(root: Path, attempt_id: str, run_id: str) -> Path:
    """The run's in-progress folder, made (mode 0700) when absent; refused, touching nothing,
    when its name holds a symlink, a file or another user's folder."""
    folder = in_progress_folder(root, attempt_id, run_id)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    problem = folder_problem(folder)
    if problem is not None:
        raise UnusableInput(f"{folder}: {problem}; left alone")
    return folder


def folder_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot be a run's in-progress folder (a symlink, a file, another user's,
    not there); None when it can. The one check both its progress and its journal rely on."""
    try:
        info = os.lstat(folder)
    except OSError as exc:
        return f"cannot be examined ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return "is a symlink, and ptreg never follows one to a run in progress"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder, so not a run in progress"
    if info.st_uid != os.geteuid():
        return f"belongs to another user (uid {info.st_uid})"
    return None


def process_create_time(pid: int) -> float | None:
    """When the process ``pid`` started, as psutil tells it; None when there is none."""
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError, ValueError, OverflowError):
        return None


def alive(pid: int, created: float) -> bool:
    """Whether ``pid`` is the process recorded: there, and started when it was recorded to."""
    now = process_create_time(pid)
    return now is not None and abs(now - created) <= CREATE_TIME_SLACK


def clean_line(text: str, limit: int = LINE_MAX) -> str:
    """One line of output as progress keeps it: control characters out, at most ``limit`` characters."""
    flat = "".join(c if c.isprintable() else " " for c in text)
    flat = " ".join(flat.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


@dataclass
class ProgressWriter:
    """Rewrites ``progress.json`` of one run as its events come (``update``), at most every
    ``WRITE_EVERY`` seconds unless the round changed. A write that fails (the disk full, the
    folder removed) stops the writing, never the run: progress is a view, not evidence."""

    folder: Path
    attempt: str
    run_id: str
    started: str = field(default_factory=utc_now)
    pid: int = field(default_factory=os.getpid)
    clock: Callable[[], float] = time.monotonic
    state: dict[str, Any] = field(default_factory=dict)
    _begun: float = 0.0
    _written: float | None = None
    _broken: bool = False

    def __post_init__(self) -> None:
        self._begun = self.clock()
        created = process_create_time(self.pid)
        self.state = {
            "pid": self.pid,
            "created": created,
            "attempt": self.attempt,
            "run_id": self.run_id,
            "started": self.started,
            "phase": "starting",
            "round": None,
            "total": None,
            "elapsed": 0.0,
            "budget_left": None,
            "last_line": None,
            "updated": self.started,
        }

    def update(
        self,
        *,
        phase: str | None = None,
        round_: int | None = None,
        total: int | None = None,
        budget_left: float | None = None,
        line: str | None = None,
        force: bool = False,
    ) -> None:
        changed_round = round_ is not None and round_ != self.state["round"]
        if phase is not None:
            self.state["phase"] = clean_line(phase, TEXT_MAX)
        if round_ is not None:
            self.state["round"] = round_
        if total is not None:
            self.state["total"] = total
        if budget_left is not None and math.isfinite(budget_left):
            self.state["budget_left"] = round(max(budget_left, 0.0), 1)
        if line is not None and line.strip():
            self.state["last_line"] = clean_line(line)
        now = self.clock()
        if force or changed_round or self._written is None or now - self._written >= WRITE_EVERY:
            self.write(now)

    def write(self, now: float | None = None) -> None:
        if self._broken:
            return
        now = self.clock() if now is None else now
        self.state["elapsed"] = round(now - self._begun, 1)
        self.state["updated"] = utc_now()
        try:
            check_working_file(self.folder / PROGRESS_FILE, _ADVICE)
            atomic_write_text(self.folder / PROGRESS_FILE, dumps_pretty(self.state))
        except (OSError, PtregError):
            self._broken = True
            return
        self._written = now


@dataclass
class InProgress:
    """A run in progress as read from its folder: what ``ptreg runs`` lists."""

    attempt: str
    run_id: str
    folder: Path
    state: str  # running | starting | process gone | unreadable | written
    problem: str | None = None  # what made progress.json unreadable
    pid: int | None = None
    started: str | None = None
    phase: str | None = None
    round: int | None = None
    total: int | None = None
    elapsed: float | None = None
    budget_left: float | None = None
    last_line: str | None = None
    log: Path | None = None
    job: dict[str, str] | None = None  # a Ray job: its id, the cluster's address, and its state once asked

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "run_id": self.run_id,
            "state": self.state,
            "problem": self.problem,
            "pid": self.pid,
            "started": self.started,
            "phase": self.phase,
            "round": self.round,
            "total": self.total,
            "elapsed": self.elapsed,
            "budget_left": self.budget_left,
            "last_line": self.last_line,
            "folder": str(self.folder),
            "log": str(self.log) if self.log is not None else None,
            "job": self.job,
        }


def _checked(raw: Any, where: str) -> dict[str, Any]:
    """progress.json's fields, each of the type ptreg writes, or UnusableInput naming the first that is not."""
    if not isinstance(raw, dict):
        raise UnusableInput(f"{where}: not a JSON object")

    def text(name: str, limit: int = TEXT_MAX, *, required: bool = False) -> str | None:
        value = raw.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, str) or len(value) > limit:
            raise UnusableInput(f"{where}#/{name}: not a text of at most {limit} characters")
        return printable(value)

    def number(name: str, *, whole: bool = False) -> float | None:
        value = raw.get(name)
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (whole and not isinstance(value, int))
            or abs(value) > 2**53  # before isfinite, which overflows on an integer of hundreds of digits
            or not math.isfinite(value)
            or value < 0
        ):
            raise UnusableInput(f"{where}#/{name}: not a {'whole ' if whole else ''}number of at least 0")
        return value

    pid = raw.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**31:
        raise UnusableInput(f"{where}#/pid: not a process id")
    created = number("created")
    found = {
        "pid": pid,
        "created": created,
        "attempt": text("attempt", required=True),
        "run_id": text("run_id", required=True),
        "started": text("started"),
        "phase": text("phase"),
        "round": number("round", whole=True),
        "total": number("total", whole=True),
        "elapsed": number("elapsed"),
        "budget_left": number("budget_left"),
        "last_line": text("last_line", LINE_MAX),
    }
    return found


def read_job(folder: Path) -> dict[str, str] | None:
    """The Ray job a detached run was submitted as (``job.json``), or None; UnusableInput when unreadable."""
    path = folder / JOB_FILE
    data = read_working_file(path, PROGRESS_MAX_BYTES, _ADVICE)
    if data is None:
        return None
    try:
        raw = decode_json(data, str(path))
    except JsonError as exc:
        raise UnusableInput(exc.message) from None
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in ("job_id", "address")):
        raise UnusableInput(f"{path}: not an object of job_id and address")
    if any(len(raw[k]) > TEXT_MAX for k in ("job_id", "address")):
        raise UnusableInput(f"{path}: job_id or address longer than {TEXT_MAX} characters")
    return {"job_id": printable(raw["job_id"]), "address": printable(raw["address"])}


def write_job(folder: Path, job_id: str, address: str) -> None:
    check_working_file(folder / JOB_FILE, _ADVICE)
    atomic_write_text(folder / JOB_FILE, dumps_pretty({"job_id": job_id, "address": address, "submitted": utc_now()}))


def read_in_progress(folder: Path, attempt_id: str, run_id: str, now: datetime | None = None) -> InProgress:
    """The run in progress in ``folder``, as its files say and its process shows: never raises
    for what the folder holds (an unreadable file is the state "unreadable", naming it)."""
    found = InProgress(attempt_id, run_id, folder, "process gone")
    log = folder / LOG_FILE
    try:
        found.log = log if check_working_file(log, _ADVICE) else None
        found.job = read_job(folder)
        path = folder / PROGRESS_FILE
        data = read_working_file(path, PROGRESS_MAX_BYTES, _ADVICE)
        if data is None:
            return found  # the run made its folder and died, or has not written yet: its lock says which
        try:
            raw = decode_json(data, str(path))
        except JsonError as exc:
            raise UnusableInput(exc.message) from None
        fields = _checked(raw, str(path))
    except (PtregError, OSError) as exc:
        found.state = "unreadable"
        found.problem = exc.message if isinstance(exc, PtregError) else f"{folder}: {exc.strerror or exc}"
        return found
    if fields["attempt"] != attempt_id or fields["run_id"] != run_id:
        found.state = "unreadable"
        found.problem = (
            f"{folder / PROGRESS_FILE}: names run {fields['run_id']} of {fields['attempt']}, not its folder's"
        )
        return found
    for name in ("pid", "started", "phase", "round", "total", "elapsed", "budget_left", "last_line"):
        setattr(found, name, fields[name])
    created = fields["created"]
    if created is not None and alive(fields["pid"], created):
        found.state = "running"
        begun = _moment(fields["started"])
        if begun is not None:  # counted on from the start, not frozen at the last write
            found.elapsed = round(((now or datetime.now(UTC)) - begun).total_seconds(), 1)
    return found


def _moment(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def runs_in_progress(root: Path) -> list[InProgress]:
    """Every run in progress of the registry at ``root``: each attempt's ``.running-<run id>``
    folders, by attempt and run id. Symlinked folders, and names that are no run id, are not
    runs in progress and are left alone."""
    base = root / RUNS_DIR
    found: list[InProgress] = []
    for attempt_dir in _folders(base):
        for entry in _folders(base / attempt_dir):
            if not entry.startswith(RUNNING_PREFIX):
                continue
            run_id = entry[len(RUNNING_PREFIX) :]
            if not _RUN_ID.fullmatch(run_id):
                continue
            run = read_in_progress(base / attempt_dir / entry, attempt_dir, run_id)
            if run.state == "process gone" and run.pid is None and run_in_progress(root, attempt_dir):
                run.state = "starting"  # its lock is held: it has not written its progress yet
            if os.path.isdir(base / attempt_dir / run_id):
                run.state = "written"  # killed between writing its run folder and removing this one
            found.append(run)
    return found


def finish_in_progress(root: Path, attempt_id: str, run_id: str, written: Path) -> None:
    """The run is written to ``written``: its log goes with it (a second name of the same file,
    so that what the run still prints lands there too), and its in-progress folder goes."""
    folder = in_progress_folder(root, attempt_id, run_id)
    if folder_problem(folder) is not None:
        return  # none, or not one ptreg made: left alone
    log = folder / LOG_FILE
    with contextlib.suppress(OSError, PtregError):
        if check_working_file(log, _ADVICE):
            os.link(log, written / LOG_FILE, follow_symlinks=False)
    shutil.rmtree(folder, ignore_errors=True)


def _folders(directory: Path) -> list[str]:
    """The names of the real folders (no symlink) in ``directory``, sorted; none when it is not one."""
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(info.st_mode):
        raise ForeignFile(directory, "is not a folder (a symlink or a file)", "ptreg keeps its runs in a real folder")
    with os.scandir(directory) as entries:
        return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))


def claim_run_id(root: Path, attempt_id: str, run_id: str) -> Path:
    """The in-progress folder of a run given its id beforehand (``ptreg run --detach`` chose it),
    once the id is known to be fresh: no run folder has it, and its in-progress folder, if any,
    holds only what the detaching process left for this very process (its log, its Ray job, a
    progress.json naming this process). Anything else is refused in one line: a run id is never
    taken over from another run, finished, running or gone (`--resume` continues a gone one)."""
    check_run_id(run_id)
    if os.path.lexists(root / RUNS_DIR / attempt_id / run_id):
        raise UnusableInput(f"run {run_id} of {attempt_id} is already written; a run id is never reused")
    folder = in_progress_folder(root, attempt_id, run_id)
    if not os.path.lexists(folder):
        return make_in_progress_folder(root, attempt_id, run_id)
    problem = folder_problem(folder)
    if problem is not None:
        raise UnusableInput(f"{folder}: {problem}; left alone")
    with os.scandir(folder) as entries:
        others = sorted(e.name for e in entries if e.name not in (LOG_FILE, JOB_FILE, PROGRESS_FILE))
    if others:
        raise UnusableInput(f"{folder}: holds {', '.join(others)}, so run {run_id} was begun by another process")
    run = read_in_progress(folder, attempt_id, run_id)
    if run.state == "unreadable":
        raise UnusableInput(run.problem or f"{folder}: unreadable")
    if run.pid is not None and run.pid != os.getpid():
        raise UnusableInput(f"{folder}: run {run_id} belongs to process {run.pid}, not to this one")
    if run.pid is not None and run.state != "running":
        raise UnusableInput(f"{folder}: names this process's id with another start time (a forged or stale file)")
    return folder
