"""Does an adaptive plan's 95% interval hold the truth 95% of the time, whenever it stops?

An adaptive plan (``min_repeats``, ``max_repeats``, ``target_ci``) adds rounds until every
ratio's interval is at most ``target_ci`` of the ratio either side, then stops. Stopping on a
narrow look picks the samples whose spread came out small, and the earlier the stop the worse.
This simulates the plan with ptreg's own code (``plan.round_order``, ``stats.paired_ratio``,
``plan.narrow_enough``): A/A runs of two arms (``round_noise.py``: normal and heavy-tailed
repeats, one-sided busy repeats, an arm's own AR(1) load, drift, heavy-tailed run effects),
each round added until the rule stops, and counts how often the recorded interval holds 1,
overall and by the round the plan stopped at, under two rules: the earlier one (stop from
``min_repeats`` on, the 99% quantile) and ptreg's (no stop before ``ADAPTIVE_MIN_ROUNDS``, a
quantile that depends on the stopping round, ``stats.adaptive_level``).

    python benchmarks/adaptive_coverage.py --draws 1000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from contextlib import ExitStack
from typing import Any
from unittest import mock

from round_noise import ARMS, SCENARIOS, Noise, one_run

from ptreg.engine import stats
from ptreg.engine.plan import narrow_enough, round_order
from ptreg.records.run_results import Cell

SETTINGS = [  # (target_ci, min_repeats, max_repeats)
    (0.03, 3, 20),
    (0.02, 3, 20),
    (0.05, 3, 12),
]
NOISES = [
    Noise("normal 3%", spread=0.03),
    Noise("t(3) 3%", spread=0.03, tails=3),
    *[s for s in SCENARIOS if s.load == 0],  # an arm's own load lasting the run is no stopping rule's to fix
    Noise("harsh, load 0.5", spread=0.03, tails=3, busy=0.15, busy_cost=0.10, load=0.02, phi=0.5, run_effect=0.2),
]
BINS = ((3, 5), (6, 9), (10, 14), (15, 20))


def one_plan(rng: random.Random, noise: Noise, target: float, least: int, most: int, floor: int) -> tuple[bool, int]:
    """One adaptive plan on one ratio whose truth is 1: whether its recorded interval holds 1,
    and how many rounds it took."""
    seed = rng.getrandbits(63)
    a, b = one_run(rng, noise, most, 1.0, lambda r: round_order(seed, "c", r, list(ARMS)))
    taken = most
    for number in range(max(least, floor), most):
        found = stats.paired_ratio({r: b[r] for r in range(number)}, {r: a[r] for r in range(number)}, adaptive=True)
        if narrow_enough([Cell(backend="b", config="c", status="measured", vs_baseline_ratio=found)], target):
            taken = number
            break
    found = stats.paired_ratio({r: b[r] for r in range(taken)}, {r: a[r] for r in range(taken)}, adaptive=True)
    assert found is not None and found.ci is not None
    return found.ci.low <= 1.0 <= found.ci.high, taken


def run(draws: int) -> list[dict[str, Any]]:
    rows = []
    for n, noise in enumerate(NOISES):
        for target, least, most in SETTINGS:
            for rule in ("earlier", "ptreg"):
                rng = random.Random(f"{n}/{target}/{least}/{most}")
                with ExitStack() as stack:
                    if rule == "earlier":
                        stack.enter_context(mock.patch.object(stats, "adaptive_level", lambda _: 0.99))
                    floor = stats.ADAPTIVE_MIN_ROUNDS if rule == "ptreg" else 0
                    plans = [one_plan(rng, noise, target, least, most, floor) for _ in range(draws)]
                by_bin = {}
                for low, high in BINS:
                    inside = [held for held, r in plans if low <= r <= high]
                    by_bin[f"{low}-{high}"] = (sum(inside) / len(inside), len(inside)) if inside else None
                rows.append(
                    {
                        "noise": noise.name,
                        "target_ci": target,
                        "rounds": f"{least}-{most}",
                        "rule": rule,
                        "coverage": sum(h for h, _ in plans) / draws,
                        "mean_rounds": statistics.fmean(r for _, r in plans),
                        "by_stopping_round": by_bin,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = run(args.draws)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"coverage of an adaptive plan's recorded 95% interval of a ratio whose truth is 1 ({args.draws} plans each)")
    bins = [f"{low}-{high}" for low, high in BINS]
    print(
        "| noise | target_ci | rounds | rule | coverage | mean rounds | "
        + " | ".join(f"stopped {b}" for b in bins)
        + " |"
    )
    print("| --- | --- | --- | --- | --- | --- |" + " --- |" * len(bins))
    for row in rows:
        cells = []
        for b in bins:
            found = row["by_stopping_round"][b]
            cells.append("-" if found is None else f"{100 * found[0]:.1f}% ({found[1]})")
        print(
            f"| {row['noise']} | {100 * row['target_ci']:g}% | {row['rounds']} | {row['rule']} | "
            f"{100 * row['coverage']:.1f}% | {row['mean_rounds']:.1f} | " + " | ".join(cells) + " |"
        )


if __name__ == "__main__":
    main()
