"""Fused ops in the contract, apart from any backend's kernels: the reference is exactly the
composition of the ops it stands for, the records and conditions name the fused part, and the
step's reports show it by name (and a backend that runs the ops apart as not calling it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers import step_cell, step_results
from ptreg.engine.backends import FUSED, OP_METHODS
from ptreg.engine.op_parity import ODD, op_inputs
from ptreg.engine.workloads import layers
from ptreg.engine.workloads.training import TrainingWorkload, attribution
from ptreg.records.condition_grammar import parse
from ptreg.records.configs import CONFIGS
from ptreg.records.decision import decide
from ptreg.records.measured import FUSED_OPS
from ptreg.records.run_results import KERNELS, STEP_OPS, RunResults, StepSample
from ptreg.records.step_work import config_floors, floors
from ptreg.site.charts import Stack, share_chart


def test_the_fused_ops_are_ops_of_the_contract() -> None:
    assert FUSED == FUSED_OPS and set(FUSED_OPS) <= set(STEP_OPS) <= set(OP_METHODS)


def test_the_fused_reference_is_the_two_reference_ops_bit_for_bit() -> None:
    for config in (ODD, CONFIGS["small"]):
        i = op_inputs("residual_layernorm", config, np.random.default_rng(2))
        stream, out, cache = layers.residual_layernorm_forward(i["x"], i["branch"], i["w"], i["b"])
        apart = layers.residual_add(i["x"], i["branch"])
        apart_out, apart_cache = layers.layernorm_forward(apart, i["w"], i["b"])
        assert stream.tobytes() == apart.tobytes() and out.tobytes() == apart_out.tobytes()
        dx, dw, db = layers.residual_layernorm_backward(i["dout"], cache, i["dstream"])
        dbranch, apart_dw, apart_db = layers.layernorm_backward(i["dout"], apart_cache)
        assert dx.tobytes() == layers.residual_add(i["dstream"], dbranch).tobytes()
        assert dw.tobytes() == apart_dw.tobytes() and db.tobytes() == apart_db.tobytes()


def test_the_fused_bias_gelu_is_the_bias_then_gelu_bit_for_bit() -> None:
    for config in (ODD, CONFIGS["small"]):
        i = op_inputs("bias_gelu", config, np.random.default_rng(3))
        out, apart = i["out"].copy(), i["out"].copy()
        y = layers.bias_gelu_forward(out, i["b"])
        layers.bias_forward(apart, i["b"])
        assert out.tobytes() == apart.tobytes() and y.tobytes() == layers.gelu_forward(apart).tobytes()
        db, apart_db = i["db"].copy(), i["db"].copy()
        dx = layers.bias_gelu_backward(i["dout"], out, db)
        apart_dx = layers.gelu_backward(i["dout"], apart)
        layers.bias_backward(apart_dx, apart_db)
        assert dx.tobytes() == apart_dx.tobytes() and db.tobytes() == apart_db.tobytes()


def test_a_fused_ops_floor_is_its_own_and_the_ops_it_stands_for_lose_its_calls() -> None:
    """Fused, the step's layernorm and residual parts keep only the calls no fusion takes, and
    the step moves fewer bytes: its floor is lower than the step of separate ops."""
    xl = CONFIGS["xl"]
    fused, apart = floors(xl, 200.0, 20.0), floors(xl, 200.0, 20.0, fused=())
    assert fused["residual_layernorm"].seconds > 0 and apart["residual_layernorm"].seconds == 0
    assert fused["layernorm"].seconds < apart["layernorm"].seconds
    assert fused["residual"].seconds < apart["residual"].seconds
    assert sum(f.seconds for f in fused.values()) < sum(f.seconds for f in apart.values())
    # the fc layer's bias leaves the bias part; GELU, every call of it fused, has no work and so
    # no floor recorded in a run
    assert fused["bias_gelu"].seconds > 0 and fused["bias"].seconds < apart["bias"].seconds
    assert fused["gelu"].seconds == 0 < apart["gelu"].seconds
    recorded = config_floors(xl, 1, 200.0, 20.0, "0" * 16, "2026-12-07T00:00:00Z")
    assert recorded.floor_ms("gelu") is None and recorded.floor_ms("bias_gelu") is not None


# --------------------------------------------------------------------------- records and reports


def samples(fused_seconds: float) -> list[dict[str, Any]]:
    """Four repeats of two steps: 10 ms of each kernel, 1 ms of each op, ``fused_seconds`` in the
    fused op (0: the backend runs the ops apart), the rest of a 60 ms step left over."""
    found = []
    for repeat in range(4):
        for step in range(2):
            ops = dict.fromkeys(STEP_OPS, 0.001)
            ops.update(dict.fromkeys(FUSED_OPS, fused_seconds))
            if fused_seconds:  # bias_gelu takes every GELU of the step
                ops["gelu"] = 0.0
            found.append(
                StepSample(
                    repeat=repeat,
                    step=step,
                    seconds=0.06 + 0.001 * repeat,
                    kernel_seconds=dict.fromkeys(KERNELS, 0.01),
                    op_seconds=ops,  # type: ignore[arg-type]
                    loss=4.0,
                ).model_dump(mode="json")
            )
    return found


def a_run() -> RunResults:
    cells = []
    for backend, fused_seconds in (("numba", 0.002), ("numpy-blas", 0.0)):
        cell = step_cell(backend, "tiny", ms=60.0, shares=(0.17, 0.17, 0.17))
        cell["step_samples"] = samples(fused_seconds)
        found = attribution([StepSample.model_validate(s) for s in cell["step_samples"]], 60.0)
        cell["attribution"] = found.model_dump(mode="json")
        cells.append(cell)
    return RunResults.model_validate(step_results("fusion", "20261207T000000Z", cells, version=9))


def test_the_op_table_lists_the_fused_part_by_name_and_the_backend_without_it_as_not_calling_it() -> None:
    run = a_run()
    (table,) = [t for t in TrainingWorkload().tables(run) if t.title.startswith("Per-op attribution at tiny")]
    row = next(r for r in table.rows if r[0] == "residual_layernorm")
    numba, numpy_blas, ratio = row[1:]
    assert numba.startswith("2.0 (") and numpy_blas == "not called"
    assert ratio == "unknown"  # no time of the baseline's to compare with
    assert next(r for r in table.rows if r[0] == "bias_gelu")[2] == "not called"
    assert next(r for r in table.rows if r[0] == "gelu")[1] == "not called"  # numba's bias_gelu took it whole
    layernorm = next(r for r in table.rows if r[0] == "layernorm")
    assert layernorm[-1] != "unknown"  # the parts both backends ran are still compared


def test_conditions_read_the_fused_part_and_a_part_never_called_is_not_at_its_floor() -> None:
    run = a_run()
    share = decide(parse("share(residual_layernorm, backend=numba, config=tiny) > 0.02"), run)
    assert share.truth is True
    tiny = CONFIGS["tiny"]
    with_floors = RunResults.model_validate(
        {
            **run.model_dump(mode="json"),
            "floors": {"tiny": config_floors(tiny, 1, 100.0, 10.0, "0" * 16, "2026-12-07T00:00:00Z").model_dump()},
        }
    )
    called = decide(parse("floor_ratio(residual_layernorm, backend=numba, config=tiny) > 1"), with_floors)
    assert called.truth is True
    never = decide(parse("floor_ratio(residual_layernorm, backend=numpy-blas, config=tiny) < 3"), with_floors)
    assert never.truth is None and "recorded no time for residual_layernorm" in never.summary()
    # GELU apart has time but, in the fused step the floors count, no work of its own
    gelu = decide(parse("floor_ratio(gelu, backend=numpy-blas, config=tiny) < 3"), with_floors)
    assert gelu.truth is None and "gelu has no floor: the fused ops take all its work" in gelu.summary()


def test_the_sites_share_chart_draws_the_fused_part_by_name() -> None:
    stack = Stack("xl / numba", 10.0, {"forward": 0.5, "residual_layernorm": 0.1, "other": 0.4}, {})
    chart = share_chart("ops", "shares", [stack])
    assert any("residual_layernorm" in str(header) for header in chart.headers)
    assert "xl / numba: residual_layernorm 10.0%" in chart.svg


def test_the_op_table_leaves_out_a_fused_part_no_backend_called() -> None:
    """numpy-blas against naive: neither fuses, so no row of a fused op, as in a run before them."""
    cells = []
    for backend in ("numpy-blas", "naive"):
        cell = step_cell(backend, "tiny", ms=60.0, shares=(0.17, 0.17, 0.17))
        cell["step_samples"] = samples(0.0)
        found = attribution([StepSample.model_validate(s) for s in cell["step_samples"]], 60.0)
        cell["attribution"] = found.model_dump(mode="json")
        cells.append(cell)
    run = RunResults.model_validate(step_results("apart", "20261207T000000Z", cells, version=9))
    (table,) = [t for t in TrainingWorkload().tables(run) if t.title.startswith("Per-op attribution at tiny")]
    names = [r[0] for r in table.rows]
    assert not set(FUSED_OPS) & set(names) and {"layernorm", "gelu", "bias", "residual"} <= set(names)
