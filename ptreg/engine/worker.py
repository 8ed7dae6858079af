"""The worker: measures one task in a process of its own, and reports as it goes.

Started by the executor in an isolated interpreter (``processes.py``) with a task on stdin;
writes events on stdout in the worker protocol (``protocol.py``). A task is either a parity check of
one backend, or one (backend, config) cell of a workload, which stays warm and times one
repeat each time the executor asks for one.

A process per task keeps one backend's threads, compiled code and memory from touching
another's numbers, and a crash from losing anyone else's results.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType
from typing import Any, TextIO

from pydantic import ValidationError

from ..errors import UnusableInput
from ..records.evaluator import backend_at
from .backends import Backend, create, provided_ops, runtime_details, set_backend_threads
from .callgrind import stopwatch_for, worker_report
from .processes import become_subreaper
from .protocol import (
    PROTOCOL_VERSION,
    AnyEvent,
    CellTask,
    Done,
    Failed,
    ParityDone,
    ParityTask,
    Progress,
    Ready,
    RepeatDone,
    Sample,
    ThreadState,
    Warm,
    decode_order,
    decode_task,
    encode,
)
from .workloads import workload_named
from .workloads.base import AnySample


def emit(event: AnyEvent) -> None:
    sys.stdout.write(encode(event))
    sys.stdout.flush()


def set_threads(backend: Backend, threads: int) -> tuple[ThreadState, Any]:
    """Pin every thread pool to ``threads``; return what is really in effect, and the
    threadpoolctl limiter, which the caller keeps alive for as long as the limit should hold.

    BLAS is limited for every backend alike, because the rest of the training step
    (attention, layer norms) runs on NumPy and so on the BLAS too.
    """
    from threadpoolctl import threadpool_info, threadpool_limits

    limiter = threadpool_limits(limits=threads)
    used = set_backend_threads(backend, threads)
    pools = [{k: p.get(k) for k in ("user_api", "internal_api", "num_threads")} for p in threadpool_info()]
    return ThreadState(requested=threads, backend=used, pools=pools), limiter


def create_taken(name: str, import_folder: str | None) -> Backend:
    """The backend a task names, created; one taken at a git revision (``numba@before``) is the
    registered backend, whose module must then have come from the checkout's folder put first
    on this worker's import path (a module imported before, or from elsewhere, is refused)."""
    registered, label = backend_at(name)
    backend = create(registered)
    if label is not None:
        module = sys.modules.get(type(backend).__module__)
        where = getattr(module, "__file__", None)
        folder = os.path.realpath(import_folder) if import_folder is not None else None
        if folder is None or where is None or not os.path.realpath(where).startswith(folder.rstrip("/") + "/"):
            raise UnusableInput(
                f"backend {name}: its module came from {where or 'nowhere on disk'}, not from the checkout of "
                f"revision {label} ({import_folder or 'none given'})"
            )
    return backend


def run_parity(task: ParityTask) -> None:
    from .parity import check_parity  # NumPy, which only a parity worker needs at once

    backend = create_taken(task.backend, task.import_folder)
    order_preserving = bool(getattr(backend, "order_preserving", False))
    reference = create(task.reference) if order_preserving and task.reference is not None else None
    _, _limiter = set_threads(backend, task.threads)  # the limiter holds the limit
    result = check_parity(
        backend,
        reference,
        task.shapes,
        task.rtol,
        task.atol,
        seed=task.seed,
        name=task.backend,
        reference_name=task.reference,
    )
    outcome = result.to_outcome()
    if provided_ops(backend):
        from .op_parity import check_ops  # NumPy, as above

        checks = check_ops(backend, task.op_configs, seed=task.seed)
        failed = [c for c in checks if not c.passed]
        outcome.op_checks = checks
        if failed:
            worst = failed[0]
            outcome.passed = False
            outcome.summary = (
                f"{task.backend}: parity FAILED on {len(failed)} of {len(checks)} op checks; "
                f"first {worst.op} at {worst.shape}: {worst.detail}"
            )
        elif outcome.passed:
            outcome.summary += f"; its {len({c.op for c in checks})} ops match NumPy's ({len(checks)} checks)"
    emit(ParityDone(result=outcome))
    emit(Done(runtime=runtime_details(backend)))


def run_cell(task: CellTask, orders: TextIO) -> None:
    """Set up and warm up, then one repeat per order read from ``orders``, until it ends."""
    workload = workload_named(task.workload)
    backend: Backend | None = None
    if workload.kind == "backends":
        backend = create_taken(task.backend, task.import_folder)
        assert task.threads is not None  # a backends spec always names its threads
        threads, _limiter = set_threads(backend, task.threads)  # the limiter holds the limit
    else:  # an arm's threads are its command's to set, through the environment it is given
        threads = ThreadState(requested=task.threads, backend=None, pools=[])
    emit(Ready(pid=os.getpid(), threads=threads))
    last = [0.0]

    def progress(phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.2 or done == total:  # enough for a progress bar, not a flood
            last[0] = now
            emit(Progress(phase=phase, done=done, total=total))

    def record(sample: AnySample) -> None:
        emit(Sample(sample=sample))

    counted = task.timer == "instructions"
    if counted and not workload.counts_instructions:
        raise UnusableInput(f"workload {task.workload!r} cannot count instructions (timer)")
    cell = workload.prepare(task, backend)
    cell.attach(emit)
    if counted:
        cell.stopwatch = stopwatch_for(task.timer)
    cell.warm_up(progress)
    if counted:
        cell.stopwatch.calibrate()  # warm: the marks cost what they will cost around each region
    emit(Warm(counting=worker_report(cell.stopwatch) if counted else None))
    for line in orders:
        try:
            order = decode_order(line)
        except ValidationError as exc:
            raise UnusableInput(f"not an order of worker protocol version {PROTOCOL_VERSION}: {_first(exc)}") from None
        cell.run_repeat(order.repeat, record, progress)
        emit(RepeatDone(repeat=order.repeat))
    # after the repeats: a backend may set up its runtime lazily (numba's threading layer is
    # known only once a parallel function has run)
    emit(Done(runtime=runtime_details(backend) if backend is not None else None))


def _first(exc: ValidationError) -> str:
    first = exc.errors(include_url=False)[0]
    return f"{'.'.join(str(part) for part in first['loc']) or 'message'}: {first['msg']}"


def _told_to_end(signum: int, frame: FrameType | None) -> None:
    # SIGTERM: the executor's thread died (its parent-death signal) or someone asked; raised
    # as SystemExit, which no ``except Exception`` takes, so that a command running now has its
    # whole tree ended on the way out. Told once: the kernel sends the parent-death signal again
    # each time the worker passes to another of a dying process's threads, and a second one
    # must not cut that end short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def main() -> int:
    # whatever the task starts stays in this worker's tree, even once its own parent is gone
    become_subreaper()
    signal.signal(signal.SIGTERM, _told_to_end)
    try:
        try:
            task = decode_task(sys.stdin.readline())
        except ValidationError as exc:
            raise UnusableInput(f"not a task of worker protocol version {PROTOCOL_VERSION}: {_first(exc)}") from None
        if isinstance(task, ParityTask):
            run_parity(task)
        else:
            run_cell(task, sys.stdin)
    except Exception as exc:  # reported to the executor as this task's failure
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        emit(Failed(message=message))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
