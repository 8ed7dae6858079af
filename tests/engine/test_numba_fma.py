"""numba-fma: numba's backend with its products' multiply-adds fused. It is registered through the
entry point like any backend, declares that it does not keep naive's order, stays within the
tolerance on shapes cut at every edge, really fuses where the CPU can (other bits than naive's),
and says so in the run's provenance; numba beside it keeps naive's bits."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest

from ptreg.engine.backends import describe, entries
from ptreg.engine.environment import cpu_flags
from ptreg.engine.parity import check_parity
from ptreg_backends.naive import NaiveBackend
from ptreg_backends.numba_tiles import TILES, runnable

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="numba is not installed (pip install 'ptreg[numba]')"
)
RTOL, ATOL = 1e-4, 1e-6  # the evaluators' tolerance
# edges against every tile's mr, nr, kc and mc; (300, 40, 290): dB's reduction in several chunks
SHAPES = [(1, 1, 1), (37, 29, 45), (129, 3, 65), (45, 300, 17), (300, 40, 290)]
# one tile of each register width, not all six: a fused twin compiles in 5-15 s
TWINS = [TILES["avx2-6x16"], TILES["avx512-12x32"]]


@pytest.mark.parametrize("tile", TWINS, ids=[t.name for t in TWINS])
def test_a_fused_twin_stays_within_the_tolerance_and_fuses_where_the_cpu_can(tile: Any) -> None:
    if not runnable(tile):
        pytest.skip(f"{tile.name} needs {tile.needs}")
    from ptreg_backends import numba_gemm

    twin = numba_gemm.compile_gemm(tile, fused=True)
    differed = False
    rng = np.random.default_rng(11)
    for m, k, n in SHAPES:
        a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
        for threads in (1, 2):
            got, by_naive = np.full((m, n), np.nan, np.float32), np.empty((m, n), np.float32)
            twin(a, b, got, threads)
            NaiveBackend().matmul_forward(a, b, by_naive)
            exact = a.astype(np.float64) @ b.astype(np.float64)
            scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
            assert np.all(np.abs(got - exact) <= ATOL + RTOL * scale), (tile.name, (m, k, n), threads)
            differed |= not np.array_equal(got.view(np.uint32), by_naive.view(np.uint32))
    if "fma" in (cpu_flags() or set()):
        assert differed, f"{tile.name}'s twin gave naive's bits everywhere: nothing was fused"


def test_numba_fma_is_an_entry_point_held_to_the_tolerance_beside_a_bit_identical_numba() -> None:
    found = entries()
    assert found["numba-fma"].target == "ptreg_backends.numba_kernels:NumbaFmaBackend"
    fma, numba = describe(found["numba-fma"]), describe(found["numba"])
    assert fma.available and fma.order_preserving is False and numba.order_preserving is True
    assert fma.configuration == numba.configuration  # the same tile, chosen once per machine

    from ptreg_backends.numba_kernels import NumbaBackend, NumbaFmaBackend

    fused, kept = NumbaFmaBackend(), NumbaBackend()
    assert fused.runtime_details()["numba_products"] == "fused multiply-add"
    assert kept.runtime_details()["numba_products"] == "multiply, then add: naive's bits"
    shapes = [(64, 256, 96), (37, 300, 53)]
    within = check_parity(fused, NaiveBackend(), shapes, RTOL, ATOL)
    assert within.passed and {c.mode for c in within.checks} == {"tolerance"}, within.summary()
    exact = check_parity(kept, NaiveBackend(), shapes, RTOL, ATOL)
    assert exact.passed and {c.mode for c in exact.checks} == {"bit-identical"}, exact.summary()
