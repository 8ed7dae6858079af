"""The adaptive plan's intervals, simulated with ptreg's own code where the truth is known:
the recorded 95% interval holds the truth in at least 95% of plans (seeded, no timing)."""

from __future__ import annotations

import random
import sys

from helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

from adaptive_coverage import one_plan


def test_an_adaptive_plans_interval_covers_what_it_claims() -> None:
    rng = random.Random(7)
    plans = [one_plan(rng, spread=0.05, target=0.03, least=3, most=12, heavy=False) for _ in range(600)]
    assert sum(covered for covered, _ in plans) / len(plans) >= 0.95
    assert any(rounds < 12 for _, rounds in plans)  # the rule did stop plans early
