"""The cross-run comparison, simulated with ptreg's own code (benchmarks/compare_calibration.py)
where the truth is known: small, seeded versions of the table's rows (no timing)."""

from __future__ import annotations

import sys

import pytest

from helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

from compare_calibration import SCENARIOS, metrics_row, row


def test_a_history_in_one_batch_never_gives_a_verdict() -> None:
    found = row(SCENARIOS["one batch, batch effect 10%"], 10, aa=60, ab=0, seed=3)
    assert found["no_verdict_rate"] == 1.0 and found["false_alarm_rate"] == 0.0


def test_t2_run_effects_and_half_the_cells_changed_raise_few_alarms() -> None:
    """300 A/A comparisons of 12 cells under t(2) run effects, and 100 of 60 cells of which 30
    slowed 2x: an unchanged cell flagged in at most 6% of them (5% expected; the slack is for
    the small sample)."""
    heavy = row(SCENARIOS["t(2) run effects"], 10, aa=300, ab=0, seed=5)
    assert heavy["false_alarm_rate"] <= 0.06 and heavy["no_verdict_rate"] == 0.0  # type: ignore[operator]
    half = row(SCENARIOS["half of 60 cells changed, t(3)"], 4, aa=100, ab=0, seed=6)
    assert half["false_alarm_rate"] <= 0.06  # type: ignore[operator]


def test_ten_metrics_of_runs_of_arms_are_one_family() -> None:
    """Unadjusted, 10 metrics at 5% each flag 40% of A/A comparisons; adjusted, about 5%."""
    found = metrics_row(10, aa=300, seed=8)
    assert found["false_alarm_rate"] == pytest.approx(0.05, abs=0.035)


def test_the_tail_table_is_what_the_simulation_gives() -> None:
    """HISTORY_TAILS refitted from 400,000 draws of t(2) for 4 and 5 batches: the quantile it
    sets at 0.1% (two-sided) is within 15% of the table's (the table's own fit took 2,000,000)."""
    from compare_calibration import fit_tails
    from scipy.stats import t

    from ptreg.engine.stats import HISTORY_TAILS

    for k, (df, scale) in fit_tails(400_000, 5, seed=11).items():
        table_df, table_scale = HISTORY_TAILS[k]
        ours, theirs = scale * t.ppf(0.9995, df), table_scale * t.ppf(0.9995, table_df)
        assert ours == pytest.approx(theirs, rel=0.15)
