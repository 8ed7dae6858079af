"""The numba backend's attention: causal softmax attention fused per (batch, head), forward and
backward, on the fused projection qkv (B·T, 3C) as the reference takes it.

Per (b, h), one task: for each query t the scores against keys 0..t only (the reference scores
all T keys then masks half of them away), the causal softmax, and the weighted sum of values,
row by row, so nothing of size T × T but the attention weights is ever written. The backward
does the same per row: the weights' gradient, the softmax's backward and the three products,
with dK and dV summed in a buffer of the task's own. Every inner loop runs along a contiguous
axis with no dependence between iterations (keys are transposed into a (hs, T) buffer first),
so LLVM vectorises them; scores are computed for whole vectors of keys past t, and never read.

Tasks are independent (each writes only its own head's columns), so the parallel variant runs
them over threads with no partial sums: both variants give the same bits. Those are not the
reference's (its products are BLAS's, its exp NumPy's): a tolerance, ``NumbaBackend``.
Importing this module imports numba.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from .numba_ops import REASSOCIATE, ZERO, exp32, variants


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


ROWS = 4  # queries per block: each key or value loaded once serves four rows


def _attention_forward(
    qkv: np.ndarray, B: int, T: int, NH: int, scale: np.float32, out: np.ndarray, att: np.ndarray
) -> None:  # pragma: no cover
    C = qkv.shape[1] // 3
    hs = C // NH
    Tp = (T + ROWS - 1) // ROWS * ROWS  # rows past T are zero, and what they give is dropped
    for task in prange(B * NH):
        b, h = task // NH, task % NH
        base = b * T
        q, unused = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        k, keys = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)  # kᵀ: scores are rows
        v, values = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)  # vᵀ: y[t, d] is a dot
        _pack(qkv, base, T, h * hs, hs, q, unused)
        _pack(qkv, base, T, C + h * hs, hs, k, keys)
        _pack(qkv, base, T, 2 * C + h * hs, hs, v, values)
        block = np.empty((ROWS, Tp), np.float32)
        w0, w1, w2, w3 = block[0], block[1], block[2], block[3]
        for t0 in range(0, T, ROWS):
            width = t0 + ROWS  # keys 0..t0+3: the block's last row's, zero weights past each row's own
            for s in range(width):
                w0[s] = ZERO
                w1[s] = ZERO
                w2[s] = ZERO
                w3[s] = ZERO
            for d in range(hs):
                kd = keys[d]
                a0, a1, a2, a3 = q[t0, d], q[t0 + 1, d], q[t0 + 2, d], q[t0 + 3, d]
                for s in range(width):
                    key = kd[s]
                    w0[s] += a0 * key
                    w1[s] += a1 * key
                    w2[s] += a2 * key
                    w3[s] += a3 * key
            for i in range(ROWS):
                row = block[i]
                n = t0 + i + 1
                top = row[0] * scale
                for s in range(n):
                    row[s] *= scale
                    top = max(top, row[s])
                total = ZERO
                for s in range(n):
                    e = exp32(row[s] - top)
                    row[s] = e
                    total += e
                for s in range(n):
                    row[s] = row[s] / total
                for s in range(n, width):
                    row[s] = ZERO  # the causal mask
                if t0 + i < T:
                    weights = att[b, h, t0 + i]
                    for s in range(n):
                        weights[s] = row[s]
            for d in range(hs):
                vd = values[d]
                y0, y1, y2, y3 = ZERO, ZERO, ZERO, ZERO
                for s in range(width):
                    value = vd[s]
                    y0 += w0[s] * value
                    y1 += w1[s] * value
                    y2 += w2[s] * value
                    y3 += w3[s] * value
                for i, y in ((0, y0), (1, y1), (2, y2), (3, y3)):
                    if t0 + i < T:
                        out[base + t0 + i, h * hs + d] = y


def _attention_backward(
    dout: np.ndarray, qkv: np.ndarray, att: np.ndarray, T: int, NH: int, scale: np.float32, dqkv: np.ndarray
) -> None:  # pragma: no cover
    """Four queries at a time, every product a loop along keys: the weights' gradient and dV for
    one channel, then dQ and dK for one channel; dK and dV are kept transposed (hs, T), rows
    updated along the keys."""
    B = att.shape[0]
    C = qkv.shape[1] // 3
    hs = C // NH
    Tp = (T + ROWS - 1) // ROWS * ROWS
    for task in prange(B * NH):
        b, h = task // NH, task % NH
        base = b * T
        q, unused = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        k, keys = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        v, values = np.zeros((Tp, hs), np.float32), np.zeros((hs, Tp), np.float32)
        dy = np.zeros((Tp, hs), np.float32)
        _pack(qkv, base, T, h * hs, hs, q, unused)
        _pack(qkv, base, T, C + h * hs, hs, k, keys)
        _pack(qkv, base, T, 2 * C + h * hs, hs, v, values)
        _pack(dout, base, T, h * hs, hs, dy, unused)  # head h's output sits in columns h·hs.. of out
        dkeys = np.zeros((hs, Tp), np.float32)
        dvalues = np.zeros((hs, Tp), np.float32)
        weights = np.empty((ROWS, Tp), np.float32)
        grads = np.empty((ROWS, Tp), np.float32)
        w0, w1, w2, w3 = weights[0], weights[1], weights[2], weights[3]
        g0, g1, g2, g3 = grads[0], grads[1], grads[2], grads[3]
        for t0 in range(0, T, ROWS):
            width = t0 + ROWS
            for i in range(ROWS):
                n = t0 + i + 1 if t0 + i < T else 0  # a padding row has no weights
                row, grad = weights[i], grads[i]
                if n:
                    saved = att[b, h, t0 + i]
                    for s in range(n):
                        row[s] = saved[s]
                for s in range(n, width):
                    row[s] = ZERO
                for s in range(width):
                    grad[s] = ZERO
            for d in range(hs):
                vd, dvd = values[d], dvalues[d]
                a0, a1, a2, a3 = dy[t0, d], dy[t0 + 1, d], dy[t0 + 2, d], dy[t0 + 3, d]
                for s in range(width):
                    value = vd[s]
                    g0[s] += a0 * value
                    g1[s] += a1 * value
                    g2[s] += a2 * value
                    g3[s] += a3 * value
                    dvd[s] += w0[s] * a0 + w1[s] * a1 + w2[s] * a2 + w3[s] * a3
            for i in range(ROWS):
                row, grad = weights[i], grads[i]
                dot = ZERO
                for s in range(width):
                    dot += row[s] * grad[s]
                for s in range(width):
                    grad[s] = row[s] * (grad[s] - dot) * scale  # softmax's backward, then the scale
            for d in range(hs):
                kd, dkd = keys[d], dkeys[d]
                a0, a1, a2, a3 = q[t0, d], q[t0 + 1, d], q[t0 + 2, d], q[t0 + 3, d]
                x0, x1, x2, x3 = ZERO, ZERO, ZERO, ZERO
                for s in range(width):
                    key = kd[s]
                    x0 += g0[s] * key
                    x1 += g1[s] * key
                    x2 += g2[s] * key
                    x3 += g3[s] * key
                    dkd[s] += g0[s] * a0 + g1[s] * a1 + g2[s] * a2 + g3[s] * a3
                for i, x in ((0, x0), (1, x1), (2, x2), (3, x3)):
                    if t0 + i < T:
                        dqkv[base + t0 + i, h * hs + d] = x
        for s in range(T):
            rk = dqkv[base + s, C + h * hs : C + h * hs + hs]
            rv = dqkv[base + s, 2 * C + h * hs : 2 * C + h * hs + hs]
            for d in range(hs):
                rk[d] = dkeys[d, s]
                rv[d] = dvalues[d, s]


attention_forward = variants(_attention_forward, REASSOCIATE)
attention_backward = variants(_attention_backward, REASSOCIATE)
