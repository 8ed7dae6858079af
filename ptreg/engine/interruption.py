"""Ctrl-C, SIGTERM and SIGHUP during a run: stop measuring, keep what finished, write it whole.

While a run measures, each of these signals raises ``Interrupted`` in the main thread; the
executor kills its worker and the run is written with status ``interrupted``. While the run's
files are written, a signal only waits, so that nothing is half-written. The process then exits
with 128 + the signal's number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP: the terminal
was closed), as shells expect.

A run measured in a thread other than the main one (the MCP server's) cannot be reached by a
signal handler; ``interrupt`` asks it to stop as that signal would, and the executor, which
polls ``raise_if_interrupted`` while it waits on a worker, raises ``Interrupted`` there.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """A BaseException, like KeyboardInterrupt, so that no ``except Exception`` swallows it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def signal_of(exc: BaseException) -> int:
    """The signal behind ``Interrupted``, or SIGINT for Python's own KeyboardInterrupt."""
    return getattr(exc, "signum", signal.SIGINT)


class _Deferral(threading.local):
    """Per thread: how deep in ``deferred`` blocks it is, and the signal that came meanwhile.
    A signal handler runs in the main thread, so it reads and sets the main thread's; a run
    writing its files in one thread never holds back a stop asked of a run in another."""

    def __init__(self) -> None:
        self.depth = 0
        self.pending: int | None = None


_deferral = _Deferral()
_asked: dict[int, int] = {}  # thread ident -> the signal another thread asked it to stop as
_asked_lock = threading.Lock()


def _handler(signum: int, frame: FrameType | None) -> None:
    if _deferral.depth:
        _deferral.pending = _deferral.pending or signum
        return
    raise Interrupted(signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into ``Interrupted`` for the length of the block."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; a library caller keeps its own
        return
    previous = {s: signal.signal(s, _handler) for s in HANDLED}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold signals (and stops asked of this thread) back until the block ends; ``pending()``
    then says whether a signal came."""
    _deferral.depth += 1
    try:
        yield
    finally:
        _deferral.depth -= 1


def pending() -> int | None:
    """The signal that arrived while deferred (and clear it), or None."""
    signum, _deferral.pending = _deferral.pending, None
    return signum


def interrupt(thread: threading.Thread, signum: int) -> None:
    """Ask the run measuring in ``thread`` to stop as ``signum`` would stop one in the main
    thread: its workers killed, what finished written as an ``interrupted`` run."""
    if thread.ident is not None:
        with _asked_lock:
            _asked[thread.ident] = signum


def withdraw(thread: threading.Thread) -> None:
    """Forget a request ``thread`` never reached (its run ended first)."""
    with _asked_lock:
        _asked.pop(thread.ident or 0, None)


def raise_if_interrupted() -> None:
    """Raise ``Interrupted`` in this thread if another thread asked it to stop; while a
    ``deferred`` block writes a run, the request waits, as a signal does."""
    if _deferral.depth:
        return
    with _asked_lock:
        signum = _asked.pop(threading.get_ident(), None)
    if signum is not None:
        raise Interrupted(signum)
