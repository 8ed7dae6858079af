"""The machine's two ceilings for a roofline, measured at each thread count: the float32 compute
peak and the memory bandwidth.

Compute: ``fp_peak.py``'s throughput loops (mul+add and FMA, 16 and 8 lanes), one copy per
thread, each released from the GIL and started together; GFLOP/s is every thread's work over the
wall time from the first start to the last end. The peak is the best variant's median.

Bandwidth: STREAM's triad (a = b + s·c) and copy (a = b) over float32 arrays of at least four
times the last-level cache each, as numba ``prange`` loops on the thread count asked; GB/s counts
the bytes the kernel names (triad 3, copy 2 per element), as STREAM does: a store's
read-for-ownership is not counted. The bandwidth is the better kernel's median. Beside it, for
reading the floors (not in them): the triad over arrays of a sixteenth of the last-level cache,
as big as a step's activations at xl, whose bandwidth is what a part whose data stays in cache
can reach.

Every variant at every thread count runs once per round, in an order shuffled per round.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import fp_peak
import numba
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

Rate = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Samples = Annotated[list[Rate], Field(min_length=1)]
Load = Annotated[list[Annotated[float, Field(ge=0, allow_inf_nan=False)]], Field(min_length=3, max_length=3)]
Threads = Annotated[int, Field(ge=1, le=1024)]
MIN_ARRAY_BYTES = 64 * 2**20  # when the last-level cache is small or unknown
IN_CACHE_CALLS = 200  # the triad within the cache takes microseconds: many calls per sample
IN_CACHE = "triad in cache"
STREAM_BYTES = {"triad": 3, "copy": 2}  # arrays touched per element, as STREAM counts them


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AtThreads(_Strict):
    """Every sample at one thread count."""

    compute_gflops: dict[str, Samples] = Field(min_length=1)
    bandwidth_gbs: dict[str, Samples] = Field(min_length=1)
    cache_gbs: Samples | None = Field(default=None, description="The triad within the last-level cache.")

    @property
    def peak_gflops(self) -> float:
        return max(statistics.median(v) for v in self.compute_gflops.values())

    @property
    def bandwidth(self) -> float:
        return max(statistics.median(v) for v in self.bandwidth_gbs.values())

    @property
    def cache_bandwidth(self) -> float | None:
        return None if self.cache_gbs is None else statistics.median(self.cache_gbs)


class LoadAverage(_Strict):
    before: Load
    after: Load


class Ceilings(_Strict):
    """What ``--json`` saves under ``ceilings`` and ``--no-measure`` reads back."""

    ceilings_version: Literal[1]
    machine: dict[str, Any]
    load_average: LoadAverage
    settings: dict[str, Any]
    threads: dict[Threads, AtThreads] = Field(min_length=1)


def last_level_cache() -> int | None:
    """Bytes of the largest cache level CPU 0 reports, None when sysfs says nothing readable."""
    found: dict[int, int] = {}
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        if size[:-1].isdigit() and size[-1] in units:
            found[level] = int(size[:-1]) * units[size[-1]]
    return found[max(found)] if found else None


def machine() -> dict[str, Any]:
    """fp_peak's record of the CPU, compilers and BLAS, with what the ceilings depend on too."""
    found = fp_peak.machine()
    found |= {
        "cpu_count": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "last_level_cache_bytes": last_level_cache(),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
        "numba_threading_layer": numba.threading_layer(),  # asked after the first parallel call
    }
    return found


@numba.njit(parallel=True, fastmath=False)
def triad(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: float) -> None:  # pragma: no cover
    for i in numba.prange(a.shape[0]):
        a[i] = b[i] + s * c[i]


@numba.njit(parallel=True, fastmath=False)
def copy(a: np.ndarray, b: np.ndarray) -> None:  # pragma: no cover
    for i in numba.prange(a.shape[0]):
        a[i] = b[i]


