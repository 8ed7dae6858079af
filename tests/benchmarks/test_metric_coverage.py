"""Intervals of a metric over items and seeds, simulated with ptreg's own code where the truth
is known (seeded, no timing): under a seed effect the interval holds the true difference about
as often as it claims, where the item-paired interval of runs before version 8 did not, and one
seed never gives a verdict."""

from __future__ import annotations

import sys

from helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

from metric_coverage import Scenario, evaluation


def test_a_seed_effect_is_carried_by_the_interval() -> None:
    found = evaluation(Scenario(items=300, seeds=5, seed_sd=0.2, correlation=0.0), replications=200, seed=11)
    assert found["interval over"] == "items and seeds"
    assert float(found["A/B coverage"]) >= 0.9
    assert float(found["A/B coverage before (items averaged over seeds)"]) <= 0.85
    assert float(found["A/A verdicts (false alarms)"].split()[0]) <= 0.08


def test_one_seed_gives_no_verdict() -> None:
    found = evaluation(Scenario(items=300, seeds=1, seed_sd=0.2, correlation=0.0), replications=40, seed=12)
    assert found["interval over"] == "items only; seed variance unknown"
    assert found["A/A no verdict"] == "1.000"
