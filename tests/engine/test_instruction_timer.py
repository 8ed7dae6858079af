"""The instructions timer: an evaluator's ``"timer": "instructions"`` counts each repeat under
valgrind's callgrind (engine/callgrind.py).

The runs here need valgrind: skipped with a reason where it is missing, a failure instead when CI
or PTREG_REQUIRE_SHARED=1 is set (`.ci/run` installs it). A count is not a timing: that two runs
of unchanged code count the same to 0.1%, and that a backend doing 10% more calls counts about
10% more, are properties of counting and are asserted as such.
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from ptreg.engine.callgrind import InstructionClock, Stopwatch
from ptreg.engine.executor import Executor
from ptreg.engine.measurement import Measurement, measure
from ptreg.engine.workloads import workload_named
from ptreg.engine.workloads.base import BackendsWorkload, repeat_unit
from ptreg.errors import PtregError
from ptreg.records.counting import BlasPool, CountedCell, CountedUnder, CountedWorker, counted_the_same_way
from ptreg.records.evaluator import EvaluatorSpec, frozen_from_spec, identity, parse_spec
from ptreg.records.run_results import Provenance, new_results

BACKEND = "example-more-work"  # tests/plugin_backend: every Nth call done twice when asked


def _spec(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "counted",
        "workload": "kernels",
        "metric": "gflops",
        "configs": ["tiny"],
        "backends": [BACKEND],
        "baseline": BACKEND,
        "warmup_steps": 2,
        "timed_steps": 10,
        "repeats": 2,
        "seed": 0,
        "threads": 1,
        "tolerance": {"rtol": 1e-4, "atol": 1e-6},
        "max_relative_spread": 5.0,
        "timer": "instructions",
    }
    raw.update(changes)
    return raw


def _need_valgrind() -> None:
    if shutil.which("valgrind") is not None:
        return
    reason = "valgrind not found (Debian: apt-get install valgrind)"
    if os.environ.get("CI") or os.environ.get("PTREG_REQUIRE_SHARED") == "1":
        pytest.fail(f"the instruction-timer tests are required here (CI or PTREG_REQUIRE_SHARED=1), but {reason}")
    pytest.skip(reason)


def _counted(spec: EvaluatorSpec, repeat_every: str | None) -> tuple[Measurement, list[float]]:
    """One run of the spec, and its one cell's instructions per step, by round."""
    saved = os.environ.get("PTREG_EXAMPLE_REPEAT_EVERY")
    try:
        if repeat_every is None:
            os.environ.pop("PTREG_EXAMPLE_REPEAT_EVERY", None)
        else:
            os.environ["PTREG_EXAMPLE_REPEAT_EVERY"] = repeat_every
        found = measure(spec, Executor())
    finally:
        if saved is None:
            os.environ.pop("PTREG_EXAMPLE_REPEAT_EVERY", None)
        else:
            os.environ["PTREG_EXAMPLE_REPEAT_EVERY"] = saved
    assert found.status == "complete", found.reason
    workload = workload_named(spec.workload)
    assert isinstance(workload, BackendsWorkload)
    (cell,) = found.cells
    counts = workload.repeat_seconds(spec, cell)
    assert sorted(counts) == list(range(spec.most_repeats))
    return found, list(counts.values())


@pytest.fixture(scope="module")
def unchanged() -> list[tuple[Measurement, list[float]]]:
    """Two runs of the same code under the instructions timer."""
    _need_valgrind()
    spec = parse_spec(_spec(), "test")
    assert isinstance(spec, EvaluatorSpec)
    return [_counted(spec, None), _counted(spec, None)]


def test_two_runs_of_unchanged_code_count_the_same_to_a_tenth_of_a_percent(
    unchanged: list[tuple[Measurement, list[float]]],
) -> None:
    (first, a), (second, b) = unchanged
    assert abs(statistics.median(a) / statistics.median(b) - 1) < 0.001, (a, b)
    assert first.counted is not None and second.counted is not None
    assert counted_the_same_way(first.counted, second.counted) == []
    worker = first.counted.cells[0].worker
    assert worker is not None and worker.marker_instructions > 0
    # valgrind emulates no AVX-512, whatever the machine has
    assert worker.cpu_features is not None and not [f for f in worker.cpu_features if f.startswith("AVX512")]
    assert [p.num_threads for p in worker.blas if p.user_api == "blas"] == [1]


@pytest.fixture(scope="module")
def more_work(unchanged: list[tuple[Measurement, list[float]]]) -> list[float]:
    """The same spec with the backend doing one call in ten twice: 10% more work."""
    spec = parse_spec(_spec(), "test")
    assert isinstance(spec, EvaluatorSpec)
    return _counted(spec, "10")[1]  # 10 calls per layer and kernel: one more each, every repeat


def test_a_backend_doing_ten_percent_more_calls_counts_about_ten_percent_more(
    unchanged: list[tuple[Measurement, list[float]]], more_work: list[float]
) -> None:
    more = more_work
    (_, base), _ = unchanged
    ratio = statistics.median(more) / statistics.median(base)
    # a little under 1.1: the loop and the marks around the calls are not repeated
    assert 1.07 < ratio < 1.101, ratio


