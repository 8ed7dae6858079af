"""benchmarks/fp_peak.py: its throughput loops are what their names say (a multiply then an add,
or one fused multiply-add, in registers of the vectors' width) and compute what they claim."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

from helpers import REPO

pytest.importorskip("numba", reason="numba is not installed (pip install 'ptreg[numba]')")
sys.path.insert(0, str(REPO / "benchmarks"))
import fp_peak  # a script, importable once its folder is on the path

STEPS = 7
COUNT = 12


@pytest.fixture(scope="module", params=[16, 8], ids=["16 lanes", "8 lanes"])
def loops(request: pytest.FixtureRequest) -> tuple[int, Any, Any]:
    lanes = request.param
    return lanes, fp_peak.build(COUNT, lanes, fused=False), fp_peak.build(COUNT, lanes, fused=True)


def test_the_mul_add_loop_never_fuses_and_the_fma_loop_does(loops: tuple[int, Any, Any]) -> None:
    lanes, separate, fused = loops
    register = {16: "zmm", 8: "ymm"}[lanes]
    apart, together = fp_peak.counts(separate), fp_peak.counts(fused)
    assert apart["fused multiply-adds"] == 0
    assert apart[f"vmulps {register}"] >= COUNT and apart[f"vaddps {register}"] >= COUNT
    assert together["fused multiply-adds"] >= 1
    assert together[f"vfmadd {register}"] >= COUNT
    for found in (apart, together):  # every accumulator in a register of the vectors' width
        assert found["stack accesses"] == 0
        assert all(n == 0 for key, n in found.items() if key.endswith(("xmm", "ymm", "zmm")) and register not in key)


def test_the_mul_add_loop_gives_numpys_bits_and_the_fma_loop_finite_values(loops: tuple[int, Any, Any]) -> None:
    lanes, separate, fused = loops
    start = fp_peak.starts(COUNT, lanes, seed=3)
    expected = fp_peak.reference(start, STEPS)
    got = fp_peak.run(separate, STEPS, start)
    assert got.dtype == np.float32 and got.shape == (COUNT, lanes)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    contracted = fp_peak.run(fused, STEPS, start)
    assert np.isfinite(contracted).all()
    np.testing.assert_allclose(contracted, expected, rtol=1e-5)
    # rounded once per step instead of twice: some of these lanes end on other bits
    assert not np.array_equal(contracted.view(np.uint32), expected.view(np.uint32))
