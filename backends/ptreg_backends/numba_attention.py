"""The numba backend's attention: causal softmax attention fused per (batch, head), forward and
backward, on the fused projection qkv (B·T, 3C) as the reference takes it, blocked over keys in
the manner of flash attention.

Per (b, h), one task: its q (times the scale), k and v packed (k and v also transposed, (hs, T),
by 16 × 16 shuffles). The forward takes each block of ROWS queries, and for it the keys in
blocks of KEYS, up to the block's last query only (the reference scores all T keys, then masks
half of them away), with an online softmax: each row its running max and sum, rescaling what it
summed when the max grows, so no (T, T) weights are written; it keeps each row's log-sum-exp
instead. The backward goes the other way round, as flash attention 2's: blocks of keys
outermost, and for each the rows that see them, recomputing the weights from q, k and that
log-sum-exp (one product more than reading them back, and no (T, T) array written, read or
allocated), with softmax's backward taking Σ_d dy·y per row (once a head) in place of a dot
along the row of weights; a block of keys' dK and dV are summed down all of its rows in
registers, and dQ gathers a pass per block of keys. Every product is a
register tile: eight rows by two vectors of sums held in registers along the product's reduction
(numba_gemm's vector sums, here free to fuse a multiply-add), each vector of keys, values or
channels loaded once for the eight rows; head sizes are zero-padded to whole tiles and runs of
keys to whole vectors, and the padding weighs nothing. The softmax between the products is
vector code along each row's keys, the eight rows of a block at once (``numba_softmax``).

Tasks are independent (each writes only its own head's columns), so the parallel variant runs
chunks of them over threads with no partial sums, each chunk with one set of buffers. The bits
are not the reference's (its products are BLAS's, its exp NumPy's), and the two variants may
reassociate their dot products differently: a tolerance (``NumbaStepOps.op_tolerances``).
Importing this module imports numba.
"""

# numba passes an intrinsic's typingctx itself: mypy sees every call one argument short
# mypy: disable-error-code="call-arg,var-annotated"
from __future__ import annotations

import types as pytypes
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import prange
from numba.core import cgutils, types
from numba.extending import intrinsic

from ptreg.engine.environment import cpu_flags

from .numba_cache import install_cache_locator
from .numba_ops import ONE, REASSOCIATE, ZERO, exp32, variants
from .numba_softmax import (
    INT,
    ROWS,
    _int,
    exp_sum,
    lane_fill,
    lane_max,
    lane_scale,
    rows_reduced,
    weights_and_grads,
)
from .numba_vectors import (
    _element,
    _literals,
    _scaled_move,
    _store_fence,
    _sum_fma,
    _sum_move,
    _sum_zero,
    _sums,
    _vector,
)

install_cache_locator()  # before any kernel is defined: its cache is filed by the package's digest


# One vector of sums: 16 float32 lanes with AVX-512, else 8 (a tile's 16 vectors of sums then
# fill AVX2's 16 registers, and LLVM spills some: slower there, never wrong). numba's disk cache
# is keyed by the CPU it compiled for, so a cached kernel always has this machine's width.
BITS = 512 if "avx512f" in (cpu_flags() or set()) else 256
LANES = BITS // 32
WIDE = 2 * LANES  # a tile is ROWS × WIDE sums (16 vectors); head sizes padded to it (key runs to LANES)
SUMS = ROWS * 2
# Keys per block: for hs up to 32 a block's keys and values (2 · hs · KEYS floats) and its
# weights and their gradients (2 · ROWS · KEYS) stay in a 48 KiB L1; xl's T = 128 is one block.
KEYS = 128
# The backward's blocks of keys, and its panels of rows that see them. A panel's weights and
# their gradients (2 · PANEL · BACK_KEYS floats, 128 KiB) and the head's packed operands stay in
# L2; fewer, longer products won over blocks small enough for L1 (a loaded probe on one xl layer,
# one thread: 32 keys 0.79, 64 keys 0.76, 128 keys 0.70 times the rows-outermost backward's time).
# A multiple of WIDE, so that a block's last run of keys, rounded up to whole vectors, stays
# inside the padded keys.
BACK_KEYS = 128
PANEL = 128
# The backward's dQ, dK and dV stored past the caches (non-temporal), in whole 64-byte lines:
# through the caches each line was read in before it was written, reads that no prefetch brought
# in time (a seventh of the backward at xl on a Zen 4). The op takes the compilation with it true
# when dqkv, which it allocates, starts on a line and every head's columns fill whole lines.
STREAMED = False
NEG_INF = np.float32(-np.inf)


