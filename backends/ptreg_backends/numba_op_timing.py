"""The memory-bound ops' serial kernel against their parallel one, timed at sizes of 2^14 to 2^22
elements on the threads the ops are set to, and the per-machine thresholds chosen from it
(``numba_threads``).

Each kernel is called through ``NumbaStepOps``'s method, so what is timed is what the step pays
(the allocations included), at xl's row widths (C for the layernorms, the residual and the
encoder, 4C for GELU and the bias, the vocabulary for cross-entropy). Serial and parallel
alternate within each round, which goes first alternating between rounds, so the machine's
drift lands on both alike; a sample is the mean of enough calls for at least 2^16 elements.
``benchmarks/op_threads.py`` prints the same measurement as a table.
Nothing here imports numba (``NumbaStepOps.load_ops`` does).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ptreg.records.configs import CONFIGS
from ptreg_backends.numba_step import NumbaStepOps
from ptreg_backends.numba_threads import (
    DEFAULT_PARALLEL_MIN,
    KERNELS,
    SIZES,
    THRESHOLD_VARIABLE,
    ParallelChoice,
    cache_path,
    decide,
    forced,
    remember,
    remembered,
)

CALIBRATION_ROUNDS = 5  # a few seconds on two threads; benchmarks/op_threads.py takes more
ELEMENTS_PER_SAMPLE = 1 << 16  # the smallest sizes are called several times a sample, for the clock
SERIAL, PARALLEL = "serial", "parallel"
NEVER = 1 << 62  # a threshold no array reaches

XL = CONFIGS["xl"]
C, HIDDEN, VOCAB = XL.d_model, 4 * XL.d_model, XL.vocab


class Arena:
    """Standard normal float32 arrays made once per (slot, element count) and handed out in any
    shape: making fresh inputs for every kernel cost more than timing them. Kernels that write
    an input in place (AdamW, the bias) change values others read: only times are taken here."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.made: dict[tuple[int, int], np.ndarray] = {}

    def take(self, slot: int, *shape: int) -> np.ndarray:
        count = int(np.prod(shape))
        if (slot, count) not in self.made:
            self.made[slot, count] = self.rng.standard_normal(count, dtype=np.float32)
        return self.made[slot, count].reshape(shape)


