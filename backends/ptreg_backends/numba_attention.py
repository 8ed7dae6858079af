"""The numba backend's attention: causal softmax attention fused per (batch, head), forward and
backward, on the fused projection qkv (B·T, 3C) as the reference takes it.

Per (b, h), one task, eight queries at a time: their scores against keys up to the block's last
query only (the reference scores all T keys then masks half of them away), each row's causal
softmax (weights past its own query set to zero), and the weighted sums of values; the backward
the same way, the weights' gradient, the softmax's backward and the three products. Every
product is a loop along keys for one channel in which each key or value loaded serves the
block's eight rows; keys and values are packed transposed (hs, T), and dK and dV summed
transposed in buffers of the task's own, so every inner loop runs along a contiguous axis with
no dependence between iterations but the sums of dot products, and LLVM vectorises them.

Tasks are independent (each writes only its own head's columns), so the parallel variant runs
them over threads with no partial sums. The bits are not the reference's (its products are
BLAS's, its exp NumPy's), and the two variants may reassociate their dot products differently:
a tolerance (``NumbaStepOps.op_tolerances``). Importing this module imports numba.
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


ROWS = 8  # queries per block: each key or value loaded once serves eight rows


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
        w0, w1, w2, w3, w4, w5, w6, w7 = block[0], block[1], block[2], block[3], block[4], block[5], block[6], block[7]
        for t0 in range(0, T, ROWS):
            width = t0 + ROWS  # keys 0..t0+3: the block's last row's, zero weights past each row's own
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
                kd = keys[d]
                a0, a1, a2, a3, a4, a5, a6, a7 = (
                    q[t0 + 0, d],
                    q[t0 + 1, d],
                    q[t0 + 2, d],
                    q[t0 + 3, d],
                    q[t0 + 4, d],
                    q[t0 + 5, d],
                    q[t0 + 6, d],
                    q[t0 + 7, d],
                )
                for s in range(width):
                    key = kd[s]
                    w0[s] += a0 * key
                    w1[s] += a1 * key
                    w2[s] += a2 * key
                    w3[s] += a3 * key
                    w4[s] += a4 * key
                    w5[s] += a5 * key
                    w6[s] += a6 * key
                    w7[s] += a7 * key
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
                y0, y1, y2, y3, y4, y5, y6, y7 = ZERO, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO
                for s in range(width):
                    value = vd[s]
                    y0 += w0[s] * value
                    y1 += w1[s] * value
                    y2 += w2[s] * value
                    y3 += w3[s] * value
                    y4 += w4[s] * value
                    y5 += w5[s] * value
                    y6 += w6[s] * value
                    y7 += w7[s] * value
                for i, y in ((0, y0), (1, y1), (2, y2), (3, y3), (4, y4), (5, y5), (6, y6), (7, y7)):
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
        w0, w1, w2, w3, w4, w5, w6, w7 = (
            weights[0],
            weights[1],
            weights[2],
            weights[3],
            weights[4],
            weights[5],
            weights[6],
            weights[7],
        )
        g0, g1, g2, g3, g4, g5, g6, g7 = grads[0], grads[1], grads[2], grads[3], grads[4], grads[5], grads[6], grads[7]
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
                a0, a1, a2, a3, a4, a5, a6, a7 = (
                    dy[t0 + 0, d],
                    dy[t0 + 1, d],
                    dy[t0 + 2, d],
                    dy[t0 + 3, d],
                    dy[t0 + 4, d],
                    dy[t0 + 5, d],
                    dy[t0 + 6, d],
                    dy[t0 + 7, d],
                )
                for s in range(width):
                    value = vd[s]
                    g0[s] += a0 * value
                    g1[s] += a1 * value
                    g2[s] += a2 * value
                    g3[s] += a3 * value
                    g4[s] += a4 * value
                    g5[s] += a5 * value
                    g6[s] += a6 * value
                    g7[s] += a7 * value
                    dvd[s] += (
                        w0[s] * a0
                        + w1[s] * a1
                        + w2[s] * a2
                        + w3[s] * a3
                        + w4[s] * a4
                        + w5[s] * a5
                        + w6[s] * a6
                        + w7[s] * a7
                    )
            for i in range(ROWS):
                row, grad = weights[i], grads[i]
                dot = ZERO
                for s in range(width):
                    dot += row[s] * grad[s]
                for s in range(width):
                    grad[s] = row[s] * (grad[s] - dot) * scale  # softmax's backward, then the scale
            for d in range(hs):
                kd, dkd = keys[d], dkeys[d]
                a0, a1, a2, a3, a4, a5, a6, a7 = (
                    q[t0 + 0, d],
                    q[t0 + 1, d],
                    q[t0 + 2, d],
                    q[t0 + 3, d],
                    q[t0 + 4, d],
                    q[t0 + 5, d],
                    q[t0 + 6, d],
                    q[t0 + 7, d],
                )
                x0, x1, x2, x3, x4, x5, x6, x7 = ZERO, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO
                for s in range(width):
                    key = kd[s]
                    x0 += g0[s] * key
                    x1 += g1[s] * key
                    x2 += g2[s] * key
                    x3 += g3[s] * key
                    x4 += g4[s] * key
                    x5 += g5[s] * key
                    x6 += g6[s] * key
                    x7 += g7[s] * key
                    dkd[s] += (
                        g0[s] * a0
                        + g1[s] * a1
                        + g2[s] * a2
                        + g3[s] * a3
                        + g4[s] * a4
                        + g5[s] * a5
                        + g6[s] * a6
                        + g7[s] * a7
                    )
                for i, x in ((0, x0), (1, x1), (2, x2), (3, x3), (4, x4), (5, x5), (6, x6), (7, x7)):
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