@intrinsic
def transpose_block(  # pragma: no cover
    typingctx: Any, vector_bits: Any, rows: Any, s0: Any, d0: Any, columns: Any
) -> tuple[Any, Any] | None:
    """columns[d0 + l, s0 + j] = rows[s0 + j, d0 + l] for a W × W block (W lanes): W vectors
    loaded, exchanged half against half, then quarter against quarter and so on down to single
    lanes (log2 W rounds of shuffles), and stored. A loop of single elements gathered down a
    column took a load a float."""
    if not _literals(vector_bits):
        return None
    bits = vector_bits.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        lanes = bits // 32
        vector = _vector(bits)
        s0 = _int(context, builder, args[2], sig.args[2])
        d0 = _int(context, builder, args[3], sig.args[3])

        def at(array: int, row: Any, column: Any) -> Any:
            return builder.bitcast(
                _element(context, builder, sig.args[array], args[array], [row, column]), vector.as_pointer()
            )

        def plus(value: Any, j: int) -> Any:
            return builder.add(value, ir.Constant(value.type, j))

        block = [builder.load(at(1, plus(s0, j), d0), align=4) for j in range(lanes)]
        step = lanes // 2
        while step:
            for j in range(lanes):
                if j & step:
                    continue
                partner = j + step
                # j keeps its lanes outside `step` and takes the partner's lanes inside it
                mine = [lane if not lane & step else lanes + lane - step for lane in range(lanes)]
                theirs = [lane + step if not lane & step else lanes + lane for lane in range(lanes)]
                a, b = block[j], block[partner]
                block[j] = builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(INT, lanes), mine))
                block[partner] = builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(INT, lanes), theirs))
            step //= 2
        for lane in range(lanes):
            builder.store(block[lane], at(4, plus(d0, lane), s0), align=4)
        return context.get_dummy_value()

    return types.void(vector_bits, rows, s0, d0, columns), codegen


@intrinsic
def _prefetch(
    typingctx: Any, array: Any, row: Any, column: Any, writing: Any
) -> tuple[Any, Any] | None:  # pragma: no cover
    """Ask the CPU to bring the cache line of array[row, column] in, to be read (writing 0) or
    written (1); a hint, which does nothing else."""
    if not _literals(writing):
        return None
    write = int(writing.literal_value)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        at = builder.bitcast(
            _element(context, builder, sig.args[0], args[0], [args[1], args[2]]), ir.IntType(8).as_pointer()
        )
        kind = ir.FunctionType(ir.VoidType(), [at.type, INT, INT, INT])
        hint = cgutils.get_or_insert_function(builder.module, kind, "llvm.prefetch.p0i8")
        # locality 3: keep it in every level; cache type 1: data
        builder.call(hint, [at, ir.Constant(INT, write), ir.Constant(INT, 3), ir.Constant(INT, 1)])
        return context.get_dummy_value()

    return types.void(array, row, column, writing), codegen


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _ahead(array: np.ndarray, base: int, T: int, offsets: Any, hs: int, writing: Any) -> None:  # pragma: no cover
    """Prefetch rows base .. base + T of array at each offset's hs columns. A head's rows are 3C
    floats apart and, in the step, not in cache (every other op ran since): read when its packing
    needs them, each waited on memory. Asked for a block's worth at a time while the head before
    computes, they arrive in time; asked for all at once, the requests queued as the reads had."""
    for s in range(T):
        for offset in offsets:
            for d in range(0, hs, 16):  # a 64-byte cache line of float32s
                _prefetch(array, base + s, offset + d, writing)
            # and the row's last one: rows are seldom 64-byte aligned, so hs floats span a line
            # more than hs / 16, and that line's miss had stalled each row's packing
            _prefetch(array, base + s, offset + hs - 1, writing)


