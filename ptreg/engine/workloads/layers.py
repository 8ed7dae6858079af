"""The layers of the tiny GPT's training step as NumPy computes them, forward beside backward.

These are the reference ops: what a backend that provides an op is held to by the parity gate,
and what runs for every op a backend does not provide (``docs/backends.md``, the op contract).
A forward returns its output and whatever its backward needs (its "cache", which only that
backward reads, so a backend's op may keep a cache of its own form); a backward takes the
gradient of the loss with respect to the output and returns (or writes) the gradients of the
inputs. Dtypes: constants are Python floats, "weak" scalars that take the array's dtype, so the
float32 path never upcasts to float64.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# --------------------------------------------------------------------------- encoder


def encoder_forward(wte: np.ndarray, wpe: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """x[b, t] = wte[:, tokens[b, t]] + wpe[t], returned as (B·T, C) rows."""
    B, T = tokens.shape
    # wte is (C, V); row i of the view wte.T is column i of wte, so this gathers columns.
    x: np.ndarray = wte.T[tokens] + wpe[:T]  # (B, T, C), a fresh contiguous array
    return x.reshape(B * T, -1)


def encoder_backward(dx: np.ndarray, tokens: np.ndarray, dwte: np.ndarray, dwpe: np.ndarray) -> None:
    """Accumulate into dwte (it already holds the head's gradient) and overwrite dwpe."""
    B, T = tokens.shape
    # Scatter-add into columns of dwte; add.at because a token can occur many times.
    np.add.at(dwte.T, tokens.reshape(-1), dx)
    dwpe[...] = 0.0
    dwpe[:T] = dx.reshape(B, T, -1).sum(axis=0)


# --------------------------------------------------------------------------- layernorm

LN_EPS = 1e-5


def layernorm_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, Any]:
    """Normalise each row to mean 0 and variance 1, then scale by w and shift by b."""
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)  # biased variance, as GPT-2
    rstd = 1.0 / np.sqrt(var + LN_EPS)
    norm = xc * rstd
    return norm * w + b, (norm, rstd, w)


