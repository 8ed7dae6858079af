"""Workloads as objects: one per name the evaluator format allows, each with its own report, and
ratios taken over the backends that hold the roles, never over names written in the engine."""

from __future__ import annotations

from typing import Any

import pytest

from ptreg.engine.backends import Backend
from ptreg.engine.executor import FAILURE_MAX, TaskOutcome, keep
from ptreg.engine.plugins import PluginEntry
from ptreg.engine.protocol import CellTask, Failed
from ptreg.engine.workloads import discovery, workload_named
from ptreg.engine.workloads.arms import ArmsWorkload
from ptreg.engine.workloads.base import CellRun
from ptreg.engine.workloads.discovery import describe_all
from ptreg.engine.workloads.kernels import KernelsWorkload
from ptreg.engine.workloads.training import TrainingWorkload
from ptreg.records.configs import CONFIGS, linear_shapes
from ptreg.records.evaluator import ALL_CONFIG, AnySpec, EvaluatorSpec, parse_spec
from ptreg.records.run_results import (
    KERNELS,
    RESULTS_VERSION,
    Cell,
    KernelSample,
    Measurement,
    MetricSample,
    Provenance,
    Roles,
    RunResults,
    StepSample,
    new_results,
)
from ptreg.views.run_report import evidence_line, tables


