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

LANES = 16  # whole vectors of keys (16 float32 is one AVX-512 vector, two AVX2)


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


def _attention_forward(
    qkv: np.ndarray, B: int, T: int, NH: int, scale: np.float32, out: np.ndarray, att: np.ndarray
) -> None:  # pragma: no cover
    C = qkv.shape[1] // 3
    hs = C // NH
    for task in prange(B * NH):
        b, h = task // NH, task % NH
        base = b * T
        q, unused = np.empty((T, hs), np.float32), np.empty((hs, T), np.float32)
        k, keys = np.empty((T, hs), np.float32), np.empty((hs, T), np.float32)  # kᵀ: scores are a row
        v, values = np.empty((T, hs), np.float32), np.empty((hs, T), np.float32)  # vᵀ: y[t, d] is a dot
        _pack(qkv, base, T, h * hs, hs, q, unused)
        _pack(qkv, base, T, C + h * hs, hs, k, keys)
        _pack(qkv, base, T, 2 * C + h * hs, hs, v, values)
        scores = np.empty(T, np.float32)
        for t in range(T):
            n = t + 1
            width = min(T, (n + LANES - 1) // LANES * LANES)
            qt = q[t]
            for s in range(width):
                scores[s] = ZERO
            for d in range(hs):
                qd = qt[d]
                kd = keys[d]
                for s in range(width):
                    scores[s] += qd * kd[s]
            top = scores[0] * scale
            for s in range(n):
                scores[s] *= scale
                top = max(top, scores[s])
            total = ZERO
            for s in range(n):
                e = exp32(scores[s] - top)
                scores[s] = e
                total += e
            weights = att[b, h, t]
            for s in range(n):
                weights[s] = scores[s] / total
            row = out[base + t, h * hs : h * hs + hs]
            for d in range(hs):
                vd = values[d]
                y = ZERO
                for s in range(n):
                    y += weights[s] * vd[s]
                row[d] = y


def _attention_backward(
    dout: np.ndarray, qkv: np.ndarray, att: np.ndarray, T: int, NH: int, scale: np.float32, dqkv: np.ndarray
) -> None:  # pragma: no cover
    """Every product as loops over keys s for one (query t, channel d): dK and dV are kept
    transposed (hs, T), so each is a row updated along s, never a short row of hs per key."""
    B = att.shape[0]
    C = qkv.shape[1] // 3
    hs = C // NH
    for task in prange(B * NH):
        b, h = task // NH, task % NH
        base = b * T
        q, unused = np.empty((T, hs), np.float32), np.empty((hs, T), np.float32)
        k, keys = np.empty((T, hs), np.float32), np.empty((hs, T), np.float32)
        v, values = np.empty((T, hs), np.float32), np.empty((hs, T), np.float32)
        dy = np.empty((T, hs), np.float32)
        _pack(qkv, base, T, h * hs, hs, q, unused)
        _pack(qkv, base, T, C + h * hs, hs, k, keys)
        _pack(qkv, base, T, 2 * C + h * hs, hs, v, values)
        _pack(dout, base, T, h * hs, hs, dy, unused)  # head h's output sits in columns h·hs.. of out
        dkeys = np.zeros((hs, T), np.float32)
        dvalues = np.zeros((hs, T), np.float32)
        datt = np.empty(T, np.float32)
        for t in range(T):
            n = t + 1
            gt, qt = dy[t], q[t]
            weights = att[b, h, t]
            for s in range(n):
                datt[s] = ZERO
            for d in range(hs):
                g = gt[d]
                vd, dvd = values[d], dvalues[d]
                for s in range(n):
                    datt[s] += g * vd[s]
                    dvd[s] += weights[s] * g
            dot = ZERO
            for s in range(n):
                dot += weights[s] * datt[s]
            for s in range(n):
                datt[s] = weights[s] * (datt[s] - dot) * scale  # softmax's backward, then the scale
            row = dqkv[base + t, h * hs : h * hs + hs]
            for d in range(hs):
                kd, dkd = keys[d], dkeys[d]
                qd = qt[d]
                total = ZERO
                for s in range(n):
                    total += datt[s] * kd[s]
                    dkd[s] += datt[s] * qd
                row[d] = total
        for s in range(T):
            rk = dqkv[base + s, C + h * hs : C + h * hs + hs]
            rv = dqkv[base + s, 2 * C + h * hs : 2 * C + h * hs + hs]
            for d in range(hs):
                rk[d] = dkeys[d, s]
                rv[d] = dvalues[d, s]


attention_forward = variants(_attention_forward, REASSOCIATE)
attention_backward = variants(_attention_backward, REASSOCIATE)
