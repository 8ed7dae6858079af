"""numba: register- and cache-blocked compiled loops in naive's order, parallel over outputs.

All three kernels call one compiled routine (``numba_gemm.gemm``), ``out[i, j] = sum over r
ascending of L[i, r] · R[r, j]``, where

- forward: L = A,     R = B,     r = k
- dA:      L = dC,    R = Bᵀ,    r = n
- dB:      L = Aᵀ,    R = dC,    r = m

(Bᵀ and Aᵀ are views: the routine packs its operands, so it reads them in any layout.) See
``numba_gemm`` for the blocking and for why the bits are naive's.

numba is imported only when the backend is instantiated, so listing backends never imports
it; compiled code is cached on disk (``cache=True``), so later processes load it instead of
compiling (about 10 s), and ``__init__`` does the loading, outside any timed call.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any

import numpy as np


@functools.cache
def _compiled() -> Any:
    """The compiled routine (compiles, or loads from the disk cache, on first call)."""
    # numba's OpenMP workers spin after each parallel region by default, taking the core from
    # the NumPy and BLAS work of the rest of the training step. Passive waiting, unless the
    # user chose otherwise (read when numba starts its pool, so set before): tinygpt xl, 2
    # threads, ms/step numba vs numpy-blas in one run: 1,763 vs 606 spinning, 1,158 vs 585
    # passive (`ptreg bench -b numba -b numpy-blas -c xl --threads 2`, OMP_WAIT_POLICY set).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from ptreg_backends import numba_gemm

    return numba_gemm.compile_gemm()


class NumbaBackend:
    name = "numba"
    description = (
        "numba-compiled register- and cache-blocked loops in naive's order, parallel over output tiles (bit-identical)."
    )
    order_preserving = True
    thread_control = "numba parallel threads (prange over output tiles), set with numba.set_num_threads; OMP_WAIT_POLICY=PASSIVE unless set"

    @staticmethod
    def default_threads() -> int:
        return int(os.environ.get("NUMBA_NUM_THREADS") or os.cpu_count() or 1)

    @staticmethod
    def unavailable_reason() -> str | None:
        try:
            found = importlib.util.find_spec("numba") is not None
        except (ImportError, ValueError):
            found = False
        return None if found else "numba is not installed (pip install 'ptreg[numba]')"

    def __init__(self) -> None:
        import numba

        self._kernel = _compiled()
        self.threads = numba.get_num_threads()
        self.warm_up()

    def runtime_details(self) -> dict[str, Any]:
        """For the cell's provenance: numba's threads, its threading layer (known once a parallel
        function has run) and the OpenMP wait policy this process ran with."""
        import numba

        try:
            layer: str | None = numba.threading_layer()
        except ValueError:
            layer = None
        return {
            "numba_threads": numba.get_num_threads(),
            "numba_threading_layer": layer,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        }

    def warm_up(self) -> None:
        """Run once on tiny arrays so thread-pool start-up is not in the first timed call."""
        tiny = np.ones((2, 2), dtype=np.float32)
        self._kernel(tiny, tiny, np.empty((2, 2), dtype=np.float32), self.threads)

    def set_threads(self, n: int) -> int:
        import numba

        # the pool's size, fixed when numba starts; numba's config sets it as an attribute at run time
        used = max(1, min(int(n), int(getattr(numba.config, "NUMBA_NUM_THREADS"))))  # noqa: B009
        numba.set_num_threads(used)
        self.threads = used
        return used

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._kernel(a, b, out, self.threads)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._kernel(dc, b.T, out, self.threads)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        self._kernel(a.T, dc, out, self.threads)
