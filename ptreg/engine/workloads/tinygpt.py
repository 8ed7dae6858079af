"""A small byte-level GPT trained in NumPy, layer by layer, in the manner of llm.c.

Every layer has a forward and, right beside it, the matching backward. A forward returns its
output and whatever the backward will need (its "cache"); a backward takes the gradient of
the loss with respect to that output and returns the gradient with respect to the inputs.

The model: bytes (vocabulary 256) -> token + learned position embeddings -> L pre-LayerNorm
blocks (ln1 -> causal multi-head self-attention, residual; ln2 -> 4·C MLP with tanh GELU,
residual) -> final LayerNorm -> logits through the tied token embedding -> mean cross-entropy.
AdamW updates the parameters.

The one rule that shapes the layout: every linear layer's matrix products (qkv projection,
attention output projection, MLP fc, MLP projection, output head) go through a ``kernels``
object with the three methods of the kernel contract (``docs/backends.md``):

    kernels.matmul_forward(a, b, out)      out = a · b       y  = x · W
    kernels.matmul_backward_da(dc, b, out) out = dc · bᵀ     dx = dy · Wᵀ
    kernels.matmul_backward_db(a, dc, out) out = aᵀ · dc     dW = xᵀ · dy

So linear weights are stored (in_features, out_features) and activations as (B·T, C) rows,
all C-contiguous, and the token embedding is stored as ``wte`` of shape (C, vocab): the head
is then the plain product x · wte, and the embedding lookup gathers columns of wte. Nothing
else calls the kernels (attention's Q·Kᵀ and att·V are done with np.matmul), and nothing
here measures time: a caller that wants to time the kernels wraps ``kernels`` in a proxy.

Dtypes: the float32 path stays float32. Constants are Python floats, which NumPy treats as
"weak" scalars that take the array's dtype, so no intermediate is silently upcast to float64.
The same code runs in float64 (``dtype=np.float64`` with ``ReferenceKernels``) for gradient
checks against finite differences.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...records.configs import GPTConfig

# --------------------------------------------------------------------------- parameters


def parameter_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter tensor by name, llm.c style: one tensor per kind, stacked over layers.

    Linear weights are (in, out) so that y = x · W; ``wte`` is (C, V) so that the tied head
    is logits = x · wte without a transpose.
    """
    V, T, L, C = config.vocab, config.context, config.layers, config.d_model
    return {
        "wte": (C, V),  # token embedding, also the output head
        "wpe": (T, C),  # position embedding
        "ln1w": (L, C),
        "ln1b": (L, C),
        "qkvw": (L, C, 3 * C),
        "qkvb": (L, 3 * C),
        "attprojw": (L, C, C),
        "attprojb": (L, C),
        "ln2w": (L, C),
        "ln2b": (L, C),
        "fcw": (L, C, 4 * C),
        "fcb": (L, 4 * C),
        "fcprojw": (L, 4 * C, C),
        "fcprojb": (L, C),
        "lnfw": (C,),
        "lnfb": (C,),
    }


def parameter_count(config: GPTConfig) -> int:
    """V·C + T·C + L·(12C² + 13C) + 2C."""
    return sum(math.prod(shape) for shape in parameter_shapes(config).values())


# --------------------------------------------------------------------------- kernels and data


class ReferenceKernels:
    """The three kernels through np.matmul, for any dtype (float64 gradient checks, tests)."""

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.matmul(a, b, out=out)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.matmul(dc, b.T, out=out)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        np.matmul(a.T, dc, out=out)


SENTENCE = b"the quick brown fox jumps over the lazy dog. "


