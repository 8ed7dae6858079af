"""Locks: one writer at a time per registry, and one run at a time per attempt.

The registry lock is held around every read-modify-write (new, conclude, import, freeze, a
run's files and link, repair), briefly; a long measurement holds only its attempt's run lock,
so runs of different attempts proceed side by side. Both are ``flock`` locks: the kernel
releases them when their process dies, even by SIGKILL, so a killed ptreg never blocks the
next one. A lock file is a working file (``workfiles.py``): opened without following a
symlink, never truncated, and refused when its name holds anything but a regular file of ours. Beside each lock a holder file names the process
(pid, command, time). It is removed on release, so finding one on acquiring means the last
holder was killed mid-write: ptreg says so and what to check. When a lock stays busy, the
message names the holder and what to do.

One model for threads and processes alike: a hold is a descriptor of the lock file opened by
the thread that takes it, and ``flock`` locks belong to that open file description, so two
threads of one process (the MCP server's tool calls) exclude each other exactly as two
processes do. Only the thread that holds a lock may take it again (a command that holds the
registry lock calls library code that takes it too); that re-entrancy is kept per thread.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Any

from ..clock import utc_now
from ..errors import LockBusy, PtregError, UnusableInput
from ..records.refs import check_id
from ..text import printable
from .index import update_after_write
from .jsonio import atomic_write_text
from .workfiles import ForeignFile, check_working_file, open_working_file, read_working_file

LOCK_FILE = ".ptreg.lock"
HOLDER_SUFFIX = ".holder"
TIMEOUT_ENV = "PTREG_LOCK_TIMEOUT"
DEFAULT_TIMEOUT = 60.0  # seconds; every registry write is short, a wait this long means trouble

POLL_S = 0.05  # how often a busy lock is tried again while waiting for it
HOLDER_WAITS = 4  # polls for the holder file of a lock found busy, to name who holds it
HOLDER_MAX_BYTES = 64 * 1024


class _Holds(threading.local):
    """The locks the current thread holds: path -> (descriptor, depth). Never shared between
    threads: another thread's hold is a lock to wait for, not one to enter again."""

    def __init__(self) -> None:
        self.held: dict[str, tuple[int, int]] = {}


_holds = _Holds()


def _warn(message: str) -> None:
    print(f"ptreg: warning: {printable(message)}", file=sys.stderr)  # it quotes the holder file


def timeout_seconds() -> float:
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise UnusableInput(f"{TIMEOUT_ENV}={raw!r}: not a number of seconds") from None
    if not (0 <= value < float("inf")):
        raise UnusableInput(f"{TIMEOUT_ENV}={raw!r}: must be zero or a positive number of seconds")
    return value


def _holder_of(lock_path: Path) -> dict[str, Any] | None:
    """What the holder file says, when it is one of ours (a symlink or a pipe is never read)."""
    try:
        data = read_working_file(Path(str(lock_path) + HOLDER_SUFFIX), HOLDER_MAX_BYTES)
        raw = json.loads(data) if data is not None else None
    except (PtregError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def _alive(pid: Any) -> bool | None:
    if not isinstance(pid, int) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def describe_holder(holder: dict[str, Any] | None) -> str:
    if holder is None:
        return "an unknown process"
    command = " ".join(str(a) for a in holder.get("command", [])) or "?"
    return f"pid {holder.get('pid')} on {holder.get('host')} (`{command}`, since {holder.get('since')})"


def _write_holder(lock_path: Path, fd: int) -> None:
    path = Path(str(lock_path) + HOLDER_SUFFIX)
    check_working_file(path, "remove it; ptreg writes its holder files itself")
    locked = os.fstat(fd)
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": ["ptreg", *sys.argv[1:]],
        "since": utc_now(),
        "file": [locked.st_dev, locked.st_ino],  # the lock file it holds, which its name may stop naming
    }
    atomic_write_text(path, json.dumps(holder) + "\n")