def stream_arrays(nbytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = nbytes // 4
    # written now, so that no page fault lands in a timed call
    return np.zeros(n, np.float32), np.full(n, 1.0, np.float32), np.full(n, 2.0, np.float32)


def bandwidth_sampler(kernel: str, threads: int, arrays: Any, calls: int) -> Callable[[], float]:
    a, b, c = arrays
    moved = STREAM_BYTES[kernel] * a.nbytes * calls

    def sample() -> float:
        numba.set_num_threads(threads)
        begun = time.perf_counter()
        for _ in range(calls):
            if kernel == "triad":
                triad(a, b, c, np.float32(3.0))
            else:
                copy(a, b)
        return moved / (time.perf_counter() - begun) / 1e9

    return sample


def compute_sampler(kernel: Any, steps: int, count: int, lanes: int, threads: int) -> Callable[[], float]:
    starts = [fp_peak.starts(count, lanes, seed=n) for n in range(threads)]
    work = threads * 2.0 * count * lanes * steps

    def sample() -> float:
        together = threading.Barrier(threads)
        spans: list[tuple[float, float]] = []

        def one(start: np.ndarray) -> None:
            together.wait()
            begun = time.perf_counter()
            fp_peak.run(kernel, steps, start)
            spans.append((begun, time.perf_counter()))  # list.append is atomic under the GIL

        workers = [threading.Thread(target=one, args=(start,)) for start in starts]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return work / (max(e for _, e in spans) - min(b for b, _ in spans)) / 1e9

    return sample


def measure(thread_counts: list[int], rounds: int, seconds: float, calls: int, accumulators: int) -> Ceilings:
    """Both ceilings at every thread count, in interleaved rounds."""
    load_before = os.getloadavg()
    cache = last_level_cache()
    nbytes = max(4 * cache, MIN_ARRAY_BYTES) if cache else 4 * MIN_ARRAY_BYTES
    arrays = stream_arrays(nbytes)
    cached = stream_arrays((cache or 16 * 2**20) // 16)
    samplers: dict[tuple[int, str, str], Callable[[], float]] = {}
    steps = {}
    for name, (lanes, fused) in fp_peak.PEAKS.items():
        kernel = fp_peak.build(accumulators, lanes, fused, nogil=True)
        steps[name] = fp_peak.calibrate(kernel, fp_peak.starts(accumulators, lanes), seconds)
        for n in thread_counts:
            samplers[(n, "compute", name)] = compute_sampler(kernel, steps[name], accumulators, lanes, n)
    for kernel_name in STREAM_BYTES:
        for n in thread_counts:
            samplers[(n, "bandwidth", kernel_name)] = bandwidth_sampler(kernel_name, n, arrays, calls)
    for n in thread_counts:
        samplers[(n, "cache", IN_CACHE)] = bandwidth_sampler("triad", n, cached, calls * IN_CACHE_CALLS)
    for sampler in samplers.values():  # compiles, and warms every thread pool up
        sampler()
    found: dict[tuple[int, str, str], list[float]] = {key: [] for key in samplers}
    order = list(samplers)
    shuffle = random.Random(0)
    for round_ in range(rounds):
        shuffle.shuffle(order)
        for key in order:
            found[key].append(samplers[key]())
        print(f"ceilings: round {round_ + 1}/{rounds} done", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    return Ceilings(
        ceilings_version=1,
        machine=machine(),
        load_average=LoadAverage(before=list(load_before), after=list(load_after)),
        settings={
            "rounds": rounds,
            "seconds_per_compute_call": seconds,
            "compute_steps_per_call": steps,
            "accumulators": accumulators,
            "stream_calls_per_sample": calls,
            "stream_array_bytes": arrays[0].nbytes,
            "in_cache_array_bytes": cached[0].nbytes,
            "in_cache_calls_per_sample": calls * IN_CACHE_CALLS,
        },
        threads={
            n: AtThreads(
                compute_gflops={name: found[(n, "compute", name)] for name in fp_peak.PEAKS},
                bandwidth_gbs={name: found[(n, "bandwidth", name)] for name in STREAM_BYTES},
                cache_gbs=found[(n, "cache", IN_CACHE)],
            )
            for n in thread_counts
        },
    )
