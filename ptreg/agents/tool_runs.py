"""What the MCP server keeps of the runs it measures: their threads, so that a signal or a
hang-up can stop each, and the progress lines it notifies while they measure."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..engine.executor import TaskProgress
from ..engine.interruption import interrupt, withdraw


class Runs:
    """The runs this server is measuring, by thread, so a signal or a hang-up can stop them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self.stopping: int | None = None  # the signal the server itself was stopped by

    @contextmanager
    def measuring(self) -> Iterator[None]:
        thread = threading.current_thread()
        with self._lock:
            self._threads.add(thread)
            if self.stopping is not None:  # began as the server was told to stop: stopped as the others
                interrupt(thread, self.stopping)
        try:
            yield
        finally:
            with self._lock:
                self._threads.discard(thread)
            withdraw(thread)

    def stop_all(self, signum: int) -> None:
        with self._lock:
            self.stopping = signum
            for thread in self._threads:
                interrupt(thread, signum)


def progress_text(event: TaskProgress) -> str:
    """One progress line, as `ptreg run` logs it in a pipe."""
    left = "" if event.budget_left is None else f" ({max(event.budget_left, 0):.0f} s left in budget)"
    if event.phase == "finished":
        return f"{event.task}: {event.outcome}"
    if event.phase == "round":
        return f"{event.task}: round {event.done + 1} of at most {event.total}{left}"
    said = f": {event.line}" if event.line else ""  # the last line its command printed so far
    return f"{event.task}: {event.phase}{left}{said}"
