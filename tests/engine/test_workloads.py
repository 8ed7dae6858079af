"""Workloads as objects: one per name the evaluator format allows, each with its own report, and
ratios taken over the backends that hold the roles, never over names written in the engine."""

from __future__ import annotations

from typing import Any

import pytest

from ptreg.engine.stats import summarize
from ptreg.engine.workloads import WORKLOADS, workload_named
from ptreg.engine.workloads.kernels import KernelsWorkload
from ptreg.engine.workloads.training import TrainingWorkload
from ptreg.records.evaluator import WORKLOAD_METRICS, EvaluatorSpec
from ptreg.records.run import RESULTS_VERSION, Cell, KernelTiming, Roles, RunResults, new_results
from ptreg.views.run_report import evidence_line, tables


def spec(workload: str, backends: list[str], baseline: str) -> EvaluatorSpec:
    return EvaluatorSpec.model_validate(
        {
            "name": "w",
            "workload": workload,
            "metric": WORKLOAD_METRICS[workload],
            "configs": ["tiny"],
            "backends": backends,
            "baseline": baseline,
            "warmup_steps": 0,
            "timed_steps": 1,
            "repeats": 1,
            "seed": 0,
            "threads": 1,
            "tolerance": {"rtol": 1e-4, "atol": 1e-6},
            "max_relative_spread": 1.0,
        }
    )


def results(s: EvaluatorSpec, cells: list[Cell], roles: Roles | None) -> RunResults:
    fields: dict[str, Any] = {
        "spec": s,
        "roles": roles or Roles(reference=None, peer=None),
        "parity": [],
        "cells": cells,
        "status": "complete",
        "reason": None,
        "command": ["test"],
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:01:00Z",
        "evaluator_version": 1,
    }
    made = new_results(**fields)
    if roles is None:  # a file written before roles were recorded
        return RunResults.model_validate({**made.model_dump(), "results_version": 1, "roles": None})
    return made


def test_every_workload_the_format_names_has_one_object_and_no_other() -> None:
    assert set(WORKLOADS) == set(WORKLOAD_METRICS)
    for name, workload in WORKLOADS.items():
        assert workload_named(name) is workload and workload.name == name and workload.unit


def test_training_ratios_follow_the_declared_reference() -> None:
    s = spec("tinygpt-train", ["slow-one", "fast-one"], "fast-one")
    cells = [
        Cell(backend="slow-one", config="tiny", status="measured", ms_per_step=summarize([10.0])),
        Cell(backend="fast-one", config="tiny", status="measured", ms_per_step=summarize([2.0])),
    ]
    TrainingWorkload().compare(s, cells, Roles(reference="slow-one", peer=None))
    assert cells[1].vs_naive == pytest.approx(5.0) and cells[0].vs_baseline == pytest.approx(0.2)
    shown = results(s, cells, Roles(reference="slow-one", peer=None))
    step = tables(shown)[1]
    assert "vs slow-one" in step.headers and "vs fast-one" in step.headers
    line = evidence_line(shown)
    assert line is not None and "about 5.00x over slow-one" in line and "naive" not in line


def test_without_a_reference_no_speedup_is_invented() -> None:
    s = spec("tinygpt-train", ["a", "b"], "b")
    cells = [
        Cell(backend="a", config="tiny", status="measured", ms_per_step=summarize([10.0])),
        Cell(backend="b", config="tiny", status="measured", ms_per_step=summarize([2.0])),
    ]
    TrainingWorkload().compare(s, cells, Roles(reference=None, peer=None))
    assert cells[0].vs_naive is None and cells[1].vs_naive is None
    line = evidence_line(results(s, cells, Roles(reference=None, peer=None)))
    assert line is not None and " over " not in line


def timing(gflops: float) -> KernelTiming:
    seconds = summarize([2 * 1 * 1 * 1 / gflops / 1e9])
    return KernelTiming(
        layer="qkv",
        kernel="forward",
        shape=[1, 1, 1],
        per_step=1,
        seconds=seconds,
        gflops=summarize([gflops]),
        vs_naive=None,
        vs_peer=None,
        vs_baseline=None,
    )


def test_kernel_ratios_and_columns_follow_the_roles() -> None:
    s = spec("kernels", ["ref", "mine", "lib"], "mine")
    cells = [
        Cell(backend=b, config="tiny", status="measured", kernels=[timing(g)], step_gflops=g)
        for b, g in (("ref", 1.0), ("mine", 4.0), ("lib", 8.0))
    ]
    roles = Roles(reference="ref", peer="lib")
    KernelsWorkload().compare(s, cells, roles)
    mine = cells[1]
    assert mine.kernels is not None
    assert mine.kernels[0].vs_naive == pytest.approx(4.0) and mine.kernels[0].vs_peer == pytest.approx(0.5)
    assert mine.vs_naive == pytest.approx(4.0) and mine.vs_baseline == pytest.approx(1.0)
    per_cell, per_kernel = tables(results(s, cells, roles))[1:]
    assert per_kernel.headers[-2:] == ["vs ref", "vs lib"]
    assert "vs ref" in per_cell.headers and "vs mine" in per_cell.headers


def test_results_written_before_roles_were_recorded_read_as_naive_and_numpy_blas() -> None:
    s = spec("kernels", ["naive", "numpy-blas"], "numpy-blas")
    old = results(s, [], None)
    assert old.results_version == 1 and old.ratio_roles == Roles(reference="naive", peer="numpy-blas")
    assert tables(old)[2].headers[-2:] == ["vs naive", "vs numpy-blas"]
    assert RESULTS_VERSION == 2


def test_roles_are_recorded_from_version_2_on_and_only_there() -> None:
    s = spec("kernels", ["naive"], "naive")
    made = results(s, [], Roles(reference="naive", peer=None))
    with pytest.raises(ValueError, match="roles"):
        RunResults.model_validate({**made.model_dump(), "roles": None})
    with pytest.raises(ValueError, match="roles"):
        RunResults.model_validate({**made.model_dump(), "results_version": 1})
