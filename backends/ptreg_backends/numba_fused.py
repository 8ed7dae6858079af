"""The numba backend's fused ops: two of the step's ops that run back to back on the same rows,
done in one pass over them (``docs/backends.md``, fused ops).

``residual_layernorm``: forward, the stream's add and the layernorm of its sum, row by row, so the
sum is normalised while it is still in L1 instead of being written out and read back by a second
op; backward, the layernorm's dx added to the stream's gradient as it is made, so dx is written
once, summed.

``bias_gelu``: forward, the fc layer's bias added to its product and GELU taken of the sum in the
same pass (the product is read and written once, not twice); backward, GELU's backward and the
bias's gradient, db summed from each row of dx as it is made instead of read back.

Each kernel comes serial and parallel over chunks of rows, as ``numba_ops``'s.
Importing this module imports numba.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ptreg_backends.numba_ops import (
    GELU_CUBE,
    GELU_CUBE3,
    GELU_SCALE,
    HALF,
    LN_EPS,
    ONE,
    REASSOCIATE,
    ZERO,
    tanh32,
    variants,
)


def _residual_layernorm_forward(
    x: np.ndarray,
    branch: np.ndarray,
    w: np.ndarray,
    b: np.ndarray,
    stream: np.ndarray,
    out: np.ndarray,
    mean: np.ndarray,
    rstd: np.ndarray,
    chunks: int,
) -> None:  # pragma: no cover
    rows, C = x.shape
    per = (rows + chunks - 1) // chunks
    inverse = ONE / np.float32(C)
    for c in prange(chunks):
        for i in range(c * per, min(rows, (c + 1) * per)):
            xr, br, sr, outr = x[i], branch[i], stream[i], out[i]
            total = ZERO
            for j in range(C):
                s = xr[j] + br[j]  # the reference's add, exactly: its bits are the stream's
                sr[j] = s
                total += s
            m = total * inverse
            squares = ZERO
            for j in range(C):
                d = sr[j] - m
                squares += d * d
            r = ONE / np.sqrt(squares * inverse + LN_EPS)
            for j in range(C):
                outr[j] = (sr[j] - m) * r * w[j] + b[j]
            mean[i] = m
            rstd[i] = r


def _residual_layernorm_backward(
    dout: np.ndarray,
    x: np.ndarray,
    mean: np.ndarray,
    rstd: np.ndarray,
    w: np.ndarray,
    dstream: np.ndarray,
    dx: np.ndarray,
    dw_parts: np.ndarray,
    db_parts: np.ndarray,
) -> None:  # pragma: no cover
    """dx = dstream + the layernorm's dx, row by row; dw and db as one partial sum per chunk of
    rows (zeroed by the caller, which adds them up), as ``numba_ops``'s layernorm backward."""
    rows, C = x.shape
    chunks = dw_parts.shape[0]
    per = (rows + chunks - 1) // chunks
    inverse = ONE / np.float32(C)
    for c in prange(chunks):
        dw, db = dw_parts[c], db_parts[c]
        for i in range(c * per, min(rows, (c + 1) * per)):
            xr, gr, sr, dxr = x[i], dout[i], dstream[i], dx[i]
            m, s = mean[i], rstd[i]
            dnorm_sum = ZERO
            dnorm_dot = ZERO
            for j in range(C):
                norm = (xr[j] - m) * s
                dnorm = gr[j] * w[j]
                dnorm_sum += dnorm
                dnorm_dot += dnorm * norm
                dw[j] += gr[j] * norm
                db[j] += gr[j]
            dnorm_mean = dnorm_sum * inverse
            dnorm_dot_mean = dnorm_dot * inverse
            for j in range(C):
                norm = (xr[j] - m) * s
                dxr[j] = sr[j] + (gr[j] * w[j] - dnorm_mean - norm * dnorm_dot_mean) * s


def _bias_gelu_forward(out: np.ndarray, b: np.ndarray, y: np.ndarray, chunks: int) -> None:  # pragma: no cover
    rows, N = out.shape
    per = (rows + chunks - 1) // chunks
    for c in prange(chunks):
        for i in range(c * per, min(rows, (c + 1) * per)):
            row, yr = out[i], y[i]
            for j in range(N):
                v = row[j] + b[j]  # the reference's add, exactly: the backward reads it back
                row[j] = v
                t = tanh32(GELU_SCALE * v * (ONE + GELU_CUBE * (v * v)))
                yr[j] = HALF * (v * (ONE + t))


def _bias_gelu_backward(
    dout: np.ndarray, x: np.ndarray, dx: np.ndarray, db_parts: np.ndarray
) -> None:  # pragma: no cover
    """dx as numba_ops's GELU backward; db as one partial sum over rows per chunk (db_parts[c],
    zeroed by the caller, which adds them up)."""
    rows, N = x.shape
    chunks = db_parts.shape[0]
    per = (rows + chunks - 1) // chunks
    for c in prange(chunks):
        db = db_parts[c]
        for i in range(c * per, min(rows, (c + 1) * per)):
            xr, gr, dxr = x[i], dout[i], dx[i]
            for j in range(N):
                xi = xr[j]
                x2 = xi * xi
                t = tanh32(GELU_SCALE * xi * (ONE + GELU_CUBE * x2))
                slope = (ONE - t * t) * xi * (GELU_SCALE * (ONE + GELU_CUBE3 * x2))
                d = HALF * (slope + ONE + t) * gr[j]
                dxr[j] = d
                db[j] += d


residual_layernorm_forward = variants(_residual_layernorm_forward, REASSOCIATE)
residual_layernorm_backward = variants(_residual_layernorm_backward, REASSOCIATE)
bias_gelu_forward = variants(_bias_gelu_forward, REASSOCIATE)
bias_gelu_backward = variants(_bias_gelu_backward, REASSOCIATE)
