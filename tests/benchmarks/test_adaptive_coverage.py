"""The adaptive plan's intervals, simulated with ptreg's own code where the truth is known:
under harsh noise (heavy tails, one-sided busy repeats, AR(1) load, run effects), the recorded
95% interval holds the truth in at least 95% of plans overall, and in at least 93% of those
that stopped early (seeded, no timing)."""

from __future__ import annotations

import random
import sys

from helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

from adaptive_coverage import NOISES, one_plan

from ptreg.engine.stats import ADAPTIVE_MIN_ROUNDS


def test_an_adaptive_plans_interval_covers_what_it_claims_at_every_stop() -> None:
    def plans(name: str) -> list[tuple[bool, int]]:
        rng = random.Random(7)
        noise = next(n for n in NOISES if n.name.startswith(name))
        return [one_plan(rng, noise, target=0.03, least=3, most=20, floor=ADAPTIVE_MIN_ROUNDS) for _ in range(600)]

    harsh = plans("harsh")  # few of these stop early: the whole is what they show
    assert sum(held for held, _ in harsh) / len(harsh) >= 0.95
    heavy = plans("t(3) repeats")  # many of these stop early: those stops are what they show
    early = [held for held, rounds in heavy if rounds < 20]
    assert len(early) >= 100 and sum(early) / len(early) >= 0.95
    assert min(rounds for _, rounds in harsh + heavy) >= ADAPTIVE_MIN_ROUNDS
