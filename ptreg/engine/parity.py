"""The parity gate: a backend's kernels must compute the right thing before anyone times them.

Every backend is held to a float64 reference within a tolerance; an order-preserving backend
must in addition reproduce the reference backend's bits exactly. A kernel that
raises, returns non-finite values or leaves ``out`` unwritten fails its check; nothing here
ever propagates a backend's exception.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..records.run_results import KERNELS, Kernel, ParityCheck, ParityOutcome
from .backends import METHOD_OF_KERNEL, kernel_shapes

Mode = Literal["bit-identical", "tolerance"]


@dataclass
class KernelCheck:
    kernel: Kernel
    shape: tuple[int, int, int]  # (M, K, N) of the product
    mode: Mode
    passed: bool
    max_abs_error: float  # max |out - float64 reference|; nan when there is no output
    max_scaled_error: float  # max |out - ref| / (atol + rtol·S); <= 1 is within tolerance
    detail: str

    def to_record(self) -> ParityCheck:
        return ParityCheck(
            kernel=self.kernel,
            shape=list(self.shape),
            mode=self.mode,
            passed=self.passed,
            max_abs_error=_finite_or_none(self.max_abs_error),
            max_scaled_error=_finite_or_none(self.max_scaled_error),
            detail=self.detail,
        )


@dataclass
class ParityResult:
    backend: str
    passed: bool
    checks: list[KernelCheck] = field(default_factory=list)

    @property
    def worst(self) -> KernelCheck | None:
        """The failing check with the largest scaled error; one without a number (it raised,
        or gave non-finite output) counts as the largest."""
        failed = [c for c in self.checks if not c.passed]
        if not failed:
            return None
        return max(failed, key=lambda c: c.max_scaled_error if math.isfinite(c.max_scaled_error) else math.inf)

    def to_outcome(self) -> ParityOutcome:
        """The run record's parity entry, its summary naming the worst mismatch."""
        return ParityOutcome(
            backend=self.backend,
            passed=self.passed,
            summary=self.summary(),
            checks=[c.to_record() for c in self.checks],
        )

    def summary(self) -> str:
        n = len(self.checks)
        if self.passed:
            modes = sorted({c.mode for c in self.checks})
            return f"{self.backend}: parity passed ({n} checks, {', '.join(modes) or 'none run'})"
        failed = sum(not c.passed for c in self.checks)
        worst = self.worst
        if worst is None:
            return f"{self.backend}: parity FAILED: no shapes were checked"
        m, k, n_ = worst.shape
        return (
            f"{self.backend}: parity FAILED {failed} of {n} checks; worst {worst.kernel} "
            f"M={m} K={k} N={n_}: {worst.detail}"
        )


def check_parity(
    backend: Any,
    reference: Any,
    shapes: Iterable[tuple[int, int, int]],
    rtol: float,
    atol: float,
    seed: int = 0,
    name: str | None = None,
    reference_name: str | None = None,
) -> ParityResult:
    """Run every kernel of ``backend`` on every shape and check it; see the module docstring.

    An order-preserving backend is also held to ``reference``'s bits; without a reference
    (no registered backend declares that role) it is held to the tolerance only, and the
    checks' mode says so. Inputs for shape number ``i`` (after dropping repeats) come from
    ``np.random.default_rng(seed + i)``, so a failure reproduces from the seed and the shapes.
    No shapes at all is a failure: nothing would have been established.
    """
    unique = list(dict.fromkeys((int(m), int(k), int(n)) for m, k, n in shapes))
    exact = bool(getattr(backend, "order_preserving", False))
    shown = reference_name or str(getattr(reference, "name", "the reference"))
    checks = []
    for index, shape in enumerate(unique):
        operands = _operands(shape, seed + index)
        for kernel in KERNELS:
            checks.append(_check(backend, reference if exact else None, shown, kernel, shape, operands, rtol, atol))
    backend_name = name or str(getattr(backend, "name", type(backend).__name__))
    return ParityResult(backend_name, bool(checks) and all(c.passed for c in checks), checks)


def _operands(shape: tuple[int, int, int], seed: int) -> dict[str, np.ndarray]:
    """A, B and dC for (M, K, N): standard normal float32, so sums cancel as gradients do."""
    m, k, n = shape
    rng = np.random.default_rng(seed)
    return {
        name: rng.standard_normal(dims, dtype=np.float32)
        for name, dims in (("a", (m, k)), ("b", (k, n)), ("dc", (m, n)))
    }


