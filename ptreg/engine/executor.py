"""The executor: starts a worker process for each task, follows its events, and keeps the budget.

The budget's wall clock counts from ``start()``: a task whose estimated time does not fit what
is left is not started (``fits``), a worker still running at the deadline is killed, and so is
one over the memory limit; every event that reached the executor is kept. A worker that
crashes fails its own task only. A signal (Ctrl-C, SIGTERM) kills the running worker and is
remembered, so that the caller can write what finished.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from ..records.run import KernelSample, ParityOutcome, StepSample
from .interruption import Interrupted, deferred, signal_of
from .protocol import CellTask, Done, Failed, ParityDone, ParityTask, Progress, Ready, Sample, decode_event, encode

POLL_SECONDS = 0.2
WORKER_MODULE = "ptreg.engine.worker"


@dataclass
class TaskProgress:
    """What the progress display shows: the task, how far it is, and the budget left."""

    task: str  # "parity numba" or "numba/small"
    phase: str
    done: int
    total: int
    budget_left: float | None
    pid: int | None = None
    outcome: str | None = None  # with phase "finished": how the task ended
    seconds: float | None = None  # with phase "finished": its wall time


@dataclass
class TaskOutcome:
    """Everything one worker said, and how it ended."""

    ready: Ready | None = None
    samples: list[StepSample | KernelSample] = field(default_factory=list)
    parity: ParityOutcome | None = None
    done: Done | None = None
    failure: str | None = None  # what the worker reported as its error
    ended: str = "not-started"  # done | error | crashed | budget | not-started | interrupted
    reason: str | None = None
    wall_seconds: float | None = None
    peak_rss_mb: float | None = None


def _rss_mb(pid: int) -> float | None:
    """Resident memory of a process in MB, from /proc (unknown elsewhere)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"worker killed by {name}"
    return f"worker exited with code {code}"


