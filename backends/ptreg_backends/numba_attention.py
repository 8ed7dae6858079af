"""The numba backend's attention: causal softmax attention fused per (batch, head), forward and
backward, on the fused projection qkv (B·T, 3C) as the reference takes it, blocked over keys in
the manner of flash attention.

Per (b, h), one task: its q, k and v packed (k and v also transposed, (hs, T)), then per block
of ROWS queries the keys in blocks of KEYS, up to the block's last query only (the reference
scores all T keys, then masks half of them away). The forward keeps an online softmax: each row
its running max and sum, rescaling what it summed when the max grows, so no (T, T) weights are
written; it keeps each row's log-sum-exp instead. The backward recomputes the weights block by
block from q, k and that log-sum-exp (one product more than reading them back, and no (T, T)
array written, read or allocated), and takes softmax's backward with Σ_d dy·y per row in place
of a dot along the row of weights. Every product is a loop along keys or along one channel in
which each key or value loaded serves the block's eight rows, so LLVM vectorises it.

Tasks are independent (each writes only its own head's columns), so the parallel variant runs
them over threads with no partial sums. The bits are not the reference's (its products are
BLAS's, its exp NumPy's), and the two variants may reassociate their dot products differently:
a tolerance (``NumbaStepOps.op_tolerances``). Importing this module imports numba.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from .numba_ops import ONE, REASSOCIATE, ZERO, exp32, variants


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _pack(
    qkv: np.ndarray, base: int, T: int, offset: int, hs: int, rows: np.ndarray, columns: np.ndarray
) -> None:  # pragma: no cover
    """One head's (T, hs) block of qkv from column ``offset``, as rows (T, hs) and transposed (hs, T)."""
    for s in range(T):
        source = qkv[base + s, offset : offset + hs]
        row = rows[s]
        for d in range(hs):
            row[d] = source[d]
            columns[d, s] = source[d]


ROWS = 8  # queries per block: each key or value loaded once serves eight rows


# --------------------------------------------------------------------------- blocked over keys