def spec(workload: str, backends: list[str], baseline: str) -> EvaluatorSpec:
    return EvaluatorSpec.model_validate(
        {
            "name": "w",
            "workload": workload,
            "metric": {"kernels": "gflops", "tinygpt-train": "ms-per-step"}[workload],
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
    made = new_results(
        s,
        Measurement([], cells, roles or Roles(reference=None, peer=None), [], "complete", None),
        Provenance(["test"], "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", 1),
    )
    if roles is None:  # a file written before roles were recorded
        return RunResults.model_validate({**made.model_dump(), "results_version": 1, "roles": None, "rounds": None})
    return made


def step_cell(s: EvaluatorSpec, backend: str, seconds_by_round: list[float], config: str = "tiny") -> Cell:
    """A cell summarised by the training workload from one step per round."""
    cell = Cell(backend=backend, config=config, status="measured")
    samples: list[Any] = [
        StepSample(repeat=r, step=0, seconds=v, kernel_seconds={}, loss=1.0) for r, v in enumerate(seconds_by_round)
    ]
    TrainingWorkload().summarize(s, cell, samples)
    return cell


def kernel_cell(s: EvaluatorSpec, backend: str, gflops_by_round: list[float]) -> Cell:
    """A cell summarised by the kernels workload: every layer and kernel at one rate per round."""
    cell = Cell(backend=backend, config="tiny", status="measured")
    samples: list[Any] = [
        KernelSample(repeat=r, layer=layer.name, kernel=k, calls=1, seconds_per_call=layer.flops / (g * 1e9))
        for r, g in enumerate(gflops_by_round)
        for layer in linear_shapes(CONFIGS["tiny"])
        for k in KERNELS
    ]
    KernelsWorkload().summarize(s, cell, samples)
    return cell


def test_the_built_in_workloads_are_plugins_found_like_any_other() -> None:
    found = {w.name: w for w in describe_all()}
    assert {"command", "kernels", "tinygpt-train"} <= set(found)
    assert found["kernels"].kind == found["tinygpt-train"].kind == "backends" and found["command"].kind == "arms"
    for name in ("command", "kernels", "tinygpt-train"):
        assert found[name].available, found[name].reason
        workload = workload_named(name)
        assert workload_named(name) is workload and workload.name == name and workload.unit


def test_training_ratios_follow_the_declared_reference() -> None:
    s = spec("tinygpt-train", ["slow-one", "fast-one"], "fast-one")
    cells = [step_cell(s, "slow-one", [0.010]), step_cell(s, "fast-one", [0.002])]
    TrainingWorkload().compare(s, cells, Roles(reference="slow-one", peer=None))
    assert cells[1].vs_naive == pytest.approx(5.0) and cells[0].vs_baseline == pytest.approx(0.2)
    shown = results(s, cells, Roles(reference="slow-one", peer=None))
    step = tables(shown)[1]
    assert "vs slow-one" in step.headers and "vs fast-one" in step.headers
    line = evidence_line(shown)
    assert line is not None and "about 5.00x over slow-one" in line and "naive" not in line


def test_without_a_reference_no_speedup_is_invented() -> None:
    s = spec("tinygpt-train", ["a", "b"], "b")
    cells = [step_cell(s, "a", [0.010]), step_cell(s, "b", [0.002])]
    TrainingWorkload().compare(s, cells, Roles(reference=None, peer=None))
    assert cells[0].vs_naive is None and cells[1].vs_naive is None
    line = evidence_line(results(s, cells, Roles(reference=None, peer=None)))
    assert line is not None and " over " not in line


def test_kernel_ratios_and_columns_follow_the_roles() -> None:
    s = spec("kernels", ["ref", "mine", "lib"], "mine")
    cells = [kernel_cell(s, b, [g]) for b, g in (("ref", 1.0), ("mine", 4.0), ("lib", 8.0))]
    roles = Roles(reference="ref", peer="lib")
    KernelsWorkload().compare(s, cells, roles)
    mine = cells[1]
    assert mine.kernels is not None
    assert mine.kernels[0].vs_naive == pytest.approx(4.0) and mine.kernels[0].vs_peer == pytest.approx(0.5)
    assert mine.vs_naive == pytest.approx(4.0) and mine.vs_baseline == pytest.approx(1.0)
    per_cell, per_kernel = tables(results(s, cells, roles))[1:]
    # the kernels against the run's baseline, as the step is; and the peer, which was measured
    assert per_kernel.headers[-3:] == ["vs ref", "vs mine", "vs lib"]
    assert "vs ref" in per_cell.headers and "vs mine" in per_cell.headers


def test_a_peer_the_run_did_not_measure_gets_no_column_of_unknowns() -> None:
    s = spec("kernels", ["mine", "ref"], "mine")  # `ptreg bench -b mine -b ref`: the peer not among them
    cells = [kernel_cell(s, b, [g]) for b, g in (("mine", 4.0), ("ref", 1.0))]
    roles = Roles(reference="ref", peer="lib")
    KernelsWorkload().compare(s, cells, roles)
    per_kernel = tables(results(s, cells, roles))[2]
    assert per_kernel.headers[-2:] == ["vs ref", "vs mine"] and "vs lib" not in per_kernel.headers
    assert all(row[-1] != "unknown" for row in per_kernel.rows if row[4] == "ref")


def test_results_written_before_roles_were_recorded_read_as_naive_and_numpy_blas() -> None:
    s = spec("kernels", ["naive", "numpy-blas"], "numpy-blas")
    old = results(s, [], None)
    assert old.results_version == 1 and old.ratio_roles == Roles(reference="naive", peer="numpy-blas")
    assert tables(old)[2].headers[-2:] == ["vs naive", "vs numpy-blas"]
    assert RESULTS_VERSION == 9


def test_roles_are_recorded_from_version_2_on_and_only_there() -> None:
    s = spec("kernels", ["naive"], "naive")
    made = results(s, [], Roles(reference="naive", peer=None))
    with pytest.raises(ValueError, match="roles"):
        RunResults.model_validate({**made.model_dump(), "roles": None})
    with pytest.raises(ValueError, match="roles"):
        RunResults.model_validate({**made.model_dump(), "results_version": 1})


def test_ratios_pair_repeats_by_round_and_carry_an_interval() -> None:
    """A drift that slows both backends alike in one round leaves their ratio alone."""
    s = spec("tinygpt-train", ["ref", "fast"], "ref")
    drift = [1.0, 1.3, 0.9, 1.6, 1.1]
    cells = [step_cell(s, "ref", [0.010 * d for d in drift]), step_cell(s, "fast", [0.005 * d for d in drift])]
    TrainingWorkload().compare(s, cells, Roles(reference="ref", peer=None))
    found = cells[1].vs_naive_ratio
    assert found is not None and found.n == 5 and found.median == pytest.approx(2.0)
    assert found.ci is not None and found.ci.low == pytest.approx(2.0) and found.ci.high == pytest.approx(2.0)
    # unpaired, the same drift would have made the ratio of medians uncertain
    assert cells[1].ms_per_step is not None and cells[1].ms_per_step.relative_spread > 0.5


def test_kernel_ratios_pair_rounds_too() -> None:
    s = spec("kernels", ["ref", "mine"], "ref")
    cells = [kernel_cell(s, "ref", [1.0, 0.5, 1.0]), kernel_cell(s, "mine", [3.0, 1.5, 3.0])]
    KernelsWorkload().compare(s, cells, Roles(reference="ref", peer=None))
    mine = cells[1]
    assert mine.vs_naive_ratio is not None and mine.vs_naive_ratio.n == 3
    assert mine.vs_naive == pytest.approx(3.0)
    assert mine.kernels is not None and all(t.vs_naive == pytest.approx(3.0) for t in mine.kernels)


def test_a_ratio_is_shown_with_its_interval_and_never_bare_when_it_holds_1() -> None:
    from ptreg.engine.workloads.base import ratio_text
    from ptreg.records.run_results import Interval, Ratio

    def r(median: float, low: float, high: float) -> Ratio:
        return Ratio(median=median, n=5, ci=Interval(low=low, high=high, level=0.95, method="t"))

    assert ratio_text(1.02, r(1.02, 0.97, 1.08)) == "no difference resolved (0.97-1.08x)"
    assert ratio_text(1.53, r(1.53, 1.49, 1.58)) == "1.53x (1.49-1.58x)"
    assert ratio_text(1.0, r(1.0, 1.0, 1.0)) == "1.00x"  # a cell against itself
    assert ratio_text(2.0, Ratio(median=2.0, n=1, ci=None)) == "2.00x"  # one round: no interval
    assert ratio_text(None, None) == "unknown"
    s = spec("tinygpt-train", ["ref", "same"], "ref")
    cells = [step_cell(s, "ref", [0.010, 0.011, 0.009]), step_cell(s, "same", [0.0101, 0.0108, 0.0092])]
    TrainingWorkload().compare(s, cells, Roles(reference="ref", peer=None))
    [row] = [row for row in tables(results(s, cells, Roles(reference="ref", peer=None)))[1].rows if row[1] == "same"]
    assert any(cell.startswith("no difference resolved") for cell in row)


# ---- a plugin's own code is hostile: metadata that raises, a check that raises, a huge message


class _Raises:
    def __get__(self, obj: object, owner: type) -> str:
        raise RuntimeError("metadata \x1b]0;t\x07" + "x" * 100_000)


class _MetadataRaises(ArmsWorkload):
    name = "metadata-raises"
    description = _Raises()  # type: ignore[assignment]

    def check_settings(self, spec: AnySpec) -> str | None:
        return None

    def prepare(self, task: CellTask, backend: Backend | None) -> CellRun:
        raise NotImplementedError


class _CheckRaises(_MetadataRaises):
    name = "check-raises"
    description = "its check raises"

    def check_settings(self, spec: AnySpec) -> str | None:
        raise KeyError("boom")


def _entry(name: str, attribute: str) -> PluginEntry:
    return PluginEntry(name, f"{__name__}:{attribute}", discovery.ENTRY_POINT_GROUP, None, None)


def test_a_plugin_whose_metadata_or_check_raises_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    found = {
        "metadata-raises": _entry("metadata-raises", "_MetadataRaises"),
        "check-raises": _entry("check-raises", "_CheckRaises"),
    }
    monkeypatch.setattr(discovery, "entries", lambda: found)
    discovery.workload_named.cache_clear()
    try:
        info = discovery.describe(found["metadata-raises"])
        assert not info.available and info.reason is not None
        assert info.reason.startswith(f"{__name__}:_MetadataRaises: reading its metadata raised RuntimeError: ")
        assert len(info.reason) < 300 and "\x1b" not in info.reason
        spec = parse_spec(
            {
                "name": "c",
                "workload": "check-raises",
                "arms": {"a": {}, "b": {}},
                "baseline": "a",
                "repeats": 1,
                "seed": 0,
                "timeout_seconds": 5,
                "metrics": {"score": {"better": "higher", "unit": "u"}},
            },
            "spec.json",
        )
        assert discovery.spec_problem(spec) == "workload 'check-raises''s check_settings raised KeyError: \"'boom'\""
    finally:
        discovery.workload_named.cache_clear()


def test_what_a_worker_or_a_sample_says_went_wrong_is_one_bounded_line() -> None:
    """A plugin's exception or a sample's problem of 100,000 characters once made the run's
    evidence too long for its record: a traceback after the run folder was written."""
    outcome = TaskOutcome()
    keep(outcome, Failed(message="RuntimeError: " + "x" * 100_000 + "\nsecond line"))
    assert outcome.failure is not None and len(outcome.failure) <= FAILURE_MAX and "\n" not in outcome.failure
    spec = parse_spec(
        {
            "name": "c",
            "workload": "command",
            "command": ["true"],
            "arms": {"a": {}, "b": {}},
            "baseline": "a",
            "repeats": 1,
            "seed": 0,
            "timeout_seconds": 5,
            "metrics": {"score": {"better": "higher", "unit": "u"}},
        },
        "spec.json",
    )
    cell = Cell(backend="a", config=ALL_CONFIG, status="measured")
    workload = workload_named("command")
    workload.summarize(spec, cell, [MetricSample(repeat=0, seed=0, values={}, problem="p" * 100_000 + "\n\x1b")])
    assert cell.status == "failed" and cell.reason is not None
    assert cell.reason.startswith("repeat 0 (seed 0): ppp") and len(cell.reason) < 400 and "\n" not in cell.reason


def test_a_run_of_backends_says_the_size_of_each_model_it_trained() -> None:
    from ptreg.views.run_report import model_line

    s = spec("tinygpt-train", ["naive", "numpy-blas"], "numpy-blas").model_copy(update={"configs": ["small", "xl"]})
    line = model_line(results(s, [], Roles(reference="naive", peer="numpy-blas")))
    assert line == (
        "Model: small 0.37M parameters, 1,024 tokens per step; xl 6.42M parameters, 1,024 tokens per step"
    ), line
