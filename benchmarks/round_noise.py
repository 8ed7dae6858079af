"""Simulated timings of arms measured in interleaved rounds within one run, under the noise
of a shared machine, for the within-run benchmarks (``within_run.py``, ``adaptive_coverage.py``,
``interval_coverage.py``). Nothing here is measured: the truth is known.

A repeat's log time is its arm's true log time plus

- noise: normal, or Student's t (heavy tails), scaled to ``spread``;
- a busy moment (one-sided): with probability ``busy`` the repeat is slowed by an exponential
  amount of mean ``busy_cost`` in log units, never sped up;
- the arm's own load (AR(1), coefficient ``phi``, stationary sd ``load``): what an arm leaves
  behind (its caches, its memory, a neighbour it wakes) lasts a few rounds;
- the machine's drift: ``drift`` log units per repeat, in the order the repeats ran, so the arm
  that goes second in a round pays ``drift`` more, and a run's later rounds more still;
- the place in the round: the arm that goes second pays ``position`` (the first one warmed what
  they share, or left it busy);
- a run effect (Student's t with 2 degrees of freedom, times ``run_effect``) common to both arms,
  as a busy hour would be: it cancels in a ratio, and is there to show it does.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

ARMS = ("a", "b")
Orders = Callable[[int], list[str]]


@dataclass(frozen=True)
class Noise:
    name: str
    spread: float
    tails: int | None = None  # Student's t degrees of freedom; None for normal
    busy: float = 0.0
    busy_cost: float = 0.0
    load: float = 0.0
    phi: float = 0.0
    drift: float = 0.0
    position: float = 0.0  # extra log time of the arm that goes second in a round
    run_effect: float = 0.0


def student(rng: random.Random, dof: int) -> float:
    """A Student's t draw with ``dof`` degrees of freedom, scaled to unit variance when it has one."""
    draw = rng.gauss(0, 1) / math.sqrt(sum(rng.gauss(0, 1) ** 2 for _ in range(dof)) / dof)
    return draw * math.sqrt((dof - 2) / dof) if dof > 2 else draw


def fixed_orders(seed: int = 0) -> Orders:
    """The orders before they were balanced: drawn per round from the evaluator's seed, the
    same sequence in every run of that evaluator."""
    return lambda r: random.Random(f"{seed}/c/{r}").sample(list(ARMS), len(ARMS))


def lopsided_seed(rounds: int, share: float = 0.8) -> tuple[int, float]:
    """The first evaluator seed whose fixed orders put arm a first in at least ``share`` of
    ``rounds`` rounds, and the share of the seeds 0-999 that do so (either arm)."""

    def first(seed: int) -> int:
        return sum(fixed_orders(seed)(r)[0] == "a" for r in range(rounds))

    counts = [first(seed) for seed in range(1000)]
    lopsided = [s for s, c in enumerate(counts) if max(c, rounds - c) >= share * rounds]
    chosen = next(s for s, c in enumerate(counts) if c >= share * rounds)
    return chosen, len(lopsided) / len(counts)


def one_run(
    rng: random.Random, noise: Noise, rounds: int, effect: float, orders: Orders
) -> tuple[dict[int, float], dict[int, float]]:
    """Arm a's and arm b's times by round; b's truth is ``effect`` times a's."""
    truth = {"a": 0.0, "b": math.log(effect)}
    load = {arm: rng.gauss(0, noise.load) for arm in ARMS}
    shift = noise.run_effect * student(rng, 2) if noise.run_effect else 0.0
    times: dict[str, dict[int, float]] = {arm: {} for arm in ARMS}
    slot = 0
    for number in range(rounds):
        for place, arm in enumerate(orders(number)):
            draw = student(rng, noise.tails) if noise.tails else rng.gauss(0, 1)
            busy = rng.expovariate(1 / noise.busy_cost) if noise.busy and rng.random() < noise.busy else 0.0
            value = (
                truth[arm]
                + shift
                + load[arm]
                + noise.spread * draw
                + busy
                + noise.drift * slot
                + noise.position * place
            )
            times[arm][number] = math.exp(value)
            slot += 1
        for arm in ARMS:
            innovation = noise.load * math.sqrt(1 - noise.phi**2)
            load[arm] = noise.phi * load[arm] + rng.gauss(0, innovation) if noise.load else 0.0
    return times["a"], times["b"]


# The noise a run of arms meets, from mild to the harsh kind a review simulated.
SCENARIOS = [
    Noise("normal", spread=0.04),
    Noise("t(3) repeats", spread=0.04, tails=3),
    Noise("one-sided busy repeats (15%, +10%)", spread=0.02, busy=0.15, busy_cost=0.10),
    Noise("AR(1) load per arm (0.7, 4%)", spread=0.02, load=0.04, phi=0.7),
    Noise("drift 1% a repeat", spread=0.03, drift=0.01),
    Noise("second in a round 4% slower", spread=0.03, position=0.04),
    Noise(
        "harsh: all of these, run effects t(2)",
        spread=0.03,
        tails=3,
        busy=0.15,
        busy_cost=0.10,
        load=0.04,
        phi=0.7,
        drift=0.01,
        position=0.04,
        run_effect=0.2,
    ),
]