# Keys per block: for hs up to 32 a block's keys and values (2 · hs · KEYS floats) and its
# weights and their gradients (2 · ROWS · KEYS) stay in a 48 KiB L1; xl's T = 128 is one block.
KEYS = 128
NEG_INF = np.float32(-np.inf)


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _scores(
    a: np.ndarray, t0: int, b: np.ndarray, k0: int, width: int, hs: int, block: np.ndarray
) -> None:  # pragma: no cover
    """block[i, s] = a[t0 + i] · b[:, k0 + s] for the ROWS rows, s < width (b transposed, (hs, T)):
    each column of b loaded once serves the eight rows."""
    w0, w1, w2, w3, w4, w5, w6, w7 = block[0], block[1], block[2], block[3], block[4], block[5], block[6], block[7]
    for s in range(width):
        w0[s] = ZERO
        w1[s] = ZERO
        w2[s] = ZERO
        w3[s] = ZERO
        w4[s] = ZERO
        w5[s] = ZERO
        w6[s] = ZERO
        w7[s] = ZERO
    for d in range(hs):
        bd = b[d, k0 : k0 + width]
        a0, a1, a2, a3 = a[t0, d], a[t0 + 1, d], a[t0 + 2, d], a[t0 + 3, d]
        a4, a5, a6, a7 = a[t0 + 4, d], a[t0 + 5, d], a[t0 + 6, d], a[t0 + 7, d]
        for s in range(width):
            x = bd[s]
            w0[s] += a0 * x
            w1[s] += a1 * x
            w2[s] += a2 * x
            w3[s] += a3 * x
            w4[s] += a4 * x
            w5[s] += a5 * x
            w6[s] += a6 * x
            w7[s] += a7 * x


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _weighted(
    block: np.ndarray, b: np.ndarray, k0: int, width: int, hs: int, acc: np.ndarray
) -> None:  # pragma: no cover
    """acc[i, d] += Σ_s block[i, s] · b[d, k0 + s]: the eight rows' dot products along keys."""
    w0, w1, w2, w3, w4, w5, w6, w7 = block[0], block[1], block[2], block[3], block[4], block[5], block[6], block[7]
    for d in range(hs):
        bd = b[d, k0 : k0 + width]
        y0, y1, y2, y3, y4, y5, y6, y7 = ZERO, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO
        for s in range(width):
            x = bd[s]
            y0 += w0[s] * x
            y1 += w1[s] * x
            y2 += w2[s] * x
            y3 += w3[s] * x
            y4 += w4[s] * x
            y5 += w5[s] * x
            y6 += w6[s] * x
            y7 += w7[s] * x
        acc[0, d] += y0
        acc[1, d] += y1
        acc[2, d] += y2
        acc[3, d] += y3
        acc[4, d] += y4
        acc[5, d] += y5
        acc[6, d] += y6
        acc[7, d] += y7


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def _outer(
    block: np.ndarray, a: np.ndarray, t0: int, k0: int, width: int, hs: int, sums: np.ndarray
) -> None:  # pragma: no cover
    """sums[d, k0 + s] += Σ_i block[i, s] · a[t0 + i, d]: a transposed gradient (dK or dV) along
    the block's keys, each element loaded and stored once for the eight rows."""
    w0, w1, w2, w3, w4, w5, w6, w7 = block[0], block[1], block[2], block[3], block[4], block[5], block[6], block[7]
    for d in range(hs):
        sd = sums[d, k0 : k0 + width]
        a0, a1, a2, a3 = a[t0, d], a[t0 + 1, d], a[t0 + 2, d], a[t0 + 3, d]
        a4, a5, a6, a7 = a[t0 + 4, d], a[t0 + 5, d], a[t0 + 6, d], a[t0 + 7, d]
        for s in range(width):
            sd[s] += (w0[s] * a0 + w1[s] * a1 + w2[s] * a2 + w3[s] * a3) + (
                w4[s] * a4 + w5[s] * a5 + w6[s] * a6 + w7[s] * a7
            )


