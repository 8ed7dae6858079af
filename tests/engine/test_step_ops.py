"""The op contract: which ops a backend provides, the parity gate of ops, the step through
StepOps, and each op's share of the step."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np
import pytest

from ptreg.engine.backends import OP_METHODS, op_tolerances, provided_ops, signature_problem
from ptreg.engine.op_parity import check_ops
from ptreg.engine.workloads import layers
from ptreg.engine.workloads.tinygpt import ReferenceKernels, StepOps, Trainer
from ptreg.engine.workloads.training import TimedStep, attribution
from ptreg.records.configs import CONFIGS
from ptreg.records.measured import FUSED_OPS
from ptreg.records.run_results import STEP_OPS, StepSample


class Reference(ReferenceKernels):
    """The three kernels and every op, each op NumPy's own: declared bit for bit."""

    op_tolerances: ClassVar[dict[str, float]] = dict.fromkeys(STEP_OPS, 0.0)


for _op, _methods in OP_METHODS.items():
    for _method in _methods:
        setattr(Reference, _method, staticmethod(getattr(layers, _method)))


class RoughGelu(ReferenceKernels):
    """GELU through erf-free tanh of a slightly wrong constant: close, not the same."""

    op_tolerances: ClassVar[dict[str, float]] = {"gelu": 1e-6}

    @staticmethod
    def gelu_forward(x: np.ndarray) -> np.ndarray:
        return layers.gelu_forward(x) * np.float32(1.001)

    @staticmethod
    def gelu_backward(dout: np.ndarray, x: np.ndarray) -> np.ndarray:
        return layers.gelu_backward(dout, x)


class LooseGelu(RoughGelu):
    op_tolerances: ClassVar[dict[str, float]] = {"gelu": 0.01}


class WritesInput(ReferenceKernels):
    op_tolerances: ClassVar[dict[str, float]] = {"residual": 0.0}

    @staticmethod
    def residual_add(x: np.ndarray, branch: np.ndarray) -> np.ndarray:
        x += branch  # in place: the caller's activation is lost
        return x


class HalfAnOp(ReferenceKernels):
    op_tolerances: ClassVar[dict[str, float]] = {"layernorm": 0.0}

    @staticmethod
    def layernorm_forward(x: Any, w: Any, b: Any) -> Any:
        return layers.layernorm_forward(x, w, b)


class Undeclared(ReferenceKernels):
    residual_add = staticmethod(layers.residual_add)


class Raises(ReferenceKernels):
    op_tolerances: ClassVar[dict[str, float]] = {"residual": 0.0}

    @staticmethod
    def residual_add(x: Any, branch: Any) -> Any:
        raise RuntimeError("no such kernel today")


def test_a_backend_of_kernels_alone_provides_no_op() -> None:
    assert provided_ops(ReferenceKernels()) == ()
    assert op_tolerances(ReferenceKernels()) == {}
    assert signature_problem("mine:Kernels", ReferenceKernels, bound=False) is None


def test_an_op_is_provided_whole_and_declared() -> None:
    assert provided_ops(Reference) == STEP_OPS
    assert signature_problem("mine:Reference", Reference, bound=False) is None
    half = signature_problem("mine:HalfAnOp", HalfAnOp, bound=False)
    assert half is not None and "layernorm_forward but not layernorm_backward" in half
    undeclared = signature_problem("mine:Undeclared", Undeclared, bound=False)
    assert undeclared is not None and "residual without a tolerance" in undeclared


def test_parity_of_ops_passes_the_reference_bit_for_bit() -> None:
    checks = check_ops(Reference(), ["tiny", "small"])
    assert {c.op for c in checks} == set(STEP_OPS)
    assert {c.shape for c in checks} == {"tiny", "small", "odd"}
    assert all(c.passed and c.mode == "bit-identical" for c in checks), [c.detail for c in checks if not c.passed]


def test_parity_of_ops_holds_each_to_its_declared_tolerance() -> None:
    rough = check_ops(RoughGelu(), ["tiny"])
    assert not any(c.passed for c in rough)
    assert "above 1e-06" in rough[0].detail and rough[0].max_relative_error is not None
    loose = check_ops(LooseGelu(), ["tiny"])
    assert all(c.passed and c.mode == "tolerance" for c in loose)


def test_parity_of_ops_catches_a_written_input_and_a_raise() -> None:
    written = check_ops(WritesInput(), ["tiny"])
    assert not written[0].passed and "modified its input x" in written[0].detail
    raised = check_ops(Raises(), ["tiny"])
    assert not raised[0].passed and "raised RuntimeError: no such kernel today" in raised[0].detail


def test_a_step_through_the_backends_ops_is_the_reference_step_when_they_are_its_bits() -> None:
    """StepOps routes every op to the backend; ops that are NumPy's give the same losses, bit
    for bit, as a backend with kernels alone (which runs the reference ops)."""
    mine, plain = Trainer(CONFIGS["tiny"], Reference()), Trainer(CONFIGS["tiny"], ReferenceKernels())
    assert mine.model.ops.provided == STEP_OPS and plain.model.ops.provided == ()
    assert [mine.step() for _ in range(3)] == [plain.step() for _ in range(3)]
    for name, value in mine.model.params.items():
        assert np.array_equal(value, plain.model.params[name]), name


class Unfused(ReferenceKernels):
    """Every op but the fused ones: a backend written before them, each op NumPy's own."""

    op_tolerances: ClassVar[dict[str, float]] = {op: 0.0 for op in STEP_OPS if op not in FUSED_OPS}


for _op, _methods in OP_METHODS.items():
    if _op not in FUSED_OPS:
        for _method in _methods:
            setattr(Unfused, _method, staticmethod(getattr(layers, _method)))