def layernorm_backward(dout: np.ndarray, cache: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns dx, dw, db. dx removes from dnorm its mean and its component along norm,
    because normalising makes the output blind to shifts and scalings of the input row."""
    norm, rstd, w = cache
    dw = (dout * norm).sum(axis=0)
    db = dout.sum(axis=0)
    dnorm = dout * w
    dx = dnorm - dnorm.mean(axis=-1, keepdims=True) - norm * (dnorm * norm).mean(axis=-1, keepdims=True)
    dx *= rstd
    return dx, dw, db


# --------------------------------------------------------------------------- softmax


def softmax_forward(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; subtracting the row max keeps exp from overflowing."""
    probs: np.ndarray = x - x.max(axis=-1, keepdims=True)
    np.exp(probs, out=probs)  # in place: these arrays are B·NH·T·T, the largest of a step
    probs /= probs.sum(axis=-1, keepdims=True)
    return probs


def softmax_backward(dprobs: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """The Jacobian of softmax is diag(p) - p pᵀ, so dx = p ⊙ dp - p · <dp, p>."""
    dx: np.ndarray = dprobs * probs
    dx -= probs * dx.sum(axis=-1, keepdims=True)
    return dx


# --------------------------------------------------------------------------- attention


def causal_mask(T: int, dtype: Any) -> np.ndarray:
    """0 on and below the diagonal, -inf above: position t may only look at positions <= t."""
    return np.triu(np.full((T, T), -np.inf, dtype=dtype), k=1)


def attention_forward(qkv: np.ndarray, B: int, T: int, NH: int) -> tuple[np.ndarray, Any]:
    """Causal multi-head self-attention on the fused projection qkv (B·T, 3C) -> (B·T, C)."""
    C = qkv.shape[1] // 3
    hs = C // NH
    # (B·T, 3C) -> three (B, NH, T, hs) views: [q | k | v], each split into NH heads.
    q, k, v = qkv.reshape(B, T, 3, NH, hs).transpose(2, 0, 3, 1, 4)
    scale = 1.0 / math.sqrt(hs)  # keeps the scores' variance near 1 whatever the head size
    preatt = q @ k.swapaxes(-1, -2)  # (B, NH, T, T)
    preatt *= scale
    preatt += causal_mask(T, qkv.dtype)
    att = softmax_forward(preatt)  # masked entries become exactly 0
    y = att @ v  # (B, NH, T, hs)
    out = np.ascontiguousarray(y.transpose(0, 2, 1, 3)).reshape(B * T, C)  # heads side by side
    return out, (q, k, v, att, scale)


def attention_backward(dout: np.ndarray, cache: Any) -> np.ndarray:
    """Gradient of attention_forward with respect to qkv, as one contiguous (B·T, 3C) array."""
    q, k, v, att, scale = cache
    B, NH, T, hs = q.shape
    dy = dout.reshape(B, T, NH, hs).transpose(0, 2, 1, 3)  # (B, NH, T, hs)
    datt = dy @ v.swapaxes(-1, -2)  # y = att · v
    dv = att.swapaxes(-1, -2) @ dy
    dpreatt = softmax_backward(datt, att)  # zero where masked, since att is zero there
    dpreatt *= scale
    dq = dpreatt @ k  # preatt = q · kᵀ · scale
    dk = dpreatt.swapaxes(-1, -2) @ q
    dqkv = np.empty((B, T, 3, NH, hs), dtype=dout.dtype)  # undo the split of the forward
    dqkv[:, :, 0] = dq.transpose(0, 2, 1, 3)
    dqkv[:, :, 1] = dk.transpose(0, 2, 1, 3)
    dqkv[:, :, 2] = dv.transpose(0, 2, 1, 3)
    return dqkv.reshape(B * T, 3 * NH * hs)


# --------------------------------------------------------------------------- gelu

GELU_SCALE = math.sqrt(2.0 / math.pi)
GELU_CUBE = 0.044715


def gelu_forward(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation (as GPT-2): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))."""
    out: np.ndarray = np.tanh(GELU_SCALE * x * (1.0 + GELU_CUBE * (x * x)))
    out += 1.0  # in place from here on: fewer (B·T, 4C) temporaries
    out *= x
    out *= 0.5
    return out


def gelu_backward(dout: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Product rule on 0.5·x·(1 + tanh u), u = √(2/π)·(x + 0.044715·x³):
    d/dx = 0.5·(1 + tanh u) + 0.5·x·sech²u·du/dx. tanh is recomputed, not stored, as llm.c."""
    x2 = x * x
    t = np.tanh(GELU_SCALE * x * (1.0 + GELU_CUBE * x2))
    grad: np.ndarray = 1.0 - t * t  # sech²u
    grad *= x
    grad *= GELU_SCALE * (1.0 + 3.0 * GELU_CUBE * x2)  # du/dx
    grad += 1.0 + t
    grad *= 0.5
    grad *= dout
    return grad


# --------------------------------------------------------------------------- cross-entropy


def crossentropy_forward(logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean over rows of -log softmax(logits)[target]; returns (loss, probs).

    The log-probability is taken as shifted logit minus log Σ exp, never log(probs), so a
    probability that underflows to 0 cannot make the loss infinite.
    """
    rows = np.arange(logits.shape[0])
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    sumexp = e.sum(axis=1, keepdims=True)
    probs = e / sumexp
    logp = shifted[rows, targets] - np.log(sumexp[:, 0])
    return float(-logp.mean()), probs


def crossentropy_backward(probs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """d(mean loss)/d logits = (probs - onehot(target)) / rows: softmax and log cancel."""
    dlogits = probs.copy()
    dlogits[np.arange(probs.shape[0]), targets] -= 1.0
    dlogits *= 1.0 / probs.shape[0]
    return dlogits


# --------------------------------------------------------------------------- residual and bias


def residual_add(x: np.ndarray, branch: np.ndarray) -> np.ndarray:
    """x + branch as a new array: the residual stream's add in the forward, and the sum of the
    two gradients where the stream forks in the backward."""
    out: np.ndarray = x + branch
    return out


# --------------------------------------------------------------------------- fused: residual add and layernorm


def residual_layernorm_forward(
    x: np.ndarray, branch: np.ndarray, w: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, Any]:
    """The stream's add and the layernorm that reads it: (x + branch, its layernorm, cache).
    Exactly the two reference ops one after the other; a backend fuses them into one pass."""
    stream = residual_add(x, branch)
    out, cache = layernorm_forward(stream, w, b)
    return stream, out, cache


def residual_layernorm_backward(
    dout: np.ndarray, cache: Any, dstream: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The layernorm's backward, its dx then added to the stream's gradient ``dstream`` (where
    the stream forks): (dstream + dx, dw, db), exactly the two reference ops in the step's order."""
    dx, dw, db = layernorm_backward(dout, cache)
    return residual_add(dstream, dx), dw, db


def bias_forward(out: np.ndarray, b: np.ndarray) -> None:
    """out += b, row by row, in place (out is the linear layer's fresh product)."""
    out += b


def bias_backward(dout: np.ndarray, db: np.ndarray) -> None:
    """db = Σ_rows dout, written into db."""
    db[...] = dout.sum(axis=0)


# --------------------------------------------------------------------------- fused: bias and GELU


def bias_gelu_forward(out: np.ndarray, b: np.ndarray) -> np.ndarray:
    """out += b in place (the pre-activation the backward reads), then GELU of it: exactly
    ``bias_forward`` then ``gelu_forward``; a backend fuses them into one pass."""
    bias_forward(out, b)
    return gelu_forward(out)


def bias_gelu_backward(dout: np.ndarray, x: np.ndarray, db: np.ndarray) -> np.ndarray:
    """GELU's backward at x (the biased pre-activation), then the bias's gradient from it, written
    into db: exactly ``gelu_backward`` then ``bias_backward``. Returns dx."""
    dx = gelu_backward(dout, x)
    bias_backward(dx, db)
    return dx


# --------------------------------------------------------------------------- AdamW


def adamw_update(
    param: np.ndarray,
    grad: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    correction1: float,
    correction2: float,
) -> None:
    """One AdamW step of one parameter tensor, in place on param, m and v. correction1 and 2 are
    1 - β1^t and 1 - β2^t: m and v start at 0, so early on they underestimate."""
    m *= beta1
    m += (1.0 - beta1) * grad
    v *= beta2
    v += (1.0 - beta2) * (grad * grad)
    step = (m / correction1) / (np.sqrt(v / correction2) + eps)
    if weight_decay:
        step += weight_decay * param
    param -= lr * step
