"""Example third-party ptreg backends: one that works, one that says why it cannot run, and one
whose kernels are made slower by a known factor (to test that comparisons find a regression)."""

from __future__ import annotations

import os

import numpy as np


class TransposeBackend:
    """Each kernel as one np.dot on explicitly transposed contiguous copies.

    BLAS picks its own summation order, so this is not order-preserving: ptreg's parity gate
    holds it to the float64 tolerance only.
    """

    name = "example-transpose"
    description = "Example plugin: np.dot on explicitly transposed copies (BLAS order, tolerance only)."
    order_preserving = False
    thread_control = "whatever NumPy's BLAS uses; this example does not set threads"

    @staticmethod
    def default_threads() -> int:
        return 1

    @staticmethod
    def unavailable_reason() -> str | None:
        return None

    def set_threads(self, n: int) -> int:
        return 1  # not controlled: honest only where BLAS runs one thread

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.dot(a, b, out=out)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.dot(dc, np.ascontiguousarray(b.T), out=out)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        np.dot(np.ascontiguousarray(a.T), dc, out=out)


class BrokenBackend:
    """Registered but never usable here: listing must report it, not crash on it."""

    name = "example-broken"
    description = "Example plugin that depends on a package that does not exist."
    order_preserving = False
    thread_control = "not applicable: never runs"

    @staticmethod
    def default_threads() -> int:
        return 1

    @staticmethod
    def unavailable_reason() -> str | None:
        return "needs the imaginary package 'quantum-blas'"

    def __init__(self) -> None:
        raise RuntimeError("example-broken cannot start: " + str(self.unavailable_reason()))


class SlowedBackend:
    """np.matmul, done ``PTREG_EXAMPLE_SLOWDOWN`` times per call (default once): a backend whose
    kernels are slower by a known whole factor, whatever the machine."""

    name = "example-slowed"
    description = "Example plugin: np.matmul repeated PTREG_EXAMPLE_SLOWDOWN times per call."

    def __init__(self) -> None:
        self.factor = int(os.environ.get("PTREG_EXAMPLE_SLOWDOWN", "1"))

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        for _ in range(self.factor):
            np.matmul(a, b, out=out)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        for _ in range(self.factor):
            np.matmul(dc, b.T, out=out)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        for _ in range(self.factor):
            np.matmul(a.T, dc, out=out)
