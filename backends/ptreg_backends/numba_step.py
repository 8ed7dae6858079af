"""The step's ops as the numba backend provides them (the op contract, ``docs/backends.md``):
each method checks what it is given, picks the serial or the parallel compilation of its
kernel (``numba_ops``, ``numba_attention``) and allocates what it returns.

The kernels are float32 only, the step's dtype: any other dtype, or a shape the reference would
broadcast, goes to the NumPy reference itself (``layers``), so every caller still gets the op.
This module imports neither numba nor the kernels: ``NumbaStepOps.load_ops`` does, from the
backend's ``__init__``, and listing backends reads only the class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from ptreg.engine.workloads import layers

# Below this many elements an op runs serially even on several threads, unless thresholds
# measured on this machine say otherwise (numba_threads): on a machine whose second core is
# often busy, waking it cost more than it saved (docs/backends.md, numba's ops).
PARALLEL_MIN_ELEMENTS = 1 << 21

F32 = np.dtype(np.float32)


def _float32(*arrays: np.ndarray) -> bool:
    return all(a.dtype == F32 for a in arrays)


def _on_a_line(shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialised float32 array whose data starts on a 64-byte cache line (NumPy's start on
    16 bytes): a view into one allocation of up to 15 floats more."""
    count = math.prod(shape)
    raw = np.empty(count + 16, dtype=F32)
    start = (-raw.ctypes.data % 64) // F32.itemsize
    return raw[start : start + count].reshape(shape)


