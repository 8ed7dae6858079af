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
object with the three methods of the kernel contract (``docs/backends.md``), and every other op
of the step (``layers.py``) goes through it too when it provides that op, else through the NumPy
reference (``StepOps``); a fused op (one standing for two run back to back) is called only
when the backend provides it, the two ops apart otherwise:

    kernels.matmul_forward(a, b, out)      out = a · b       y  = x · W
    kernels.matmul_backward_da(dc, b, out) out = dc · bᵀ     dx = dy · Wᵀ
    kernels.matmul_backward_db(a, dc, out) out = aᵀ · dc     dW = xᵀ · dy

So linear weights are stored (in_features, out_features) and activations as (B·T, C) rows,
all C-contiguous, and the token embedding is stored as ``wte`` of shape (C, vocab): the head
is then the plain product x · wte, and the embedding lookup gathers columns of wte. Nothing
else calls the kernels (the reference attention's Q·Kᵀ and att·V are done with np.matmul), and
nothing here measures time: a caller that wants to time the kernels and ops wraps them in a proxy.

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
from ..backends import KERNEL_CALLS, OP_METHODS, provided_ops
from . import layers

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


class StepOps:
    """Every method the step calls: the three kernels of ``source``, and for each op the
    source's own methods when it provides the op, else the NumPy reference's (``layers.py``).
    A source without ops (the three kernels only) thus runs the step exactly as the reference."""

    def __init__(self, source: Any):
        self.source = source
        self.provided = provided_ops(source)
        for method in KERNEL_CALLS:
            setattr(self, method, getattr(source, method))
        for op, methods in OP_METHODS.items():
            for method in methods:
                setattr(self, method, getattr(source if op in self.provided else layers, method))


def linear_forward(ops: Any, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """y = x · W + b with x (M, K), W (K, N): the product is the kernels' job, the bias an op."""
    out = np.empty((x.shape[0], w.shape[1]), dtype=x.dtype)
    ops.matmul_forward(x, w, out)
    if b is not None:
        ops.bias_forward(out, b)
    return out


def linear_backward(
    ops: Any, dout: np.ndarray, x: np.ndarray, w: np.ndarray, dw: np.ndarray, db: np.ndarray | None
) -> np.ndarray:
    """Writes dW = xᵀ · dy into dw and db = Σ_rows dy into db; returns dx = dy · Wᵀ."""
    ops.matmul_backward_db(x, dout, dw)
    if db is not None:
        ops.bias_backward(dout, db)
    dx = np.empty_like(x)
    ops.matmul_backward_da(dout, w, dx)
    return dx


SENTENCE = b"the quick brown fox jumps over the lazy dog. "


def corpus(nbytes: int = 1 << 16) -> np.ndarray:
    """``nbytes`` bytes of the sentence repeated: trivially learnable, so the loss must fall."""
    repeats = -(-nbytes // len(SENTENCE))
    return np.frombuffer(SENTENCE * repeats, dtype=np.uint8)[:nbytes].copy()


# --------------------------------------------------------------------------- the model


class TinyGPT:
    """Parameters, forward (keeping the activations) and backward of the whole GPT."""

    def __init__(self, config: GPTConfig, kernels: Any, seed: int = 0, dtype: Any = np.float32):
        self.config = config
        self.kernels = kernels
        self.ops: Any = StepOps(kernels)  # methods set per op, so typed loosely
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
        cfg, p, ops = self.config, self.params, self.ops
        B, T = tokens.shape
        if cfg.context < T:
            raise ValueError(f"sequence length {T} exceeds the context {cfg.context}")
        x = ops.encoder_forward(p["wte"], p["wpe"], tokens)  # (B·T, C), the residual stream
        branch: np.ndarray | None = None  # the last sub-block's output, not yet added to x
        blocks = []
        for i in range(cfg.layers):
            # attention sub-block: x = x + proj(attention(qkv(ln1(x)))), after the last block's add
            x, ln1, ln1_cache, ln1_fused = self._add_then_norm(x, branch, p["ln1w"][i], p["ln1b"][i])
            qkv = linear_forward(ops, ln1, p["qkvw"][i], p["qkvb"][i])
            atty, att_cache = ops.attention_forward(qkv, B, T, cfg.heads)
            branch = linear_forward(ops, atty, p["attprojw"][i], p["attprojb"][i])
            # MLP sub-block: x = x + proj(gelu(fc(ln2(x))))
            x, ln2, ln2_cache, ln2_fused = self._add_then_norm(x, branch, p["ln2w"][i], p["ln2b"][i])
            if "bias_gelu" in ops.provided:  # the bias added in the same pass as the GELU
                fch = linear_forward(ops, ln2, p["fcw"][i], None)
                fch_gelu = ops.bias_gelu_forward(fch, p["fcb"][i])
            else:
                fch = linear_forward(ops, ln2, p["fcw"][i], p["fcb"][i])
                fch_gelu = ops.gelu_forward(fch)
            branch = linear_forward(ops, fch_gelu, p["fcprojw"][i], p["fcprojb"][i])
            blocks.append(
                {
                    "ln1": ln1,
                    "ln1_cache": ln1_cache,
                    "ln1_fused": ln1_fused,
                    "ln2_fused": ln2_fused,
                    "att_cache": att_cache,
                    "atty": atty,
                    "ln2": ln2,
                    "ln2_cache": ln2_cache,
                    "fch": fch,
                    "fch_gelu": fch_gelu,
                }
            )
        # apart, not fused: the final layernorm's backward adds its dx to no stream gradient
        x = ops.residual_add(x, branch)
        lnf, lnf_cache = ops.layernorm_forward(x, p["lnfw"], p["lnfb"])
        logits = linear_forward(ops, lnf, p["wte"], None)  # tied head: x · wte, no bias
        loss, probs = ops.crossentropy_forward(logits, targets.reshape(-1))
        loss = float(loss)
        self.cache = {
            "tokens": tokens,
            "targets": targets.reshape(-1),
            "blocks": blocks,
            "lnf": lnf,
            "lnf_cache": lnf_cache,
            "probs": probs,
        }
        return loss

    def _add_then_norm(
        self, x: np.ndarray, branch: np.ndarray | None, w: np.ndarray, b: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, Any, bool]:
        """x + branch (x itself without a branch) and its layernorm, with the cache and whether the
        fused op made them: fused when the backend provides it, else the two ops apart."""
        ops = self.ops
        if branch is None:
            out, cache = ops.layernorm_forward(x, w, b)
            return x, out, cache, False
        if "residual_layernorm" in ops.provided:
            stream, out, cache = ops.residual_layernorm_forward(x, branch, w, b)
            return stream, out, cache, True
        stream = ops.residual_add(x, branch)
        out, cache = ops.layernorm_forward(stream, w, b)
        return stream, out, cache, False

    def _norm_back_then_add(self, dout: np.ndarray, cache: Any, dx: np.ndarray, fused: bool) -> tuple[Any, Any, Any]:
        """The layernorm's backward, its dx added to the stream's gradient dx: by the fused op
        when its forward was the fused one (the backward reads that forward's cache)."""
        ops = self.ops
        if fused:
            found: tuple[Any, Any, Any] = ops.residual_layernorm_backward(dout, cache, dx)
            return found
        dbranch, dw, db = ops.layernorm_backward(dout, cache)
        return ops.residual_add(dx, dbranch), dw, db

    def backward(self) -> dict[str, np.ndarray]:
        """Gradients of the last forward's loss, same keys and shapes as ``params``."""
        if self.cache is None:
            raise RuntimeError("backward() needs a forward() first")
        cfg, p, ops, c = self.config, self.params, self.ops, self.cache
        g = {name: np.empty_like(value) for name, value in p.items()}  # every entry is written
        dlogits = ops.crossentropy_backward(c["probs"], c["targets"])
        dlnf = linear_backward(ops, dlogits, c["lnf"], p["wte"], g["wte"], None)
        dx, g["lnfw"][...], g["lnfb"][...] = ops.layernorm_backward(dlnf, c["lnf_cache"])
        for i in reversed(range(cfg.layers)):
            a = c["blocks"][i]
            # MLP sub-block; the residual passes dx through unchanged and adds the branch's
            dfch_gelu = linear_backward(ops, dx, a["fch_gelu"], p["fcprojw"][i], g["fcprojw"][i], g["fcprojb"][i])
            if "bias_gelu" in ops.provided:  # fcb's gradient summed as GELU's backward writes dfch
                dfch = ops.bias_gelu_backward(dfch_gelu, a["fch"], g["fcb"][i])
                dln2 = linear_backward(ops, dfch, a["ln2"], p["fcw"][i], g["fcw"][i], None)
            else:
                dfch = ops.gelu_backward(dfch_gelu, a["fch"])
                dln2 = linear_backward(ops, dfch, a["ln2"], p["fcw"][i], g["fcw"][i], g["fcb"][i])
            dx, g["ln2w"][i], g["ln2b"][i] = self._norm_back_then_add(dln2, a["ln2_cache"], dx, a["ln2_fused"])
            # attention sub-block
            datty = linear_backward(ops, dx, a["atty"], p["attprojw"][i], g["attprojw"][i], g["attprojb"][i])
            dqkv = ops.attention_backward(datty, a["att_cache"])
            dln1 = linear_backward(ops, dqkv, a["ln1"], p["qkvw"][i], g["qkvw"][i], g["qkvb"][i])
            dx, g["ln1w"][i], g["ln1b"][i] = self._norm_back_then_add(dln1, a["ln1_cache"], dx, a["ln1_fused"])
        ops.encoder_backward(dx, c["tokens"], g["wte"], g["wpe"])  # adds to the head's dwte
        return g


# --------------------------------------------------------------------------- optimizer


class AdamW:
    """Adam with decoupled weight decay and bias correction, as llm.c's ``gpt2_update``.

    weight_decay defaults to 0.0, as llm.c's training loop calls it; when set, it applies to
    every parameter (llm.c's C version does not exempt biases or LayerNorm either).
    """

    def __init__(
        self,
        lr: float = 3e-4,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        ops: Any = None,
    ):
        self.lr, self.beta1, self.beta2, self.eps, self.weight_decay = lr, beta1, beta2, eps, weight_decay
        self.update_one = layers.adamw_update if ops is None else ops.adamw_update  # the op, per tensor
        self.m: dict[str, np.ndarray] = {}  # running mean of the gradient
        self.v: dict[str, np.ndarray] = {}  # running mean of its square
        self.t = 0  # steps taken

    def update(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """One step, in place (the parameter arrays keep their identity and layout)."""
        self.t += 1
        correction1 = 1.0 - self.beta1**self.t
        correction2 = 1.0 - self.beta2**self.t
        for name, param in params.items():
            m = self.m.setdefault(name, np.zeros_like(param))
            v = self.v.setdefault(name, np.zeros_like(param))
            self.update_one(
                param,
                grads[name],
                m,
                v,
                self.lr,
                self.beta1,
                self.beta2,
                self.eps,
                self.weight_decay,
                correction1,
                correction2,
            )


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
        self.optimizer = AdamW(lr=lr, weight_decay=weight_decay, ops=self.model.ops)
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