def _holds_another(holder: dict[str, Any], fd: int) -> bool:
    """Whether a holder file left beside the lock names a live holder of another file than the
    one ``fd`` locked: the lock file was deleted (or replaced) while it held it, and that holder
    holds it still."""
    locked = os.fstat(fd)
    if holder.get("file") in (None, [locked.st_dev, locked.st_ino]) or holder.get("host") != socket.gethostname():
        return False
    return _alive(holder.get("pid")) is True


@contextmanager
def _locked(
    lock_path: Path,
    timeout: float,
    busy: Callable[[dict[str, Any] | None, float], str],
    stale: Callable[[dict[str, Any]], str],
    released: Callable[[], None] | None = None,
    folder: Path | None = None,
) -> Iterator[None]:
    """Hold ``lock_path`` (and, when given, ``folder`` too, locked after it); ``released`` runs
    before the outermost hold of this thread lets go (so what it does is still covered by the
    lock)."""
    held = _holds.held
    key = os.path.realpath(lock_path)
    if key in held:
        fd, depth = held[key]
        held[key] = (fd, depth + 1)
        try:
            yield
        finally:
            fd, depth = held[key]
            held[key] = (fd, depth - 1)
        return
    begun = time.monotonic()
    fd = _acquire(lock_path, timeout, busy)
    folder_fd = None
    if folder is not None:
        try:
            folder_fd = _acquire_folder(folder, lock_path, timeout, busy, begun)
        except BaseException:
            os.close(fd)
            raise
    held[key] = (fd, 1)
    written = False
    try:
        previous = _holder_of(lock_path)
        if previous is not None and _holds_another(previous, fd):
            raise LockBusy(busy(previous, time.monotonic() - begun), str(lock_path), describe_holder(previous), 0.0)
        if previous is not None:
            _warn(stale(previous))
        _write_holder(lock_path, fd)
        written = True
        yield
        if released is not None:
            released()
    finally:
        del held[key]
        if written:  # never what was under the name before (it may not be ours)
            with suppress(OSError):
                os.unlink(str(lock_path) + HOLDER_SUFFIX)
        if folder_fd is not None:
            os.close(folder_fd)
        os.close(fd)  # releases the flock


def _acquire(lock_path: Path, timeout: float, busy: Callable[[dict[str, Any] | None, float], str]) -> int:
    """The descriptor of ``lock_path``, flocked exclusively, waiting up to ``timeout`` seconds.
    Opened without O_TRUNC and without following a symlink: a lock file's name pointing at
    another file must not empty or lock that file."""
    advice = "remove it; ptreg makes its lock files itself"
    try:
        fd = open_working_file(lock_path, os.O_RDWR | os.O_CREAT, advice)
    except ForeignFile:
        raise
    except OSError as exc:
        raise UnusableInput(f"{lock_path}: cannot lock: {exc.strerror or exc}") from None
    _wait_for(fd, lock_path, timeout, busy)
    return fd