@dataclass
class Executor:
    """Runs tasks one at a time, each in a fresh ``python -m ptreg.engine.worker`` process."""

    wall_clock_seconds: float | None = None  # None: no budget (ptreg bench)
    max_memory_mb: float | None = None
    progress: Callable[[TaskProgress], None] | None = None
    clock: Callable[[], float] = time.monotonic
    python: str = sys.executable
    started: float | None = None
    budget_hit: bool = False
    interrupted: int | None = None  # the signal that stopped the run, once one has

    def start(self) -> None:
        self.started = self.clock()

    def budget_left(self) -> float | None:
        if self.wall_clock_seconds is None or self.started is None:
            return None
        return self.wall_clock_seconds - (self.clock() - self.started)

    def fits(self, estimate: float | None) -> tuple[bool, str | None]:
        """Whether a task estimated to take ``estimate`` seconds may start now."""
        left = self.budget_left()
        if left is None:
            return True, None
        if left <= 0:
            return False, "the budget's wall clock is used up"
        if estimate is not None and estimate > left:
            return False, f"estimated {estimate:.0f} s, {left:.0f} s left in the budget"
        return True, None

    def _notify(self, event: TaskProgress) -> None:
        if self.progress is not None:
            self.progress(event)

    def execute(self, label: str, task: ParityTask | CellTask) -> TaskOutcome:
        """Run one worker to its end, its kill at the deadline, or its crash."""
        outcome = TaskOutcome()
        begun = time.monotonic()
        env = dict(os.environ)
        # The worker prints events only; Python's own buffering must not hold them back.
        env["PYTHONUNBUFFERED"] = "1"
        with tempfile.TemporaryFile(mode="w+") as stderr:
            process = subprocess.Popen(
                [self.python, "-m", WORKER_MODULE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
                start_new_session=True,
            )
            lines: queue.Queue[str | None] = queue.Queue()
            reader = threading.Thread(target=_read_lines, args=(process, lines), daemon=True)
            reader.start()
            try:
                assert process.stdin is not None
                process.stdin.write(encode(task))
                process.stdin.close()
            except BrokenPipeError:
                pass
            self._notify(TaskProgress(label, "starting", 0, 1, self.budget_left(), process.pid))
            try:
                self._follow(label, process, lines, outcome)
            except (Interrupted, KeyboardInterrupt) as exc:
                with deferred():  # a second Ctrl-C must not lose what the worker reported
                    self._kill(process)
                    self._drain(lines, outcome)
                self.interrupted = signal_of(exc)
                outcome.ended = "interrupted"
                outcome.reason = f"interrupted by {signal.Signals(self.interrupted).name}"
            except BaseException:
                outcome.ended, outcome.reason = "interrupted", "interrupted"
                self._kill(process)
                raise
            finally:
                reader.join(timeout=5)
                outcome.wall_seconds = time.monotonic() - begun
            if outcome.ended == "not-started":  # the worker ended on its own
                process.wait()
                _ending(outcome, process.returncode, stderr)
        ended = outcome.ended if outcome.reason is None else f"{outcome.ended}: {outcome.reason}"
        self._notify(TaskProgress(label, "finished", 1, 1, self.budget_left(), None, ended, outcome.wall_seconds))
        return outcome

    def _follow(
        self, label: str, process: subprocess.Popen[str], lines: queue.Queue[str | None], outcome: TaskOutcome
    ) -> None:
        while True:
            left = self.budget_left()
            if left is not None and left <= 0:
                self._stop(process, lines, outcome, "killed at the budget's wall-clock limit")
                return
            rss = _rss_mb(process.pid)
            if rss is not None:
                outcome.peak_rss_mb = max(rss, outcome.peak_rss_mb or 0.0)
                if self.max_memory_mb is not None and rss > self.max_memory_mb:
                    self._stop(
                        process,
                        lines,
                        outcome,
                        f"killed at {rss:.0f} MB resident, over the budget's {self.max_memory_mb:g} MB",
                    )
                    return
            try:
                line = lines.get(timeout=POLL_SECONDS if left is None else max(0.01, min(POLL_SECONDS, left)))
            except queue.Empty:
                continue
            if line is None:
                return
            self._take(label, line, outcome, process.pid)

    def _stop(
        self, process: subprocess.Popen[str], lines: queue.Queue[str | None], outcome: TaskOutcome, reason: str
    ) -> None:
        """The budget ends the task: kill the worker and keep what it wrote."""
        self._kill(process)
        self.budget_hit = True
        outcome.ended, outcome.reason = "budget", reason
        self._drain(lines, outcome)

    def _take(self, label: str, line: str, outcome: TaskOutcome, pid: int) -> None:
        event = decode_event(line)
        if isinstance(event, Sample):
            outcome.samples.append(event.sample)
        elif isinstance(event, Progress):
            self._notify(TaskProgress(label, event.phase, event.done, event.total, self.budget_left(), pid))
        elif isinstance(event, Ready):
            outcome.ready = event
        elif isinstance(event, ParityDone):
            outcome.parity = event.result
        elif isinstance(event, Done):
            outcome.done = event
        elif isinstance(event, Failed):
            outcome.failure = event.message
        # anything else is a stray print from a backend, not a result

    def _drain(self, lines: queue.Queue[str | None], outcome: TaskOutcome) -> None:
        """Keep what the worker wrote before it was killed."""
        while True:
            try:
                line = lines.get(timeout=2)
            except queue.Empty:
                return
            if line is None:
                return
            self._take("", line, outcome, 0)

    @staticmethod
    def _kill(process: subprocess.Popen[str]) -> None:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the worker and any helper it started
        process.wait()


def _read_lines(process: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)
    lines.put(None)


def _ending(outcome: TaskOutcome, returncode: int, stderr: IO[str]) -> None:
    """How a worker that ended on its own ended: done, an error it reported, or a crash."""
    if outcome.done is not None:
        outcome.ended = "done"
    elif outcome.failure is not None:
        outcome.ended, outcome.reason = "error", outcome.failure
    else:
        stderr.seek(0)
        tail = [line for line in stderr.read().splitlines() if line.strip()][-1:]
        outcome.ended = "crashed"
        outcome.reason = _describe_exit(returncode) + (f": {tail[0].strip()}" if tail else "")
