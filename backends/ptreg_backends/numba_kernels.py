"""numba: compiled loops in naive's accumulation order, parallel over independent outputs.

All three kernels are one compiled loop, ``out[i, :] = sum over r ascending of L[i, r] ·
R[r, :]`` (start at 0.0; per r a float32 multiply, then a float32 add), where

- forward: L = A,                  R = B,                      r = k
- dA:      L = dC,                 R = Bᵀ (copied contiguous), r = n
- dB:      L = Aᵀ (copied),        R = dC,                     r = m

so the innermost loop runs along a contiguous row of R and of ``out`` and vectorises across
independent outputs, never across the reduction. The parallel loop (``prange``) hands out
(column panel, row) pairs: each output element is written by one thread only, in order.

Bits: ``fastmath=False`` leaves LLVM's IEEE semantics, and numba emits ``fmul`` and ``fadd``
without the ``contract`` flag, so LLVM may not fuse them into an FMA even on CPUs that have
one; the parity gate (``ptreg.parity``) checks the result against naive bit for bit.

numba is imported only when the backend is instantiated, so listing backends never imports
it; compiled code is cached on disk (``cache=True``) so later processes skip compilation.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any, Optional

import numpy as np

# Columns per panel: a thread walks the rows of one K×panel slab of R, which stays in L2
# (1 MiB per core here; 1 MiB at K=256, panel 1024). Quick look at the xl fc shape, GFLOP/s
# forward / dA / dB with 1 thread: panel 256: 19 25 19; 512: 23 25 22; 1024: 25 25 28 (noisy).
# Not tuned further; a later issue tunes it.
DEFAULT_PANEL = 1024

_SIGNATURE = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], int64)"


@functools.lru_cache(maxsize=None)
def _compiled() -> Any:
    """The compiled kernel (compiles or loads from the disk cache on first call)."""
    import numba

    @numba.njit(_SIGNATURE, parallel=True, cache=True, fastmath=False)
    def rank1_rows(lhs, rhs, out, panel):  # pragma: no cover - runs compiled
        rows, reduction = lhs.shape
        cols = rhs.shape[1]
        panels = (cols + panel - 1) // panel
        # panel-major: consecutive iterations (same thread) reuse one panel of rhs
        for t in numba.prange(panels * rows):
            i = t % rows
            j0 = (t // rows) * panel
            j1 = min(j0 + panel, cols)
            # 1-D views indexed from 0: with range(j0, j1) on the 2-D arrays LLVM left the
            # loop scalar (~4 GFLOP/s instead of ~30 on one core at the xl fc shape)
            out_row = out[i, j0:j1]
            out_row[:] = 0.0
            for r in range(reduction):
                x = lhs[i, r]
                rhs_row = rhs[r, j0:j1]
                for j in range(j1 - j0):
                    out_row[j] += x * rhs_row[j]

    return rank1_rows


class NumbaBackend:
    name = "numba"
    description = "numba-compiled loops in naive's order, parallel over output rows (bit-identical)."
    order_preserving = True
    thread_control = "numba parallel threads (prange over output rows), set with numba.set_num_threads"

    @staticmethod
    def default_threads() -> int:
        return int(os.environ.get("NUMBA_NUM_THREADS") or os.cpu_count() or 1)

    @staticmethod
    def unavailable_reason() -> Optional[str]:
        try:
            found = importlib.util.find_spec("numba") is not None
        except (ImportError, ValueError):
            found = False
        return None if found else "numba is not installed (pip install 'ptreg[numba]')"

    def __init__(self, panel: int = DEFAULT_PANEL):
        if panel < 1:
            raise ValueError(f"panel must be positive, got {panel}")
        self.panel = int(panel)
        self._kernel = _compiled()
        self.warm_up()

    def warm_up(self) -> None:
        """Run once on tiny arrays so thread-pool start-up is not in the first timed call."""
        tiny = np.ones((2, 2), dtype=np.float32)
        self._kernel(tiny, tiny, np.empty((2, 2), dtype=np.float32), self.panel)

    def set_threads(self, n: int) -> int:
        import numba

        used = max(1, min(int(n), numba.config.NUMBA_NUM_THREADS))
        numba.set_num_threads(used)
        return used

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._kernel(a, b, out, self.panel)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._kernel(dc, np.ascontiguousarray(b.T), out, self.panel)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        self._kernel(np.ascontiguousarray(a.T), dc, out, self.panel)
