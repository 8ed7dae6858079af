"""The numba backend's fused ops: two of the step's ops that run back to back on the same rows,
done in one pass over them (``docs/backends.md``, fused ops).

``residual_layernorm``: forward, the stream's add and the layernorm of its sum, row by row, so the
sum is normalised while it is still in L1 instead of being written out and read back by a second
op; backward, the layernorm's dx added to the stream's gradient as it is made, so dx is written
once, summed. Each kernel comes serial and parallel over chunks of rows, as ``numba_ops``'s.
Importing this module imports numba.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ptreg_backends.numba_ops import LN_EPS, ONE, REASSOCIATE, ZERO, variants


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


residual_layernorm_forward = variants(_residual_layernorm_forward, REASSOCIATE)
residual_layernorm_backward = variants(_residual_layernorm_backward, REASSOCIATE)
