"""Example third-party ptreg backends: one that works, one that says why it cannot run, and one
whose kernels are made slower by a known factor (to test that comparisons find a regression)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

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
    """np.matmul, then as long again times ``PTREG_EXAMPLE_SLOWDOWN`` - 1 spent spinning (default
    1: not slowed): a backend whose kernels are slower by a known factor, whatever the machine."""

    name = "example-slowed"
    description = "Example plugin: np.matmul slowed by the factor PTREG_EXAMPLE_SLOWDOWN."

    def __init__(self) -> None:
        self.factor = float(os.environ.get("PTREG_EXAMPLE_SLOWDOWN", "1"))

    def _slowed(self, product: Callable[[], None]) -> None:
        start = time.perf_counter()
        product()
        until = time.perf_counter() + (time.perf_counter() - start) * (self.factor - 1)
        while time.perf_counter() < until:
            pass

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._slowed(lambda: np.matmul(a, b, out=out))

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._slowed(lambda: np.matmul(dc, b.T, out=out))

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        self._slowed(lambda: np.matmul(a.T, dc, out=out))


class MoreWorkBackend:
    """np.matmul, and every ``PTREG_EXAMPLE_REPEAT_EVERY``-th call done twice (unset: never): a
    backend that does a known fraction more work, counted the same on any machine (the
    instructions timer's tests; a slowdown by spinning, as example-slowed's, is not work)."""

    name = "example-more-work"
    description = "Example plugin: np.matmul, every Nth call (PTREG_EXAMPLE_REPEAT_EVERY) done twice."

    def __init__(self) -> None:
        every = os.environ.get("PTREG_EXAMPLE_REPEAT_EVERY")
        self.every = int(every) if every else None
        self.calls = 0

    def _counted(self, product: Callable[[], None]) -> None:
        product()
        self.calls += 1
        if self.every is not None and self.calls % self.every == 0:
            product()

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._counted(lambda: np.matmul(a, b, out=out))

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._counted(lambda: np.matmul(dc, b.T, out=out))

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        self._counted(lambda: np.matmul(a.T, dc, out=out))


class OwnOpsBackend(TransposeBackend):
    """Provides two of the step's ops: layernorm computed in float64 and rounded once at the end
    (so within a tolerance of NumPy's float32, not its bits), and the residual add as NumPy's
    own (its bits)."""

    name = "example-own-ops"
    description = "Example plugin: its own layernorm (in float64) and residual add beside np.dot kernels."
    op_tolerances = {"layernorm": 1e-5, "residual": 0.0}  # noqa: RUF012 - read from the class

    @staticmethod
    def layernorm_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, object]:
        x64 = x.astype(np.float64)
        mean = x64.mean(axis=-1, keepdims=True)
        rstd = 1.0 / np.sqrt(((x64 - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
        norm = (x64 - mean) * rstd
        return (norm * w + b).astype(x.dtype), (norm, rstd, w)

    @staticmethod
    def layernorm_backward(dout: np.ndarray, cache: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        norm, rstd, w = cache  # type: ignore[misc]
        d64 = dout.astype(np.float64)
        dnorm = d64 * w
        dx = (dnorm - dnorm.mean(axis=-1, keepdims=True) - norm * (dnorm * norm).mean(axis=-1, keepdims=True)) * rstd
        dtype = dout.dtype
        return dx.astype(dtype), (d64 * norm).sum(axis=0).astype(dtype), d64.sum(axis=0).astype(dtype)

    @staticmethod
    def residual_add(x: np.ndarray, branch: np.ndarray) -> np.ndarray:
        return x + branch


class WrongOpBackend(TransposeBackend):
    """Provides a GELU with a wrong constant under a tight tolerance: its parity must fail."""

    name = "example-wrong-op"
    description = "Example plugin: a GELU off by 0.1%, to show the parity gate of ops refusing it."
    op_tolerances = {"gelu": 1e-6}  # noqa: RUF012 - read from the class

    @staticmethod
    def gelu_forward(x: np.ndarray) -> np.ndarray:
        out: np.ndarray = 0.5 * x * (1.0 + np.tanh(0.7986 * (x + 0.044715 * x**3)))
        return out

    @staticmethod
    def gelu_backward(dout: np.ndarray, x: np.ndarray) -> np.ndarray:
        return dout * (0.5 * (1.0 + np.tanh(0.7986 * x)))
