"""Fault injection for the crash tests: ``PTREG_CRASH_AT=N`` kills the process at the N-th
step of its writes, as a power cut or ``kill -9`` would.

SQLite's crash tests work the same way: every step of a write is a numbered point, and the
test kills the writer at each one in turn, then checks the store. Unset, it costs one
comparison per step.
"""

from __future__ import annotations

import os
import signal
import threading

CRASH_ENV = "PTREG_CRASH_AT"

_raw = os.environ.get(CRASH_ENV, "")
_target = int(_raw) if _raw.isdigit() and int(_raw) > 0 else None
_count = 0
_count_lock = threading.Lock()  # the import stages files on several threads


def crash_point() -> None:
    """One step of a write is done; die here if this is the step the test chose."""
    global _count
    if _target is None:
        return
    with _count_lock:
        _count += 1
        hit = _count == _target
    if hit:
        os.kill(os.getpid(), signal.SIGKILL)
