"""Statistics, attribution and the evidence line, on made-up samples (no process, no timing)."""

from __future__ import annotations

import math
import statistics

import pytest

from ptreg.engine.stats import center_interval, inverted, paired_ratio, resolved, summarize, too_wide
from ptreg.engine.workloads.training import TrainingWorkload, attribution
from ptreg.records.intervals import t_quantile
from ptreg.records.run_results import Cell, Roles, StepSample


def test_summary_is_median_and_spread() -> None:
    s = summarize([3.0, 1.0, 2.0, 10.0])
    assert (s.n, s.median, s.min, s.max) == (4, 2.5, 1.0, 10.0)
    assert s.q1 <= s.median <= s.q3
    assert s.relative_spread == pytest.approx(9.0 / 2.5)
    assert too_wide(s, 1.0) is True and too_wide(s, 5.0) is False


def test_single_value_has_unknown_spread() -> None:
    s = summarize([4.0])
    assert s.relative_spread is None and too_wide(s, 0.1) is None
    with pytest.raises(ValueError):
        summarize([])


def test_inverted_summary_swaps_the_ends() -> None:
    seconds = summarize([0.5, 1.0, 2.0])
    rate = inverted(seconds, 100.0)
    assert (rate.min, rate.median, rate.max) == (50.0, 100.0, 200.0)
    assert rate.q1 <= rate.median <= rate.q3


def _steps(seconds: float, forward: float, da: float, db: float, n: int = 4) -> list[StepSample]:
    return [
        StepSample(
            repeat=i // 2,
            step=i % 2,
            seconds=seconds,
            kernel_seconds={"forward": forward, "backward_da": da, "backward_db": db},
            loss=5.0,
        )
        for i in range(n)
    ]


def test_attribution_shares_add_up_and_name_the_bounding_kernel() -> None:
    a = attribution(_steps(1.0, 0.2, 0.3, 0.4), step_ms=1000.0)
    assert a.forward.share == pytest.approx(0.2) and a.backward_db.share == pytest.approx(0.4)
    assert a.other.share == pytest.approx(0.1)
    assert a.bounding_kernel == "backward_db"
    assert a.headroom == pytest.approx(1 / 0.6)  # Amdahl: dB taking no time leaves 60%
    assert a.all_matmuls_bound == pytest.approx(10.0)
    assert a.backward_db.ms == pytest.approx(400.0)


def test_speedups_compare_cells_of_the_same_config_only() -> None:
    from ptreg.records.evaluator import EvaluatorSpec

    spec = EvaluatorSpec(
        name="x",
        workload="tinygpt-train",
        metric="ms-per-step",
        configs=["tiny", "small"],
        backends=["naive", "numba"],
        baseline="numba",
        warmup_steps=0,
        timed_steps=1,
        repeats=1,
        seed=0,
        threads=1,
        tolerance={"rtol": 0, "atol": 0},
        max_relative_spread=1,
    )

    def measured(backend: str, config: str, ms: float) -> Cell:
        cell = Cell(backend=backend, config=config, status="measured")
        sample = StepSample(repeat=0, step=0, seconds=ms / 1000, kernel_seconds={}, loss=1.0)
        TrainingWorkload().summarize(spec, cell, [sample])
        return cell

    cells = [
        measured("naive", "tiny", 10.0),
        measured("numba", "tiny", 4.0),
        Cell(backend="naive", config="small", status="failed", reason="crashed"),
        measured("numba", "small", 40.0),
    ]
    TrainingWorkload().compare(spec, cells, Roles(reference="naive", peer=None))
    assert cells[1].vs_naive == pytest.approx(2.5) and cells[1].vs_baseline == pytest.approx(1.0)
    assert cells[3].vs_naive is None  # naive failed at small: unknown, not zero


def test_an_interval_holds_the_center_and_needs_two_values() -> None:
    values = [1.0, 1.1, 0.95, 1.05, 1.02]
    found = center_interval(values)
    assert found is not None and found.low < 1.02 < found.high and found.level == 0.95
    assert center_interval([1.0]) is None and center_interval([1.0, 0.0]) is None
    assert summarize(values).ci == found
    rate = inverted(summarize(values), 10.0)
    assert rate.ci is not None and rate.ci.low == pytest.approx(10.0 / found.high)


def test_a_ratio_whose_interval_holds_1_is_not_resolved() -> None:
    same = paired_ratio({0: 1.0, 1: 1.1, 2: 0.9}, {0: 1.0, 1: 1.0, 2: 1.0})
    assert same is not None and same.n == 3 and resolved(same) is False
    faster = paired_ratio({0: 2.0, 1: 2.1, 2: 1.9}, {0: 1.0, 1: 1.0, 2: 1.0})
    assert resolved(faster) is True
    assert paired_ratio({0: 1.0}, {1: 1.0}) is None  # no round in common
    assert resolved(paired_ratio({0: 2.0}, {0: 1.0})) is None  # one round: no interval


