"""How often a 95% interval holds the truth, at the repeat counts ptreg takes, and what it is of.

``--section methods``: draws n log-noise values around a true center of 0 (normal with a 3%
standard deviation, and Student's t with 3 degrees of freedom for heavy tails) and counts how
often each method's interval holds 0: the percentile bootstrap of the median
(scipy.stats.bootstrap) and Student's t on the log values (what ptreg uses,
``ptreg/engine/stats.py``).

``--section labels``: under one-sided busy repeats (a busy moment only ever slows a repeat) the
true (unloaded) value, the median and the geometric mean are three different numbers. Through
ptreg's own ``stats.summarize`` (one cell's repeats) and ``stats.paired_ratio`` (a ratio of two
arms, the slower of which meets busy moments more often, as a longer repeat does), how often
the recorded interval holds each: the label says what it holds. Seeded; no timing.

    python benchmarks/interval_coverage.py --section methods --draws 2000
    python benchmarks/interval_coverage.py --section labels --draws 2000
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from typing import Any

import numpy as np
from scipy import stats

from ptreg.engine import stats as ptreg_stats


def bootstrap_median(x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    found = stats.bootstrap(
        (x,), np.median, confidence_level=0.95, n_resamples=999, method="percentile", rng=rng, vectorized=True
    )
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


def student_t(x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    found = stats.ttest_1samp(x, 0.0).confidence_interval(0.95)
    return float(found.low), float(found.high)


def methods(draws: int, sizes: list[int]) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    rows = []
    for n in sizes:
        for noise in ("normal", "t3"):
            held = {"boot": 0, "t": 0}
            for _ in range(draws):
                x = rng.normal(0, 0.03, n) if noise == "normal" else rng.standard_t(3, n) * 0.03
                for name, method in (("boot", bootstrap_median), ("t", student_t)):
                    low, high = method(x, rng)
                    held[name] += low <= 0 <= high
            rows.append({"repeats": n, "noise": noise, "bootstrap": held["boot"] / draws, "t": held["t"] / draws})
    return rows


# One-sided busy moments: a repeat meets one with this probability and is slowed by an
# exponential amount of this mean (log units). Arm b, 1.5x slower, meets them twice as often.
SPREAD, BUSY, COST, SLOWER = 0.02, (0.1, 0.2), 0.15, 1.5


def log_time(rng: random.Random, truth: float, busy: float) -> float:
    extra = rng.expovariate(1 / COST) if rng.random() < busy else 0.0
    return truth + rng.gauss(0, SPREAD) + extra


def targets(rng: random.Random, one_arm: bool) -> dict[str, float]:
    """The true (unloaded), median and geometric-mean value, in logs, by a large draw."""
    if one_arm:
        logs = [log_time(rng, 0.0, BUSY[0]) for _ in range(200_000)]
        truth = 0.0
    else:
        truth = math.log(SLOWER)
        logs = [log_time(rng, truth, BUSY[1]) - log_time(rng, 0.0, BUSY[0]) for _ in range(200_000)]
    return {"true": truth, "median": statistics.median(logs), "geometric mean": statistics.fmean(logs)}


def labels(draws: int, sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for what in ("one cell's time", "ratio of two arms"):
        one_arm = what.startswith("one")
        aim = targets(random.Random(7), one_arm)
        for n in sizes:
            rng = random.Random(f"{what}/{n}")
            held = dict.fromkeys(aim, 0)
            for _ in range(draws):
                if one_arm:
                    found = ptreg_stats.summarize([math.exp(log_time(rng, 0.0, BUSY[0])) for _ in range(n)]).ci
                else:
                    a = {r: math.exp(log_time(rng, 0.0, BUSY[0])) for r in range(n)}
                    b = {r: math.exp(log_time(rng, math.log(SLOWER), BUSY[1])) for r in range(n)}
                    ratio = ptreg_stats.paired_ratio(b, a)
                    found = ratio.ci if ratio is not None else None
                assert found is not None
                for name, value in aim.items():
                    held[name] += found.low <= math.exp(value) <= found.high
            rows.append({"of": what, "repeats": n, **{k: v / draws for k, v in held.items()}})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--section", choices=("methods", "labels"), default="methods")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 4, 5, 8, 12])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.section == "methods":
        rows = methods(args.draws, args.sizes)
        if args.json:
            print(json.dumps(rows, indent=1))
            return
        print(f"coverage of 95% intervals over {args.draws} seeded draws (the share that holds the true center)")
        print("| repeats | noise | bootstrap of the median | Student's t on logs |")
        print("| --- | --- | --- | --- |")
        for row in rows:
            print(f"| {row['repeats']} | {row['noise']} | {row['bootstrap']:.3f} | {row['t']:.3f} |")
        return
    rows = labels(args.draws, args.sizes)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(
        f"one-sided busy repeats ({100 * BUSY[0]:g}% of arm a's, {100 * BUSY[1]:g}% of arm b's, +{100 * COST:g}% on "
        f"average), noise {100 * SPREAD:g}%: how often ptreg's recorded 95% interval holds each ({args.draws} draws)"
    )
    print("| interval of | repeats | true (unloaded) | median | geometric mean |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['of']} | {row['repeats']} | {100 * row['true']:.1f}% | {100 * row['median']:.1f}% | "
            f"{100 * row['geometric mean']:.1f}% |"
        )


if __name__ == "__main__":
    main()
