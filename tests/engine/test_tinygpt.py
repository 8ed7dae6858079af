"""The NumPy GPT of ptreg.tinygpt: sizes, gradients, learning, kernel routing, determinism."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest

from ptreg.engine.backends import kernel_shapes
from ptreg.engine.workloads.tinygpt import ReferenceKernels, TinyGPT, Trainer, corpus, parameter_count, parameter_shapes
from ptreg.records.configs import CONFIGS, GPTConfig, linear_shapes

EXPECTED_COUNTS = {"small": 366432, "medium": 838400, "large": 2743296, "xl": 6416896}
EXPECTED_MILLIONS = {"small": 0.37, "medium": 0.84, "large": 2.74, "xl": 6.42}
METHODS = {"matmul_forward": "forward", "matmul_backward_da": "backward_da", "matmul_backward_db": "backward_db"}


def formula(cfg: GPTConfig) -> int:
    V, T, L, C = cfg.vocab, cfg.context, cfg.layers, cfg.d_model
    return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C


class CountingKernels:
    """Delegates to ReferenceKernels after checking each call's arguments; records the calls.

    ``out`` is filled with NaN first, so an output the kernel did not fully overwrite shows.
    """

    def __init__(self, dtype: Any = np.float32):
        self.inner = ReferenceKernels()
        self.dtype = np.dtype(dtype)
        self.calls: list[tuple[str, int, int, int]] = []  # (kernel, M, K, N)

    def _check(self, method: str, x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        for array in (x, y, out):
            assert isinstance(array, np.ndarray)
            assert array.dtype == self.dtype, (method, array.dtype)
            assert array.ndim == 2 and array.flags.c_contiguous, method
        kernel = METHODS[method]
        if kernel == "forward":
            (m, k), (_, n) = x.shape, y.shape
        elif kernel == "backward_da":
            (m, n), (k, _) = x.shape, y.shape
        else:
            (m, k), (_, n) = x.shape, y.shape
        assert (x.shape, y.shape, out.shape) == kernel_shapes(kernel, m, k, n), method
        self.calls.append((kernel, m, k, n))
        out.fill(np.nan)
        getattr(self.inner, method)(x, y, out)
        assert np.isfinite(out).all(), f"{method} left part of out unwritten"

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._check("matmul_forward", a, b, out)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._check("matmul_backward_da", dc, b, out)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        self._check("matmul_backward_db", a, dc, out)


def float_arrays(obj: Any):
    """Every floating-point array inside nested dicts, lists and tuples."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f":
            yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from float_arrays(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from float_arrays(value)


# --------------------------------------------------------------------------- sizes


@pytest.mark.parametrize("name", list(EXPECTED_COUNTS))
def test_parameter_counts(name: str) -> None:
    cfg = CONFIGS[name]
    assert parameter_count(cfg) == EXPECTED_COUNTS[name] == formula(cfg) == cfg.parameters
    assert round(parameter_count(cfg) / 1e6, 2) == EXPECTED_MILLIONS[name]


def test_configs_in_order_and_params_match_shapes() -> None:
    assert list(CONFIGS) == ["tiny", "small", "medium", "large", "xl"]
    cfg = CONFIGS["tiny"]
    model = TinyGPT(cfg, ReferenceKernels(), seed=0)
    shapes = parameter_shapes(cfg)
    assert {k: v.shape for k, v in model.params.items()} == shapes
    assert sum(v.size for v in model.params.values()) == parameter_count(cfg) == formula(cfg)
    assert all(v.dtype == np.float32 and v.flags.c_contiguous for v in model.params.values())
    assert model.params["wte"].shape == (cfg.d_model, cfg.vocab)


def test_linear_shapes() -> None:
    cfg = CONFIGS["small"]
    M, C, L = cfg.batch * cfg.context, cfg.d_model, cfg.layers
    got = [(s.name, s.m, s.k, s.n, s.per_step) for s in linear_shapes(cfg)]
    assert got == [
        ("qkv", M, C, 3 * C, L),
        ("attn_proj", M, C, C, L),
        ("fc", M, C, 4 * C, L),
        ("mlp_proj", M, 4 * C, C, L),
        ("head", M, C, 256, 1),
    ]


def test_corpus() -> None:
    data = corpus()
    assert data.dtype == np.uint8 and data.ndim == 1
    assert len(data) > max(c.context for c in CONFIGS.values()) + 1
    assert bytes(data[:45]) == b"the quick brown fox jumps over the lazy dog. "


# --------------------------------------------------------------------------- gradients


def test_gradients_match_finite_differences() -> None:
    """Every parameter kind, a few entries each, in float64 against central differences."""
    cfg = GPTConfig("check", context=5, layers=2, d_model=8, batch=2, heads=2)
    rng = np.random.default_rng(1)
    model = TinyGPT(cfg, ReferenceKernels(), seed=3, dtype=np.float64)
    # Move off the init (zero biases, unit LayerNorm weights, tiny weights) to a generic point.
    for value in model.params.values():
        value += rng.normal(0.0, 0.3, size=value.shape)
    tokens = rng.integers(0, cfg.vocab, size=(cfg.batch, cfg.context))
    targets = rng.integers(0, cfg.vocab, size=(cfg.batch, cfg.context))
    model.forward(tokens, targets)
    grads = model.backward()
    assert set(grads) == set(model.params)

    h = 1e-5
    worst = 0.0
    for name, param in model.params.items():
        assert grads[name].shape == param.shape and grads[name].dtype == np.float64
        flat, gflat = param.reshape(-1), grads[name].reshape(-1)
        picks = rng.choice(flat.size, size=min(6, flat.size), replace=False)
        if name == "wte":  # also entries of columns that are both looked up and predicted
            picks = np.concatenate([picks, [int(tokens[0, 0]), cfg.vocab + int(tokens[1, 2])]])
        for i in picks:
            saved = flat[i]
            flat[i] = saved + h
            up = model.forward(tokens, targets)
            flat[i] = saved - h
            down = model.forward(tokens, targets)
            flat[i] = saved
            numeric = (up - down) / (2 * h)
            analytic = gflat[i]
            # relative error; the 1e-4 floor keeps round-off (~1e-10 absolute) on a
            # near-zero gradient from passing for a mismatch
            err = abs(numeric - analytic) / max(abs(numeric), abs(analytic), 1e-4)
            worst = max(worst, err)
            assert err < 1e-5, (name, int(i), analytic, numeric)
    assert worst < 1e-5


def test_unused_positions_get_zero_gradient() -> None:
    cfg = GPTConfig("short", context=8, layers=1, d_model=8, batch=2, heads=2)
    model = TinyGPT(cfg, ReferenceKernels(), seed=0, dtype=np.float64)
    tokens = np.zeros((2, 5), dtype=np.int64)
    model.forward(tokens, tokens)
    grads = model.backward()
    assert np.all(grads["wpe"][5:] == 0.0) and np.any(grads["wpe"][:5] != 0.0)


# --------------------------------------------------------------------------- training


def test_loss_falls() -> None:
    trainer = Trainer(CONFIGS["tiny"], ReferenceKernels(), seed=0)
    losses = [trainer.step() for _ in range(40)]
    assert abs(losses[0] - math.log(256)) < 0.2
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0] - 0.5
    assert trainer.config.tokens_per_step == 4 * 16


