"""numba's attention, blocked over keys with an online softmax, against the NumPy reference on
shapes that reach every edge of its blocking: T past one block of keys and not a multiple of it
nor of the query block, an odd head size, one head; a row whose max grows from one key block to
the next (the online softmax's rescaling); the backward's blocks of keys and panels of rows at
their edges; serial and parallel compilations."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest

from ptreg.engine import op_parity
from ptreg.engine.workloads import layers

HAS_NUMBA = importlib.util.find_spec("numba") is not None
pytestmark = pytest.mark.skipif(not HAS_NUMBA, reason="numba is not installed (pip install 'ptreg[numba]')")


@pytest.fixture(scope="module")
def step_ops() -> Any:
    from ptreg_backends.numba_step import NumbaStepOps

    ops = NumbaStepOps()
    ops.load_ops()
    return ops


def _threads(ops: Any, threads: int) -> None:
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    ops.threads = threads
    ops.parallel_min = 0 if threads > 1 else 1 << 62


def _relative(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max())


def _both(ops: Any, qkv: np.ndarray, dout: np.ndarray, B: int, T: int, NH: int) -> tuple[float, float]:
    """The worst relative error of out and of dqkv against the reference."""
    ref, ref_cache = layers.attention_forward(qkv.copy(), B, T, NH)
    dref = layers.attention_backward(dout.copy(), ref_cache)
    given = qkv.copy()
    out, cache = ops.attention_forward(given, B, T, NH)
    out = np.array(out, copy=True)
    dqkv = ops.attention_backward(dout.copy(), cache)
    assert np.array_equal(given, qkv)  # qkv only read
    assert np.isfinite(out).all() and np.isfinite(dqkv).all()
    return _relative(out, ref), _relative(dqkv, dref)


SHAPES = [  # (B, T, NH, C): hs = C / NH
    (2, 300, 1, 13),  # three key blocks, the last partial; T no multiple of 8; hs odd; one head
    (1, 129, 3, 21),  # one key past a block; hs 7
    (3, 7, 1, 20),  # fewer keys than one query block
    (1, 1, 2, 6),  # one position: each row's only weight is 1
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("B", "T", "NH", "C"), SHAPES)
def test_within_the_declared_tolerance_on_odd_shapes(
    step_ops: Any, threads: int, B: int, T: int, NH: int, C: int
) -> None:
    _threads(step_ops, threads)
    tolerance = step_ops.op_tolerances["attention"]
    rng = np.random.default_rng([T, C, threads])
    qkv = rng.standard_normal((B * T, 3 * C), dtype=np.float32)
    dout = rng.standard_normal((B * T, C), dtype=np.float32)
    assert max(_both(step_ops, qkv, dout, B, T, NH)) <= tolerance


@pytest.mark.parametrize("threads", [1, 2])
def test_a_max_that_grows_from_one_key_block_to_the_next(step_ops: Any, threads: int) -> None:
    """Keys grow along the sequence, so a late row's max is in a later block than its first: what
    the first block summed must be rescaled, or the weights no longer sum to one."""
    from ptreg_backends.numba_attention import KEYS

    _threads(step_ops, threads)
    B, T, NH, C = 1, 2 * KEYS + 11, 1, 9
    rng = np.random.default_rng(7)
    qkv = rng.standard_normal((B * T, 3 * C), dtype=np.float32)
    qkv[:, :C] = np.abs(qkv[:, :C])  # q positive, k rising: later keys score higher
    qkv[:, C : 2 * C] = np.linspace(0.0, 2.0, T, dtype=np.float32)[:, None]
    dout = rng.standard_normal((B * T, C), dtype=np.float32)
    assert max(_both(step_ops, qkv, dout, B, T, NH)) <= step_ops.op_tolerances["attention"]


def test_no_weights_are_kept_between_forward_and_backward(step_ops: Any) -> None:
    """The cache holds each row's log-sum-exp, not the (B, NH, T, T) weights the reference keeps."""
    _threads(step_ops, 1)
    B, T, NH, C = 2, 40, 2, 8
    qkv = np.random.default_rng(1).standard_normal((B * T, 3 * C), dtype=np.float32)
    _, cache = step_ops.attention_forward(qkv, B, T, NH)
    kept = [item for item in cache if isinstance(item, np.ndarray)]
    assert all(item.size < B * NH * T * T for item in kept)


def test_the_parity_gate_passes_the_blocked_attention(step_ops: Any) -> None:
    _threads(step_ops, 2)
    checks = [c for c in op_parity.check_ops(step_ops, ["small", "xl"], seed=5) if c.op == "attention"]
    assert checks and all(c.passed for c in checks), [c.detail for c in checks]


def _lengths() -> list[int]:
    """Sequence lengths that put a row's last visible key at each edge of the vector code: one
    before, on and one past a vector's end, a run of keys that ends on a half tile (a whole
    number of vectors but not of tiles), and the same past one block of keys."""
    from ptreg_backends.numba_attention import KEYS, LANES, WIDE

    return [LANES - 1, LANES, LANES + 1, WIDE + LANES, KEYS + LANES + 3]


