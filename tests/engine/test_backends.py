"""Backends: entry-point discovery, lazy optional dependencies, threads, and the parity gate.

No timing is asserted anywhere: this machine is shared and noisy. The third-party backend
comes from tests/plugin_backend, installed as its own distribution for the test session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from ptreg.engine.backends import METHOD_OF_KERNEL, create, describe, entries, kernel_shapes
from ptreg.engine.parity import ParityResult, check_parity
from ptreg.engine.plan import PARITY_SHAPES
from ptreg.errors import PtregError
from ptreg.records.run_results import KERNELS
from ptreg_backends.blocked_numpy import BlockedNumpyBackend
from ptreg_backends.naive import NaiveBackend
from ptreg_backends.numba_kernels import NumbaBackend

BUILT_IN = ("naive", "blocked-numpy", "numba", "numpy-blas")
RTOL, ATOL = 1e-5, 1e-6
HAS_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAS_NUMBA, reason="numba is not installed (pip install 'ptreg[numba]')")


def parity(backend: Any, shapes: Any = PARITY_SHAPES) -> ParityResult:
    return check_parity(backend, NaiveBackend(), shapes, rtol=RTOL, atol=ATOL)


def run(backend: Any, kernel: str, x: np.ndarray, y: np.ndarray, out_shape: tuple[int, int]) -> np.ndarray:
    out = np.full(out_shape, np.nan, dtype=np.float32)
    getattr(backend, METHOD_OF_KERNEL[kernel])(x, y, out)
    return out


# --------------------------------------------------------------------------- discovery


def test_entries_list_built_in_and_third_party_backends() -> None:
    found = entries()
    if "example-transpose" not in found:
        pytest.fail("the session fixture did not install tests/plugin_backend", pytrace=False)
    for name in BUILT_IN:
        assert found[name].distribution == "ptreg", found[name]
    for name in ("example-transpose", "example-broken"):
        assert found[name].distribution == "ptreg-example-backend", found[name]
    assert found["example-transpose"].target == "ptreg_example_backend:TransposeBackend"


def test_the_test_backends_stay_out_of_the_users_environment() -> None:
    """Outside the session's own folder (PYTHONPATH left out), the environment the README's
    command installed has the built-in backends only, and that command installs nothing else."""
    from helpers import REPO

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    listing = (
        "import importlib.metadata as m, importlib.util as u, json; "
        "print(json.dumps([sorted(e.name for e in m.entry_points(group='ptreg.backends')), "
        "u.find_spec('ptreg_example_backend') is None]))"
    )
    done = subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True, env=env, cwd="/")
    names, absent = json.loads(done.stdout)
    assert absent and not [n for n in names if n.startswith("example-")], names
    assert set(BUILT_IN) <= set(names)
    assert "plugin_backend" not in (REPO / "README.md").read_text(encoding="utf-8")


def test_built_in_metadata_is_complete() -> None:
    for name in BUILT_IN:
        info = describe(entries()[name])
        assert info.description and "\n" not in info.description
        assert info.thread_control and "\n" not in info.thread_control
        assert isinstance(info.order_preserving, bool) and info.default_threads >= 1
        if name != "numba" or HAS_NUMBA:
            assert info.available and info.reason is None, info
    assert describe(entries()["numpy-blas"]).order_preserving is False


def test_unavailable_backend_is_reported_not_fatal() -> None:
    if "example-broken" not in entries():
        pytest.fail("the session fixture did not install tests/plugin_backend", pytrace=False)
    info = describe(entries()["example-broken"])
    assert info.available is False
    assert info.reason == "needs the imaginary package 'quantum-blas'"
    with pytest.raises(PtregError, match="quantum-blas"):
        create("example-broken")


def test_unknown_backend_names_the_registered_ones() -> None:
    with pytest.raises(PtregError) as caught:
        create("nope")
    assert "'nope'" in caught.value.message
    for name in BUILT_IN:
        assert name in caught.value.message


def test_listing_does_not_import_numba() -> None:
    code = "import sys; from ptreg.engine.backends import describe_all; describe_all(); print('numba' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_missing_numba_is_reported_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numba" else real(name, *a))
    hint = "numba is not installed (pip install 'ptreg[numba]')"
    assert NumbaBackend.unavailable_reason() == hint
    info = describe(entries()["numba"])
    assert info.available is False and info.reason == hint
    with pytest.raises(PtregError, match="numba is not installed"):
        create("numba")


# --------------------------------------------------------------------------- parity: real backends


def test_parity_shapes_cover_odd_and_remainder_sizes_in_every_position() -> None:
    assert 8 <= len(PARITY_SHAPES) <= 12
    assert (1, 1, 1) in PARITY_SHAPES and (129, 129, 129) in PARITY_SHAPES
    for position in range(3):
        assert {s[position] for s in PARITY_SHAPES} == {1, 3, 17, 63, 65, 129}


@pytest.mark.parametrize("name", (*BUILT_IN, "example-transpose"))
def test_backend_passes_parity(name: str) -> None:
    if name == "numba" and not HAS_NUMBA:
        pytest.skip("numba is not installed (pip install 'ptreg[numba]')")
    if name not in entries():
        pytest.fail("the session fixture did not install tests/plugin_backend", pytrace=False)
    backend = create(name)
    result = parity(backend)
    assert result.passed, result.summary()
    assert result.worst is None
    assert len(result.checks) == len(PARITY_SHAPES) * len(KERNELS)
    expected_mode = "bit-identical" if backend.order_preserving else "tolerance"
    assert {c.mode for c in result.checks} == {expected_mode}
    json.dumps(result.to_outcome().model_dump(mode="json"), allow_nan=False)


def order_preserving_variants(shape: tuple[int, int, int]) -> list[Any]:
    """Every order-preserving backend; blocked-numpy also with tiny tiles (on small shapes:
    a 5×3 tile on the large ones would take a Python loop of a million steps)."""
    variants = [BlockedNumpyBackend()]
    if max(shape) <= 130:
        variants += [BlockedNumpyBackend(tile_m=4, tile_n=8), BlockedNumpyBackend(5, 3)]
    if HAS_NUMBA:
        variants.append(NumbaBackend())
    return variants


# Odd shapes, and shapes that cross numba's blocks (MR 6, NR 16, KC 256, MC 96, NC 512) with a
# remainder in every position of every kernel: for dA the reduction is n, for dB it is m.
ODD_SHAPES = [(37, 29, 45), (1, 65, 129), (129, 3, 1), (45, 130, 17), (97, 257, 513), (200, 520, 35)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", ODD_SHAPES)
def test_order_preserving_backends_match_naive_bits(shape: tuple[int, int, int], threads: int) -> None:
    rng = np.random.default_rng(sum(shape))
    variants = order_preserving_variants(shape)
    for backend in variants:
        assert backend.set_threads(threads) == min(threads, backend.default_threads())
    try:
        for kernel in KERNELS:
            x_shape, y_shape, out_shape = kernel_shapes(kernel, *shape)
            x, y = rng.standard_normal(x_shape, np.float32), rng.standard_normal(y_shape, np.float32)
            x_before, y_before = x.copy(), y.copy()
            expected = run(NaiveBackend(), kernel, x, y, out_shape)
            for backend in variants:
                got = run(backend, kernel, x, y, out_shape)
                assert np.array_equal(got, expected), (type(backend).__name__, kernel, shape, threads)
                assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))  # signed zeros too
                assert np.array_equal(x, x_before) and np.array_equal(y, y_before)
    finally:
        for backend in variants:
            backend.set_threads(1)


@needs_numba
def test_numba_compiles_once_vectorised_and_a_second_process_reuses_the_cache(tmp_path: Any) -> None:
    """The first process compiles the matmul routine (and writes the disk cache); the second only
    loads it.

    The first also checks the machine code, which numba can show only for what it compiled:
    packed multiplies and adds and no fused multiply-add (which would change the bits).
    Each process gets the routine as the backend's constructor does (``_compiled``) and no more:
    the step's ops, which the constructor compiles too, are not what is checked here, and
    compiling them into the empty cache took nine tenths of the test's time.
    """
    code = (
        "import re; from ptreg_backends.numba_kernels import _compiled; from ptreg_backends import numba_gemm; "
        "_compiled(False); d = numba_gemm.dispatcher(numba_gemm.TILES['avx2-6x16']); s = d.stats; "
        "hits, misses = sum(s.cache_hits.values()), sum(s.cache_misses.values()); "
        "asm = '\\n'.join(d.inspect_asm().values()) if misses else ''; "
        "packed = bool(re.search(r'\\bv?mulps\\b', asm) and re.search(r'\\bv?addps\\b', asm)); "
        "fused = bool(re.search(r'\\bvfn?m(add|sub)\\w*ps\\b', asm)); "
        "print(hits, misses, packed, fused)"
    )
    # one tile forced, so that the processes compile that one only (no tuning)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PTREG_NUMBA_TILE": "avx2-6x16"}
    reports = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stderr
        reports.append(done.stdout.split())
    # (cache hits, cache misses, packed vector multiply and add, fused multiply-add) per process
    assert reports == [["0", "1", "True", "False"], ["1", "0", "False", "False"]], reports
    assert any(tmp_path.rglob("*.nbi")) and any(tmp_path.rglob("*.nbc"))


# --------------------------------------------------------------------------- parity: wrong backends


class ReversedNaive(NaiveBackend):
    """Claims naive's order but sums forward in k descending: right values, wrong bits."""

    name = "reversed"

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        super().matmul_forward(np.ascontiguousarray(a[:, ::-1]), np.ascontiguousarray(b[::-1, :]), out)