def corpus(nbytes: int = 1 << 16) -> np.ndarray:
    """``nbytes`` bytes of the sentence repeated: trivially learnable, so the loss must fall."""
    repeats = -(-nbytes // len(SENTENCE))
    return np.frombuffer(SENTENCE * repeats, dtype=np.uint8)[:nbytes].copy()


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


# --------------------------------------------------------------------------- linear (matmul)


def linear_forward(kernels: Any, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """y = x · W + b with x (M, K), W (K, N): the product is the kernels' job."""
    out = np.empty((x.shape[0], w.shape[1]), dtype=x.dtype)
    kernels.matmul_forward(x, w, out)
    if b is not None:
        out += b
    return out


def linear_backward(
    kernels: Any, dout: np.ndarray, x: np.ndarray, w: np.ndarray, dw: np.ndarray, db: np.ndarray | None
) -> np.ndarray:
    """Writes dW = xᵀ · dy into dw and db = Σ_rows dy into db; returns dx = dy · Wᵀ."""
    kernels.matmul_backward_db(x, dout, dw)
    if db is not None:
        db[...] = dout.sum(axis=0)
    dx = np.empty_like(x)
    kernels.matmul_backward_da(dout, w, dx)
    return dx


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


def crossentropy_softmax_backward(probs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """d(mean loss)/d logits = (probs - onehot(target)) / rows: softmax and log cancel."""
    dlogits = probs.copy()
    dlogits[np.arange(probs.shape[0]), targets] -= 1.0
    dlogits *= 1.0 / probs.shape[0]
    return dlogits


# --------------------------------------------------------------------------- the model


class TinyGPT:
    """Parameters, forward (keeping the activations) and backward of the whole GPT."""

    def __init__(self, config: GPTConfig, kernels: Any, seed: int = 0, dtype: Any = np.float32):
        self.config = config
        self.kernels = kernels
        self.dtype = np.dtype(dtype)
        self.params = self._init_params(seed)
        self.cache: dict[str, Any] | None = None  # activations of the last forward

    def _init_params(self, seed: int) -> dict[str, np.ndarray]:
        """GPT-2 init: weights N(0, 0.02), the two projections that write into the residual
        stream scaled by 1/√(2L) so the stream's variance does not grow with depth; biases 0,
        LayerNorm weights 1. Drawn in float64 and cast, so every dtype starts from the same
        numbers."""
        rng = np.random.default_rng(seed)
        residual_std = 0.02 / math.sqrt(2 * self.config.layers)
        params = {}
        for name, shape in parameter_shapes(self.config).items():
            if name in ("ln1w", "ln2w", "lnfw"):
                value = np.ones(shape)
            elif name.endswith("b"):  # every bias, and the LayerNorm shifts
                value = np.zeros(shape)
            else:
                std = residual_std if name in ("attprojw", "fcprojw") else 0.02
                value = rng.standard_normal(shape) * std
            params[name] = np.ascontiguousarray(value, dtype=self.dtype)
        return params

    def forward(self, tokens: np.ndarray, targets: np.ndarray) -> float:
        """Mean cross-entropy of predicting targets[b, t] from tokens[b, :t+1]."""
        cfg, p, kern = self.config, self.params, self.kernels
        B, T = tokens.shape
        if cfg.context < T:
            raise ValueError(f"sequence length {T} exceeds the context {cfg.context}")
        x = encoder_forward(p["wte"], p["wpe"], tokens)  # (B·T, C), the residual stream
        blocks = []
        for i in range(cfg.layers):
            # attention sub-block: x = x + proj(attention(qkv(ln1(x))))
            ln1, ln1_cache = layernorm_forward(x, p["ln1w"][i], p["ln1b"][i])
            qkv = linear_forward(kern, ln1, p["qkvw"][i], p["qkvb"][i])
            atty, att_cache = attention_forward(qkv, B, T, cfg.heads)
            x = x + linear_forward(kern, atty, p["attprojw"][i], p["attprojb"][i])
            # MLP sub-block: x = x + proj(gelu(fc(ln2(x))))
            ln2, ln2_cache = layernorm_forward(x, p["ln2w"][i], p["ln2b"][i])
            fch = linear_forward(kern, ln2, p["fcw"][i], p["fcb"][i])
            fch_gelu = gelu_forward(fch)
            x = x + linear_forward(kern, fch_gelu, p["fcprojw"][i], p["fcprojb"][i])
            blocks.append(
                {
                    "ln1": ln1,
                    "ln1_cache": ln1_cache,
                    "att_cache": att_cache,
                    "atty": atty,
                    "ln2": ln2,
                    "ln2_cache": ln2_cache,
                    "fch": fch,
                    "fch_gelu": fch_gelu,
                }
            )
        lnf, lnf_cache = layernorm_forward(x, p["lnfw"], p["lnfb"])
        logits = linear_forward(kern, lnf, p["wte"], None)  # tied head: x · wte, no bias
        loss, probs = crossentropy_forward(logits, targets.reshape(-1))
        self.cache = {
            "tokens": tokens,
            "targets": targets.reshape(-1),
            "blocks": blocks,
            "lnf": lnf,
            "lnf_cache": lnf_cache,
            "probs": probs,
        }
        return loss

    def backward(self) -> dict[str, np.ndarray]:
        """Gradients of the last forward's loss, same keys and shapes as ``params``."""
        if self.cache is None:
            raise RuntimeError("backward() needs a forward() first")
        cfg, p, kern, c = self.config, self.params, self.kernels, self.cache
        g = {name: np.empty_like(value) for name, value in p.items()}  # every entry is written
        dlogits = crossentropy_softmax_backward(c["probs"], c["targets"])
        dlnf = linear_backward(kern, dlogits, c["lnf"], p["wte"], g["wte"], None)
        dx, g["lnfw"][...], g["lnfb"][...] = layernorm_backward(dlnf, c["lnf_cache"])
        for i in reversed(range(cfg.layers)):
            a = c["blocks"][i]
            # MLP sub-block; the residual passes dx through unchanged and adds the branch's
            dfch_gelu = linear_backward(kern, dx, a["fch_gelu"], p["fcprojw"][i], g["fcprojw"][i], g["fcprojb"][i])
            dfch = gelu_backward(dfch_gelu, a["fch"])
            dln2 = linear_backward(kern, dfch, a["ln2"], p["fcw"][i], g["fcw"][i], g["fcb"][i])
            dbranch, g["ln2w"][i], g["ln2b"][i] = layernorm_backward(dln2, a["ln2_cache"])
            dx = dx + dbranch
            # attention sub-block
            datty = linear_backward(kern, dx, a["atty"], p["attprojw"][i], g["attprojw"][i], g["attprojb"][i])
            dqkv = attention_backward(datty, a["att_cache"])
            dln1 = linear_backward(kern, dqkv, a["ln1"], p["qkvw"][i], g["qkvw"][i], g["qkvb"][i])
            dbranch, g["ln1w"][i], g["ln1b"][i] = layernorm_backward(dln1, a["ln1_cache"])
            dx = dx + dbranch
        encoder_backward(dx, c["tokens"], g["wte"], g["wpe"])  # adds to the head's dwte
        return g


# --------------------------------------------------------------------------- optimizer


class AdamW:
    """Adam with decoupled weight decay and bias correction, as llm.c's ``gpt2_update``.

    weight_decay defaults to 0.0, as llm.c's training loop calls it; when set, it applies to
    every parameter (llm.c's C version does not exempt biases or LayerNorm either).
    """

    def __init__(
        self, lr: float = 3e-4, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0
    ):
        self.lr, self.beta1, self.beta2, self.eps, self.weight_decay = lr, beta1, beta2, eps, weight_decay
        self.m: dict[str, np.ndarray] = {}  # running mean of the gradient
        self.v: dict[str, np.ndarray] = {}  # running mean of its square
        self.t = 0  # steps taken

    def update(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """One step, in place (the parameter arrays keep their identity and layout)."""
        self.t += 1
        # m and v start at 0, so early on they underestimate; dividing by 1 - β^t corrects it
        correction1 = 1.0 - self.beta1**self.t
        correction2 = 1.0 - self.beta2**self.t
        for name, param in params.items():
            grad = grads[name]
            m = self.m.setdefault(name, np.zeros_like(param))
            v = self.v.setdefault(name, np.zeros_like(param))
            m *= self.beta1
            m += (1.0 - self.beta1) * grad
            v *= self.beta2
            v += (1.0 - self.beta2) * (grad * grad)
            step = (m / correction1) / (np.sqrt(v / correction2) + self.eps)
            if self.weight_decay:
                step += self.weight_decay * param
            param -= self.lr * step


# --------------------------------------------------------------------------- training


class Trainer:
    """Model, optimizer and data together: ``step()`` is one full training step."""

    def __init__(
        self,
        config: GPTConfig,
        kernels: Any,
        seed: int = 0,
        dtype: Any = np.float32,
        lr: float = 3e-4,
        weight_decay: float = 0.0,
    ):
        self.config = config
        self.model = TinyGPT(config, kernels, seed=seed, dtype=dtype)
        self.optimizer = AdamW(lr=lr, weight_decay=weight_decay)
        self.data = corpus()
        self.rng = np.random.default_rng(seed)  # batch positions; same seed, same batches
        self.steps = 0

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """B random windows of the corpus; the targets are the inputs shifted by one byte."""
        B, T = self.config.batch, self.config.context
        starts = self.rng.integers(0, len(self.data) - T, size=B)  # start + T is a valid index
        index = starts[:, None] + np.arange(T)
        return self.data[index].astype(np.int64), self.data[index + 1].astype(np.int64)

    def step(self) -> float:
        """Batch, forward, backward, AdamW update; returns the loss before the update."""
        tokens, targets = self.next_batch()
        loss = self.model.forward(tokens, targets)
        grads = self.model.backward()
        self.optimizer.update(self.model.params, grads)
        self.steps += 1
        return loss
