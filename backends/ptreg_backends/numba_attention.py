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

import numpy as np
from numba import prange

from .numba_ops import REASSOCIATE, ZERO, exp32, variants

LANES = 16  # whole vectors of keys (16 float32 is one AVX-512 vector, two AVX2)


def _attention_forward(
    qkv: np.ndarray, B: int, T: int, NH: int, scale: np.float32, out: np.ndarray, att: np.ndarray
) -> None:  # pragma: no cover
    C = qkv.shape[1] // 3
    hs = C // NH
    for task in prange(B * NH):
        b, h = task // NH, task % NH
        base, qo, ko, vo = b * T, h * hs, C + h * hs, 2 * C + h * hs
        keys = np.empty((hs, T), np.float32)  # kᵀ: scores of one query against keys are a row
        for s in range(T):
            for d in range(hs):
                keys[d, s] = qkv[base + s, ko + d]
        scores = np.empty(T, np.float32)
        acc = np.empty(hs, np.float32)
        for t in range(T):
            n = t + 1
            width = min(T, (n + LANES - 1) // LANES * LANES)
            for s in range(width):
                scores[s] = ZERO
            for d in range(hs):
                qd = qkv[base + t, qo + d]
                for s in range(width):
                    scores[s] += qd * keys[d, s]
            top = scores[0] * scale
            for s in range(n):
                scores[s] *= scale
                top = max(top, scores[s])
            total = ZERO
            for s in range(n):
                e = exp32(scores[s] - top)
                scores[s] = e
                total += e
            for d in range(hs):
                acc[d] = ZERO
            for s in range(n):
                a = scores[s] / total
                att[b, h, t, s] = a
                for d in range(hs):
                    acc[d] += a * qkv[base + s, vo + d]
            for d in range(hs):
                out[base + t, qo + d] = acc[d]


def _attention_backward(
    dout: np.ndarray, qkv: np.ndarray, att: np.ndarray, T: int, NH: int, scale: np.float32, dqkv: np.ndarray
) -> None:  # pragma: no cover
    B = att.shape[0]
    C = qkv.shape[1] // 3
    hs = C // NH
    for task in prange(B * NH):
        b, h = task // NH, task % NH
        base, qo, ko, vo = b * T, h * hs, C + h * hs, 2 * C + h * hs
        values = np.empty((hs, T), np.float32)  # vᵀ, for the weights' gradient as a row
        for s in range(T):
            for d in range(hs):
                values[d, s] = qkv[base + s, vo + d]
        dk = np.zeros((T, hs), np.float32)
        dv = np.zeros((T, hs), np.float32)
        datt = np.empty(T, np.float32)
        acc = np.empty(hs, np.float32)
        for t in range(T):
            n = t + 1
            width = min(T, (n + LANES - 1) // LANES * LANES)
            for s in range(width):
                datt[s] = ZERO
            for d in range(hs):
                g = dout[base + t, qo + d]  # head h's output sits in columns h·hs.. of out
                for s in range(width):
                    datt[s] += g * values[d, s]
            dot = ZERO
            for s in range(n):
                a = att[b, h, t, s]
                dot += a * datt[s]
                for d in range(hs):
                    dv[s, d] += a * dout[base + t, qo + d]
            for d in range(hs):
                acc[d] = ZERO
            for s in range(n):
                g = att[b, h, t, s] * (datt[s] - dot) * scale  # softmax's backward, then the scale
                for d in range(hs):
                    acc[d] += g * qkv[base + s, ko + d]
                    dk[s, d] += g * qkv[base + t, qo + d]
            for d in range(hs):
                dqkv[base + t, qo + d] = acc[d]
        for s in range(T):
            for d in range(hs):
                dqkv[base + s, ko + d] = dk[s, d]
                dqkv[base + s, vo + d] = dv[s, d]


attention_forward = variants(_attention_forward, REASSOCIATE)
attention_backward = variants(_attention_backward, REASSOCIATE)
