"""Comparisons within one run: do the intervals of two arms' ratio hold, and do they find a change?

Simulated runs of two arms in interleaved rounds (``round_noise.py``), through ptreg's own
functions: ``plan.round_order`` for the order, ``stats.paired_ratio`` for the interval and
``workloads.arms.better_word`` for the verdict. Nothing is timed; the truth is known.

``--section dependence``: A/A runs (the arms are identical). For each kind of noise and number
of rounds, how often the 95% interval of the ratio holds 1, three ways: the orders drawn from
the evaluator's seed with the independent variance (what ptreg did), the balanced orders of a
seed per run with the independent variance, and the balanced orders with the lag-1 variance
(what ptreg does now).

``--section power``: runs whose arm b is 1.1x slower, and A/A runs, at the per-round spread of
the log ratio that recorded tinygpt runs show (``attempts/runs/``), 5 rounds: how often the
interval resolves the change the right way, and how often better_word says better or worse,
with no margin and with wall time's declared one.

    python benchmarks/within_run.py --section dependence --draws 2000
    python benchmarks/within_run.py --section power --draws 2000
"""

from __future__ import annotations

import argparse
import json
import math
import random
from typing import Any
from unittest import mock

from round_noise import ARMS, SCENARIOS, Noise, fixed_orders, lopsided_seed, one_run

from ptreg.engine import stats
from ptreg.engine.plan import round_order
from ptreg.engine.workloads.arms import better_word
from ptreg.records.evaluator import PTREG_METRICS, WALL_SECONDS
from ptreg.records.run_results import MetricComparison, SignedInterval


def balanced_orders(rng: random.Random) -> Any:
    seed = rng.getrandbits(63)  # a fresh seed per run, as plan.order_seed draws one
    return lambda r: round_order(seed, "c", r, list(ARMS))


def independent(logs: Any) -> float:
    import statistics

    return statistics.variance(logs)


def ratio_of(a: dict[int, float], b: dict[int, float], lag1: bool) -> stats.Ratio | None:
    if lag1:
        return stats.paired_ratio(b, a)
    with mock.patch.object(stats, "_dependent_variance", independent):
        return stats.paired_ratio(b, a)


def holds(found: stats.Ratio | None, truth: float) -> bool:
    assert found is not None and found.ci is not None
    return found.ci.low <= truth <= found.ci.high


def wilson_upper(count: int, total: int) -> float:
    z = 1.96
    p = count / total
    centre = p + z * z / (2 * total)
    spread = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    return (centre + spread) / (1 + z * z / total)


WAYS = (
    "seeded order, independent",
    "seeded order, lopsided seed, independent",
    "balanced, independent",
    "balanced, lag-1 (ptreg)",
)


def dependence(draws: int) -> list[dict[str, Any]]:
    rows = []
    for n, noise in enumerate(SCENARIOS):
        for rounds in (5, 10):
            lopsided, share = lopsided_seed(rounds)
            found: dict[str, Any] = {"lopsided_share": share}
            for way in WAYS:
                rng = random.Random(f"{n}/{rounds}/{way}")
                held = 0
                for _ in range(draws):
                    if way.startswith("seeded"):
                        # each simulated run belongs to an evaluator of its own seed, or to the lopsided one
                        orders = fixed_orders(lopsided if "lopsided" in way else rng.getrandbits(32))
                    else:
                        orders = balanced_orders(rng)
                    a, b = one_run(rng, noise, rounds, 1.0, orders)
                    held += holds(ratio_of(a, b, lag1=way.endswith("(ptreg)")), 1.0)
                found[way] = held / draws
            rows.append({"noise": noise.name, "rounds": rounds, **found})
    return rows


def verdict(found: stats.Ratio, margin: float | None) -> str:
    assert found.ci is not None
    comparison = MetricComparison(
        kind="ratio",
        estimate=found.median,
        ci=SignedInterval(**found.ci.model_dump()),
        n=found.n,
        paired_by="round",
        seeds=found.n,
    )
    declaration = PTREG_METRICS[WALL_SECONDS]
    if margin is None:
        declaration = declaration.model_copy(update={"margin": None})
    return better_word(comparison, declaration)


# per-round sd of the log ratio: a quiet run, the kernels evaluator's median (measured), the
# recorded tinygpt runs' middle and median
POWER_SPREADS = (0.03, 0.043, 0.06, 0.086)


def power(draws: int, rounds: int) -> list[dict[str, Any]]:
    rows = []
    margin = PTREG_METRICS[WALL_SECONDS].margin
    for spread in POWER_SPREADS:
        # each arm's repeat carries half the variance of the ratio's log
        for kind, noise in (
            ("normal", Noise("normal", spread=spread / math.sqrt(2))),
            ("t(3), AR(1) load", Noise("t3", spread=spread / math.sqrt(2) * 0.8, tails=3, load=spread * 0.3, phi=0.5)),
        ):
            for effect in (1.1, 1.0):
                rng = random.Random(f"power/{spread}/{kind}/{effect}")
                resolved = right = plain_said = margin_said = 0
                for _ in range(draws):
                    a, b = one_run(rng, noise, rounds, effect, balanced_orders(rng))
                    found = stats.paired_ratio(b, a)
                    assert found is not None and found.ci is not None
                    resolved += not found.ci.low <= 1.0 <= found.ci.high
                    right += found.ci.low > 1.0 if effect > 1 else 0
                    plain_said += verdict(found, None) in ("better", "worse")
                    margin_said += verdict(found, margin) in ("better", "worse")
                rows.append(
                    {
                        "spread": spread,
                        "noise": kind,
                        "effect": effect,
                        "rounds": rounds,
                        "resolved": resolved / draws,
                        "resolved_right_way": right / draws,
                        "verdict_no_margin": plain_said / draws,
                        "verdict_margin": margin_said / draws,
                        "verdict_no_margin_upper": wilson_upper(plain_said, draws),
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--section", choices=("dependence", "power"), required=True)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.section == "dependence":
        rows = dependence(args.draws)
        if args.json:
            print(json.dumps(rows, indent=1))
            return
        print(f"A/A coverage of the ratio's 95% interval ({args.draws} runs each)")
        ways = list(WAYS)
        print(
            "a lopsided seed puts one arm first in at least 80% of the rounds: "
            + ", ".join(f"{100 * row['lopsided_share']:.0f}% of seeds at {row['rounds']} rounds" for row in rows[:2])
        )
        print("| noise | rounds | " + " | ".join(ways) + " |")
        print("| --- | --- |" + " --- |" * len(ways))
        for row in rows:
            print(f"| {row['noise']} | {row['rounds']} | " + " | ".join(f"{100 * row[w]:.1f}%" for w in ways) + " |")
        return
    rows = power(args.draws, args.rounds)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    margin = PTREG_METRICS[WALL_SECONDS].margin
    print(f"b over a, {args.rounds} rounds, balanced orders ({args.draws} runs each)")
    print(
        "| per-round sd of log ratio | noise | truth | interval excludes 1 | right way | better/worse, no margin | "
        f"better/worse, margin {100 * (margin or 0):g}% |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['spread']:g} | {row['noise']} | {row['effect']:g}x | {100 * row['resolved']:.1f}% | "
            f"{100 * row['resolved_right_way']:.1f}% | {100 * row['verdict_no_margin']:.1f}% "
            f"(Wilson upper {100 * row['verdict_no_margin_upper']:.1f}%) | {100 * row['verdict_margin']:.1f}% |"
        )


if __name__ == "__main__":
    main()
