"""The numba backend's step ops (all but attention, which is ``numba_attention``): fused loops
over float32 arrays, one pass where NumPy makes several with temporaries.

Each kernel comes twice, compiled from one Python function: serial, and parallel over chunks of
rows or elements (``prange``). The caller picks (``NumbaBackend``): the serial one on one thread
or for arrays too small to pay a second thread's wake-up. Both compute the same bits (an
element never depends on how the work was split), but for layernorm's dw and db: a sum over
rows, split into one partial sum per chunk, in an op not declared bit-identical anyway.

Bits. ``adamw``, ``encoder``, ``bias`` and ``residual`` do the reference's float32 operations
in the reference's order with no fast-math flags (no fused multiply-add, no reassociation), so
they keep NumPy's bits. ``gelu``, ``layernorm`` and ``crossentropy`` cannot: NumPy's tanh and
exp are its own SIMD routines, and its sums are pairwise. Here exp and tanh are polynomials
that LLVM can vectorise (``exp32``, ``tanh32``; numba's own call libm one element at a time),
and row sums may be reassociated into vector lanes.
Importing this module imports numba.
"""

from __future__ import annotations

import math
import types as pytypes
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import prange
from numba.core import types
from numba.extending import intrinsic

from .numba_cache import install_cache_locator

install_cache_locator()  # before any kernel is defined: its cache is filed by the package's digest

# Sums may be reassociated into vector lanes (and a multiply-add fused); no flag that assumes
# finite values, so a NaN or inf still comes out as one and parity's finiteness check sees it.
REASSOCIATE = {"reassoc", "nsz", "contract"}


def variants(fn: Callable[..., Any], fastmath: Any) -> tuple[Any, Any]:
    """The serial and the parallel compilation of ``fn``. Each gets a name of its own: numba's
    disk cache files a function under its name, and the two must not load each other's code."""

    def build(suffix: str, parallel: bool) -> Any:
        copy = pytypes.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + suffix, fn.__defaults__, fn.__closure__)
        copy.__qualname__ = fn.__qualname__ + suffix
        return numba.njit(parallel=parallel, fastmath=fastmath, error_model="numpy", cache=True)(copy)

    return build("_serial", False), build("_parallel", True)


# --------------------------------------------------------------------------- exp and tanh

LOG2E = np.float32(1.4426950408889634)
# ln 2 split in two: the first part has few enough bits that k·LN2_HI is exact for |k| < 2^9
LN2_HI = np.float32(0.693359375)
LN2_LO = np.float32(math.log(2.0) - 0.693359375)
EXP_FLOOR = np.float32(-87.0)  # e^-87 is still a normal float32; below it exp32 returns that
EXP_CEIL = np.float32(88.0)
# 1/n! for n = 2..7: Taylor on |r| <= ln2/2 leaves r^8/8! < 6e-9 of e^r
C2, C3, C4, C5, C6, C7 = (np.float32(1.0 / math.factorial(n)) for n in range(2, 8))
ONE = np.float32(1.0)
HALF = np.float32(0.5)
ZERO = np.float32(0.0)
TANH_SATURATED = np.float32(9.0)  # tanh(9) rounds to 1.0 in float32
TANH_SMALL = np.float32(0.0625)  # below it, the series; above, through exp (no cancellation)
THIRD = np.float32(1.0 / 3.0)
TWO_FIFTEENTHS = np.float32(2.0 / 15.0)
TWO = np.float32(2.0)