@numba.njit(cache=True, inline="always")
def _padded(n: int) -> int:  # pragma: no cover
    """n rounded up to whole tiles."""
    return (n + WIDE - 1) // WIDE * WIDE


@numba.njit(cache=True, inline="always")
def _vectors(n: int) -> int:  # pragma: no cover
    """n keys rounded up to whole vectors: a block's run of keys needs no more (the last half
    tile of scores is a tile of its own), which saves up to a vector of masked keys a row."""
    return (n + LANES - 1) // LANES * LANES


@numba.njit(cache=True, inline="always")
def _flat(a: np.ndarray) -> np.ndarray:  # pragma: no cover
    """A buffer as one row, for the products' vector loads at computed offsets; made once a chunk
    of heads, not a block: a reshape calls into numba's runtime (about 16 ns, made per product per
    block it was a fifth of the backward)."""
    return a.reshape(a.size)


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _scaled_row(
    target: np.ndarray,
    trow: int,
    tcol: int,
    source: np.ndarray,
    srow: int,
    scol: int,
    n: int,
    factor: np.float32,
) -> None:  # pragma: no cover
    """target[trow, tcol : tcol + n] = source[srow, scol : scol + n] · factor: whole vectors,
    then the rest one at a time (a loop over slices of a run-time length had compiled to scalar
    code with a set-up per row, and the packs and write-backs were a fifth of attention's time)."""
    whole = n // LANES * LANES
    for d0 in range(0, whole, LANES):
        _scaled_move(BITS, target, trow, tcol + d0, source, srow, scol + d0, factor, 0)
    for d in range(whole, n):
        target[trow, tcol + d] = source[srow, scol + d] * factor


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _streamed_row(
    target: np.ndarray,
    trow: int,
    tcol: int,
    source: np.ndarray,
    srow: int,
    scol: int,
    n: int,
    factor: np.float32,
) -> None:  # pragma: no cover
    """As ``_scaled_row``, with non-temporal stores: for n a multiple of 16 and target[trow, tcol]
    on a 64-byte boundary (``_streams``), so only whole cache lines are written."""
    for d0 in range(0, n, LANES):
        _scaled_move(BITS, target, trow, tcol + d0, source, srow, scol + d0, factor, 1)


