"""Locks: one writer at a time per registry, and one run at a time per attempt.

The registry lock is held around every read-modify-write (new, conclude, import, freeze, a
run's files and link, repair), briefly; a long measurement holds only its attempt's run lock,
so runs of different attempts proceed side by side. Both are ``flock`` locks (the
``filelock`` package): the kernel releases them when their process dies, even by SIGKILL, so
a killed ptreg never blocks the next one. Beside each lock a holder file names the process
(pid, command, time). It is removed on release, so finding one on acquiring means the last
holder was killed mid-write: ptreg says so and what to check. When a lock stays busy, the
message names the holder and what to do.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Any

from ..clock import utc_now
from ..errors import EXIT_CHECK_FAILED, PtregError
from ..text import printable
from .index import update_after_write
from .jsonio import atomic_write_text

LOCK_FILE = ".ptreg.lock"
HOLDER_SUFFIX = ".holder"
TIMEOUT_ENV = "PTREG_LOCK_TIMEOUT"
DEFAULT_TIMEOUT = 60.0  # seconds; every registry write is short, a wait this long means trouble

# Locks this process holds: path -> (FileLock, depth). A command that holds the registry
# lock may call library code that takes it again.
_held: dict[str, tuple[Any, int]] = {}


def _warn(message: str) -> None:
    print(f"ptreg: warning: {printable(message)}", file=sys.stderr)  # it quotes the holder file


def timeout_seconds() -> float:
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise PtregError(f"{TIMEOUT_ENV}={raw!r}: not a number of seconds") from None
    if not (0 <= value < float("inf")):
        raise PtregError(f"{TIMEOUT_ENV}={raw!r}: must be zero or a positive number of seconds")
    return value


def _holder_of(lock_path: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(Path(str(lock_path) + HOLDER_SUFFIX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
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


def _write_holder(lock_path: Path) -> None:
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": ["ptreg", *sys.argv[1:]],
        "since": utc_now(),
    }
    atomic_write_text(Path(str(lock_path) + HOLDER_SUFFIX), json.dumps(holder) + "\n")


@contextmanager
def _locked(
    lock_path: Path,
    timeout: float,
    busy: Callable[[dict[str, Any] | None, float], str],
    stale: Callable[[dict[str, Any]], str],
) -> Iterator[None]:
    from filelock import FileLock, Timeout  # 26 ms to import: only for commands that write

    key = os.path.realpath(lock_path)
    if key in _held:
        lock, depth = _held[key]
        _held[key] = (lock, depth + 1)
        try:
            yield
        finally:
            lock, depth = _held[key]
            _held[key] = (lock, depth - 1)
        return
    lock = FileLock(str(lock_path), timeout=timeout)
    begun = time.monotonic()
    try:
        lock.acquire()
    except Timeout:
        raise PtregError(busy(_holder_of(lock_path), time.monotonic() - begun), EXIT_CHECK_FAILED) from None
    except OSError as exc:
        raise PtregError(f"{lock_path}: cannot lock: {exc.strerror or exc}") from None
    _held[key] = (lock, 1)
    try:
        previous = _holder_of(lock_path)
        if previous is not None:
            _warn(stale(previous))
        _write_holder(lock_path)
        yield
    finally:
        del _held[key]
        with suppress(OSError):
            os.unlink(str(lock_path) + HOLDER_SUFFIX)
        lock.release()


def registry_lock(root: Path, timeout: float | None = None) -> AbstractContextManager[None]:
    """Hold the registry's write lock; wait up to ``timeout`` (default $PTREG_LOCK_TIMEOUT or 60 s).
    Before the outermost hold is released, the query index is brought up to date with what was
    written, so that the next reader finds it current (a kill before that leaves it stale, which
    the next reader's check finds)."""
    lock_path = root / LOCK_FILE
    outermost = os.path.realpath(lock_path) not in _held

    def busy(holder: dict[str, Any] | None, waited: float) -> str:
        alive = _alive(holder.get("pid")) if holder else None
        if alive is False:
            return (
                f"{lock_path}: still locked after {waited:.0f} s, but its recorded holder, "
                f"{describe_holder(holder)}, is not running; a process it started may hold it. "
                f"If no ptreg is running, delete {lock_path} and retry"
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

    return _then_index(
        _locked(lock_path, timeout_seconds() if timeout is None else timeout, busy, stale), root, outermost
    )


@contextmanager
def _then_index(lock: AbstractContextManager[None], root: Path, outermost: bool) -> Iterator[None]:
    with lock:
        yield
        if outermost:
            update_after_write(root)


def run_lock(root: Path, attempt_id: str) -> AbstractContextManager[None]:
    """Hold the lock that keeps two runs of one attempt apart; refuse at once when it is taken."""
    lock_path = root / f".ptreg-run-{attempt_id}.lock"

    def busy(holder: dict[str, Any] | None, waited: float) -> str:
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