def call_of(ops: NumbaStepOps, kernel: str, size: int, arena: Arena) -> Callable[[], Any]:
    """A call of ``kernel`` on ``size`` elements (a multiple of 1,024) through its method."""
    rows, hidden_rows = size // C, size // HIDDEN
    rng, normal = arena.rng, arena.take
    if kernel.startswith("encoder"):
        T = min(XL.context, rows)
        tokens = rng.integers(0, VOCAB, size=(rows // T, T))
        wte, wpe = normal(0, C, VOCAB), normal(0, T, C)
        if kernel == "encoder_forward":
            return lambda: ops.encoder_forward(wte, wpe, tokens)
        dx, dwte, dwpe = normal(1, rows, C), np.zeros((C, VOCAB), np.float32), np.empty((T, C), np.float32)
        return lambda: ops.encoder_backward(dx, tokens, dwte, dwpe)
    if kernel.startswith(("layernorm", "residual_layernorm")):
        x, branch, dout = (normal(slot, rows, C) for slot in range(3))
        w, b = normal(0, C), normal(1, C)
        if kernel == "layernorm_forward":
            return lambda: ops.layernorm_forward(x, w, b)
        if kernel == "residual_layernorm_forward":
            return lambda: ops.residual_layernorm_forward(x, branch, w, b)
        if kernel == "layernorm_backward":
            _, cache = ops.layernorm_forward(x, w, b)
            return lambda: ops.layernorm_backward(dout, cache)
        _, _, cache = ops.residual_layernorm_forward(x, branch, w, b)
        return lambda: ops.residual_layernorm_backward(dout, cache, branch)
    if kernel in ("residual_add",):
        x, branch = normal(0, rows, C), normal(1, rows, C)
        return lambda: ops.residual_add(x, branch)
    if kernel.startswith("crossentropy"):
        logits, targets = normal(0, rows, VOCAB), rng.integers(0, VOCAB, size=rows)
        if kernel == "crossentropy_forward":
            return lambda: ops.crossentropy_forward(logits, targets)
        _, probs = ops.crossentropy_forward(logits, targets)
        return lambda: ops.crossentropy_backward(probs, targets)
    x, dout = normal(0, hidden_rows, HIDDEN), normal(1, hidden_rows, HIDDEN)
    b, db = normal(2, HIDDEN) * np.float32(1e-3), np.empty(HIDDEN, np.float32)  # a small bias: added each call
    calls: dict[str, Callable[[], Any]] = {
        "gelu_forward": lambda: ops.gelu_forward(x),
        "gelu_backward": lambda: ops.gelu_backward(dout, x),
        "bias_gelu_forward": lambda: ops.bias_gelu_forward(x, b),
        "bias_gelu_backward": lambda: ops.bias_gelu_backward(dout, x, db),
        "bias_forward": lambda: ops.bias_forward(x, b),
        "bias_backward": lambda: ops.bias_backward(dout, db),
    }
    if kernel in calls:
        return calls[kernel]
    if kernel == "adamw_update":
        m, v = normal(2, hidden_rows, HIDDEN) * np.float32(0.1), np.abs(normal(3, hidden_rows, HIDDEN))
        return lambda: ops.adamw_update(x, dout, m, v, 3e-4, 0.9, 0.999, 1e-8, 0.01, 0.271, 0.003)
    raise ValueError(f"no memory-bound kernel {kernel!r} (kernels: {', '.join(KERNELS)})")


Samples = dict[str, dict[int, dict[str, list[float]]]]  # kernel, size, way: seconds a call, a round each


def measure(
    ops: NumbaStepOps,
    kernels: tuple[str, ...] = KERNELS,
    sizes: tuple[int, ...] = SIZES,
    rounds: int = CALIBRATION_ROUNDS,
    seed: int = 0,
) -> Samples:
    """Seconds a call of each kernel at each size, serial and parallel on ``ops.threads``, one
    value a round. One kernel's inputs at a time are held (up to 2^22 elements an array)."""
    saved = ops.parallel_min, ops.parallel_mins
    samples: Samples = {k: {s: {SERIAL: [], PARALLEL: []} for s in sizes} for k in kernels}
    arena = Arena(np.random.default_rng(seed))
    try:
        ops.parallel_mins = {}
        for kernel in kernels:
            calls = {size: call_of(ops, kernel, size, arena) for size in sizes}
            for call in calls.values():  # page faults and the pool's first wake-up, untimed
                for least in (NEVER, 0):
                    ops.parallel_min = least
                    call()
            for r in range(rounds):
                for size, call in calls.items():
                    repeats = max(1, ELEMENTS_PER_SAMPLE // size)
                    ways = (SERIAL, PARALLEL) if (r + size.bit_length()) % 2 == 0 else (PARALLEL, SERIAL)
                    for way in ways:
                        ops.parallel_min = NEVER if way == SERIAL else 0
                        start = time.perf_counter()
                        for _ in range(repeats):
                            call()
                        samples[kernel][size][way].append((time.perf_counter() - start) / repeats)
    finally:
        ops.parallel_min, ops.parallel_mins = saved
    return samples


def round_ratios(by_way: dict[str, list[float]]) -> list[float]:
    """Parallel over serial, round by round (below 1: the parallel kernel was faster)."""
    return [p / s for s, p in zip(by_way[SERIAL], by_way[PARALLEL], strict=True) if s > 0]


def ratios_of(samples: Samples) -> dict[str, dict[int, list[float]]]:
    """Each kernel's per-round ratios at each size, in the order taken."""
    return {kernel: {size: round_ratios(w) for size, w in by_size.items()} for kernel, by_size in samples.items()}


def calibrate(ops: NumbaStepOps, rounds: int = CALIBRATION_ROUNDS) -> tuple[dict[str, int | None], dict[str, Any]]:
    """Measure and decide each kernel's threshold on ``ops.threads``; also what to remember of how.
    Timed on ops of its own sharing ``ops``'s kernels: a backend may not provide every op's method."""
    probe = NumbaStepOps()
    probe._kernels, probe.threads = ops._kernels, ops.threads
    started = time.perf_counter()
    ratios = ratios_of(measure(probe, rounds=rounds))
    how = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "rounds": rounds,
        "median_ratios": {
            k: {str(s): round(statistics.median(r), 3) if r else None for s, r in by.items()}
            for k, by in ratios.items()
        },
        "seconds": round(time.perf_counter() - started, 1),
    }
    return decide(ratios), how


def choose(ops: NumbaStepOps, log: Callable[[str], None] | None = None) -> ParallelChoice:
    """The thresholds for ``ops.threads``: none needed on one thread; PTREG_NUMBA_PARALLEL_MIN when
    set (ValueError when it is not a number or "default"); else this machine's remembered ones;
    else measured now and remembered (an unwritable cache costs the next process a new measurement)."""
    threads = ops.threads
    if threads <= 1:
        return ParallelChoice(threads, "one thread", DEFAULT_PARALLEL_MIN, {}, None)
    told = forced()
    if told == "default":
        return ParallelChoice(
            threads, "default, not calibrated", DEFAULT_PARALLEL_MIN, {}, None, f"{THRESHOLD_VARIABLE}=default"
        )
    if isinstance(told, int):
        return ParallelChoice(threads, THRESHOLD_VARIABLE, told, {}, None)
    path = cache_path()
    known = remembered(threads, path)
    if known is not None:
        return ParallelChoice(threads, "cache", DEFAULT_PARALLEL_MIN, known, str(path))
    thresholds, how = calibrate(ops)
    try:
        written: str | None = str(remember(threads, thresholds, how, path))
    except OSError as error:
        written = None
        if log:
            log(f"not remembered: {error}")
    return ParallelChoice(threads, "measured", DEFAULT_PARALLEL_MIN, thresholds, written)
