"""numpy-blas: ``np.matmul`` into ``out``, i.e. the BLAS sgemm NumPy links (OpenBLAS here).

BLAS blocks, vectorises and threads the reduction in its own order (and uses FMA where the
CPU has it), so results differ from naive in the last bits: ``order_preserving`` is False and
the parity gate holds it to the tolerance only. The transposes are views; BLAS reads them
as transposed operands, no copy.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def _blas_pools() -> list[dict[str, Any]]:
    """threadpoolctl's view of the BLAS libraries loaded in this process (NumPy's included)."""
    from threadpoolctl import threadpool_info

    return [pool for pool in threadpool_info() if pool.get("user_api") == "blas"]


class NumpyBlasBackend:
    name = "numpy-blas"
    description = "np.matmul into out: NumPy's BLAS sgemm; fast, its own summation order (tolerance only)."
    order_preserving = False
    thread_control = (
        "BLAS library threads (OpenBLAS/MKL pool), set with threadpoolctl.threadpool_limits(user_api='blas')"
    )
    # What a user would pick instead of an own kernel: every kernel is also compared with it.
    role = "peer"

    def __init__(self) -> None:
        self._limits: Any = None  # the live threadpool_limits; its limit holds while it exists

    @staticmethod
    def default_threads() -> int:
        counts = [int(pool["num_threads"]) for pool in _blas_pools() if pool.get("num_threads")]
        return max(counts) if counts else (os.cpu_count() or 1)

    @staticmethod
    def unavailable_reason() -> str | None:
        return None  # NumPy always has a matmul, BLAS-backed or not

    def set_threads(self, n: int) -> int:
        from threadpoolctl import threadpool_limits

        if self._limits is not None:  # limits do not stack: go back to the original first
            self._limits.restore_original_limits()
        self._limits = threadpool_limits(limits=max(1, int(n)), user_api="blas")
        counts = [int(pool["num_threads"]) for pool in _blas_pools() if pool.get("num_threads")]
        return max(counts) if counts else 1  # no BLAS found: NumPy's own loop is single-threaded

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.matmul(a, b, out=out)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.matmul(dc, b.T, out=out)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        np.matmul(a.T, dc, out=out)