def _acquire_folder(
    folder: Path, lock_path: Path, timeout: float, busy: Callable[[dict[str, Any] | None, float], str], begun: float
) -> int:
    """A descriptor of ``folder``, flocked exclusively after ``lock_path`` was: a lock file can
    be deleted while it is held (by hand, as a stale one), and the next writer would lock the
    new file of that name beside the first; a folder that holds the registry cannot be."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise UnusableInput(f"{folder}: cannot lock: {exc.strerror or exc}") from None
    _wait_for(fd, lock_path, timeout, busy, begun)
    return fd


def _wait_for(
    fd: int,
    lock_path: Path,
    timeout: float,
    busy: Callable[[dict[str, Any] | None, float], str],
    begun: float | None = None,
) -> None:
    """``flock`` ``fd`` exclusively, waiting until ``timeout`` seconds after ``begun`` (now when
    not given); LockBusy naming the holder of ``lock_path`` then (``fd`` closed)."""
    begun = time.monotonic() if begun is None else begun
    unnamed = 0  # polls past the wait that found no holder file
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            waited = time.monotonic() - begun
            if waited >= timeout:
                holder = _holder_of(lock_path)
                # A holder writes its file just after it takes the lock, and removes it just
                # before letting go: with no file yet, or none any more, look again a few times.
                if holder is None and unnamed < HOLDER_WAITS:
                    unnamed += 1
                    time.sleep(POLL_S)
                    continue
                os.close(fd)
                raise LockBusy(busy(holder, waited), str(lock_path), describe_holder(holder), waited) from None
            time.sleep(min(POLL_S, max(timeout - waited, 0.001)))
        except OSError as exc:
            os.close(fd)
            raise UnusableInput(f"{lock_path}: cannot lock: {exc.strerror or exc}") from None


def registry_lock(root: Path, timeout: float | None = None) -> AbstractContextManager[None]:
    """Hold the registry's write lock; wait up to ``timeout`` (default $PTREG_LOCK_TIMEOUT or 60 s),
    then raise ``LockBusy``. Before this thread's outermost hold is released, the query index is
    brought up to date with what was written, so that the next reader finds it current (a kill
    before that leaves it stale, which the next reader's check finds)."""
    lock_path = root / LOCK_FILE

    def busy(holder: dict[str, Any] | None, waited: float) -> str:
        alive = _alive(holder.get("pid")) if holder else None
        if alive is False:
            return (
                f"{lock_path}: still locked after {waited:.0f} s, but its recorded holder, "
                f"{describe_holder(holder)}, is not running; a process it started may hold it: "
                "stop that process and retry"
            )
        return (
            f"{lock_path}: the registry is being written by {describe_holder(holder)}; waited {waited:.0f} s. "
            f"Retry when it has finished, or stop it ({TIMEOUT_ENV} sets the wait)"
        )

    def stale(holder: dict[str, Any]) -> str:
        return (
            f"{lock_path}: the last writer, {describe_holder(holder)}, was killed while it held the lock "
            "(the system released it). Every write is atomic, so no record is partial; "
            "`ptreg validate` reports anything it left behind and `ptreg repair` clears it"
        )

    wait = timeout_seconds() if timeout is None else timeout
    return _locked(lock_path, wait, busy, stale, released=lambda: update_after_write(root), folder=root)


def _run_lock_path(root: Path, attempt_id: str) -> Path:
    return root / f".ptreg-run-{check_id(attempt_id)}.lock"


def run_in_progress(root: Path, attempt_id: str) -> bool:
    """Whether a run of the attempt holds its run lock now, in any process or thread (this one
    included). Only asks: the lock is let go at once, and no lock file is made."""
    try:
        fd = open_working_file(
            _run_lock_path(root, attempt_id), os.O_RDONLY, "remove it; ptreg makes its lock files itself"
        )
    except (PtregError, OSError):  # no valid id, no lock file, or not ours: no run can hold it
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # drops only this description's shared lock, never the holder's
    return False


def run_lock(root: Path, attempt_id: str, purpose: str = "run") -> AbstractContextManager[None]:
    """Hold the lock that keeps two runs of one attempt apart, and a conclusion from a run in
    progress (``purpose``: "run", "conclude" or "readmit"); refuse at once when it is taken."""
    lock_path = _run_lock_path(root, attempt_id)

    def busy(holder: dict[str, Any] | None, waited: float) -> str:
        if purpose in ("conclude", "readmit"):
            done = "concluded" if purpose == "conclude" else "readmitted"
            return (
                f"{attempt_id} is being run by {describe_holder(holder)}; it cannot be {done} while its run "
                f"measures. {purpose.capitalize()} it when the run has finished (`ptreg show {attempt_id}` then "
                "lists it), or stop the run: its finished samples are written as an interrupted run"
            )
        return (
            f"{attempt_id} is already being run by {describe_holder(holder)}; runs of one attempt "
            f"are not measured side by side. Wait for it to finish (`ptreg show {attempt_id}` then lists it), "
            "or stop it: its finished samples are written as an interrupted run"
        )

    def stale(holder: dict[str, Any]) -> str:
        return (
            f"the last run of {attempt_id}, {describe_holder(holder)}, was killed before it finished; "
            "`ptreg validate` reports a run folder it left unlinked and `ptreg repair` links it"
        )

    return _locked(lock_path, 0, busy, stale)