def test_a_counted_run_is_recorded_in_instructions(unchanged: list[tuple[Measurement, list[float]]]) -> None:
    (found, _), _ = unchanged
    spec = parse_spec(_spec(), "test")
    assert repeat_unit(spec) == "instructions"
    results = new_results(spec, found, Provenance(["test"], "2026-12-02T00:00:00Z", "2026-12-02T00:00:01Z", 1))
    assert results.counted is not None and results.counted.unit == "instructions"
    cell = results.cells[0]
    assert cell.instructions_per_step is not None and cell.attribution is None
    workload = workload_named("kernels")
    (table, _) = workload.tables(results)
    assert "instructions/step" in table.headers and "step GFLOP/s" not in table.headers
    assert "instructions per step's linear layers" in " ".join(workload.evidence(results))


# --------------------------------------------------------------------------- without valgrind


def test_a_timer_other_than_wall_or_instructions_is_refused_naming_the_field() -> None:
    with pytest.raises(PtregError) as caught:
        parse_spec(_spec(timer="cycles"), "spec.json")
    assert "\n" not in caught.value.message
    assert "timer" in caught.value.message and "cycles" in caught.value.message


def test_counting_needs_one_thread() -> None:
    with pytest.raises(PtregError, match="threads must be 1"):
        parse_spec(_spec(threads=2), "spec.json")


def test_a_spec_without_the_key_or_with_wall_hashes_as_before() -> None:
    """The key is new: every spec frozen before it existed keeps its hash, and saying the
    default aloud changes nothing."""
    raw = _spec()
    del raw["timer"]
    absent = frozen_from_spec(parse_spec(raw, "a"), 1)
    wall = frozen_from_spec(parse_spec({**raw, "timer": "wall"}, "b"), 1)
    counted = frozen_from_spec(parse_spec({**raw, "timer": "instructions"}, "c"), 1)
    assert absent.sha256 == wall.sha256 != counted.sha256
    # what a spec of these fields hashed to before the key existed: its own text, hashed
    assert absent.sha256 == identity(raw, 1)


class _FixedCountClock(InstructionClock):
    """Marks without valgrind: every region between two marks counts 7,000 instructions."""

    def mark(self) -> int:
        self.marks += 1
        return self.marks

    def since(self, first: int, last: int) -> int:
        return 7000


def test_calibrating_freezes_the_warm_worker_out_of_each_regions_collection(tmp_path: Path) -> None:
    """Once warm, the worker's objects are out of the collector's walk: the collection before
    each region (and any inside one) walks what was made since, not the whole worker."""
    warm = [[] for _ in range(1000)]  # containers the collector tracks, alive since before warm-up ended
    stopwatch = Stopwatch(_FixedCountClock(tmp_path))
    try:
        assert stopwatch.calibrate() == 7000 and stopwatch.marks_cost == 7000
        walked = {id(o) for o in gc.get_objects()}
        assert gc.get_freeze_count() >= len(warm)
        assert not [w for w in warm if id(w) in walked]
        made_later: list[list[int]] = [[]]
        assert id(made_later) in {id(o) for o in gc.get_objects()}
    finally:
        gc.unfreeze()  # this test's process is not a worker: its objects go back to the collector


def _counted_under(**changes: Any) -> CountedUnder:
    worker = CountedWorker(
        cpu_features=["AVX2", "FMA3"],
        blas=[
            BlasPool(user_api="blas", internal_api="openblas", version="0.3.31", architecture="Haswell", num_threads=1)
        ],
        marker_instructions=7000,
    )
    fields: dict[str, Any] = {
        "tool": "callgrind",
        "valgrind": "valgrind-3.19.0",
        "options": ["--tool=callgrind"],
        "hash_seed": "0",
        "environment": {"OPENBLAS_NUM_THREADS": "1"},
        "cells": [CountedCell(backend="numpy-blas", config="tiny", worker=worker)],
    }
    fields.update(changes)
    return CountedUnder(**fields)


def test_counts_are_compared_only_when_taken_the_same_way() -> None:
    same = _counted_under()
    assert counted_the_same_way(same, _counted_under()) == []
    assert counted_the_same_way(None, None) == []
    assert counted_the_same_way(same, None) == ["one run is timed in seconds, the other counted in instructions"]
    newer = counted_the_same_way(same, _counted_under(valgrind="valgrind-3.22.0"))
    assert newer == ["valgrind: valgrind-3.19.0 vs valgrind-3.22.0"]
    other_kernel = CountedWorker(
        cpu_features=["AVX2", "FMA3"],
        blas=[
            BlasPool(user_api="blas", internal_api="openblas", version="0.3.31", architecture="SkylakeX", num_threads=1)
        ],
        marker_instructions=7000,
    )
    moved = counted_the_same_way(
        same, _counted_under(cells=[CountedCell(backend="numpy-blas", config="tiny", worker=other_kernel)])
    )
    assert len(moved) == 1 and "numpy-blas/tiny: BLAS" in moved[0] and "SkylakeX" in moved[0]


def test_compare_reads_real_counts_as_no_difference_and_ten_percent_more_as_slower(
    unchanged: list[tuple[Measurement, list[float]]], more_work: list[float]
) -> None:
    """The counts of the runs above, judged by compare's own code: two runs of unchanged code
    are no difference, and the backend doing 10% more calls is slower."""
    from ptreg.views.cell_verdicts import HistoryRun, decide, judge_cell

    (_, a), (_, b) = unchanged
    more = more_work
    history = [HistoryRun("a", a, "2026-12-01T00:00:00Z", "2026-12-01T00:01:00Z")]
    same = judge_cell("tiny", BACKEND, history, b, 0.05, counted=True)
    slower = judge_cell("tiny", BACKEND, history, more, 0.05, counted=True)
    decide([same], same_machine=True)
    decide([slower], same_machine=True)
    assert same.verdict == "no difference resolved" and slower.verdict == "slower"
