"""numba's fused ops (``numba_fused``): each against the reference it stands for on odd shapes,
serial and parallel; what keeps the reference's bits; the fallbacks; and training steps with the
fused op against the same steps with the two ops apart."""

from __future__ import annotations

import importlib.util
from collections import Counter
from typing import Any, ClassVar

import numpy as np
import pytest

from ptreg.engine.backends import OP_METHODS, provided_ops
from ptreg.engine.workloads import layers
from ptreg.records.configs import CONFIGS
from ptreg.records.measured import FUSED_OPS

HAS_NUMBA = importlib.util.find_spec("numba") is not None
pytestmark = pytest.mark.skipif(not HAS_NUMBA, reason="numba is not installed (pip install 'ptreg[numba]')")


@pytest.fixture(scope="module")
def step_ops() -> Any:
    """The backend's op methods without its matmuls (whose tile would be timed on first use)."""
    from ptreg_backends.numba_step import NumbaStepOps

    ops = NumbaStepOps()
    ops.load_ops()
    return ops


def on_threads(ops: Any, threads: int) -> None:
    """One thread: the serial kernels. Two: the parallel ones for every size."""
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    ops.threads = threads
    ops.parallel_min = 0 if threads > 1 else 1 << 62


def relative(found: np.ndarray, expected: np.ndarray) -> float:
    """max |found - expected| over max |expected|, as the parity gate takes it (0 when both are 0)."""
    error, scale = float(np.abs(found - expected).max()), float(np.abs(expected).max())
    return error / scale if scale else (0.0 if error == 0 else np.inf)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows,channels", [(1, 1), (1, 20), (5, 3), (13, 33), (64, 17)])
def test_residual_layernorm_is_the_add_then_the_layernorm(
    step_ops: Any, threads: int, rows: int, channels: int
) -> None:
    """The sum keeps NumPy's bits (the same float32 add); the rest within the declared tolerance;
    the inputs left as they were."""
    on_threads(step_ops, threads)
    rng = np.random.default_rng(rows * 100 + channels)
    x = rng.standard_normal((rows, channels), dtype=np.float32) * 3 + 1
    branch, dout, dstream = (rng.standard_normal((rows, channels), dtype=np.float32) for _ in range(3))
    w, b = rng.standard_normal(channels, dtype=np.float32), rng.standard_normal(channels, dtype=np.float32)
    given = [a.copy() for a in (x, branch, w, b, dout, dstream)]
    stream, out, cache = step_ops.residual_layernorm_forward(x, branch, w, b)
    dx, dw, db = step_ops.residual_layernorm_backward(dout, cache, dstream)
    ref_stream, ref_out, ref_cache = layers.residual_layernorm_forward(x, branch, w, b)
    ref_dx, ref_dw, ref_db = layers.residual_layernorm_backward(dout, ref_cache, dstream)
    assert stream.tobytes() == ref_stream.tobytes()
    tolerance = step_ops.op_tolerances["residual_layernorm"]
    for name, found, expected in (("out", out, ref_out), ("dx", dx, ref_dx), ("dw", dw, ref_dw), ("db", db, ref_db)):
        assert found.dtype == np.float32 and found.shape == expected.shape, name
        assert relative(found, expected) <= tolerance, name
    for before, after in zip(given, (x, branch, w, b, dout, dstream), strict=True):
        assert before.tobytes() == after.tobytes()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows,width", [(1, 1), (1, 37), (5, 3), (13, 33), (64, 80)])
def test_bias_gelu_is_the_bias_then_gelu(step_ops: Any, threads: int, rows: int, width: int) -> None:
    """The biased pre-activation keeps NumPy's bits (the backward reads it); the rest within the
    declared tolerance; dout and b left as they were."""
    on_threads(step_ops, threads)
    rng = np.random.default_rng(rows * 1000 + width)
    out = rng.standard_normal((rows, width), dtype=np.float32) * 2
    b, dout = rng.standard_normal(width, dtype=np.float32), rng.standard_normal((rows, width), dtype=np.float32)
    ref_out, given = out.copy(), (b.copy(), dout.copy())
    db, ref_db = np.full(width, np.nan, np.float32), np.full(width, np.nan, np.float32)
    y = step_ops.bias_gelu_forward(out, b)
    ref_y = layers.bias_gelu_forward(ref_out, b)
    assert out.tobytes() == ref_out.tobytes()
    dx = step_ops.bias_gelu_backward(dout, out, db)
    ref_dx = layers.bias_gelu_backward(dout, ref_out, ref_db)
    tolerance = step_ops.op_tolerances["bias_gelu"]
    for name, found, expected in (("y", y, ref_y), ("dx", dx, ref_dx), ("db", db, ref_db)):
        assert found.dtype == np.float32 and found.shape == expected.shape, name
        assert relative(found, expected) <= tolerance, name
    assert given[0].tobytes() == b.tobytes() and given[1].tobytes() == dout.tobytes()