def test_intervals_cover_the_truth_in_about_95_percent_of_draws() -> None:
    """Equal backends, multiplicative noise: the ratio's interval holds 1 in at least 92% of
    400 seeded draws of 4 rounds (the binomial's 95% lower bound for a true 95%)."""
    import random

    rng = random.Random(7)
    held = 0
    for _ in range(400):
        a = {r: rng.lognormvariate(0, 0.03) for r in range(4)}
        b = {r: rng.lognormvariate(0, 0.03) for r in range(4)}
        found = paired_ratio(a, b)
        held += resolved(found) is False
    assert held / 400 >= 0.92


def test_an_adaptive_plan_records_its_interval_at_the_quantile_that_keeps_95_percent() -> None:
    from ptreg.engine.stats import ADAPTIVE_METHOD, ADAPTIVE_PAIRED_METHOD, LEVEL

    values = [1.0, 1.1, 0.95, 1.05, 1.02]
    fixed, adaptive = summarize(values), summarize(values, adaptive=True)
    assert fixed.ci is not None and adaptive.ci is not None
    assert adaptive.ci.low < fixed.ci.low and adaptive.ci.high > fixed.ci.high
    assert adaptive.ci.level == fixed.ci.level == LEVEL and adaptive.ci.method == ADAPTIVE_METHOD
    ratio = paired_ratio({0: 2.0, 1: 2.2, 2: 1.9}, {0: 1.0, 1: 1.0, 2: 1.0}, adaptive=True)
    assert ratio is not None and ratio.ci is not None and ratio.ci.method == ADAPTIVE_PAIRED_METHOD


def test_an_adaptive_interval_is_wider_the_earlier_the_plan_stopped() -> None:
    """The quantile depends on the stopping round: an interval after few rounds is taken at the
    early level, one after many at the later; the record says both, and the floor of rounds."""
    from ptreg.engine.stats import (
        ADAPTIVE_METHOD,
        ADAPTIVE_MIN_ROUNDS,
        ADAPTIVE_QUANTILE_LEVEL,
        EARLY_QUANTILE_LEVEL,
        EARLY_ROUNDS,
        adaptive_level,
        log_interval,
    )

    assert adaptive_level(ADAPTIVE_MIN_ROUNDS) == EARLY_QUANTILE_LEVEL > ADAPTIVE_QUANTILE_LEVEL
    assert adaptive_level(EARLY_ROUNDS) == ADAPTIVE_QUANTILE_LEVEL
    for n in (ADAPTIVE_MIN_ROUNDS, EARLY_ROUNDS + 2):
        values = [1.0 + 0.01 * (i % 3) for i in range(n)]
        found, plain = log_interval(values, adaptive=True), log_interval(values)
        assert found is not None and plain is not None
        widened = math.log(found[1] / found[0]) / math.log(plain[1] / plain[0])
        assert widened == pytest.approx(t_quantile(n, adaptive_level(n)) / t_quantile(n))
    assert f"no stop before {ADAPTIVE_MIN_ROUNDS} rounds" in ADAPTIVE_METHOD


def test_rounds_that_move_together_widen_a_ratios_interval_and_alternating_ones_do_not_narrow_it() -> None:
    """Per-round ratios that drift (each near the last) carry less information than as many
    independent ones: the interval adds their lag-1 autocovariance. Ratios that alternate
    (negative autocovariance) keep the independent interval, never a narrower one."""
    from ptreg.engine.stats import PAIRED_METHOD

    ones = dict.fromkeys(range(6), 1.0)
    drifting = dict(enumerate([1.00, 1.02, 1.04, 1.06, 1.08, 1.10]))
    shuffled = dict(enumerate([1.04, 1.10, 1.00, 1.06, 1.02, 1.08]))  # the same values, no drift
    slow, quick = paired_ratio(drifting, ones), paired_ratio(shuffled, ones)
    assert slow is not None and quick is not None and slow.ci is not None and quick.ci is not None
    assert math.log(slow.ci.high / slow.ci.low) > 1.3 * math.log(quick.ci.high / quick.ci.low)
    alternating = dict(enumerate([1.00, 1.10, 1.00, 1.10, 1.00, 1.10]))
    found = paired_ratio(alternating, ones)
    assert found is not None and found.ci is not None and found.ci.method == PAIRED_METHOD
    logs = [math.log(v) for v in alternating.values()]
    half = t_quantile(6) * statistics.stdev(logs) / math.sqrt(6)
    assert math.log(found.ci.high / found.ci.low) / 2 == pytest.approx(half)
