"""How often `ptreg compare` cries wolf, and what it finds, where the truth is known.

Simulated runs go through ptreg's own comparison code (``views/comparison.py``: ``judge_cell``
for each cell, ``decide`` for the comparison's verdicts, Benjamini-Hochberg included), exactly
as `ptreg compare` calls it on runs read from disk. Each simulated run has 6 configs of two
backends ("mine", the one a change touches, and "peer"), taken in interleaved rounds, and
everything that made the old comparison lie:

- a drift of each cell's own from run to run (a standard deviation in log units), set per
  scenario: ``quiet+noisy`` (half the configs 5%, half 30%), ``spread`` (5% to 30% across the
  configs), ``noisy`` (30% everywhere);
- one-sided outliers: a repeat is slowed by 1 + Exp(mean 0.5) with probability 0.1 (a busy
  moment slows a repeat, it never speeds one up);
- load that persists: across the rounds of a run, an AR(1) load (rho 0.8, 10%) shared by both
  backends of a round; and a whole run slowed by 20-50% with probability 0.2.

An A/A comparison is B drawn like the history (k runs of A's code, A among them); a comparison
that flags any cell is a false alarm. An A/B comparison slows every cell of "mine" in B by the
factor; its power is the share of comparisons that flag at least one of them slower. Absolute
times compare 12 cells; ``--relative-to peer`` compares mine's 6, each as a ratio to peer's time
in the same round.

    python benchmarks/compare_calibration.py --aa 4000        # 4,000 A/A and 500 A/B per row
    python benchmarks/compare_calibration.py --aa 400 --ab 100 --json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import dataclass

from ptreg.views.comparison import decide, judge_cell

CONFIGS = 6
REPEATS = 5
SCENARIOS = {
    "quiet+noisy": [0.05, 0.05, 0.05, 0.30, 0.30, 0.30],
    "spread": [0.05 + 0.05 * i for i in range(CONFIGS)],
    "noisy": [0.30] * CONFIGS,
}
FACTORS = (1.1, 1.5, 2.0)
HISTORIES = (4, 5, 10)  # fewer than 4 gives no verdict (engine/stats.py MIN_HISTORY)


@dataclass(frozen=True)
class Cell:
    config: int
    backend: str
    drift: float


def one_run(rng: random.Random, cells: list[Cell], slower: float) -> dict[tuple[int, str], list[float]]:
    """Each cell's time, round by round, of one simulated run; "mine" is ``slower`` times slower."""
    whole = 1 + rng.uniform(0.2, 0.5) if rng.random() < 0.2 else 1.0
    offset = {(c.config, c.backend): rng.gauss(0, c.drift) for c in cells}
    times: dict[tuple[int, str], list[float]] = {(c.config, c.backend): [] for c in cells}
    load = rng.gauss(0, 0.1)
    for _ in range(REPEATS):
        load = 0.8 * load + math.sqrt(1 - 0.8**2) * rng.gauss(0, 0.1)
        for c in cells:
            outlier = 1 + rng.expovariate(2.0) if rng.random() < 0.1 else 1.0
            factor = slower if c.backend == "mine" else 1.0
            noise = math.exp(rng.gauss(0, 0.02) + load + offset[(c.config, c.backend)])
            times[(c.config, c.backend)].append(0.01 * factor * whole * noise * outlier)
    return times


def as_cells(run: dict[tuple[int, str], list[float]], relative: bool) -> dict[tuple[int, str], list[float]]:
    if not relative:
        return run
    return {
        (config, "mine"): [m / p for m, p in zip(run[(config, "mine")], run[(config, "peer")], strict=True)]
        for config in range(CONFIGS)
    }


def comparison(rng: random.Random, cells: list[Cell], history: int, relative: bool, slower: float) -> tuple[int, int]:
    """One comparison: (cells flagged in any direction, changed cells flagged slower)."""
    runs = [as_cells(one_run(rng, cells, 1.0), relative) for _ in range(history)]
    b = as_cells(one_run(rng, cells, slower), relative)
    judged = [
        judge_cell(
            str(config), backend, [(f"run-{n}", run[(config, backend)]) for n, run in enumerate(runs)], values, 0.05
        )
        for (config, backend), values in b.items()
    ]
    decide(judged, same_machine=True)
    flagged = sum(c.verdict in ("slower", "faster") for c in judged)
    found = sum(c.verdict == "slower" and c.backend == "mine" for c in judged)
    return flagged, found


def row(scenario: str, relative: bool, history: int, aa: int, ab: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    cells = [Cell(i, b, d) for i, d in enumerate(SCENARIOS[scenario]) for b in ("mine", "peer")]
    alarms = sum(comparison(rng, cells, history, relative, 1.0)[0] > 0 for _ in range(aa))
    power = {}
    quiet_found = {}
    for factor in FACTORS:
        results = [comparison(rng, cells, history, relative, factor) for _ in range(ab)]
        power[factor] = sum(found > 0 for _, found in results) / ab
        quiet_found[factor] = sum(found for _, found in results) / (ab * CONFIGS)
    low, high = wilson(alarms, aa)
    return {
        "scenario": scenario,
        "cells": "relative to peer" if relative else "absolute",
        "history_runs": history,
        "aa_comparisons": aa,
        "false_alarm_rate": alarms / aa,
        "false_alarm_95": [low, high],
        "ab_comparisons": ab,
        "power": {f"{f:g}x": power[f] for f in FACTORS},
        "changed_cells_found": {f"{f:g}x": quiet_found[f] for f in FACTORS},
    }


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95% Wilson interval of a rate k/n: how sure the table's rates are."""
    z = 1.959964
    centre = (k + z * z / 2) / (n + z * z)
    half = z * math.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aa", type=int, default=2000, help="A/A comparisons per row")
    parser.add_argument("--ab", type=int, default=500, help="A/B comparisons per row and factor")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--histories", type=int, nargs="+", default=list(HISTORIES), help="runs of A's code")
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    started = time.monotonic()
    grid = [(s, r, k) for s in args.scenarios for r in (False, True) for k in args.histories]
    for n, (scenario, relative, history) in enumerate(grid):
        rows.append(row(scenario, relative, history, args.aa, args.ab, args.seed + n))
        print(f"[{n + 1}/{len(grid)}] {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(
        "| drift per cell | cells | runs of A's code | A/A: any flag (95% CI) | power 1.1x | 1.5x | 2x | cells found at 1.5x |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        low, high = r["false_alarm_95"]  # type: ignore[misc]
        power = r["power"]
        found = r["changed_cells_found"]
        print(
            f"| {r['scenario']} | {r['cells']} | {r['history_runs']} | {100 * r['false_alarm_rate']:.1f}% "  # type: ignore[operator]
            f"({100 * low:.1f}-{100 * high:.1f}) | {100 * power['1.1x']:.0f}% | {100 * power['1.5x']:.0f}% | "  # type: ignore[index]
            f"{100 * power['2x']:.0f}% | {100 * found['1.5x']:.0f}% |"  # type: ignore[index]
        )


if __name__ == "__main__":
    main()
