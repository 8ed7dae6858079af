"""The reference backend: every output accumulates in one fixed order.

forward  C[m, n]  = sum over k ascending of A[m, k] · B[k, n]
dA       dA[m, k] = sum over n ascending of dC[m, n] · B[k, n]
dB       dB[k, n] = sum over m ascending of A[m, k] · dC[m, n]

Each step of the sum is a float32 multiply, rounded, then a float32 add, rounded: two
separate NumPy ufuncs, so no fused multiply-add can creep in. The code is vectorised only
across independent outputs (a rank-1 update of the whole output per step of the sum), which
keeps every output's order. Order-preserving backends must reproduce these bits exactly.
"""

from __future__ import annotations

import numpy as np


class NaiveBackend:
    name = "naive"
    description = "Reference: plain NumPy rank-1 updates in the fixed accumulation order."
    order_preserving = True
    thread_control = "single-threaded: NumPy ufuncs run on the calling thread; not settable"
    # Its order is the one order-preserving backends reproduce, and speedups are quoted over it.
    role = "reference"

    @staticmethod
    def default_threads() -> int:
        return 1

    @staticmethod
    def unavailable_reason() -> str | None:
        return None

    def set_threads(self, n: int) -> int:
        return 1

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        # C += A[:, k] ⊗ B[k, :] for k ascending
        term = np.empty_like(out)
        out.fill(0.0)
        for k in range(a.shape[1]):
            np.multiply(a[:, k, None], b[None, k, :], out=term)
            np.add(out, term, out=out)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        # dA += dC[:, n] ⊗ B[:, n] for n ascending. The columns are copied into rows first:
        # a copy changes no value, and strided columns made this kernel 8x slower than the others.
        dc_t, b_t = np.ascontiguousarray(dc.T), np.ascontiguousarray(b.T)
        term = np.empty_like(out)
        out.fill(0.0)
        for n in range(dc.shape[1]):
            np.multiply(dc_t[n, :, None], b_t[None, n, :], out=term)
            np.add(out, term, out=out)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        # dB += A[m, :] ⊗ dC[m, :] for m ascending
        term = np.empty_like(out)
        out.fill(0.0)
        for m in range(a.shape[0]):
            np.multiply(a[m, :, None], dc[None, m, :], out=term)
            np.add(out, term, out=out)