def _flash_forward(
    qkv: np.ndarray, B: int, T: int, NH: int, scale: np.float32, out: np.ndarray, lse: np.ndarray
) -> None:  # pragma: no cover
    """Per (b, h) and block of ROWS queries, the keys in blocks of KEYS with an online softmax:
    each row keeps its running max and sum, and rescales what it summed when the max grows. No
    (T, T) weights are kept, only each row's log-sum-exp (lse) for the backward."""
    C = qkv.shape[1] // 3
    hs = C // NH
    Tp = (T + ROWS - 1) // ROWS * ROWS
    for task in prange(B * NH):
        b, h = task // NH, task % NH
        base = b * T
        q, unused = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        k, keys = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        v, values = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        _pack(qkv, base, T, h * hs, hs, q, unused)
        _pack(qkv, base, T, C + h * hs, hs, k, keys)
        _pack(qkv, base, T, 2 * C + h * hs, hs, v, values)
        block = np.empty((ROWS, KEYS), np.float32)
        acc = np.empty((ROWS, hs), np.float32)
        top = np.empty(ROWS, np.float32)
        total = np.empty(ROWS, np.float32)
        for t0 in range(0, T, ROWS):
            acc[:] = ZERO
            top[:] = NEG_INF
            total[:] = ZERO
            end = t0 + ROWS  # keys past the block's last query are masked for all of its rows
            for k0 in range(0, end, KEYS):
                width = min(KEYS, end - k0)
                _scores(q, t0, keys, k0, width, hs, block)
                for i in range(ROWS):
                    row = block[i]
                    n = min(t0 + i + 1 - k0, width)  # the keys this row may see in the block
                    if n <= 0:
                        for s in range(width):
                            row[s] = ZERO
                        continue
                    best = top[i]
                    for s in range(n):
                        row[s] *= scale
                        best = max(best, row[s])
                    shrink = ZERO if top[i] == NEG_INF else exp32(top[i] - best)
                    added = ZERO
                    for s in range(n):
                        e = exp32(row[s] - best)
                        row[s] = e
                        added += e
                    for s in range(n, width):
                        row[s] = ZERO  # the causal mask
                    total[i] = total[i] * shrink + added
                    top[i] = best
                    if shrink != ONE:
                        for d in range(hs):
                            acc[i, d] *= shrink
                _weighted(block, values, k0, width, hs, acc)
            for i in range(ROWS):
                t = t0 + i
                if t < T:
                    inverse = ONE / total[i]
                    for d in range(hs):
                        out[base + t, h * hs + d] = acc[i, d] * inverse
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
) -> None:  # pragma: no cover
    """The weights recomputed block by block from q, k and each row's lse (exp(score - lse)),
    then as the forward-keeping backward: dP = dy·vᵀ, dS = P·(dP - Σ dy·y)·scale, dV += Pᵀ·dy,
    dQ += dS·k, dK += dSᵀ·q; dK and dV kept transposed (hs, T)."""
    B = lse.shape[0]
    C = qkv.shape[1] // 3
    hs = C // NH
    Tp = (T + ROWS - 1) // ROWS * ROWS
    for task in prange(B * NH):
        b, h = task // NH, task % NH
        base = b * T
        q, qt = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        k, keys = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        v, values = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        dy, unused = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        _pack(qkv, base, T, h * hs, hs, q, qt)
        _pack(qkv, base, T, C + h * hs, hs, k, keys)
        _pack(qkv, base, T, 2 * C + h * hs, hs, v, values)
        _pack(dout, base, T, h * hs, hs, dy, unused)
        dkeys = np.zeros((hs, Tp), np.float32)
        dvalues = np.zeros((hs, Tp), np.float32)
        weights = np.empty((ROWS, KEYS), np.float32)
        grads = np.empty((ROWS, KEYS), np.float32)
        dq = np.empty((ROWS, hs), np.float32)
        both = np.empty(ROWS, np.float32)  # Σ_d dy·y of each row: softmax's backward needs no row of P
        for t0 in range(0, T, ROWS):
            for i in range(ROWS):
                t = t0 + i
                dot = ZERO
                if t < T:
                    for d in range(hs):
                        dot += dy[t, d] * out[base + t, h * hs + d]
                both[i] = dot
            dq[:] = ZERO
            end = t0 + ROWS
            for k0 in range(0, end, KEYS):
                width = min(KEYS, end - k0)
                _scores(q, t0, keys, k0, width, hs, weights)
                _scores(dy, t0, values, k0, width, hs, grads)
                for i in range(ROWS):
                    row, grad = weights[i], grads[i]
                    t = t0 + i
                    n = min(t + 1 - k0, width) if t < T else 0  # a padding row has no weights
                    n = max(n, 0)
                    if n:
                        top = lse[b, h, t]
                        for s in range(n):
                            p = exp32(row[s] * scale - top)
                            row[s] = p
                            grad[s] = p * (grad[s] - both[i]) * scale
                    for s in range(n, width):
                        row[s] = ZERO
                        grad[s] = ZERO
                _outer(weights, dy, t0, k0, width, hs, dvalues)
                _outer(grads, q, t0, k0, width, hs, dkeys)
                _weighted(grads, keys, k0, width, hs, dq)
            for i in range(ROWS):
                if t0 + i < T:
                    for d in range(hs):
                        dqkv[base + t0 + i, h * hs + d] = dq[i, d]
        for s in range(T):
            rk = dqkv[base + s, C + h * hs : C + h * hs + hs]
            rv = dqkv[base + s, 2 * C + h * hs : 2 * C + h * hs + hs]
            for d in range(hs):
                rk[d] = dkeys[d, s]
                rv[d] = dvalues[d, s]


attention_forward = variants(_flash_forward, REASSOCIATE)
attention_backward = variants(_flash_backward, REASSOCIATE)
