"""numba's parallel-threshold rule, simulated with its own ``decide`` where the truth is known
(benchmarks/threshold_rule.py): under harsh noise and on a busy machine it almost never sends a
kernel parallel at a size where parallel is slower, and under harsh noise it finds the true
crossover from the backend's own 5 rounds (seeded, no timing)."""

from __future__ import annotations

import random
import sys

from helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

from round_noise import SCENARIOS
from threshold_rule import BUSIER, row

from ptreg_backends.numba_op_timing import CALIBRATION_ROUNDS

HARSH = SCENARIOS[-1]


def test_the_rule_never_goes_parallel_where_parallel_is_slower() -> None:
    rng = random.Random(11)
    for noise in (HARSH, BUSIER):
        for truth in ("crossover at 2^18", "parallel slower everywhere"):
            found = row(rng, noise, CALIBRATION_ROUNDS, truth, draws=150)
            assert found["parallel_where_slower"] <= 0.01, found
    assert row(rng, BUSIER, CALIBRATION_ROUNDS, "parallel slower everywhere", draws=150)["serial"] >= 0.99


def test_under_harsh_noise_five_rounds_find_the_crossover() -> None:
    found = row(random.Random(12), HARSH, CALIBRATION_ROUNDS, "crossover at 2^18", draws=150)
    assert found["at_crossover"] >= 0.9, found