@numba.njit(cache=True, inline="always")
def _streams(target: np.ndarray, hs: int) -> bool:  # pragma: no cover
    """Whether every head's columns of every row of target (C-contiguous, a multiple of hs
    columns) start on a cache line and fill whole lines: 16 float32s to a 64-byte line."""
    return hs % 16 == 0 and target.shape[1] % 16 == 0 and target.ctypes.data % 64 == 0


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _pack(
    qkv: np.ndarray,
    base: int,
    T: int,
    offset: int,
    hs: int,
    factor: np.float32,
    rows: np.ndarray,
    columns: np.ndarray,
) -> None:  # pragma: no cover
    """One head's (T, hs) block of qkv from column ``offset``, times ``factor``, into rows
    (Tp, HSP) and, when it has any, transposed columns (HSP, Tp); the padding stays zero."""
    for s in range(T):
        _scaled_row(rows, s, 0, qkv, base + s, offset, hs, factor)
    if columns.shape[0] > 0:  # whole blocks, padding included (zero, and zero where it lands)
        for s0 in range(0, rows.shape[0], LANES):
            for d0 in range(0, rows.shape[1], LANES):
                transpose_block(BITS, rows, s0, d0, columns)


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _scores(
    sums: Any,
    a: np.ndarray,
    af: np.ndarray,
    t0: int,
    b: np.ndarray,
    bf: np.ndarray,
    k0: int,
    wide: int,
    hs: int,
    block: np.ndarray,
    r: int,
) -> None:  # pragma: no cover
    """block[r + i, s] = a[t0 + i] · b[:, k0 + s] for s < wide (b transposed, (HSP, Tp)): per tile
    of WIDE keys, 16 vectors of sums in registers along the head's channels; a last vector of keys
    (wide a multiple of LANES only) as a tile of ROWS × LANES. af and bf are a and b flat (see
    ``_flat``)."""
    HSP, Tp = a.shape[1], b.shape[1]
    whole = wide // WIDE * WIDE
    for s0 in range(0, whole, WIDE):
        for x in range(SUMS):
            _sum_zero(sums, x, BITS)
        for d in range(hs):
            for i in range(ROWS):
                for w in range(2):
                    _sum_fma(sums, i * 2 + w, BITS, af, (t0 + i) * HSP + d, bf, d * Tp + k0 + s0 + w * LANES)
        for i in range(ROWS):
            for w in range(2):
                _sum_move(sums, i * 2 + w, BITS, block, r + i, s0 + w * LANES, 1)
    if wide > whole:
        for i in range(ROWS):
            _sum_zero(sums, i, BITS)
        for d in range(hs):
            for i in range(ROWS):
                _sum_fma(sums, i, BITS, af, (t0 + i) * HSP + d, bf, d * Tp + k0 + whole)
        for i in range(ROWS):
            _sum_move(sums, i, BITS, block, r + i, whole, 1)


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _weighted(
    sums: Any,
    block: np.ndarray,
    wf: np.ndarray,
    r: int,
    b: np.ndarray,
    bf: np.ndarray,
    k0: int,
    wide: int,
    acc: np.ndarray,
    t0: int,
    factors: np.ndarray,
) -> None:  # pragma: no cover
    """acc[t0 + i, :] = acc[t0 + i, :] · factors[i] + Σ_s block[r + i, s] · b[k0 + s, :] (b in rows,
    (Tp, HSP)): per WIDE channels, 16 vectors of sums in registers along the block's keys. wf and
    bf are block and b flat."""
    HSP, KB = b.shape[1], block.shape[1]
    for d0 in range(0, HSP, WIDE):
        for i in range(ROWS):
            for w in range(2):
                _sum_move(sums, i * 2 + w, BITS, acc, t0 + i, d0 + w * LANES, 0)
                lane_scale(sums, i * 2 + w, BITS, factors, i)
        for s in range(wide):
            for i in range(ROWS):
                for w in range(2):
                    _sum_fma(sums, i * 2 + w, BITS, wf, (r + i) * KB + s, bf, (k0 + s) * HSP + d0 + w * LANES)
        for i in range(ROWS):
            for w in range(2):
                _sum_move(sums, i * 2 + w, BITS, acc, t0 + i, d0 + w * LANES, 1)


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _down_rows(
    sums: Any,
    panel: np.ndarray,
    pf: np.ndarray,
    p0: int,
    a: np.ndarray,
    af: np.ndarray,
    first: int,
    end: int,
    s0: int,
    into: np.ndarray,
) -> None:  # pragma: no cover
    """into[s0 + j, :] += Σ_t panel[t - p0, s0 + j] · a[t, :] for t in first .. end and j < ROWS
    (dK or dV of ROWS keys, a in rows, (Tp, HSP)): per WIDE channels, the ROWS keys' 16 vectors of
    sums in registers down every row that sees them, loaded and stored once. pf and af are panel
    and a flat."""
    HSP, KB = a.shape[1], panel.shape[1]
    for d0 in range(0, HSP, WIDE):
        for j in range(ROWS):
            for w in range(2):
                _sum_move(sums, j * 2 + w, BITS, into, s0 + j, d0 + w * LANES, 0)
        for t in range(first, end):
            for j in range(ROWS):
                for w in range(2):
                    _sum_fma(sums, j * 2 + w, BITS, pf, (t - p0) * KB + s0 + j, af, t * HSP + d0 + w * LANES)
        for j in range(ROWS):
            for w in range(2):
                _sum_move(sums, j * 2 + w, BITS, into, s0 + j, d0 + w * LANES, 1)