def _inputs(kernel: Kernel, ops: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    return {
        "forward": (ops["a"], ops["b"]),
        "backward_da": (ops["dc"], ops["b"]),
        "backward_db": (ops["a"], ops["dc"]),
    }[kernel]


def _reference64(kernel: Kernel, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact-ish result in float64 and its scale S, the sum of |products| per output.

    S, not |result|, bounds float32 rounding: each of the K partial sums is rounded relative to
    its own size, which can be up to S even when the terms cancel to a result near zero, so a
    tolerance relative to |result| would fail correct kernels on cancelling outputs.
    """
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    if kernel == "forward":
        x_op, y_op = x64, y64
    elif kernel == "backward_da":
        x_op, y_op = x64, y64.T
    else:
        x_op, y_op = x64.T, y64
    return x_op @ y_op, np.abs(x_op) @ np.abs(y_op)


def _check(
    backend: Any,
    reference: Any,
    reference_name: str,
    kernel: Kernel,
    shape: tuple[int, int, int],
    ops: dict[str, np.ndarray],
    rtol: float,
    atol: float,
) -> KernelCheck:
    mode: Mode = "tolerance" if reference is None else "bit-identical"

    def fail(detail: str, abs_err: float = math.nan, scaled: float = math.nan) -> KernelCheck:
        return KernelCheck(kernel, shape, mode, False, abs_err, scaled, detail)

    x, y = _inputs(kernel, ops)
    out_shape = kernel_shapes(kernel, *shape)[2]
    out, error = _run(backend, kernel, x, y, out_shape)
    if out is None or error:
        return fail(error)
    finite = np.isfinite(out)
    if not finite.all():
        bad = int(out.size - np.count_nonzero(finite))
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        unwritten = " (NaN as prefilled: out not written?)" if np.isnan(out[first]) else ""
        return fail(f"{bad} of {out.size} outputs are not finite, first at {first}{unwritten}")

    ref64, scale = _reference64(kernel, x, y)
    abs_err = np.abs(out.astype(np.float64) - ref64)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = abs_err / (atol + rtol * scale)
    scaled[abs_err == 0.0] = 0.0  # exact is fine even where atol + rtol·S is 0
    max_abs, max_scaled = float(abs_err.max(initial=0.0)), float(scaled.max(initial=0.0))
    if max_scaled > 1.0:
        at = tuple(int(i) for i in np.unravel_index(int(np.argmax(scaled)), scaled.shape))
        return fail(
            f"outside tolerance: |out - ref| = {abs_err[at]:.3g} > {atol:g} + {rtol:g}·{scale[at]:.3g} "
            f"at {at} (scaled error {max_scaled:.3g})",
            max_abs,
            max_scaled,
        )
    detail = f"within tolerance (scaled error {max_scaled:.3g} <= 1)"

    if reference is not None:
        ref_out, ref_error = _run(reference, kernel, x, y, out_shape)
        if ref_out is None or ref_error:
            return fail(f"reference backend failed, cannot compare bits: {ref_error}", max_abs, max_scaled)
        # bits, not values: also tells +0.0 from -0.0, which a different order can produce
        differ = out.view(np.uint32) != ref_out.view(np.uint32)
        if differ.any():
            first = tuple(int(i) for i in np.argwhere(differ)[0])
            return fail(
                f"not bit-identical to {reference_name}: "
                f"{int(differ.sum())} of {out.size} outputs differ, first at {first} "
                f"({out[first]!r} vs {ref_out[first]!r}); {detail}",
                max_abs,
                max_scaled,
            )
        detail = f"bit-identical to {reference_name}; {detail}"
    return KernelCheck(kernel, shape, mode, True, max_abs, max_scaled, detail)


def _run(
    backend: Any, kernel: Kernel, x: np.ndarray, y: np.ndarray, out_shape: tuple[int, int]
) -> tuple[np.ndarray | None, str]:
    """Call the kernel on copies of the inputs into a NaN-filled ``out``: (out, "") or (None or
    out, what went wrong). Copies, so a kernel that writes its inputs cannot spoil later checks,
    and such a kernel is caught."""
    x_in, y_in = x.copy(), y.copy()
    out = np.full(out_shape, np.nan, dtype=np.float32)
    try:
        getattr(backend, METHOD_OF_KERNEL[kernel])(x_in, y_in, out)
    except Exception as exc:  # a failing kernel is a failed check, never a crash
        return None, f"raised {type(exc).__name__}: {exc}"
    if not (np.array_equal(x_in, x) and np.array_equal(y_in, y)):
        return out, "the kernel modified its inputs"
    return out, ""


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