@intrinsic
def _float_with_bits(typingctx: Any, bits: Any) -> tuple[Any, Callable[..., Any]] | None:  # pragma: no cover
    """The float32 whose IEEE bits are the int32 ``bits``: how 2^k is built, in a form LLVM
    vectorises (a bit cast costs nothing)."""
    if bits != types.int32:
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def exp32(x: Any) -> Any:  # pragma: no cover
    """e^x in float32 to about 2 ulp: x = k·ln2 + r, e^r by its Taylor series, times 2^k.
    Range reduction in two steps (Cody and Waite) keeps r exact to float32's precision."""
    x = min(max(x, EXP_FLOOR), EXP_CEIL)
    k = np.floor(x * LOG2E + HALF)
    r = (x - k * LN2_HI) - k * LN2_LO
    p = C6 + r * C7
    p = C5 + r * p
    p = C4 + r * p
    p = C3 + r * p
    p = C2 + r * p
    p = ONE + r * p
    p = ONE + r * p
    bits = np.int32((np.int32(k) + np.int32(127)) << np.int32(23))
    scale: Any = _float_with_bits(bits)  # type: ignore[call-arg]  # numba passes typingctx itself
    return p * scale


@numba.njit(fastmath=False, error_model="numpy", cache=True, inline="always")
def tanh32(u: Any) -> Any:  # pragma: no cover
    """tanh in float32: the odd series u - u³/3 + 2u⁵/15 near 0, else (1 - e^-2|u|)/(1 + e^-2|u|)."""
    a = min(abs(u), TANH_SATURATED)
    e = exp32(-TWO * a)
    big = (ONE - e) / (ONE + e)
    a2 = a * a
    small = a * (ONE - a2 * (THIRD - a2 * TWO_FIFTEENTHS))
    t = small if a < TANH_SMALL else big
    return math.copysign(t, u)


# --------------------------------------------------------------------------- GELU

GELU_SCALE = np.float32(math.sqrt(2.0 / math.pi))
GELU_CUBE = np.float32(0.044715)
GELU_CUBE3 = np.float32(3.0 * 0.044715)


def _gelu_forward(x: np.ndarray, out: np.ndarray, chunks: int) -> None:  # pragma: no cover
    n = x.size
    per = (n + chunks - 1) // chunks
    for c in prange(chunks):
        lo, hi = c * per, min(n, (c + 1) * per)
        xs, outs = x[lo:hi], out[lo:hi]
        for i in range(hi - lo):
            xi = xs[i]
            t = tanh32(GELU_SCALE * xi * (ONE + GELU_CUBE * (xi * xi)))
            outs[i] = HALF * (xi * (ONE + t))


def _gelu_backward(dout: np.ndarray, x: np.ndarray, dx: np.ndarray, chunks: int) -> None:  # pragma: no cover
    n = x.size
    per = (n + chunks - 1) // chunks
    for c in prange(chunks):
        lo, hi = c * per, min(n, (c + 1) * per)
        xs, gs, dxs = x[lo:hi], dout[lo:hi], dx[lo:hi]
        for i in range(hi - lo):
            xi = xs[i]
            x2 = xi * xi
            t = tanh32(GELU_SCALE * xi * (ONE + GELU_CUBE * x2))
            slope = (ONE - t * t) * xi * (GELU_SCALE * (ONE + GELU_CUBE3 * x2))
            dxs[i] = HALF * (slope + ONE + t) * gs[i]


gelu_forward = variants(_gelu_forward, REASSOCIATE)
gelu_backward = variants(_gelu_backward, REASSOCIATE)


# --------------------------------------------------------------------------- layernorm

LN_EPS = np.float32(1e-5)


def _layernorm_forward(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray, mean: np.ndarray, rstd: np.ndarray, chunks: int
) -> None:  # pragma: no cover
    rows, C = x.shape
    per = (rows + chunks - 1) // chunks
    inverse = ONE / np.float32(C)
    for c in prange(chunks):
        for i in range(c * per, min(rows, (c + 1) * per)):
            xr, outr = x[i], out[i]
            total = ZERO
            for j in range(C):
                total += xr[j]
            m = total * inverse
            squares = ZERO
            for j in range(C):
                d = xr[j] - m
                squares += d * d
            s = ONE / np.sqrt(squares * inverse + LN_EPS)
            for j in range(C):
                outr[j] = (xr[j] - m) * s * w[j] + b[j]
            mean[i] = m
            rstd[i] = s


