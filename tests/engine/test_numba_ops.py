"""numba's step ops against the NumPy reference: each op forward and backward within the tolerance
it declares (bits where it declares 0.0), on the configs' shapes and an odd one, inputs left as
they were, on one and on two threads; both compilations give the same bits; the edge cases the
compiled loops must not get wrong; and whole training steps through them."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest

from ptreg.engine import op_parity
from ptreg.engine.backends import OP_METHODS, entries, op_tolerances, provided_ops, signature_problem
from ptreg.engine.workloads import layers
from ptreg.records.configs import CONFIGS

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
    """One thread: the serial kernels. Two: the parallel ones for every size, in two chunks."""
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    ops.threads = threads
    ops.parallel_min = 0 if threads > 1 else 1 << 62


@pytest.mark.parametrize("threads", [1, 2])
def test_every_op_within_its_declared_tolerance(step_ops: Any, threads: int) -> None:
    """The parity gate's own check: forward, then backward on the op's own cache, beside the
    reference on copies of the same inputs; an input written, a value not finite, or an error
    beyond the declaration fails it."""
    on_threads(step_ops, threads)
    checks = op_parity.check_ops(step_ops, ["tiny", "small", "xl"], seed=3)
    assert {c.op for c in checks} == set(OP_METHODS)
    failed = [(c.op, c.shape, c.detail) for c in checks if not c.passed]
    assert failed == []
    assert {c.shape for c in checks} == {"tiny", "small", "xl", "odd"}


def test_serial_and_parallel_agree(step_ops: Any) -> None:
    """Bit for bit where the op keeps NumPy's bits; within its tolerance where it does not (the two
    compilations may split a reassociated sum into vector lanes differently)."""
    found: dict[int, list[tuple[str, str, np.ndarray]]] = {}
    for threads in (1, 2):
        on_threads(step_ops, threads)
        found[threads] = []
        for op, run in op_parity.RUNS.items():
            inputs = op_parity.op_inputs(op, CONFIGS["small"], np.random.default_rng(5))
            found[threads] += [(op, name, np.array(value, dtype=np.float32)) for name, value in run(step_ops, inputs)]
    for (op, name, serial), (_, _, parallel) in zip(found[1], found[2], strict=True):
        tolerance = step_ops.op_tolerances[op]
        if tolerance == 0.0:
            assert serial.tobytes() == parallel.tobytes(), (op, name)
        else:
            assert np.abs(serial - parallel).max() <= tolerance * np.abs(serial).max(), (op, name)


def test_the_backend_provides_the_ops_that_pay_each_with_its_tolerance() -> None:
    """residual and bias are measured but not provided (docs/backends.md, numba's ops)."""
    from ptreg_backends.numba_kernels import NumbaBackend

    assert set(provided_ops(NumbaBackend)) == set(OP_METHODS) - {"residual", "bias"}
    assert op_tolerances(NumbaBackend) == NumbaBackend.op_tolerances
    assert signature_problem("numba", NumbaBackend, bound=False) is None
    assert "numba" in entries()


def test_encoder_keeps_add_at_order_with_repeated_tokens(step_ops: Any) -> None:
    """Every row of the batch the same few tokens: many additions into one column of dwte, whose
    float32 sum depends on their order."""
    on_threads(step_ops, 2)
    rng = np.random.default_rng(1)
    C, V, B, T = 20, 5, 6, 9
    tokens = rng.integers(0, 2, size=(B, T))
    dx = rng.standard_normal((B * T, C), dtype=np.float32) * 1e3
    dwte = rng.standard_normal((C, V), dtype=np.float32)
    expected = [dwte.copy(), np.empty((T + 2, C), np.float32)]
    given = [dwte.copy(), np.full((T + 2, C), np.nan, np.float32)]  # rows past T are zeroed
    layers.encoder_backward(dx, tokens, *expected)
    step_ops.encoder_backward(dx, tokens, *given)
    assert expected[0].tobytes() == given[0].tobytes()
    assert expected[1].tobytes() == given[1].tobytes()


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adamw_keeps_the_references_bits_with_and_without_decay(step_ops: Any, weight_decay: float) -> None:
    on_threads(step_ops, 1)
    rng = np.random.default_rng(2)
    shape = (7, 33)
    param = rng.standard_normal(shape, dtype=np.float32)
    param[0, :3] = [0.0, -0.0, 1e-30]  # signed zeros and a tiny value: the bits of each are kept
    grad = rng.standard_normal(shape, dtype=np.float32)
    state = [param, grad, np.zeros(shape, np.float32), np.zeros(shape, np.float32)]
    expected = [a.copy() for a in state]
    for t in (1, 2, 3):
        args = (1e-3, 0.9, 0.999, 1e-8, weight_decay, 1 - 0.9**t, 1 - 0.999**t)
        layers.adamw_update(*expected, *args)
        step_ops.adamw_update(*state, *args)
        for mine, theirs in zip(state, expected, strict=True):
            assert mine.tobytes() == theirs.tobytes()


def test_other_dtypes_and_shapes_go_to_the_reference(step_ops: Any) -> None:
    """The kernels are float32; float64 (the gradient checks' dtype) gets the reference itself."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 8))
    assert step_ops.gelu_forward(x).tobytes() == layers.gelu_forward(x).tobytes()
    out, cache = step_ops.layernorm_forward(x, np.ones(8), np.zeros(8))
    assert out.tobytes() == layers.layernorm_forward(x, np.ones(8), np.zeros(8))[0].tobytes()
    dx, _, _ = step_ops.layernorm_backward(np.ones_like(x), cache)
    assert dx.dtype == np.float64
    row = np.ones(8, np.float32)
    assert step_ops.residual_add(np.ones((6, 8), np.float32), row).shape == (6, 8)  # broadcast, as NumPy


def test_a_token_out_of_range_is_an_index_error(step_ops: Any) -> None:
    wte, wpe = np.zeros((4, 5), np.float32), np.zeros((3, 4), np.float32)
    with pytest.raises(IndexError):
        step_ops.encoder_forward(wte, wpe, np.array([[0, 5, 1]]))
    with pytest.raises(IndexError):
        step_ops.crossentropy_forward(np.zeros((2, 5), np.float32), np.array([0, -1]))


def test_training_steps_through_numbas_ops_follow_the_reference(step_ops: Any) -> None:
    """Three steps of the tiny GPT with every op numba's (products through np.matmul) against the
    same steps all in NumPy: the losses agree to float32 rounding, and they fall."""
    from ptreg.engine.workloads.tinygpt import ReferenceKernels, Trainer

    class Mixed(type(step_ops), ReferenceKernels):  # type: ignore[misc]
        pass

    mixed = Mixed()
    mixed.load_ops()
    on_threads(mixed, 2)
    ours, reference = Trainer(CONFIGS["tiny"], mixed, seed=1), Trainer(CONFIGS["tiny"], ReferenceKernels(), seed=1)
    assert set(ours.model.ops.provided) == set(OP_METHODS)
    losses = [(ours.step(), reference.step()) for _ in range(3)]
    for mine, theirs in losses:
        assert mine == pytest.approx(theirs, rel=1e-4)
    assert losses[-1][0] < losses[0][0]