class OffByABit(NaiveBackend):
    """Adds 1e-3 to every dB output and admits no order: fails the tolerance."""

    name = "off"
    order_preserving = False

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        super().matmul_backward_db(a, dc, out)
        out += np.float32(1e-3)


class Raising(NaiveBackend):
    name = "raising"

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        raise MemoryError("scratch buffer too large")


class Lazy(NaiveBackend):
    """Writes only the first row of the forward output."""

    name = "lazy"
    order_preserving = False

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.matmul(a[:1], b, out=out[:1])


def test_wrong_order_fails_bit_identity_but_not_tolerance() -> None:
    result = parity(ReversedNaive())
    assert not result.passed
    worst = result.worst
    assert worst is not None and worst.kernel == "forward" and worst.mode == "bit-identical"
    assert "not bit-identical to naive" in worst.detail and "within tolerance" in worst.detail
    assert all(c.passed for c in result.checks if c.kernel != "forward")
    assert "FAILED" in result.summary() and "forward" in result.summary()


def test_wrong_values_fail_tolerance_with_the_worst_mismatch() -> None:
    result = parity(OffByABit())
    assert not result.passed
    worst = result.worst
    assert worst is not None and worst.kernel == "backward_db" and worst.mode == "tolerance"
    assert worst.max_scaled_error > 1 and worst.max_abs_error == pytest.approx(1e-3, rel=0.05)
    assert "outside tolerance" in worst.detail
    failing = [c for c in result.checks if not c.passed]
    assert worst.max_scaled_error == max(c.max_scaled_error for c in failing)
    data = json.loads(json.dumps(result.to_outcome().model_dump(mode="json"), allow_nan=False))
    assert data["passed"] is False and "worst backward_db" in data["summary"]