def _layernorm_backward(
    dout: np.ndarray,
    x: np.ndarray,
    mean: np.ndarray,
    rstd: np.ndarray,
    w: np.ndarray,
    dx: np.ndarray,
    dw_parts: np.ndarray,
    db_parts: np.ndarray,
) -> None:  # pragma: no cover
    """dx row by row; dw and db as one partial sum per chunk of rows (dw_parts[c], db_parts[c],
    zeroed by the caller), which the caller adds up."""
    rows, C = x.shape
    chunks = dw_parts.shape[0]
    per = (rows + chunks - 1) // chunks
    inverse = ONE / np.float32(C)
    for c in prange(chunks):
        dw, db = dw_parts[c], db_parts[c]
        for i in range(c * per, min(rows, (c + 1) * per)):
            xr, gr, dxr = x[i], dout[i], dx[i]
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
                dxr[j] = (gr[j] * w[j] - dnorm_mean - norm * dnorm_dot_mean) * s


layernorm_forward = variants(_layernorm_forward, REASSOCIATE)
layernorm_backward = variants(_layernorm_backward, REASSOCIATE)


# --------------------------------------------------------------------------- cross-entropy


def _crossentropy_forward(
    logits: np.ndarray, targets: np.ndarray, probs: np.ndarray, logp: np.ndarray, chunks: int
) -> None:  # pragma: no cover
    rows, V = logits.shape
    per = (rows + chunks - 1) // chunks
    for c in prange(chunks):
        for i in range(c * per, min(rows, (c + 1) * per)):
            row, pr = logits[i], probs[i]
            top = row[0]
            for j in range(V):
                top = max(top, row[j])
            total = ZERO
            for j in range(V):
                e = exp32(row[j] - top)
                pr[j] = e
                total += e
            for j in range(V):
                pr[j] = pr[j] / total
            logp[i] = (row[targets[i]] - top) - np.float32(math.log(total))


def _crossentropy_backward(
    probs: np.ndarray, targets: np.ndarray, dlogits: np.ndarray, chunks: int
) -> None:  # pragma: no cover
    rows, V = probs.shape
    per = (rows + chunks - 1) // chunks
    scale = ONE / np.float32(rows)
    for c in prange(chunks):
        for i in range(c * per, min(rows, (c + 1) * per)):
            pr, dr = probs[i], dlogits[i]
            for j in range(V):
                dr[j] = pr[j] * scale
            dr[targets[i]] = (pr[targets[i]] - ONE) * scale


crossentropy_forward = variants(_crossentropy_forward, REASSOCIATE)
crossentropy_backward = variants(_crossentropy_backward, REASSOCIATE)


# --------------------------------------------------------------------------- the bit-identical ops


def _adamw_update(
    param: np.ndarray,
    grad: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    constants: np.ndarray,
    chunks: int,
) -> None:  # pragma: no cover
    """The reference's float32 operations in its order, per element in one pass: m and v are
    read once and written once, with no temporary the size of the tensor.
    constants: beta1, 1 - beta1, beta2, 1 - beta2, correction1, correction2, eps, weight_decay,
    lr, each rounded to float32 as NumPy rounds a Python float against a float32 array."""
    beta1, keep1, beta2, keep2 = constants[0], constants[1], constants[2], constants[3]
    correction1, correction2, eps, decay, lr = constants[4], constants[5], constants[6], constants[7], constants[8]
    n = param.size
    per = (n + chunks - 1) // chunks
    for c in prange(chunks):
        lo, hi = c * per, min(n, (c + 1) * per)
        ps, gs, ms, vs = param[lo:hi], grad[lo:hi], m[lo:hi], v[lo:hi]
        # two loops, the test outside: a branch inside would keep LLVM from vectorising
        if decay != ZERO:
            for i in range(hi - lo):
                g = gs[i]
                mi = ms[i] * beta1 + keep1 * g
                vi = vs[i] * beta2 + keep2 * (g * g)
                ms[i] = mi
                vs[i] = vi
                step = (mi / correction1) / (np.sqrt(vi / correction2) + eps) + decay * ps[i]
                ps[i] = ps[i] - lr * step
        else:
            for i in range(hi - lo):
                g = gs[i]
                mi = ms[i] * beta1 + keep1 * g
                vi = vs[i] * beta2 + keep2 * (g * g)
                ms[i] = mi
                vs[i] = vi
                ps[i] = ps[i] - lr * ((mi / correction1) / (np.sqrt(vi / correction2) + eps))


