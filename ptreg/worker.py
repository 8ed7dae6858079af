"""The worker: measures one task in a process of its own, and reports as JSON lines.

Started by the runner as ``python -m ptreg.worker`` with one JSON task on stdin; writes one
JSON object per line on stdout, flushed at once, so that every sample reaches the runner
even if this process is killed a moment later. Tasks:

- ``parity``: run the backend's three kernels on the parity shapes against ``naive`` and a
  float64 reference (see ``parity.py``).
- ``cell``: time one (backend, config) pair: warm-up, then ``repeats`` × ``timed_steps``.

A process per cell keeps one backend's threads, compiled code and memory from touching
another's numbers, and a crash from losing anyone else's results.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable

from .backend import KERNELS, METHOD_OF_KERNEL, Backend, create, kernel_shapes


def emit(event: str, **data: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **data}, allow_nan=False) + "\n")
    sys.stdout.flush()


class TimedKernels:
    """Wraps a backend and adds up the seconds spent in each of its three kernels.

    The model sees the same three methods; the wrapper costs two clock reads per call,
    a few hundred nanoseconds against kernels of tens of microseconds or more.
    """

    def __init__(self, backend: Backend):
        self.backend = backend
        self.seconds = dict.fromkeys(KERNELS, 0.0)

    def reset(self) -> None:
        self.seconds = dict.fromkeys(KERNELS, 0.0)

    def matmul_forward(self, a, b, out) -> None:
        start = time.perf_counter()
        self.backend.matmul_forward(a, b, out)
        self.seconds["forward"] += time.perf_counter() - start

    def matmul_backward_da(self, dc, b, out) -> None:
        start = time.perf_counter()
        self.backend.matmul_backward_da(dc, b, out)
        self.seconds["backward_da"] += time.perf_counter() - start

    def matmul_backward_db(self, a, dc, out) -> None:
        start = time.perf_counter()
        self.backend.matmul_backward_db(a, dc, out)
        self.seconds["backward_db"] += time.perf_counter() - start


def set_threads(backend: Backend, threads: int) -> tuple[dict[str, Any], Any]:
    """Pin every thread pool to ``threads``; return what is really in effect, and the
    threadpoolctl limiter, which the caller keeps alive for as long as the limit should hold.

    BLAS is limited for every backend alike, because the rest of the training step
    (attention, layer norms) runs on NumPy and so on the BLAS too.
    """
    from threadpoolctl import threadpool_info, threadpool_limits

    limiter = threadpool_limits(limits=threads)
    used = backend.set_threads(threads)
    state: dict[str, Any] = {
        "requested": threads,
        "backend": used,
        "pools": [{k: p.get(k) for k in ("user_api", "internal_api", "num_threads")} for p in threadpool_info()],
    }
    if "numba" in sys.modules:
        import numba

        state["numba"] = numba.get_num_threads()
    return state, limiter


def numba_layer() -> Any:
    """numba's threading layer, known only after a parallel function has run."""
    if "numba" not in sys.modules:
        return None
    import numba

    try:
        return numba.threading_layer()
    except ValueError:
        return None


def run_parity(task: dict[str, Any]) -> None:
    from .parity import check_parity

    backend = create(task["backend"])
    reference = create("naive")
    _, limiter = set_threads(backend, task["threads"])  # the limiter holds the limit
    shapes = [tuple(s) for s in task["shapes"]]
    result = check_parity(backend, reference, shapes, task["rtol"], task["atol"], seed=task["seed"])
    emit("parity", result=result.to_json())
    emit("done")


def run_train_cell(task: dict[str, Any], backend: Backend, progress: Callable[[str, int, int], None]) -> None:
    from .tinygpt import CONFIGS, Trainer

    kernels = TimedKernels(backend)
    trainer = Trainer(CONFIGS[task["config"]], kernels, seed=task["seed"])
    warmup, timed, repeats = task["warmup_steps"], task["timed_steps"], task["repeats"]
    total = warmup + timed * repeats
    for i in range(warmup):
        trainer.step()
        progress("warm-up", i + 1, total)
    for repeat in range(repeats):
        for step in range(timed):
            kernels.reset()
            start = time.perf_counter()
            loss = trainer.step()
            seconds = time.perf_counter() - start
            emit("step", repeat=repeat, step=step, seconds=seconds, kernel_seconds=kernels.seconds, loss=float(loss))
            progress("timed", warmup + repeat * timed + step + 1, total)


def run_kernel_cell(task: dict[str, Any], backend: Backend, progress: Callable[[str, int, int], None]) -> None:
    import numpy as np

    from .tinygpt import CONFIGS, linear_shapes

    rng = np.random.default_rng(task["seed"])
    calls = []  # (layer, kernel, bound call)
    for layer in linear_shapes(CONFIGS[task["config"]]):
        for kernel in KERNELS:
            first, second, result = kernel_shapes(kernel, layer.m, layer.k, layer.n)
            a = rng.standard_normal(first, dtype=np.float32)
            b = rng.standard_normal(second, dtype=np.float32)
            out = np.empty(result, dtype=np.float32)
            method = getattr(backend, METHOD_OF_KERNEL[kernel])
            calls.append((layer.name, kernel, lambda m=method, a=a, b=b, out=out: m(a, b, out)))
    warmup, timed, repeats = task["warmup_steps"], task["timed_steps"], task["repeats"]
    total = len(calls) * (warmup + timed * repeats)
    done = 0
    for _, _, call in calls:
        for _ in range(warmup):
            call()
        done += warmup
        progress("warm-up", done, total)
    # Repeats outermost: every layer and kernel is measured once per repeat, so slow drift of
    # the machine spreads over all of them instead of landing on one.
    for repeat in range(repeats):
        for layer, kernel, call in calls:
            start = time.perf_counter()
            for _ in range(timed):
                call()
            seconds = time.perf_counter() - start
            emit("kernel", repeat=repeat, layer=layer, kernel=kernel, calls=timed, seconds_per_call=seconds / timed)
            done += timed
            progress("timed", done, total)


def run_cell(task: dict[str, Any]) -> None:
    backend = create(task["backend"])
    threads, limiter = set_threads(backend, task["threads"])  # the limiter holds the limit
    emit("ready", pid=os.getpid(), threads=threads)
    last = [0.0]

    def progress(phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.2 or done == total:  # enough for a progress bar, not a flood
            last[0] = now
            emit("progress", phase=phase, done=done, total=total)

    if task["workload"] == "tinygpt-train":
        run_train_cell(task, backend, progress)
    else:
        run_kernel_cell(task, backend, progress)
    # a backend may set its own pool's wait policy (numba does), so the worker's value is recorded
    emit("done", numba_threading_layer=numba_layer(), omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"))


def main() -> int:
    try:
        task = json.loads(sys.stdin.read())
        if task["task"] == "parity":
            run_parity(task)
        else:
            run_cell(task)
    except Exception as exc:  # reported to the runner as this cell's failure
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        emit("error", message=message)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