def test_raising_kernel_fails_its_checks_without_crashing() -> None:
    result = parity(Raising())
    assert not result.passed
    for check in result.checks:
        if check.kernel == "backward_da":
            assert not check.passed and "raised MemoryError: scratch buffer too large" in check.detail
        else:
            assert check.passed, check
    data = json.loads(json.dumps(result.to_outcome().model_dump(mode="json"), allow_nan=False))
    failed = [c for c in data["checks"] if not c["passed"]]
    assert failed and all(c["max_scaled_error"] is None and c["max_abs_error"] is None for c in failed)


def test_unwritten_output_fails() -> None:
    result = parity(Lazy(), [(1, 3, 4), (5, 3, 4)])
    by_shape = {c.shape: c for c in result.checks if c.kernel == "forward"}
    assert by_shape[(1, 3, 4)].passed  # one row: everything was written
    assert not by_shape[(5, 3, 4)].passed and "not written" in by_shape[(5, 3, 4)].detail
    assert not result.passed


def test_same_shape_twice_is_checked_once_and_no_shapes_fails() -> None:
    result = parity(NaiveBackend(), [(3, 17, 63), (3, 17, 63), (1, 1, 1)])
    assert [c.shape for c in result.checks[::3]] == [(3, 17, 63), (1, 1, 1)]
    empty = parity(NaiveBackend(), [])
    assert not empty.passed and "no shapes" in empty.summary()


# --------------------------------------------------------------------------- threads


def test_naive_is_single_threaded_and_blocked_numpy_is_capped_at_the_cores() -> None:
    assert NaiveBackend().set_threads(4) == 1
    backend = BlockedNumpyBackend()
    assert backend.set_threads(10_000) == (os.cpu_count() or 1)
    assert backend.set_threads(1) == 1 and backend._pool is None


@pytest.mark.parametrize(("shape", "threaded"), [((128, 300, 600), True), ((96, 1024, 96), False)])
def test_blocked_numpy_shares_only_tiles_large_enough(
    shape: tuple[int, int, int], threaded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On two threads a forward whose per-thread tile reaches MIN_THREADED_TILE goes to the pool;
    one with a small output (as every dB of the small config) runs on the calling thread. Same bits."""
    backend = BlockedNumpyBackend()
    backend.set_threads(2)
    if backend.threads < 2:
        pytest.skip("one core: no pool to share with")
    submitted: list[int] = []
    assert backend._pool is not None
    real = backend._pool.submit
    monkeypatch.setattr(backend._pool, "submit", lambda *a, **k: submitted.append(1) or real(*a, **k))
    rng = np.random.default_rng(3)
    m, k, n = shape
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    expected = run(NaiveBackend(), "forward", a, b, (m, n))
    got = run(backend, "forward", a, b, (m, n))
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert bool(submitted) is threaded
    backend.set_threads(1)


def test_numpy_blas_thread_limit_is_in_effect() -> None:
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    backend = create("numpy-blas")
    if not blas_threads():
        assert backend.set_threads(2) == 1  # NumPy without BLAS: its own single-threaded loop
        return
    with threadpool_limits(limits=None):  # puts the original limits back on exit
        assert backend.set_threads(1) == 1 and blas_threads() == {1}
        assert backend.set_threads(2) == 2 and blas_threads() == {2}
        assert backend.set_threads(1) == 1 and blas_threads() == {1}


@needs_numba
def test_numba_threads_are_capped_at_numba_num_threads() -> None:
    import numba

    backend = create("numba")
    try:
        assert backend.set_threads(1) == 1 and numba.get_num_threads() == 1
        assert backend.set_threads(10_000) == numba.config.NUMBA_NUM_THREADS == numba.get_num_threads()
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
