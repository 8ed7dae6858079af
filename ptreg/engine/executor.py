"""The executor: starts a worker process for each task, follows its events, and keeps the budget.

The budget's wall clock counts from ``start()``: a task whose estimated time does not fit what
is left is not started (``fits``), a worker still running at the deadline is killed, and so is
one whose process tree reached the memory limit; every event that reached the executor is kept.
A worker that crashes fails its own task only. A signal (Ctrl-C, SIGTERM, SIGHUP) kills the
running worker and is remembered, so that the caller can kill the others and write what
finished. Each worker is started and killed as a whole process tree (``processes.py``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ..records.counting import CountedWorker
from ..records.run_results import KernelSample, MetricSample, ParityOutcome, StepSample
from .callgrind import counted_environment, worker_command
from .environment import worker_variables
from .interruption import Interrupted, deferred, raise_if_interrupted, signal_of
from .processes import (
    METHOD_VARIABLE,
    Tree,
    become_subreaper,
    python_argv,
    python_environment,
    refuse_platform,
    start,
    supervision_method,
)
from .protocol import (
    AnyEvent,
    CellTask,
    Done,
    Failed,
    ParityDone,
    ParityTask,
    Progress,
    Ready,
    RepeatDone,
    RunRepeat,
    Sample,
    Warm,
    decode_event,
    encode,
)

POLL_SECONDS = 0.2
EXIT_SECONDS = 5.0  # a worker that closed its output is given this long to exit before it is killed
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
    line: str | None = None  # the last line its command printed so far, when it runs one


@dataclass
class TaskOutcome:
    """Everything one worker said, and how it ended."""

    ready: Ready | None = None
    samples: list[StepSample | KernelSample | MetricSample] = field(default_factory=list)
    parity: ParityOutcome | None = None
    done: Done | None = None
    failure: str | None = None  # what the worker reported as its error
    ended: str = "not-started"  # done | error | crashed | budget | not-started | interrupted
    reason: str | None = None
    wall_seconds: float | None = None
    peak_memory_mb: float | None = None  # of the worker's whole process tree
    memory: dict[str, str | None] | None = None  # how that was measured and bounded
    counting: CountedWorker | None = None  # a counted worker's view of valgrind's CPU, once warm


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"worker killed by {name}"
    return f"worker exited with code {code}"


@dataclass
class Worker:
    """One worker process, what it said so far, and its busy time."""

    label: str
    tree: Tree
    lines: queue.Queue[str | None]
    stderr: IO[str]
    folder: Path  # its working directory (and a counted worker's callgrind dumps), removed when it ends
    outcome: TaskOutcome = field(default_factory=TaskOutcome)
    reader: threading.Thread | None = None
    busy: float = 0.0  # seconds the executor waited on it: setup, warm-up, its repeats
    phase: str = ""  # the round it is in, for progress
    ended: bool = False
    checked: float = -1e9  # when its memory was last looked at

    @property
    def pid(self) -> int:
        return self.tree.pid

    @property
    def process(self) -> subprocess.Popen[str]:
        return self.tree.process


@dataclass
class Executor:
    """Runs each task in a fresh worker process (``ptreg.engine.worker`` in an isolated
    interpreter): a parity check to its end, a cell kept warm while its repeats are asked for
    one at a time, interleaved with the other backends' by the caller."""

    wall_clock_seconds: float | None = None  # None: no budget (ptreg bench)
    max_memory_mb: float | None = None
    progress: Callable[[TaskProgress], None] | None = None
    clock: Callable[[], float] = time.monotonic
    python: str = sys.executable
    started: float | None = None
    budget_hit: bool = False
    interrupted: int | None = None  # the signal that stopped the run, once one has
    # Every line a worker writes, with the worker's label: how an executor on a cluster node
    # streams them on to the driver as they come.
    listener: Callable[[str, str], None] | None = None
    # End the workers when the thread that started them dies, however it died (ptreg killed by a
    # signal it does not handle, or by SIGKILL; on a cluster node, a cancelled task's process
    # killed outright): each is told by SIGTERM, and ends its command's tree whole before it goes.
    die_with_parent: bool = True
    # The registry directory: like the working directory, nothing in it is on a worker's import path.
    registry: Path | None = None

    def __post_init__(self) -> None:
        refuse_platform()  # before a run collects its environment or starts anything

    def start(self) -> None:
        supervision_method()  # a method this machine cannot hold trees by is refused before anything runs
        # what a worker's tree leaves when the worker dies (a command that killed it) is adopted
        # here, and so stays within reach of the tree's end
        become_subreaper()
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

    def announce(
        self, task: str, phase: str, done: int, total: int, outcome: str | None = None, seconds: float | None = None
    ) -> None:
        """Progress of something made of several tasks, such as a config's rounds."""
        self._notify(TaskProgress(task, phase, done, total, self.budget_left(), None, outcome, seconds))

    def execute(self, label: str, task: ParityTask) -> TaskOutcome:
        """Run one worker to its end, its kill at the deadline, or its crash."""
        worker = self._start(label, task, more_to_say=False)
        self._wait(worker, None)
        self._finish(worker)
        return worker.outcome

    def open(self, label: str, task: CellTask) -> Worker:
        """Start a cell's worker and follow it until it is warm (``outcome.ended`` says why not)."""
        worker = self._start(label, task, more_to_say=True)
        if not self._wait(worker, Warm):
            self._finish(worker)
        return worker

    def run_repeat(self, worker: Worker, repeat: int, rounds: int) -> bool:
        """Ask a warm worker for repeat ``repeat`` and follow it until that repeat is done;
        False when the worker ended instead (``outcome.ended`` says how)."""
        if worker.ended:
            return False
        worker.phase = f"round {repeat + 1}/{rounds}"
        try:
            assert worker.process.stdin is not None
            worker.process.stdin.write(encode(RunRepeat(repeat=repeat)))
            worker.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: what it said, and how it ended, follow
        if self._wait(worker, RepeatDone):
            return True
        self._finish(worker)
        return False

    def close(self, worker: Worker) -> TaskOutcome:
        """No more repeats: let the worker say ``done`` and exit (a dead one is left as it ended)."""
        if not worker.ended:
            with contextlib.suppress(BrokenPipeError, OSError):
                assert worker.process.stdin is not None
                worker.process.stdin.close()
            self._wait(worker, None)
            self._finish(worker)
        return worker.outcome

    def kill(self, worker: Worker, ended: str, reason: str) -> None:
        """End a worker that is not running a task of its own (the budget or a signal stopped
        the run while another worker ran): kill it and keep what it said."""
        if worker.ended:
            return
        self._kill(worker)
        self._drain(worker)
        worker.outcome.ended, worker.outcome.reason = ended, reason
        self._finish(worker)

    def _start(self, label: str, task: ParityTask | CellTask, *, more_to_say: bool) -> Worker:
        method = supervision_method()
        env = python_environment(dict(os.environ))
        env.update(worker_variables(env))  # the same thread rule for every backend
        env[METHOD_VARIABLE] = method  # the commands a worker runs are held as it is
        refused = [Path.cwd()] + ([self.registry] if self.registry is not None else [])
        # a backend taken at a revision: that checkout's folder first, for this task's worker only
        first = [task.import_folder] if task.import_folder is not None else []
        command = python_argv(self.python, WORKER_MODULE, sys.path, refused, _script(), first)
        # a folder of its own to run in, and where a counted worker's callgrind dumps go
        folder = Path(tempfile.mkdtemp(prefix="ptreg-worker-"))
        if isinstance(task, CellTask) and task.timer == "instructions":
            command = worker_command(command, folder)
            env.update(counted_environment(folder))
        stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - lives as long as the worker; _finish closes it
        try:
            tree = start(
                command,
                cwd=folder,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                memory_limit_mb=self.max_memory_mb,
                die_with_parent=self.die_with_parent,
                death_signal=signal.SIGTERM,
                method=method,
            )
        except BaseException:
            stderr.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        process = tree.process
        worker = Worker(label, tree, queue.Queue(), stderr, folder)
        worker.outcome.memory = {"measured_by": tree.measured_by, "bounded_by": tree.bounded_by}
        worker.reader = threading.Thread(target=_read_lines, args=(process, worker.lines), daemon=True)
        worker.reader.start()
        try:
            assert process.stdin is not None
            process.stdin.write(encode(task))
            if more_to_say:
                process.stdin.flush()
            else:
                process.stdin.close()
        except BrokenPipeError:
            pass
        self._notify(TaskProgress(label, "starting", 0, 1, self.budget_left(), process.pid))
        return worker

    def _wait(self, worker: Worker, until: type[AnyEvent] | None) -> bool:
        """Follow the worker until an event of type ``until`` arrives (True), or it ends, is
        stopped by the budget, or a signal arrives (False). Its time counts as busy."""
        begun = time.monotonic()
        try:
            return self._follow(worker, until)
        except (Interrupted, KeyboardInterrupt) as exc:
            with deferred():  # a second Ctrl-C must not lose what the worker reported
                self._kill(worker)
                self._drain(worker)
            self.interrupted = signal_of(exc)
            worker.outcome.ended = "interrupted"
            worker.outcome.reason = f"interrupted by {signal.Signals(self.interrupted).name}"
            return False
        except BaseException:
            worker.outcome.ended, worker.outcome.reason = "interrupted", "interrupted"
            self._kill(worker)
            raise
        finally:
            worker.busy += time.monotonic() - begun

    def _finish(self, worker: Worker) -> None:
        """The worker is gone (or going): how it ended, its time, and one line saying so."""
        if worker.ended:
            return
        worker.ended = True
        outcome = worker.outcome
        if worker.reader is not None:
            worker.reader.join(timeout=5)
        if outcome.ended == "not-started":  # the worker ended on its own
            exited = time.monotonic() + EXIT_SECONDS
            while not worker.tree.reap() and time.monotonic() < exited:
                time.sleep(0.01)
            self._end_tree(worker)  # and whatever it left running
            if self._over_memory(worker, at_once=True):  # the kernel stopped it at the budget
                self.budget_hit = True
                outcome.ended, outcome.reason = "budget", self._memory_reason(worker)
            else:
                _ending(outcome, worker.process.returncode or 0, worker.stderr)
        worker.stderr.close()
        shutil.rmtree(worker.folder, ignore_errors=True)
        for pipe in (worker.process.stdin, worker.process.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        outcome.wall_seconds = worker.busy
        ended = outcome.ended if outcome.reason is None else f"{outcome.ended}: {outcome.reason}"
        self._notify(
            TaskProgress(worker.label, "finished", 1, 1, self.budget_left(), None, ended, outcome.wall_seconds)
        )

    def _follow(self, worker: Worker, until: type[AnyEvent] | None) -> bool:
        while True:
            raise_if_interrupted()  # a stop asked by another thread, when this one measures off the main thread
            left = self.budget_left()
            if left is not None and left <= 0:
                self._stop(worker, "killed at the budget's wall-clock limit")
                return False
            if self._over_memory(worker, at_once=False):
                self._stop(worker, self._memory_reason(worker))
                return False
            try:
                line = worker.lines.get(timeout=POLL_SECONDS if left is None else max(0.01, min(POLL_SECONDS, left)))
            except queue.Empty:
                continue
            if line is None:
                return False
            event = self._take(worker, line)
            # what the worker says after the kernel held its tree at the budget (a command
            # killed, a repeat cut short) does not count as done
            if until is not None and isinstance(event, until) and not self._over_memory(worker, at_once=True):
                return True

    def _over_memory(self, worker: Worker, *, at_once: bool) -> bool:
        """Whether the worker's tree reached the budget's memory, looked at (and its memory
        sampled) every POLL_SECONDS, or now when ``at_once``."""
        now = time.monotonic()
        if not at_once and now - worker.checked < POLL_SECONDS:
            return False
        worker.checked = now
        worker.tree.sample()
        worker.outcome.peak_memory_mb = worker.tree.peak_mb()
        return self.max_memory_mb is not None and worker.tree.over_limit()

    def _memory_reason(self, worker: Worker) -> str:
        peak = worker.tree.peak_mb()
        at = f" at {peak:.0f} MB" if peak is not None else ""
        return f"its process tree was killed{at}, reaching the budget's {self.max_memory_mb:g} MB of memory"

    def _stop(self, worker: Worker, reason: str) -> None:
        """The budget ends the task: kill the worker and keep what it wrote."""
        self._kill(worker)
        self.budget_hit = True
        worker.outcome.ended, worker.outcome.reason = "budget", reason
        self._drain(worker)

    def _take(self, worker: Worker, line: str) -> AnyEvent | None:
        if self.listener is not None:
            self.listener(worker.label, line)
        event = decode_event(line)
        if isinstance(event, Progress):
            phase = f"{worker.phase} {event.phase}".strip()
            self._notify(
                TaskProgress(
                    worker.label, phase, event.done, event.total, self.budget_left(), worker.pid, line=event.line
                )
            )
        else:
            keep(worker.outcome, event)
        return event

    def _drain(self, worker: Worker) -> None:
        """Keep what the worker wrote before it was killed."""
        while True:
            try:
                line = worker.lines.get(timeout=2)
            except queue.Empty:
                return
            if line is None:
                return
            self._take(worker, line)

    def _kill(self, worker: Worker) -> None:
        self._end_tree(worker)
        self._over_memory(worker, at_once=True)  # its peak, as the tree's end left it

    def _end_tree(self, worker: Worker) -> None:
        """Kill the worker and every process of its tree, however it regrouped; a process that
        outlived that is said in the task's reason."""
        survivors = worker.tree.end()
        worker.outcome.peak_memory_mb = worker.tree.peak_mb()
        if survivors:
            shown = ", ".join(str(pid) for pid in survivors[:5])
            note = f"{len(survivors)} process(es) of its tree outlived the kill: {shown}"
            worker.outcome.reason = f"{worker.outcome.reason}; {note}" if worker.outcome.reason else note


FAILURE_MAX = 300


def keep(outcome: TaskOutcome, event: AnyEvent | None) -> None:
    """What an event adds to its task's outcome (progress and stray prints add nothing)."""
    if isinstance(event, Sample):
        outcome.samples.append(event.sample)
    elif isinstance(event, Ready):
        outcome.ready = event
    elif isinstance(event, Warm):
        outcome.counting = event.counting
    elif isinstance(event, ParityDone):
        outcome.parity = event.result
    elif isinstance(event, Done):
        outcome.done = event
    elif isinstance(event, Failed):
        # a plugin's exception text, hostile like any input: one line, bounded, so that the
        # reason a run records (and the evidence quoting it) stays within what a record holds
        lines = event.message.strip().splitlines() or [""]
        first = lines[0] + (" ..." if len(lines) > 1 else "")
        outcome.failure = first if len(first) <= FAILURE_MAX else first[: FAILURE_MAX - 3] + "..."


def _script() -> str | None:
    """The script this process was started as (its folder is on sys.path, not a worker's)."""
    main = sys.modules.get("__main__")
    found = getattr(main, "__file__", None)
    return found if isinstance(found, str) else None


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