def _encoder_forward(
    wte: np.ndarray, wpe: np.ndarray, tokens: np.ndarray, x: np.ndarray, chunks: int
) -> None:  # pragma: no cover
    """x[b·T + t, c] = wte[c, token] + wpe[t, c]: a gather of columns of wte."""
    B, T = tokens.shape
    C = wpe.shape[1]
    rows = B * T
    per = (rows + chunks - 1) // chunks
    for part in prange(chunks):
        for r in range(part * per, min(rows, (part + 1) * per)):
            token = tokens[r // T, r % T]
            t = r % T
            for c in range(C):
                x[r, c] = wte[c, token] + wpe[t, c]


def _encoder_backward(
    dx: np.ndarray, tokens: np.ndarray, dwte: np.ndarray, dwpe: np.ndarray, chunks: int
) -> None:  # pragma: no cover
    """As the reference: each row of dx added into its token's column of dwte in row order
    (np.add.at's order), and dwpe[t] = Σ_b dx[b·T + t], b ascending from b = 0 (np.sum over an
    outer axis adds whole rows in order). Parallel over channels, so each sum keeps its order."""
    B, T = tokens.shape
    C = dwte.shape[0]
    per = (C + chunks - 1) // chunks
    for part in prange(chunks):
        c0, c1 = part * per, min(C, (part + 1) * per)
        for r in range(B * T):
            token = tokens[r // T, r % T]
            for c in range(c0, c1):
                dwte[c, token] += dx[r, c]
        for t in range(dwpe.shape[0]):
            for c in range(c0, c1):
                dwpe[t, c] = ZERO
        for t in range(T):
            for c in range(c0, c1):
                dwpe[t, c] = dx[t, c]
            for b in range(1, B):
                for c in range(c0, c1):
                    dwpe[t, c] += dx[b * T + t, c]


def _bias_forward(out: np.ndarray, b: np.ndarray, chunks: int) -> None:  # pragma: no cover
    rows, N = out.shape
    per = (rows + chunks - 1) // chunks
    for c in prange(chunks):
        for i in range(c * per, min(rows, (c + 1) * per)):
            row = out[i]
            for j in range(N):
                row[j] += b[j]


def _bias_backward(dout: np.ndarray, db: np.ndarray, chunks: int) -> None:  # pragma: no cover
    """db[j] = dout[0, j] + dout[1, j] + ..., rows in order as NumPy's sum over axis 0;
    parallel over columns (in blocks of 64 floats, a cache line's multiple) so each sum keeps it."""
    rows, N = dout.shape
    blocks = (N + 63) // 64
    per = (blocks + chunks - 1) // chunks
    for c in prange(chunks):
        j0, j1 = c * per * 64, min(N, (c + 1) * per * 64)
        sums, first = db[j0:j1], dout[0, j0:j1]
        for j in range(j1 - j0):
            sums[j] = first[j]
        for i in range(1, rows):
            row = dout[i, j0:j1]
            for j in range(j1 - j0):
                sums[j] += row[j]


def _residual_add(x: np.ndarray, branch: np.ndarray, out: np.ndarray, chunks: int) -> None:  # pragma: no cover
    n = x.size
    per = (n + chunks - 1) // chunks
    for c in prange(chunks):
        lo, hi = c * per, min(n, (c + 1) * per)
        xs, bs, outs = x[lo:hi], branch[lo:hi], out[lo:hi]
        for i in range(hi - lo):
            outs[i] = xs[i] + bs[i]


adamw_update = variants(_adamw_update, False)
encoder_forward = variants(_encoder_forward, False)
encoder_backward = variants(_encoder_backward, False)
bias_forward = variants(_bias_forward, False)
bias_backward = variants(_bias_backward, False)
residual_add = variants(_residual_add, False)