def _flash_forward(
    qkv: np.ndarray, B: int, T: int, NH: int, scale: np.float32, out: np.ndarray, lse: np.ndarray, chunks: int
) -> None:  # pragma: no cover
    """Per (b, h) and block of ROWS queries, the keys in blocks of KEYS with an online softmax:
    each row keeps its running max and sum, and rescales what it summed when the max grows. No
    (T, T) weights are kept, only each row's log-sum-exp (lse) for the backward. q is packed
    times the scale, so the scores come out scaled."""
    C = qkv.shape[1] // 3
    hs = C // NH
    HSP, Tp = _padded(hs), _padded(T)
    heads = B * NH
    parts = min(heads, chunks)  # one set of buffers a chunk of heads (a thread's), not a head
    per = (heads + parts - 1) // parts
    for part in prange(parts):
        sums = _sums(SUMS, BITS)
        rowwise = _sums(SUMS, BITS)  # the softmax's vectors apart from the products'
        none = np.zeros((0, Tp), np.float32)
        q, keys = np.zeros((Tp, HSP), np.float32), np.zeros((HSP, Tp), np.float32)
        k, v = np.zeros((Tp, HSP), np.float32), np.zeros((Tp, HSP), np.float32)
        block = np.empty((ROWS, KEYS), np.float32)
        qf, keysf, vf, blockf = _flat(q), _flat(keys), _flat(v), _flat(block)
        acc = np.empty((ROWS, HSP), np.float32)
        top = np.empty(ROWS, np.float32)
        total = np.empty(ROWS, np.float32)
        shrink = np.empty(ROWS, np.float32)
        best = np.empty(ROWS, np.float32)
        added = np.empty(ROWS, np.float32)
        last = min(heads, (part + 1) * per)
        for task in range(part * per, last):
            b, h = task // NH, task % NH
            base = b * T
            following = task + 1 < last  # a next head in this chunk, whose rows to ask for early
            after, column = (task + 1) // NH * T, (task + 1) % NH * hs
            _pack(qkv, base, T, h * hs, hs, scale, q, none)
            _pack(qkv, base, T, C + h * hs, hs, ONE, k, keys)
            _pack(qkv, base, T, 2 * C + h * hs, hs, ONE, v, none)
            for t0 in range(0, T, ROWS):
                if following:  # the next head's rows, a block's worth at a time, while this one computes
                    rows = min(ROWS, T - t0)
                    _ahead(qkv, after + t0, rows, (column, C + column, 2 * C + column), hs, 0)
                    _ahead(out, after + t0, rows, (column,), hs, 1)
                acc[:] = ZERO
                top[:] = NEG_INF
                total[:] = ZERO
                end = t0 + ROWS  # keys past the block's last query are masked for all of its rows
                for k0 in range(0, end, KEYS):
                    width = min(KEYS, end - k0)
                    wide = _vectors(width)  # keys past width are masked (or padding): weight zero
                    _scores(sums, q, qf, t0, keys, keysf, k0, wide, hs, block, 0)
                    # row i sees keys k0 .. t0 + i: the first min(first + i, width) of the block
                    first = t0 + 1 - k0
                    for i in range(ROWS):
                        lane_fill(rowwise, i, BITS, NEG_INF)
                    for c in range(0, wide, LANES):
                        for i in range(ROWS):
                            lane_max(rowwise, i, BITS, block, i, c, min(first + i, width))
                    rows_reduced(rowwise, 0, BITS, 1, best)
                    for i in range(ROWS):
                        best[i] = max(best[i], top[i])
                        shrink[i] = ZERO if top[i] == NEG_INF else exp32(top[i] - best[i])
                        lane_fill(rowwise, ROWS + i, BITS, ZERO)
                    for c in range(0, wide, LANES):
                        for i in range(ROWS):
                            exp_sum(rowwise, ROWS + i, BITS, block, i, c, min(first + i, width), best[i])
                    rows_reduced(rowwise, ROWS, BITS, 0, added)
                    for i in range(ROWS):
                        total[i] = total[i] * shrink[i] + added[i]
                        top[i] = best[i]
                    _weighted(sums, block, blockf, 0, v, vf, k0, wide, acc, 0, shrink)
                for i in range(ROWS):
                    t = t0 + i
                    if t < T:
                        _scaled_row(out, base + t, h * hs, acc, i, 0, hs, ONE / total[i])
                        lse[b, h, t] = top[i] + np.log(total[i])