def test_other_dtypes_and_a_reference_cache_go_to_the_reference(step_ops: Any) -> None:
    rng = np.random.default_rng(6)
    x, branch = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))  # float64
    w, b = np.ones(8), np.zeros(8)
    stream, out, cache = step_ops.residual_layernorm_forward(x, branch, w, b)
    ref = layers.residual_layernorm_forward(x, branch, w, b)
    assert stream.tobytes() == ref[0].tobytes() and out.tobytes() == ref[1].tobytes()
    dout = rng.standard_normal((4, 8))
    dx, dw, db = step_ops.residual_layernorm_backward(dout, cache, dout)
    expected = layers.residual_layernorm_backward(dout, ref[2], dout)
    assert all(f.tobytes() == e.tobytes() for f, e in zip((dx, dw, db), expected, strict=True))
    # numba's own cache with a float64 gradient of the stream: its layernorm, NumPy's add
    x32 = x.astype(np.float32)
    _, _, ours = step_ops.residual_layernorm_forward(x32, x32, w.astype(np.float32), b.astype(np.float32))
    found = step_ops.residual_layernorm_backward(dout.astype(np.float32), ours, dout)
    assert found[0].dtype == np.float64
    # bias_gelu in float64: NumPy's, bits and all
    pre, ref_pre, db, ref_db = x.copy(), x.copy(), np.zeros(8), np.zeros(8)
    assert step_ops.bias_gelu_forward(pre, b).tobytes() == layers.bias_gelu_forward(ref_pre, b).tobytes()
    found_dx = step_ops.bias_gelu_backward(dout, pre, db)
    assert found_dx.tobytes() == layers.bias_gelu_backward(dout, ref_pre, ref_db).tobytes()
    assert db.tobytes() == ref_db.tobytes()


def test_training_steps_with_the_fused_op_follow_the_steps_with_the_ops_apart(step_ops: Any) -> None:
    """Three steps of the tiny GPT, every op numba's (products through np.matmul), with and without
    the fused op, same seed: the losses agree to float32 rounding and the parameters stay within
    the fused op's tolerance of each other; the fused op is really called in one and not the other."""
    from ptreg.engine.workloads.tinygpt import ReferenceKernels, Trainer

    base = type(step_ops)

    class Fused(base, ReferenceKernels):  # type: ignore[misc, valid-type]
        pass

    class Apart(Fused):
        residual_layernorm_forward = None
        residual_layernorm_backward = None
        bias_gelu_forward = None
        bias_gelu_backward = None
        op_tolerances: ClassVar = {op: t for op, t in base.op_tolerances.items() if op not in FUSED_OPS}

    fused_ops, apart_ops = Fused(), Apart()
    calls: Counter[str] = Counter()
    for ops in (fused_ops, apart_ops):
        ops.load_ops()
        on_threads(ops, 1)

    def counted(method: str) -> Any:
        original = getattr(fused_ops, method)

        def call(*args: Any) -> Any:
            calls[method] += 1
            return original(*args)

        return call

    for op in FUSED_OPS:
        for method in OP_METHODS[op]:
            setattr(fused_ops, method, counted(method))
    assert set(FUSED_OPS) <= set(provided_ops(fused_ops)) and not set(FUSED_OPS) & set(provided_ops(apart_ops))
    config = CONFIGS["tiny"]
    fused, apart = Trainer(config, fused_ops, seed=2), Trainer(config, apart_ops, seed=2)
    losses = [(fused.step(), apart.step()) for _ in range(3)]
    pairs, fc = 3 * (2 * config.layers - 1), 3 * config.layers
    assert calls == {
        "residual_layernorm_forward": pairs,
        "residual_layernorm_backward": pairs,
        "bias_gelu_forward": fc,
        "bias_gelu_backward": fc,
    }
    for mine, theirs in losses:
        assert mine == pytest.approx(theirs, rel=1e-5)
    for name, value in fused.model.params.items():
        other = apart.model.params[name]
        assert np.abs(value - other).max() <= 1e-4 * max(float(np.abs(other).max()), 1.0), name