class NumbaStepOps:
    """The ops' methods, for ``NumbaBackend`` to inherit; ``threads`` is the backend's."""

    # max |out - ref| / max |ref| allowed per op: about twice the worst of benchmarks/op_tolerances.py,
    # and why an op differs at all: docs/backends.md, numba's ops
    op_tolerances: ClassVar[dict[str, float]] = {
        "encoder": 0.0,
        "layernorm": 4e-6,
        "attention": 3e-6,
        "gelu": 3e-6,
        "residual": 0.0,
        "residual_layernorm": 6e-6,
        "bias": 0.0,
        "bias_gelu": 4e-6,
        "crossentropy": 2e-6,
        "adamw": 0.0,
    }
    threads = 1
    parallel_min = PARALLEL_MIN_ELEMENTS  # for every kernel without its own threshold
    # each kernel's own, where measured (numba_threads); None: serial at every size
    parallel_mins: Mapping[str, int | None] = MappingProxyType({})
    _kernels: dict[str, tuple[Any, Any]]  # set by load_ops

    def load_ops(self) -> None:
        """Import (and so compile, or load from numba's disk cache) every op's kernels."""
        from ptreg_backends import numba_attention, numba_fused, numba_ops

        self._kernels = {
            name: getattr(module, name)
            for module, names in (
                (
                    numba_ops,
                    (
                        "gelu_forward",
                        "gelu_backward",
                        "layernorm_forward",
                        "layernorm_backward",
                        "crossentropy_forward",
                        "crossentropy_backward",
                        "adamw_update",
                        "encoder_forward",
                        "encoder_backward",
                        "bias_forward",
                        "bias_backward",
                        "residual_add",
                    ),
                ),
                (numba_attention, ("attention_forward", "attention_backward", "attention_backward_streamed")),
                (
                    numba_fused,
                    (
                        "residual_layernorm_forward",
                        "residual_layernorm_backward",
                        "bias_gelu_forward",
                        "bias_gelu_backward",
                    ),
                ),
            )
            for name in names
        }

    def _pick(self, name: str, elements: int) -> tuple[Any, int]:
        """The kernel to run and its number of chunks: serial (one chunk) on one thread or below
        the kernel's threshold (its own, else parallel_min), else parallel, one chunk per thread."""
        serial, parallel = self._kernels[name]
        least = self.parallel_mins.get(name, self.parallel_min)
        if self.threads > 1 and least is not None and elements >= least:
            return parallel, self.threads
        return serial, 1

    def warm_up_ops(self) -> None:
        """Run every op once, serial and parallel, on tiny float32 arrays of each layout the step
        passes: numba compiles per argument type, so no compilation is left for a timed step."""
        from ptreg.engine import op_parity
        from ptreg.engine.backends import provided_ops

        saved = self.threads, self.parallel_min, self.parallel_mins
        try:
            self.parallel_mins = {}
            for threads, least in ((1, PARALLEL_MIN_ELEMENTS), (2, 0)):
                self.threads, self.parallel_min = threads, least
                rng = np.random.default_rng(0)
                for op in provided_ops(self):
                    op_parity.RUNS[op](self, op_parity.op_inputs(op, op_parity.ODD, rng))
                # attention's streamed backward, for head sizes of whole cache lines (ODD's is 20)
                qkv = rng.standard_normal((3, 48)).astype(F32)
                self.attention_backward(
                    rng.standard_normal((3, 16)).astype(F32), self.attention_forward(qkv, 1, 3, 1)[1]
                )
        finally:
            self.threads, self.parallel_min, self.parallel_mins = saved

    # ----------------------------------------------------------------------- encoder

    def encoder_forward(self, wte: np.ndarray, wpe: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        if not _float32(wte, wpe) or tokens.ndim != 2:
            return layers.encoder_forward(wte, wpe, tokens)
        tokens = _checked_tokens(tokens, wte.shape[1])
        B, T = tokens.shape
        x = np.empty((B * T, wpe.shape[1]), dtype=F32)
        kernel, chunks = self._pick("encoder_forward", x.size)
        kernel(wte, wpe, tokens, x, chunks)
        return x

    def encoder_backward(self, dx: np.ndarray, tokens: np.ndarray, dwte: np.ndarray, dwpe: np.ndarray) -> None:
        if not _float32(dx, dwte, dwpe) or tokens.ndim != 2:
            layers.encoder_backward(dx, tokens, dwte, dwpe)
            return
        tokens = _checked_tokens(tokens, dwte.shape[1])
        kernel, chunks = self._pick("encoder_backward", dx.size)
        kernel(np.ascontiguousarray(dx), tokens, dwte, dwpe, min(chunks, dwte.shape[0]))

    # ----------------------------------------------------------------------- layernorm

    def layernorm_forward(self, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, Any]:
        if not _float32(x, w, b) or x.ndim != 2:
            return layers.layernorm_forward(x, w, b)
        x = np.ascontiguousarray(x)
        out = np.empty_like(x)
        mean = np.empty(x.shape[0], dtype=F32)
        rstd = np.empty(x.shape[0], dtype=F32)
        kernel, chunks = self._pick("layernorm_forward", x.size)
        kernel(x, w, b, out, mean, rstd, chunks)
        # the backward recomputes the normalised rows from x, mean and rstd: the step never
        # writes x after its layernorm (each residual add makes a new array)
        return out, ("numba", x, mean, rstd, w)

    def layernorm_backward(self, dout: np.ndarray, cache: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not _ours(cache):
            return layers.layernorm_backward(dout, cache)
        _, x, mean, rstd, w = cache
        dout = np.ascontiguousarray(dout, dtype=F32)
        kernel, chunks = self._pick("layernorm_backward", x.size)
        dx = np.empty_like(x)
        dw_parts = np.zeros((chunks, x.shape[1]), dtype=F32)
        db_parts = np.zeros((chunks, x.shape[1]), dtype=F32)
        kernel(dout, x, mean, rstd, w, dx, dw_parts, db_parts)
        return dx, dw_parts.sum(axis=0), db_parts.sum(axis=0)

    # ----------------------------------------------------------------------- fused: residual and layernorm

    def residual_layernorm_forward(
        self, x: np.ndarray, branch: np.ndarray, w: np.ndarray, b: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, Any]:
        if not _float32(x, branch, w, b) or x.ndim != 2 or x.shape != branch.shape:
            return layers.residual_layernorm_forward(x, branch, w, b)
        x, branch = np.ascontiguousarray(x), np.ascontiguousarray(branch)
        stream, out = np.empty_like(x), np.empty_like(x)
        mean = np.empty(x.shape[0], dtype=F32)
        rstd = np.empty(x.shape[0], dtype=F32)
        kernel, chunks = self._pick("residual_layernorm_forward", x.size)
        kernel(x, branch, w, b, stream, out, mean, rstd, chunks)
        # the same cache as layernorm_forward's, of the sum: the step never writes the stream
        return stream, out, ("numba", stream, mean, rstd, w)

    def residual_layernorm_backward(
        self, dout: np.ndarray, cache: Any, dstream: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not _ours(cache):
            return layers.residual_layernorm_backward(dout, cache, dstream)
        if not _float32(dstream) or dstream.shape != cache[1].shape:  # the add as NumPy would do it
            dx_norm, dw, db = self.layernorm_backward(dout, cache)
            return layers.residual_add(dstream, dx_norm), dw, db
        _, x, mean, rstd, w = cache
        dout = np.ascontiguousarray(dout, dtype=F32)
        kernel, chunks = self._pick("residual_layernorm_backward", x.size)
        dx = np.empty_like(x)
        dw_parts = np.zeros((chunks, x.shape[1]), dtype=F32)
        db_parts = np.zeros((chunks, x.shape[1]), dtype=F32)
        kernel(dout, x, mean, rstd, w, np.ascontiguousarray(dstream), dx, dw_parts, db_parts)
        return dx, dw_parts.sum(axis=0), db_parts.sum(axis=0)

    # ----------------------------------------------------------------------- fused: bias and GELU

    def bias_gelu_forward(self, out: np.ndarray, b: np.ndarray) -> np.ndarray:
        if not _float32(out, b) or out.ndim != 2 or b.shape != out.shape[1:] or not out.flags.c_contiguous:
            return layers.bias_gelu_forward(out, b)
        y = np.empty_like(out)
        kernel, chunks = self._pick("bias_gelu_forward", out.size)
        kernel(out, np.ascontiguousarray(b), y, chunks)
        return y

    def bias_gelu_backward(self, dout: np.ndarray, x: np.ndarray, db: np.ndarray) -> np.ndarray:
        if not _float32(dout, x, db) or x.ndim != 2 or dout.shape != x.shape or db.shape != x.shape[1:] or not x.size:
            return layers.bias_gelu_backward(dout, x, db)
        x, dout = np.ascontiguousarray(x), np.ascontiguousarray(dout)
        dx = np.empty_like(x)
        kernel, chunks = self._pick("bias_gelu_backward", x.size)
        db_parts = np.zeros((chunks, x.shape[1]), dtype=F32)
        kernel(dout, x, dx, db_parts)
        db[...] = db_parts.sum(axis=0)
        return dx

    # ----------------------------------------------------------------------- attention

    def attention_forward(self, qkv: np.ndarray, B: int, T: int, NH: int) -> tuple[np.ndarray, Any]:
        C = qkv.shape[1] // 3
        if not _float32(qkv) or qkv.shape != (B * T, 3 * C) or C % NH:
            return layers.attention_forward(qkv, B, T, NH)
        qkv = np.ascontiguousarray(qkv)
        scale = np.float32(1.0 / math.sqrt(C // NH))
        out = np.empty((B * T, C), dtype=F32)
        lse = np.empty((B, NH, T), dtype=F32)  # each row's log-sum-exp: the weights, recomputed
        # its work is hs multiply-adds a score (several products of them), not one an element
        kernel, chunks = self._pick("attention_forward", B * NH * T * T * (C // NH))
        kernel(qkv, B, T, NH, scale, out, lse, chunks)
        return out, ("numba", qkv, out, lse, T, NH, scale)

    def attention_backward(self, dout: np.ndarray, cache: Any) -> np.ndarray:
        if not _ours(cache):
            return layers.attention_backward(dout, cache)
        _, qkv, out, lse, T, NH, scale = cache
        dqkv = _on_a_line(qkv.shape)  # so that the kernel can store whole lines of it past the caches
        B, hs = lse.shape[0], qkv.shape[1] // 3 // NH
        name = "attention_backward_streamed" if hs % 16 == 0 else "attention_backward"
        kernel, chunks = self._pick(name, B * NH * T * T * hs)
        kernel(np.ascontiguousarray(dout, dtype=F32), qkv, out, lse, T, NH, scale, dqkv, chunks)
        return dqkv

    # ----------------------------------------------------------------------- GELU

    def gelu_forward(self, x: np.ndarray) -> np.ndarray:
        if not _float32(x):
            return layers.gelu_forward(x)
        x = np.ascontiguousarray(x)
        out = np.empty_like(x)
        kernel, chunks = self._pick("gelu_forward", x.size)
        kernel(x.reshape(-1), out.reshape(-1), chunks)
        return out

    def gelu_backward(self, dout: np.ndarray, x: np.ndarray) -> np.ndarray:
        if not _float32(dout, x) or dout.shape != x.shape:
            return layers.gelu_backward(dout, x)
        x, dout = np.ascontiguousarray(x), np.ascontiguousarray(dout)
        dx = np.empty_like(x)
        kernel, chunks = self._pick("gelu_backward", x.size)
        kernel(dout.reshape(-1), x.reshape(-1), dx.reshape(-1), chunks)
        return dx

    # ----------------------------------------------------------------------- residual and bias

    def residual_add(self, x: np.ndarray, branch: np.ndarray) -> np.ndarray:
        if not _float32(x, branch) or x.shape != branch.shape:
            return layers.residual_add(x, branch)
        x, branch = np.ascontiguousarray(x), np.ascontiguousarray(branch)
        out = np.empty_like(x)
        kernel, chunks = self._pick("residual_add", x.size)
        kernel(x.reshape(-1), branch.reshape(-1), out.reshape(-1), chunks)
        return out

    def bias_forward(self, out: np.ndarray, b: np.ndarray) -> None:
        if not _float32(out, b) or out.ndim != 2 or b.shape != out.shape[1:]:
            layers.bias_forward(out, b)
            return
        kernel, chunks = self._pick("bias_forward", out.size)
        kernel(out, b, chunks)

    def bias_backward(self, dout: np.ndarray, db: np.ndarray) -> None:
        if not _float32(dout, db) or dout.ndim != 2 or db.shape != dout.shape[1:] or dout.shape[0] == 0:
            layers.bias_backward(dout, db)
            return
        kernel, chunks = self._pick("bias_backward", dout.size)
        kernel(dout, db, min(chunks, -(-db.shape[0] // 64)))

    # ----------------------------------------------------------------------- cross-entropy

    def crossentropy_forward(self, logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
        if not _float32(logits) or logits.ndim != 2 or logits.shape[0] == 0:
            return layers.crossentropy_forward(logits, targets)
        targets = _checked_tokens(targets, logits.shape[1])
        logits = np.ascontiguousarray(logits)
        probs = np.empty_like(logits)
        logp = np.empty(logits.shape[0], dtype=F32)
        kernel, chunks = self._pick("crossentropy_forward", logits.size)
        kernel(logits, targets, probs, logp, chunks)
        return float(-logp.mean()), probs

    def crossentropy_backward(self, probs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        if not _float32(probs) or probs.ndim != 2:
            return layers.crossentropy_backward(probs, targets)
        targets = _checked_tokens(targets, probs.shape[1])
        probs = np.ascontiguousarray(probs)
        dlogits = np.empty_like(probs)
        kernel, chunks = self._pick("crossentropy_backward", probs.size)
        kernel(probs, targets, dlogits, chunks)
        return dlogits

    # ----------------------------------------------------------------------- AdamW

    def adamw_update(
        self,
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
        flat = all(a.flags.c_contiguous for a in (param, m, v)) and param.shape == grad.shape == m.shape == v.shape
        if not _float32(param, grad, m, v) or not flat:
            layers.adamw_update(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2)
            return
        # each Python float rounded to float32 as NumPy rounds it against a float32 array
        constants = np.array(
            [beta1, 1.0 - beta1, beta2, 1.0 - beta2, correction1, correction2, eps, weight_decay, lr], dtype=F32
        )
        kernel, chunks = self._pick("adamw_update", param.size)
        kernel(
            param.reshape(-1), np.ascontiguousarray(grad).reshape(-1), m.reshape(-1), v.reshape(-1), constants, chunks
        )


def _ours(cache: Any) -> bool:
    """Whether a cache is this backend's own (its forward fell back to the reference's else)."""
    return isinstance(cache, tuple) and bool(cache) and isinstance(cache[0], str) and cache[0] == "numba"


def _checked_tokens(tokens: np.ndarray, count: int) -> np.ndarray:
    """tokens as int64, contiguous; an IndexError (as NumPy's gather raises) for one out of range,
    since the compiled gather does not check its indices."""
    tokens = np.ascontiguousarray(tokens, dtype=np.int64)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= count):
        raise IndexError(f"a token outside 0..{count - 1}")
    return tokens