def _flash_backward(
    dout: np.ndarray,
    qkv: np.ndarray,
    out: np.ndarray,
    lse: np.ndarray,
    T: int,
    NH: int,
    scale: np.float32,
    dqkv: np.ndarray,
    chunks: int,
) -> None:  # pragma: no cover
    """Per (b, h), the keys in blocks of BACK_KEYS outermost, as flash attention 2's backward.
    For a block of keys and a panel of up to PANEL rows that see them (t >= the block's first
    key), per ROWS rows: the weights recomputed from q, k and each row's lse (exp(score - lse)),
    dP = dy·vᵀ, dS = P·(dP - Σ dy·y) kept in the panel, and dQ += dS·k into the head's dQ (one
    read and write a row a block of keys; times the scale at the end). Then down the panel, per
    ROWS keys: dV += Pᵀ·dy and dK += dSᵀ·q (q packed times the scale), the keys' sums held in
    registers the whole way down, so each block's dK and dV are loaded and stored once a panel."""
    B = lse.shape[0]
    C = qkv.shape[1] // 3
    hs = C // NH
    HSP, Tp = _padded(hs), _padded(T)
    heads = B * NH
    parts = min(heads, chunks)
    per = (heads + parts - 1) // parts
    # the streamed compilation stores dQ, dK and dV past the caches (see STREAMED); a constant,
    # not a test of dqkv in the kernel, which had made the whole backward slower than either
    streaming = STREAMED
    if streaming and not _streams(dqkv, hs):
        raise ValueError("attention_backward_streamed: dqkv not on a cache line, or hs not a multiple of 16")
    for part in prange(parts):
        sums = _sums(SUMS, BITS)
        none = np.zeros((0, Tp), np.float32)
        q, keys = np.zeros((Tp, HSP), np.float32), np.zeros((HSP, Tp), np.float32)
        k, values = np.zeros((Tp, HSP), np.float32), np.zeros((HSP, Tp), np.float32)
        v, dy = np.zeros((Tp, HSP), np.float32), np.zeros((Tp, HSP), np.float32)
        dq = np.empty((Tp, HSP), np.float32)
        dk = np.empty((BACK_KEYS, HSP), np.float32)
        dv = np.empty((BACK_KEYS, HSP), np.float32)
        # zeroed once: a column past a row block's last key is never written, and is read
        # (weighing only keys past T, whose sums are never written out) by the sums down it
        weights = np.zeros((PANEL, BACK_KEYS), np.float32)
        grads = np.zeros((PANEL, BACK_KEYS), np.float32)
        qf, keysf, kf, valuesf, dyf = _flat(q), _flat(keys), _flat(k), _flat(values), _flat(dy)
        weightsf, gradsf = _flat(weights), _flat(grads)
        unscaled = np.ones(ROWS, np.float32)  # dQ's sums carry over from block to block as they are
        both = np.zeros(Tp, np.float32)  # Σ_d dy·y of each row: softmax's backward needs no row of P
        seen = np.empty(ROWS, np.int64)  # how many of the block's keys each row sees
        top = np.empty(ROWS, np.float32)  # each row's log-sum-exp
        dots = np.empty(ROWS, np.float32)
        last = min(heads, (part + 1) * per)
        for task in range(part * per, last):
            b, h = task // NH, task % NH
            base = b * T
            following = task + 1 < last  # a next head in this chunk, whose rows to ask for early
            after, column = (task + 1) // NH * T, (task + 1) % NH * hs
            _pack(qkv, base, T, h * hs, hs, scale, q, none)
            _pack(qkv, base, T, C + h * hs, hs, ONE, k, keys)
            _pack(qkv, base, T, 2 * C + h * hs, hs, ONE, v, values)
            _pack(dout, base, T, h * hs, hs, ONE, dy, none)  # head h's output sits in columns h·hs.. of out
            for t in range(T):
                total, dyt, yt = ZERO, dy[t], out[base + t, h * hs : h * hs + hs]
                for d in range(hs):
                    total += dyt[d] * yt[d]
                both[t] = total
            dq[:] = ZERO
            for k0 in range(0, T, BACK_KEYS):
                width = min(BACK_KEYS, T - k0)
                dk[:] = ZERO
                dv[:] = ZERO
                for p0 in range(k0, T, PANEL):  # earlier rows see none of these keys
                    end = min(T, p0 + PANEL)
                    for t0 in range(p0, end, ROWS):
                        if following and k0 == 0:  # the next head's rows, while this one computes
                            rows = min(ROWS, T - t0)
                            _ahead(qkv, after + t0, rows, (column, C + column, 2 * C + column), hs, 0)
                            _ahead(dout, after + t0, rows, (column,), hs, 0)
                            _ahead(out, after + t0, rows, (column,), hs, 0)
                            if not streaming:
                                _ahead(dqkv, after + t0, rows, (column, C + column, 2 * C + column), hs, 1)
                        r = t0 - p0
                        # keys past the block's last query are masked for all of its rows
                        wide = _vectors(min(width, t0 + ROWS - k0))
                        _scores(sums, q, qf, t0, keys, keysf, k0, wide, hs, weights, r)
                        _scores(sums, dy, dyf, t0, values, valuesf, k0, wide, hs, grads, r)
                        for i in range(ROWS):
                            t = t0 + i
                            if t < T:
                                seen[i], top[i], dots[i] = min(t + 1 - k0, width), lse[b, h, t], both[t]
                            else:  # padding: no key seen, weights and gradients zero
                                seen[i], top[i], dots[i] = 0, ZERO, ZERO
                        for c in range(0, wide, LANES):
                            for i in range(ROWS):  # the rows' exps are independent: unrolled, they overlap
                                weights_and_grads(BITS, weights, r + i, c, seen[i], grads, top[i], dots[i])
                        _weighted(sums, grads, gradsf, r, k, kf, k0, wide, dq, t0, unscaled)
                    for s0 in range(0, width, ROWS):
                        first = max(p0, k0 + s0)  # rows before the keys' own see none of them
                        _down_rows(sums, weights, weightsf, p0, dy, dyf, first, end, s0, dv)
                        _down_rows(sums, grads, gradsf, p0, q, qf, first, end, s0, dk)
                for s in range(width):
                    if streaming:
                        _streamed_row(dqkv, base + k0 + s, C + h * hs, dk, s, 0, hs, ONE)
                        _streamed_row(dqkv, base + k0 + s, 2 * C + h * hs, dv, s, 0, hs, ONE)
                    else:
                        _scaled_row(dqkv, base + k0 + s, C + h * hs, dk, s, 0, hs, ONE)
                        _scaled_row(dqkv, base + k0 + s, 2 * C + h * hs, dv, s, 0, hs, ONE)
            for t in range(T):
                if streaming:
                    _streamed_row(dqkv, base + t, h * hs, dq, t, 0, hs, scale)
                else:
                    _scaled_row(dqkv, base + t, h * hs, dq, t, 0, hs, scale)
        if streaming:
            _store_fence()


def _streamed(fn: Any) -> Any:
    """fn with STREAMED true, under a name of its own (numba's disk cache files a kernel by its
    name); numba reads a global as a constant when it compiles."""
    copy = pytypes.FunctionType(
        fn.__code__, {**fn.__globals__, "STREAMED": True}, fn.__name__ + "_streamed", fn.__defaults__, fn.__closure__
    )
    copy.__qualname__ = fn.__qualname__ + "_streamed"
    return copy


attention_forward = variants(_flash_forward, REASSOCIATE)
attention_backward = variants(_flash_backward, REASSOCIATE)
attention_backward_streamed = variants(_streamed(_flash_backward), REASSOCIATE)
