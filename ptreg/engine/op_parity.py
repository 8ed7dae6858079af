"""The parity gate for the step's ops: each op a backend provides, against the NumPy reference.

For every op a backend provides (``backends.provided_ops``), on inputs shaped as each named
configuration's step shapes them and as one odd configuration (no size a multiple of anything,
one head), the backend's forward and then its backward (on its own forward's cache) run beside
the reference's (``workloads/layers.py``) on copies of the same inputs. Every output must be
finite and, as the backend declares in ``op_tolerances``, either the reference's bits (0.0) or
within ``max |out - ref| <= tolerance · max |ref|``: relative to the output's largest
magnitude, since an op's outputs (a normalised row, a gradient) have no per-element scale such
as the kernels' Σ|a||b|. An op that raises or writes an input it only reads fails its check.
Nothing here propagates a backend's exception.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..records.configs import CONFIGS, GPTConfig
from ..records.run_results import OpParityCheck
from .backends import op_tolerances
from .workloads import layers

# No dimension a multiple of a vector width or tile, one head, a batch of three.
ODD = GPTConfig("odd", context=7, layers=1, d_model=20, batch=3, heads=1, vocab=37)

Inputs = dict[str, Any]
Outputs = list[tuple[str, Any]]


def check_ops(backend: Any, configs: list[str], seed: int = 0) -> list[OpParityCheck]:
    """One check per op the backend provides and per shape (each config named, then ODD)."""
    tolerances = op_tolerances(backend)
    shapes = [CONFIGS[name] for name in dict.fromkeys(configs)] + [ODD]
    checks = []
    for op, tolerance in tolerances.items():
        for index, config in enumerate(shapes):
            rng = np.random.default_rng([seed, index, len(op)])
            checks.append(_check(backend, op, tolerance, config, rng))
    return checks


def _check(backend: Any, op: str, tolerance: float, config: GPTConfig, rng: np.random.Generator) -> OpParityCheck:
    mode = "bit-identical" if tolerance == 0.0 else "tolerance"

    def result(passed: bool, error: float | None, detail: str) -> OpParityCheck:
        shown = error if error is not None and math.isfinite(error) else None
        return OpParityCheck(
            op=op,
            shape=config.name,
            mode=mode,
            tolerance=tolerance,
            passed=passed,
            max_relative_error=shown,
            detail=detail,
        )

    run = RUNS[op]
    inputs = _INPUTS[op](config, rng)
    try:
        expected = run(layers, _copied(inputs))
    except Exception as exc:  # the reference itself failing is a bug here, still not a crash
        return result(False, None, f"the NumPy reference raised {type(exc).__name__}: {exc}")
    given = _copied(inputs)
    try:
        found = run(backend, given)
    except Exception as exc:  # a failing op is a failed check
        return result(False, None, f"raised {type(exc).__name__}: {exc}")
    for name in READ_ONLY[op]:
        if not np.array_equal(given[name], inputs[name]):
            return result(False, None, f"it modified its input {name}")
    worst = 0.0
    for (name, out), (_, ref) in zip(found, expected, strict=True):
        out_array, ref_array = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
        if out_array.shape != ref_array.shape:
            return result(False, None, f"{name} has shape {out_array.shape}, the reference's {ref_array.shape}")
        if not np.isfinite(out_array).all():
            return result(False, None, f"{name} is not finite everywhere")
        if tolerance == 0.0:
            same = np.asarray(out).tobytes() == np.asarray(ref, dtype=np.asarray(out).dtype).tobytes()
            if not same or np.asarray(out).dtype != np.asarray(ref).dtype:
                error = _relative(out_array, ref_array)
                return result(False, error, f"{name} is not bit-identical to NumPy's (relative error {error:.3g})")
            continue
        error = _relative(out_array, ref_array)
        worst = max(worst, error)
        if error > tolerance:
            return result(False, error, f"{name}: max |out - ref| = {error:.3g} · max |ref|, above {tolerance:g}")
    detail = "bit-identical to NumPy's" if tolerance == 0.0 else f"within {tolerance:g} (worst {worst:.3g})"
    return result(True, worst, detail)


def _relative(out: np.ndarray, ref: np.ndarray) -> float:
    scale = float(np.abs(ref).max(initial=0.0))
    error = float(np.abs(out - ref).max(initial=0.0))
    return error / scale if scale > 0 else (0.0 if error == 0 else math.inf)


def _copied(inputs: Inputs) -> Inputs:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


# --------------------------------------------------------------------------- inputs per op


def _normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def _rows(config: GPTConfig) -> int:
    return config.batch * config.context


_INPUTS: dict[str, Callable[[GPTConfig, np.random.Generator], Inputs]] = {
    "encoder": lambda c, r: {
        "wte": _normal(r, c.d_model, c.vocab),
        "wpe": _normal(r, c.context, c.d_model),
        "tokens": r.integers(0, c.vocab, size=(c.batch, c.context)),
        "dx": _normal(r, _rows(c), c.d_model),
        "dwte": _normal(r, c.d_model, c.vocab),  # holds the head's gradient already: added to
        "dwpe": np.full((c.context, c.d_model), np.nan, dtype=np.float32),  # overwritten
    },
    "layernorm": lambda c, r: {
        "x": _normal(r, _rows(c), c.d_model) * 3 + 1,
        "w": _normal(r, c.d_model),
        "b": _normal(r, c.d_model),
        "dout": _normal(r, _rows(c), c.d_model),
    },
    "attention": lambda c, r: {
        "qkv": _normal(r, _rows(c), 3 * c.d_model),
        "B": c.batch,
        "T": c.context,
        "NH": c.heads,
        "dout": _normal(r, _rows(c), c.d_model),
    },
    "gelu": lambda c, r: {"x": _normal(r, _rows(c), 4 * c.d_model) * 2, "dout": _normal(r, _rows(c), 4 * c.d_model)},
    "residual": lambda c, r: {"x": _normal(r, _rows(c), c.d_model), "branch": _normal(r, _rows(c), c.d_model)},
    "residual_layernorm": lambda c, r: {
        "x": _normal(r, _rows(c), c.d_model) * 3 + 1,
        "branch": _normal(r, _rows(c), c.d_model),
        "w": _normal(r, c.d_model),
        "b": _normal(r, c.d_model),
        "dout": _normal(r, _rows(c), c.d_model),
        "dstream": _normal(r, _rows(c), c.d_model),
    },
    "bias": lambda c, r: {
        "out": _normal(r, _rows(c), 4 * c.d_model),
        "b": _normal(r, 4 * c.d_model),
        "dout": _normal(r, _rows(c), 4 * c.d_model),
        "db": np.full(4 * c.d_model, np.nan, dtype=np.float32),
    },
    "bias_gelu": lambda c, r: {
        "out": _normal(r, _rows(c), 4 * c.d_model) * 2,
        "b": _normal(r, 4 * c.d_model),
        "dout": _normal(r, _rows(c), 4 * c.d_model),
        "db": np.full(4 * c.d_model, np.nan, dtype=np.float32),  # overwritten
    },
    "crossentropy": lambda c, r: {
        "logits": _normal(r, _rows(c), c.vocab) * 4,
        "targets": r.integers(0, c.vocab, size=_rows(c)),
    },
    "adamw": lambda c, r: {
        "param": _normal(r, c.d_model, 4 * c.d_model),
        "grad": _normal(r, c.d_model, 4 * c.d_model),
        "m": _normal(r, c.d_model, 4 * c.d_model) * 0.1,
        "v": np.abs(_normal(r, c.d_model, 4 * c.d_model)) * 0.01,
    },
}


def op_inputs(op: str, config: GPTConfig, rng: np.random.Generator) -> Inputs:
    """Random inputs of ``op`` shaped as ``config`` shapes them in the step (what parity checks on)."""
    return _INPUTS[op](config, rng)


# What each op only reads: a change to one of these fails the check.
READ_ONLY: dict[str, tuple[str, ...]] = {
    "encoder": ("wte", "wpe", "tokens", "dx"),
    "layernorm": ("x", "w", "b", "dout"),
    "attention": ("qkv", "dout"),
    "gelu": ("x", "dout"),
    "residual": ("x", "branch"),
    "residual_layernorm": ("x", "branch", "w", "b", "dout", "dstream"),
    "bias": ("b", "dout"),
    "bias_gelu": ("b", "dout"),
    "crossentropy": ("logits", "targets"),
    "adamw": ("grad",),
}


def _encoder(ops: Any, i: Inputs) -> Outputs:
    x = ops.encoder_forward(i["wte"], i["wpe"], i["tokens"])
    ops.encoder_backward(i["dx"], i["tokens"], i["dwte"], i["dwpe"])
    return [("x", x), ("dwte", i["dwte"]), ("dwpe", i["dwpe"])]


def _layernorm(ops: Any, i: Inputs) -> Outputs:
    out, cache = ops.layernorm_forward(i["x"], i["w"], i["b"])
    dx, dw, db = ops.layernorm_backward(i["dout"], cache)
    return [("out", out), ("dx", dx), ("dw", dw), ("db", db)]


def _attention(ops: Any, i: Inputs) -> Outputs:
    out, cache = ops.attention_forward(i["qkv"], i["B"], i["T"], i["NH"])
    out = np.array(out, copy=True)  # before the backward, which may reuse what out points at
    return [("out", out), ("dqkv", ops.attention_backward(i["dout"], cache))]


def _gelu(ops: Any, i: Inputs) -> Outputs:
    return [("out", ops.gelu_forward(i["x"])), ("dx", ops.gelu_backward(i["dout"], i["x"]))]


def _residual(ops: Any, i: Inputs) -> Outputs:
    return [("out", ops.residual_add(i["x"], i["branch"]))]


def _residual_layernorm(ops: Any, i: Inputs) -> Outputs:
    stream, out, cache = ops.residual_layernorm_forward(i["x"], i["branch"], i["w"], i["b"])
    stream, out = np.array(stream, copy=True), np.array(out, copy=True)  # the cache may hold them
    dx, dw, db = ops.residual_layernorm_backward(i["dout"], cache, i["dstream"])
    return [("stream", stream), ("out", out), ("dx", dx), ("dw", dw), ("db", db)]


def _bias(ops: Any, i: Inputs) -> Outputs:
    ops.bias_forward(i["out"], i["b"])
    ops.bias_backward(i["dout"], i["db"])
    return [("out", i["out"]), ("db", i["db"])]


def _bias_gelu(ops: Any, i: Inputs) -> Outputs:
    y = np.array(ops.bias_gelu_forward(i["out"], i["b"]), copy=True)
    dx = ops.bias_gelu_backward(i["dout"], i["out"], i["db"])  # at the biased pre-activation
    return [("out", i["out"]), ("y", y), ("dx", dx), ("db", i["db"])]


def _crossentropy(ops: Any, i: Inputs) -> Outputs:
    loss, probs = ops.crossentropy_forward(i["logits"], i["targets"])
    probs = np.array(probs, copy=True)
    return [("loss", np.float32(loss)), ("probs", probs), ("dlogits", ops.crossentropy_backward(probs, i["targets"]))]


def _adamw(ops: Any, i: Inputs) -> Outputs:
    # the third step of 3e-4 with decay: bias corrections and the decay term both in play
    beta1, beta2 = 0.9, 0.999
    ops.adamw_update(i["param"], i["grad"], i["m"], i["v"], 3e-4, beta1, beta2, 1e-8, 0.01, 1 - beta1**3, 1 - beta2**3)
    return [("param", i["param"]), ("m", i["m"]), ("v", i["v"])]


RUNS: dict[str, Callable[[Any, Inputs], Outputs]] = {
    "encoder": _encoder,
    "layernorm": _layernorm,
    "attention": _attention,
    "gelu": _gelu,
    "residual": _residual,
    "residual_layernorm": _residual_layernorm,
    "bias": _bias,
    "bias_gelu": _bias_gelu,
    "crossentropy": _crossentropy,
    "adamw": _adamw,
}
