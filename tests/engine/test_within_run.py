"""Comparisons within one run: identical arms measured for real give no verdict of a change,
a real 1.5x is found, and a metric's declared margin decides what reads as no practical
difference. A flag rate, never a timing: each test counts verdicts, not seconds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from helpers import REPO
from ptreg.engine.executor import Executor
from ptreg.engine.measurement import measure
from ptreg.engine.workloads.arms import better_word
from ptreg.records.evaluator import PEAK_MEMORY, PTREG_METRICS, WALL_SECONDS, MetricDeclaration, parse_spec
from ptreg.records.run_results import MetricComparison, SignedInterval

sys.path.insert(0, str(REPO / "benchmarks"))

from within_run_real import NAP, nap_spec  # the evaluator the benchmark runs: one text for both


def wall_verdicts(tmp_path: Path, a: str, b: str, runs: int, repeats: int = 6) -> list[str]:
    """Each run's verdict on arm b's wall time against arm a's, measured for real."""
    (tmp_path / "nap.py").write_text(NAP)
    spec = parse_spec(nap_spec(a, b, repeats), "spec")
    found = []
    for _ in range(runs):
        measured = measure(spec, Executor(), root=tmp_path)
        assert measured.status == "complete", measured.reason
        [rounds] = measured.rounds
        first = [order[0] for order in rounds.orders]
        assert first.count("a") == first.count("b")  # an even number of rounds: each arm first in half
        cell = next(c for c in measured.cells if c.backend == "b")
        comparison = (cell.versus or {})["a"][WALL_SECONDS]
        found.append(better_word(comparison, PTREG_METRICS[WALL_SECONDS]))
    return found


def test_identical_arms_give_no_wall_time_verdict_run_after_run(tmp_path: Path) -> None:
    verdicts = wall_verdicts(tmp_path, "0.1", "0.1", runs=4)
    assert not [v for v in verdicts if v in ("better", "worse")], verdicts


@pytest.mark.slow
def test_identical_arms_give_no_wall_time_verdict_in_20_runs(tmp_path: Path) -> None:
    verdicts = wall_verdicts(tmp_path, "0.1", "0.1", runs=20)
    assert not [v for v in verdicts if v in ("better", "worse")], verdicts


def test_an_arm_half_again_as_slow_is_found_worse(tmp_path: Path) -> None:
    """Sleeping 1.5x as long (about 1.25x the wall time, with Python's start): found worse in
    most runs of 10 rounds, and never better."""
    verdicts = wall_verdicts(tmp_path, "0.1", "0.15", runs=3, repeats=10)
    assert verdicts.count("worse") >= 2 and "better" not in verdicts, verdicts


def ratio(estimate: float, low: float, high: float) -> MetricComparison:
    ci = SignedInterval(low=low, high=high, level=0.95, method="test")
    return MetricComparison(kind="ratio", estimate=estimate, ci=ci, n=6, paired_by="round", seeds=6)


def test_a_metrics_declared_margin_turns_a_tiny_difference_into_no_practical_difference() -> None:
    memory, wall = PTREG_METRICS[PEAK_MEMORY], PTREG_METRICS[WALL_SECONDS]
    # a deterministic metric: 0.06% apart, an interval of no width
    assert better_word(ratio(1.0006, 1.0006, 1.0006), memory) == "no practical difference"
    # the A/A wall time a review saw called worse: within one run, not beyond the margin
    assert better_word(ratio(1.043, 1.025, 1.055), wall) != "worse"
    assert better_word(ratio(1.5, 1.4, 1.6), wall) == "worse"
    assert better_word(ratio(0.6, 0.55, 0.65), wall) == "better"
    # an analysis plan's margin takes the declared one's place
    assert better_word(ratio(1.043, 1.025, 1.055), wall, margin=1.01) == "worse"
    undeclared = wall.model_copy(update={"margin": None})
    assert better_word(ratio(1.043, 1.025, 1.055), undeclared) == "worse"


def test_a_margin_is_of_its_metrics_kind_and_absent_unless_declared() -> None:
    assert MetricDeclaration(better="lower", unit="s", compare="ratio", margin=0.05).smallest_effect() == 1.05
    assert MetricDeclaration(better="higher", unit="points", margin=0.5).smallest_effect() == 0.5
    assert MetricDeclaration(better="higher", unit="points").smallest_effect() is None
    with pytest.raises(ValidationError, match="a ratio's margin is a fraction below 1"):
        MetricDeclaration(better="lower", unit="s", compare="ratio", margin=1.05)
    # a spec that declares none is written (and hashed) as before
    spec = parse_spec(nap_spec("0.1", "0.1"), "spec")
    assert "margin" not in json.dumps(spec.model_dump(mode="json", exclude_none=True))