@pytest.mark.parametrize("threads", [1, 2])
def test_within_the_declared_tolerance_at_every_edge_of_a_vector_of_keys(step_ops: Any, threads: int) -> None:
    _threads(step_ops, threads)
    for T in _lengths():
        B, NH, C = 2, 2, 22  # hs 11: no whole vector of channels either
        rng = np.random.default_rng([T, threads, 3])
        qkv = rng.standard_normal((B * T, 3 * C), dtype=np.float32)
        dout = rng.standard_normal((B * T, C), dtype=np.float32)
        assert max(_both(step_ops, qkv, dout, B, T, NH)) <= step_ops.op_tolerances["attention"], T


@pytest.mark.parametrize("threads", [1, 2])
def test_a_nan_a_row_sees_comes_out_of_that_row(step_ops: Any, threads: int) -> None:
    """The vector max skips a NaN (a compare with it is false), so the NaN must reach the row
    through its exp: every row that sees a NaN key, and a row whose own query is NaN, comes out
    not finite, as the reference's does (parity's finiteness check relies on it)."""
    from ptreg_backends.numba_attention import KEYS

    _threads(step_ops, threads)
    B, T, NH, C = 1, KEYS + 40, 2, 16
    rng = np.random.default_rng(11)
    qkv = rng.standard_normal((B * T, 3 * C), dtype=np.float32)
    key, query = KEYS + 5, 9  # a key in the second block of keys; a query before it
    qkv[key, C + 3] = np.nan  # head 0's k of that key
    qkv[query, 2] = np.nan  # head 0's q of that query
    out, _ = step_ops.attention_forward(qkv, B, T, NH)
    head0 = np.asarray(out)[:, : C // NH]
    assert not np.isfinite(head0[key:]).all(axis=1).any()
    assert not np.isfinite(head0[query]).all()


def _backward_lengths() -> list[int]:
    """Sequence lengths at the edges of the backward's blocking (keys outermost): a last group of
    eight keys one short, one block of keys exactly, one key past it (a last block of one key,
    short of a vector), and a block of keys whose rows fill one panel and spill into a second,
    partial one (later panels start past the block's own keys: each row of them sees them all)."""
    from ptreg_backends.numba_attention import BACK_KEYS, PANEL

    return [BACK_KEYS - 1, BACK_KEYS, BACK_KEYS + 1, BACK_KEYS + PANEL + 5]


@pytest.mark.parametrize("threads", [1, 2])
def test_within_the_declared_tolerance_at_the_edges_of_the_backwards_blocks(step_ops: Any, threads: int) -> None:
    _threads(step_ops, threads)
    for T in _backward_lengths():
        B, NH, C = 2, 3, 33  # hs 11
        rng = np.random.default_rng([T, threads, 5])
        qkv = rng.standard_normal((B * T, 3 * C), dtype=np.float32)
        dout = rng.standard_normal((B * T, C), dtype=np.float32)
        assert max(_both(step_ops, qkv, dout, B, T, NH)) <= step_ops.op_tolerances["attention"], T


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("hs", [16, 32])
def test_the_streamed_backward_at_the_edges_of_the_backwards_blocks(step_ops: Any, threads: int, hs: int) -> None:
    """Head sizes of whole cache lines take the backward whose dQ, dK and dV are stored past the
    caches, into a dqkv the op starts on a line: within the tolerance at the backward's block
    edges, and bit for bit what the compilation with cached stores gives."""
    from ptreg_backends import numba_attention

    _threads(step_ops, threads)
    for T in _backward_lengths():
        B, NH = 2, 2
        C = NH * hs
        rng = np.random.default_rng([T, threads, hs])
        qkv = rng.standard_normal((B * T, 3 * C), dtype=np.float32)
        dout = rng.standard_normal((B * T, C), dtype=np.float32)
        assert max(_both(step_ops, qkv, dout, B, T, NH)) <= step_ops.op_tolerances["attention"], T
        out, cache = step_ops.attention_forward(qkv, B, T, NH)
        dqkv = step_ops.attention_backward(dout, cache)
        assert dqkv.ctypes.data % 64 == 0
        _, _, out, lse, _, _, scale = cache
        cached = np.empty_like(qkv)
        kernel = numba_attention.attention_backward[0 if threads == 1 else 1]
        kernel(dout, qkv, out, lse, T, NH, scale, cached, threads)
        assert np.array_equal(dqkv, cached), T


def test_the_streamed_backward_refuses_a_dqkv_off_a_cache_line(step_ops: Any) -> None:
    """Its stores need the line boundary: given a dqkv that does not start on one, it raises
    rather than fault or write past the row."""
    from ptreg_backends import numba_attention

    B, T, NH, C = 1, 9, 1, 16
    rng = np.random.default_rng(3)
    qkv = rng.standard_normal((B * T, 3 * C), dtype=np.float32)
    _threads(step_ops, 1)
    out, cache = step_ops.attention_forward(qkv, B, T, NH)
    _, _, out, lse, _, _, scale = cache
    raw = np.empty(qkv.size + 16, np.float32)
    start = (-raw.ctypes.data % 64) // 4 + 1  # one float past a line
    dqkv = raw[start : start + qkv.size].reshape(qkv.shape)
    with pytest.raises(ValueError, match="cache line"):
        numba_attention.attention_backward_streamed[0](
            np.ones((B * T, C), np.float32), qkv, out, lse, T, NH, scale, dqkv, 1
        )
