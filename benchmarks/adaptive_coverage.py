"""Does an adaptive plan's 95% interval hold the truth 95% of the time?

An adaptive plan (``min_repeats``, ``max_repeats``, ``target_ci``) adds rounds until every
ratio's interval is at most ``target_ci`` of the ratio either side, then stops. Stopping on a
narrow look picks the samples whose spread came out small, so an interval taken at the plain
95% quantile covers less than it says. This simulates the plan with ptreg's own code
(``engine/stats.py paired_ratio``, ``engine/plan.py narrow_enough``): per-round log ratios
around a known truth, normal or heavy-tailed (Student's t, 3 degrees of freedom), each round
added until the rule stops, and counts how often the recorded interval holds the truth, with
the quantile ptreg uses for adaptive plans and, for contrast, the plain 95% one.

    python benchmarks/adaptive_coverage.py --draws 2000
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from unittest import mock

from ptreg.engine import stats
from ptreg.engine.plan import narrow_enough
from ptreg.records.run_results import Cell

SETTINGS = [  # (spread of a round's log ratio, target_ci, min_repeats, max_repeats)
    (0.05, 0.02, 3, 20),
    (0.10, 0.05, 3, 20),
    (0.03, 0.03, 3, 20),
    (0.10, 0.10, 3, 20),
    (0.05, 0.03, 5, 12),
    (0.02, 0.01, 3, 12),
]


def one_plan(rng: random.Random, spread: float, target: float, least: int, most: int, heavy: bool) -> tuple[bool, int]:
    """One adaptive plan on one ratio whose truth is 1: whether its recorded interval holds 1,
    and how many rounds it took."""
    mine: dict[int, float] = {}
    theirs: dict[int, float] = {}
    for number in range(most):
        draw = rng.gauss(0, 1)
        if heavy:  # Student's t with 3 degrees of freedom, scaled to unit variance
            draw /= math.sqrt(sum(rng.gauss(0, 1) ** 2 for _ in range(3)) / 3) * math.sqrt(3)
        theirs[number], mine[number] = math.exp(spread * draw), 1.0
        if number + 1 >= least:
            found = stats.paired_ratio(theirs, mine, adaptive=True)
            cell = Cell(backend="mine", config="c", status="measured", vs_baseline_ratio=found)
            if narrow_enough([cell], target):
                break
    found = stats.paired_ratio(theirs, mine, adaptive=True)
    assert found is not None and found.ci is not None
    return found.ci.low <= 1.0 <= found.ci.high, len(mine)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=2000)
    args = parser.parse_args()
    print(f"coverage of an adaptive plan's recorded 95% interval of a ratio whose truth is 1 ({args.draws} plans each)")
    print("| noise | spread | target_ci | rounds | plain 95% quantile | ptreg (99% quantile) | mean rounds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for heavy in (False, True):
        for n, (spread, target, least, most) in enumerate(SETTINGS):
            found = {}
            for level in (stats.LEVEL, stats.ADAPTIVE_QUANTILE_LEVEL):
                rng = random.Random(100 * n + heavy)
                with mock.patch.object(stats, "ADAPTIVE_QUANTILE_LEVEL", level):
                    plans = [one_plan(rng, spread, target, least, most, heavy) for _ in range(args.draws)]
                found[level] = (sum(c for c, _ in plans) / args.draws, statistics.fmean(r for _, r in plans))
            plain, ours = found[stats.LEVEL], found[stats.ADAPTIVE_QUANTILE_LEVEL]
            print(
                f"| {'t3' if heavy else 'normal'} | {100 * spread:g}% | {100 * target:g}% | {least}-{most} | "
                f"{100 * plain[0]:.1f}% | {100 * ours[0]:.1f}% | {ours[1]:.1f} |"
            )


if __name__ == "__main__":
    main()