def test_deterministic() -> None:
    a = Trainer(CONFIGS["tiny"], ReferenceKernels(), seed=7)
    b = Trainer(CONFIGS["tiny"], ReferenceKernels(), seed=7)
    losses_a = [a.step() for _ in range(3)]
    assert losses_a == [b.step() for _ in range(3)]
    for name in a.model.params:
        assert np.array_equal(a.model.params[name], b.model.params[name])
    c = Trainer(CONFIGS["tiny"], ReferenceKernels(), seed=8)
    assert [c.step() for _ in range(3)] != losses_a


def test_float32_throughout() -> None:
    trainer = Trainer(CONFIGS["tiny"], ReferenceKernels(), seed=0)
    trainer.step()
    model = trainer.model
    model.forward(*trainer.next_batch())
    grads = model.backward()
    arrays = [
        *float_arrays(model.cache),
        *float_arrays(grads),
        *float_arrays(model.params),
        *float_arrays(trainer.optimizer.m),
        *float_arrays(trainer.optimizer.v),
    ]
    assert len(arrays) > 50
    assert {a.dtype for a in arrays} == {np.dtype(np.float32)}


# --------------------------------------------------------------------------- the kernels


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_every_linear_matmul_goes_through_the_kernels(name: str) -> None:
    cfg = CONFIGS[name]
    kernels = CountingKernels()
    trainer = Trainer(cfg, kernels, seed=0)
    loss = trainer.step()
    assert math.isfinite(loss)

    per_kernel = Counter(kernel for kernel, *_ in kernels.calls)
    expected = 4 * cfg.layers + 1
    assert per_kernel == {"forward": expected, "backward_da": expected, "backward_db": expected}
    # ... and with exactly the shapes linear_shapes announces.
    announced = Counter()
    for s in linear_shapes(cfg):
        for kernel in ("forward", "backward_da", "backward_db"):
            announced[(kernel, s.m, s.k, s.n)] += s.per_step
    assert Counter(kernels.calls) == announced


def test_kernels_give_the_same_step_as_reference() -> None:
    """The model depends on the kernels only through the three methods: routing them through
    the checking proxy (or another backend) changes nothing."""
    plain = Trainer(CONFIGS["tiny"], ReferenceKernels(), seed=2)
    proxied = Trainer(CONFIGS["tiny"], CountingKernels(), seed=2)
    assert [plain.step() for _ in range(2)] == [proxied.step() for _ in range(2)]


def test_naive_backend_trains_the_same() -> None:
    naive = pytest.importorskip("ptreg_backends.naive")
    reference = Trainer(CONFIGS["tiny"], ReferenceKernels(), seed=0)
    other = Trainer(CONFIGS["tiny"], naive.NaiveBackend(), seed=0)
    for _ in range(2):
        assert other.step() == pytest.approx(reference.step(), rel=1e-5)
