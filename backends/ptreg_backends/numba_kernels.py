"""numba: register- and cache-blocked compiled loops in naive's order, parallel over outputs.

All three kernels call one compiled routine (``numba_gemm.gemm``), ``out[i, j] = sum over r
ascending of L[i, r] · R[r, j]``, where

- forward: L = A,     R = B,     r = k
- dA:      L = dC,    R = Bᵀ,    r = n
- dB:      L = Aᵀ,    R = dC,    r = m

(Bᵀ and Aᵀ are views: the routine packs its operands, so it reads them in any layout.) See
``numba_gemm`` for the blocking and for why the bits are naive's.

The register tile and blocking are chosen for the machine (``numba_tiles``): the tile that
PTREG_NUMBA_TILE names, else the one remembered for this CPU, else the candidates are timed
on first use (under a minute) and the fastest remembered. numba is imported only when the
backend is instantiated, so listing backends never imports it; compiled code is cached on
disk (``cache=True``), so later processes load it instead of compiling (5-15 s a tile), and
``__init__`` does the loading, outside any timed call.

Six of the step's other ops are the backend's own too (``numba_step.NumbaStepOps``, whose
kernels are ``numba_ops`` and ``numba_attention``); which, and why, is in docs/backends.md.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from typing import Any, ClassVar

import numpy as np

from ptreg_backends.numba_step import NumbaStepOps


@functools.cache
def _compiled(fused: bool) -> tuple[Any, Any]:
    """The chosen tile and its compiled routine, or its fused twin (loaded from numba's disk
    cache when it is there); the first time on a machine, the candidates are timed first (under
    a minute)."""
    from ptreg_backends import numba_gemm

    def log(message: str) -> None:
        print(f"numba tiles: {message}", file=sys.stderr, flush=True)

    choice = numba_gemm.choose(log)
    return choice, numba_gemm.compile_gemm(choice.tile, fused=fused)


class NumbaBackend(NumbaStepOps):
    name = "numba"
    description = (
        "numba-compiled register- and cache-blocked loops in naive's order, parallel over output tiles (bit-identical); "
        "six of the step's ops and two fusions of two, each within its declared tolerance."
    )
    order_preserving = True
    # Measured and not provided (docs/backends.md, numba's ops): NumPy's residual add and bias
    # loops are as fast, so the step keeps them; the other ops are numba's own.
    residual_add = None  # type: ignore[assignment]
    bias_forward = None  # type: ignore[assignment]
    bias_backward = None  # type: ignore[assignment]
    op_tolerances: ClassVar[dict[str, float]] = {
        op: tolerance for op, tolerance in NumbaStepOps.op_tolerances.items() if op not in ("residual", "bias")
    }
    thread_control = "numba parallel threads (prange over output tiles), set with numba.set_num_threads"
    fused_products = False  # the routine's fused twin instead (NumbaFmaBackend)

    @staticmethod
    def default_threads() -> int:
        return int(os.environ.get("NUMBA_NUM_THREADS") or os.cpu_count() or 1)

    @staticmethod
    def unavailable_reason() -> str | None:
        try:
            found = importlib.util.find_spec("numba") is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return "numba is not installed (pip install 'ptreg[numba]')"
        from ptreg_backends import numba_threads
        from ptreg_backends.numba_tiles import forced

        try:
            forced()
            numba_threads.forced()
        except ValueError as error:  # PTREG_NUMBA_TILE names no candidate, or a threshold is no number
            return str(error)
        return None

    @staticmethod
    def configuration() -> str:
        """The register tile this machine uses, read from the tile cache without importing numba."""
        from ptreg_backends.numba_tiles import describe_choice

        return describe_choice()

    def __init__(self) -> None:
        import numba

        self._choice, self._kernel = _compiled(self.fused_products)
        self.threads = numba.get_num_threads()
        self.load_ops()
        self.warm_up()
        self._choose_parallel()

    def _choose_parallel(self) -> None:
        """The ops' parallel thresholds for the threads now set: remembered for this machine, or
        measured now (a few seconds, once per machine and thread count; numba_threads)."""
        from ptreg_backends import numba_op_timing

        def log(message: str) -> None:
            print(f"numba thresholds: {message}", file=sys.stderr, flush=True)

        self._parallel = numba_op_timing.choose(self, log)
        self.parallel_min, self.parallel_mins = self._parallel.least, self._parallel.per_kernel

    def runtime_details(self) -> dict[str, Any]:
        """For the cell's provenance: numba's threads, its threading layer (known once a parallel
        function has run), the OpenMP wait policy and GNU OpenMP spin count this process ran
        with, the register tile
        (its blocking, and whether it was forced, remembered or timed just now), and the ops'
        parallel thresholds (and whether forced, remembered, measured just now or the default)."""
        import numba

        try:
            layer: str | None = numba.threading_layer()
        except ValueError:
            layer = None
        return {
            "numba_threads": numba.get_num_threads(),
            "numba_threading_layer": layer,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
            "numba_tile": self._choice.details(),
            "numba_products": "fused multiply-add" if self.fused_products else "multiply, then add: naive's bits",
            "numba_parallel_min": self._parallel.details(),
        }

    def warm_up(self) -> None:
        """Run once on tiny arrays so thread-pool start-up, and the ops' compilation (or their
        load from numba's disk cache), is not in the first timed call."""
        tiny = np.ones((2, 2), dtype=np.float32)
        self._kernel(tiny, tiny, np.empty((2, 2), dtype=np.float32), self.threads)
        self.warm_up_ops()

    def set_threads(self, n: int) -> int:
        import numba

        # the pool's size, fixed when numba starts; numba's config sets it as an attribute at run time
        used = max(1, min(int(n), int(getattr(numba.config, "NUMBA_NUM_THREADS"))))  # noqa: B009
        numba.set_num_threads(used)
        self.threads = used
        if used != self._parallel.threads:
            self._choose_parallel()
        return used

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._kernel(a, b, out, self.threads)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._kernel(dc, b.T, out, self.threads)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        self._kernel(a.T, dc, out, self.threads)


class NumbaFmaBackend(NumbaBackend):
    """numba with each multiply-add of its products rounded once, as one FMA instruction where the
    CPU has one: the same tile, packing and ops as ``numba``, without naive's bits, so held to
    the evaluator's tolerance against float64. What those bits cost: ``benchmarks/parity_cost.py``
    and docs/backends.md."""

    name = "numba-fma"
    description = (
        "numba's backend with the matmuls' multiply-adds fused (one rounding each, FMA): not naive's bits, "
        "within the evaluator's tolerance; the same tile, ops and threads as numba."
    )
    order_preserving = False
    fused_products = True