def timed_samples(backend: Any, steps: int = 3) -> list[StepSample]:
    timed = TimedStep(backend)
    trainer = Trainer(CONFIGS["tiny"], timed)
    samples = []
    for step in range(steps):
        timed.reset()
        before = time.perf_counter()
        loss = trainer.step()
        seconds = time.perf_counter() - before
        samples.append(
            StepSample(
                repeat=0,
                step=step,
                seconds=seconds,
                kernel_seconds=dict(timed.seconds),
                op_seconds=dict(timed.op_seconds),
                loss=loss,
            )
        )
    return samples


@pytest.mark.parametrize("backend", [ReferenceKernels, Unfused])
def test_the_step_times_every_op_and_the_attribution_adds_up(backend: type) -> None:
    """A backend without the fused ops (kernels alone, or every op written before them): the step
    runs the separate ops, each timed, and never a fused one."""
    samples = timed_samples(backend())
    assert all(samples[-1].op_seconds[op] > 0 for op in STEP_OPS if op not in FUSED_OPS)  # type: ignore[index]
    assert all(samples[-1].op_seconds[op] == 0 for op in FUSED_OPS)  # type: ignore[index]
    found = attribution(samples, step_ms=1.0)
    assert found.ops is not None and set(found.ops) == set(STEP_OPS)
    shares = [found.forward.share, found.backward_da.share, found.backward_db.share, found.other.share]
    assert sum(shares) + sum(s.share for s in found.ops.values()) == pytest.approx(1.0)
    assert found.bounding_part in (*STEP_OPS, "forward", "backward_da", "backward_db")


def test_a_backend_that_provides_a_fused_op_has_it_called_and_timed_as_its_own_part() -> None:
    samples = timed_samples(Reference())
    times = samples[-1].op_seconds or {}
    # every GELU of the step is the fc layer's, which bias_gelu takes with its bias
    assert times["gelu"] == 0 and all(times[op] > 0 for op in STEP_OPS if op != "gelu")
    found = attribution(samples, step_ms=1.0)
    assert found.ops is not None and found.ops["residual_layernorm"].share > 0 and found.ops["bias_gelu"].share > 0


def test_a_backend_without_the_fused_ops_runs_the_step_it_always_did() -> None:
    """Bit for bit the reference step, the fused op never called (its methods are not even on
    the timed proxy, so the step cannot reach it)."""
    older, plain = Trainer(CONFIGS["tiny"], Unfused()), Trainer(CONFIGS["tiny"], ReferenceKernels())
    assert set(older.model.ops.provided) == set(STEP_OPS) - set(FUSED_OPS)
    assert [older.step() for _ in range(2)] == [plain.step() for _ in range(2)]
    for name, value in older.model.params.items():
        assert np.array_equal(value, plain.model.params[name]), name
    timed = TimedStep(Unfused())  # type: ignore[arg-type]
    assert not hasattr(timed, "residual_layernorm_forward") and "residual_layernorm" not in timed.provided


def test_an_attribution_without_op_times_keeps_every_op_in_other() -> None:
    sample = StepSample(repeat=0, step=0, seconds=1.0, kernel_seconds={"forward": 0.5}, loss=1.0)
    found = attribution([sample], step_ms=1000.0)
    assert found.ops is None and found.bounding_part is None
    assert found.other.share == pytest.approx(0.5)


def test_step_ops_without_ops_falls_back_to_numpy() -> None:
    step = StepOps(ReferenceKernels())
    assert step.layernorm_forward is layers.layernorm_forward  # type: ignore[attr-defined]


def test_a_plugin_that_provides_ops_is_checked_timed_and_attributed_op_by_op(cli: Any) -> None:
    """Through a real worker: the plugin's ops pass parity (one of them within a tolerance, one
    bit for bit), each op has its share in the results, the table marks the plugin's own ops;
    a plugin whose op is off is refused before timing, naming the op."""
    result = cli(
        "bench", "-b", "example-own-ops", "-b", "numpy-blas", "-b", "example-wrong-op",
        "-c", "tiny", "--repeats", "2", "--timed-steps", "1", "--warmup-steps", "0", "--json",
    )  # fmt: skip
    assert result.code == 1, result.err  # one backend failed its parity
    data = result.json()
    parity = {p["backend"]: p for p in data["parity"]}
    own = parity["example-own-ops"]
    assert own["passed"] and {c["op"] for c in own["op_checks"]} == {"layernorm", "residual"}
    modes = {(c["op"], c["mode"]) for c in own["op_checks"]}
    assert modes == {("layernorm", "tolerance"), ("residual", "bit-identical")}
    assert parity["numpy-blas"]["op_checks"] is None  # it provides none: nothing to check
    wrong = parity["example-wrong-op"]
    assert not wrong["passed"] and "gelu at tiny" in wrong["summary"]
    cells = {c["backend"]: c for c in data["cells"]}
    assert cells["example-wrong-op"]["status"] == "parity-failed"
    ops = cells["example-own-ops"]["attribution"]["ops"]
    assert set(ops) == set(STEP_OPS) and all(0 <= ops[op]["share"] <= 1 for op in ops)
    table = cli(
        "bench", "-b", "example-own-ops", "-b", "numpy-blas", "-c", "tiny", "--repeats", "2", "--timed-steps", "1"
    )
    assert "Per-op attribution at tiny" in table.out
    layernorm_row = next(line for line in table.out.splitlines() if line.startswith("layernorm"))
    assert "*" in layernorm_row  # example-own-ops's own op; numpy-blas's is NumPy's
