"""How often `ptreg compare` cries wolf, and what it finds, where the truth is known.

Simulated runs go through ptreg's own comparison code, exactly as `ptreg compare` calls it on
runs read from disk: ``views/cell_verdicts.py`` ``judge_cell`` for each cell (the history grouped
into batches by the runs' times, B against the batch centres) and ``decide`` for the verdicts
(Holm across the cells); runs of arms through ``views/arms_comparison.py`` ``metric_shifts``
(Holm across every arm's metric). Each scenario is the harsh noise a review of the comparison
used, and each simulated run has, per cell:

- a run effect: the cell's centre moves from run to run by a draw of the named family (normal,
  Student's t with 3 or 2 degrees of freedom, the last with no variance at all) times 5%;
- noise within the run: each repeat times exp(N(0, 2%)), and slowed by 1 + Exp(mean 0.5) with
  probability 0.1 (a busy moment slows a repeat, it never speeds one up);
- ``shared machine``, the older model instead: a drift of each cell's own (5% or 30%), an AR(1)
  load across rounds (rho 0.8, 10%) shared by a round's backends, and a whole run slowed by
  20-50% with probability 0.2; absolute times, or each cell relative to a peer backend.

History runs start a day apart (each a batch of its own) unless the scenario takes them back to
back: ``one batch``, a minute apart, with a batch effect of 10% per cell shared by the history
and another drawn for B; ``batches of 2``, pairs of runs a minute apart, the pairs a day apart,
each pair with its own batch effect. An A/A comparison is B drawn like its history; a comparison that
flags any cell is a false alarm (with the rate's 95% Wilson interval), and a comparison whose
cells get no verdict is counted apart. An A/B comparison slows the changed cells in B by the
factor; power is the share of comparisons that flag at least one of them slower. ``half
changed``: 30 of 60 cells slowed 2x in B; a false alarm is then any of the 30 unchanged cells
flagged.

    python benchmarks/compare_calibration.py                  # every scenario, default sizes
    python benchmarks/compare_calibration.py --aa 400 --ab 50 --json
    python benchmarks/compare_calibration.py --table --table-draws 2000000 --seed 2026   # HISTORY_TAILS

``--table`` refits ``engine/stats.py HISTORY_TAILS``: for each history size k, the ratio
``|b - median| / Qn`` of k + 1 draws of each family (normal, t(5), t(3), t(2); ``--table-draws``
of t(2) and a quarter as many of the others), its quantiles from 20% down to 0.05%, and the Student's t (degrees of freedom on a grid of quarters, and a
scale) whose quantiles are at or above the worst family's at every one of them.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from ptreg.engine.stats import HISTORY_TAILS
from ptreg.views.cell_verdicts import HistoryRun, decide, judge_cell

FACTORS = (1.1, 1.5, 2.0)
DAY = 86400.0


def stamp(seconds: float) -> str:
    base = 1_796_083_200  # 2026-12-01T00:00:00Z
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base + seconds))


@dataclass(frozen=True)
class Scenario:
    name: str
    cells: int  # cells per run (half of them "mine", the ones a change touches, unless half_changed)
    repeats: int
    family: str  # of the run effects: normal, t3, t2, or shared (the older model)
    one_batch: bool = False  # the history taken back to back, with a batch effect of 10% per cell
    pairs: bool = False  # the history taken in batches of two runs back to back, each with its batch effect
    half_changed: bool = False  # A/A means: 30 of 60 cells slowed 2x, the others unchanged
    relative: bool = False  # shared machine: each cell as a ratio to its peer's time in the round


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("t(2) run effects", 12, 5, "t2"),
        Scenario("t(3) run effects", 12, 5, "t3"),
        Scenario("normal run effects", 12, 5, "normal"),
        Scenario("one batch, batch effect 10%", 12, 5, "normal", one_batch=True),
        Scenario("batches of 2 runs, batch effect 10%", 12, 5, "normal", pairs=True),
        Scenario("60 cells x 3 repeats, t(3)", 60, 3, "t3"),
        Scenario("half of 60 cells changed, t(3)", 60, 3, "t3", half_changed=True),
        Scenario("shared machine, absolute", 12, 5, "shared"),
        Scenario("shared machine, relative to peer", 12, 5, "shared", relative=True),
    )
}


def effect(rng: random.Random, family: str) -> float:
    """A run effect of scale 1 from the family."""
    z = rng.gauss(0, 1)
    if family == "normal":
        return z
    df = {"t3": 3, "t2": 2}[family]
    return z / math.sqrt(rng.gammavariate(df / 2, 2) / df)


def one_run(
    rng: random.Random, s: Scenario, slower: Callable[[int], float], batch: list[float] | None
) -> list[list[float]]:
    """Each cell's repeats of one run; cell i is ``slower(i)`` times slower."""
    if s.family == "shared":
        return shared_run(rng, s, slower)
    cells = []
    for i in range(s.cells):
        centre = 0.05 * effect(rng, s.family) + (batch[i] if batch is not None else 0.0)
        repeats = []
        for _ in range(s.repeats):
            outlier = 1 + rng.expovariate(2.0) if rng.random() < 0.1 else 1.0
            repeats.append(0.01 * slower(i) * math.exp(centre + rng.gauss(0, 0.02)) * outlier)
        cells.append(repeats)
    return cells


def shared_run(rng: random.Random, s: Scenario, slower: Callable[[int], float]) -> list[list[float]]:
    """The older model: configs of two backends (mine, then peer), a drift of each cell's own
    (5% in half the configs, 30% in the others), AR(1) load shared by a round, a whole run slowed
    20-50% one time in five; relative: mine's times over peer's, round by round."""
    configs = s.cells // 2
    whole = 1 + rng.uniform(0.2, 0.5) if rng.random() < 0.2 else 1.0
    drifts = [0.05 if c < configs // 2 else 0.30 for c in range(configs) for _ in range(2)]
    offsets = [rng.gauss(0, d) for d in drifts]
    times: list[list[float]] = [[] for _ in drifts]
    load = rng.gauss(0, 0.1)
    for _ in range(s.repeats):
        load = 0.8 * load + math.sqrt(1 - 0.8**2) * rng.gauss(0, 0.1)
        for i in range(len(drifts)):
            outlier = 1 + rng.expovariate(2.0) if rng.random() < 0.1 else 1.0
            factor = slower(i) if i % 2 == 0 else 1.0
            times[i].append(0.01 * factor * whole * math.exp(rng.gauss(0, 0.02) + load + offsets[i]) * outlier)
    if not s.relative:
        return times
    return [[m / p for m, p in zip(times[2 * c], times[2 * c + 1], strict=True)] for c in range(configs)]


def changed(s: Scenario, cell: int) -> bool:
    """Whether an A/B comparison slows this cell: half the cells (mine's, in the shared model)."""
    if s.family == "shared":
        return s.relative or cell % 2 == 0
    return cell % 2 == 0


def comparison(rng: random.Random, s: Scenario, k: int, factor: float) -> tuple[bool, bool, bool]:
    """One comparison: (any cell that should not be flagged is flagged, any changed cell found
    slower, no cell got a verdict)."""

    def moved(i: int) -> float:
        if s.half_changed:
            return 2.0 if i % 2 == 0 else 1.0
        return factor if changed(s, i) else 1.0

    batched = s.one_batch or s.pairs
    shared = [[rng.gauss(0, 0.10) for _ in range(s.cells)] for _ in range(k)] if batched else None
    # the batch each history run belongs to: all one, or pairs; and when it starts
    batch_of = [0 if s.one_batch else n // 2 if s.pairs else n for n in range(k)]
    starts = [batch_of[n] * DAY + 60.0 * n for n in range(k)]
    runs = [one_run(rng, s, lambda i: 1.0, None if shared is None else shared[batch_of[n]]) for n in range(k)]
    b = one_run(rng, s, moved, [rng.gauss(0, 0.10) for _ in range(s.cells)] if batched else None)
    spans = [(stamp(start), stamp(start + 50.0)) for start in starts]
    judged = []
    for i, values in enumerate(b):
        history = [HistoryRun(f"run-{n}", runs[n][i], *spans[n]) for n in reversed(range(k))]
        judged.append(judge_cell(str(i), "mine" if changed(s, i) else "peer", history, values, 0.05))
    decide(judged, same_machine=True)
    slowed = [(factor != 1.0 and changed(s, i)) or (s.half_changed and i % 2 == 0) for i in range(len(judged))]
    alarm = any(c.verdict in ("slower", "faster") for c, m in zip(judged, slowed, strict=True) if not m)
    found = any(c.verdict == "slower" for c, m in zip(judged, slowed, strict=True) if m)
    silent = all(c.verdict.startswith("no verdict") for c in judged)
    return alarm, found, silent


def row(s: Scenario, k: int, aa: int, ab: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    draws = [comparison(rng, s, k, 1.0) for _ in range(aa)]
    alarms = sum(d[0] for d in draws)
    silent = sum(d[2] for d in draws)
    power: dict[str, float | None] = {}
    if not s.half_changed:
        for factor in FACTORS:
            found = [comparison(rng, s, k, factor) for _ in range(ab)]
            given = [f for f in found if not f[2]]
            power[f"{factor:g}x"] = sum(f[1] for f in given) / len(given) if given else None
    low, high = wilson(alarms, aa)
    return {
        "scenario": s.name,
        "cells": s.cells if not s.relative else s.cells // 2,
        "repeats": s.repeats,
        "history_runs": k,
        "aa_comparisons": aa,
        "false_alarm_rate": alarms / aa,
        "false_alarm_95": [low, high],
        "no_verdict_rate": silent / aa,
        "ab_comparisons": ab,
        "power": power,
    }


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95% Wilson interval of a rate k/n: how sure the table's rates are."""
    z = 1.959964
    centre = (k + z * z / 2) / (n + z * z)
    half = z * math.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return max(0.0, centre - half), min(1.0, centre + half)


# --------------------------------------------------------------------------- runs of arms


def metrics_row(metrics: int, aa: int, seed: int) -> dict[str, object]:
    """A/A comparisons of two runs of one arm scored on ``metrics`` noisy metrics (each repeat's
    value 0.5 + N(0, 0.05), 5 repeats, compared by round), through ``metric_shifts``: a false
    alarm is any metric called better or worse."""
    from ptreg.engine.workloads.command import CommandWorkload
    from ptreg.records.evaluator import parse_spec
    from ptreg.records.run_results import Cell, Measurement, MetricSample, Provenance, Roles, new_results
    from ptreg.views.arms_comparison import metric_shifts

    spec = parse_spec(
        {
            "name": "many-metrics",
            "workload": "command",
            "command": ["python3", "x.py"],
            "arms": {"only": {}},
            "baseline": "only",
            "metrics": {f"m{i}": {"better": "higher", "unit": "fraction"} for i in range(metrics)},
            "repeats": 5,
            "seed": 0,
            "timeout_seconds": 10,
        },
        "spec",
    )
    workload = CommandWorkload()
    rng = random.Random(seed)

    def run(n: int) -> object:
        samples = [
            MetricSample(
                repeat=r,
                seed=r,
                values={f"m{i}": 0.5 + rng.gauss(0, 0.05) for i in range(metrics)},
                wall_seconds=1.0 + rng.random() * 0.01,
                peak_memory_mb=30.0,
            )
            for r in range(5)
        ]
        cell = Cell(backend="only", config="all", status="measured")
        workload.summarize(spec, cell, list(samples))
        workload.compare(spec, [cell], Roles(reference=None, peer=None))
        return new_results(
            spec,
            Measurement([], [cell], Roles(reference=None, peer=None), [], "complete", None),
            Provenance(["ptreg", "run"], stamp(n * DAY), stamp(n * DAY + 60), 2),
        )

    alarms = 0
    for _ in range(aa):
        shifts = metric_shifts(run(0), run(1), earlier=[], threshold=0.05, same_machine=True)  # type: ignore[arg-type]
        alarms += any(m.verdict in ("better", "worse") for m in shifts)
    low, high = wilson(alarms, aa)
    return {
        "scenario": f"runs of arms, {metrics} metrics",
        "cells": metrics,
        "repeats": 5,
        "history_runs": 1,
        "aa_comparisons": aa,
        "false_alarm_rate": alarms / aa,
        "false_alarm_95": [low, high],
        "no_verdict_rate": 0.0,
        "ab_comparisons": 0,
        "power": {},
    }


# --------------------------------------------------------------------------- the tail table


def fit_tails(draws: int, most: int, seed: int) -> dict[int, tuple[float, float]]:
    """``HISTORY_TAILS`` refitted by simulation (see the module's text)."""
    import numpy as np
    from scipy.stats import t

    levels = [0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 0.0005]
    rng = np.random.default_rng(seed)
    families = {
        "normal": lambda n: rng.standard_normal(n),
        "t5": lambda n: rng.standard_t(5, n),
        "t3": lambda n: rng.standard_t(3, n),
        "t2": lambda n: rng.standard_t(2, n),
    }

    def ratios(family: Callable[[int], object], k: int, n: int) -> object:
        h = k // 2 + 1
        rank = h * (h - 1) // 2 - 1
        i, j = np.triu_indices(k, 1)
        found = []
        for start in range(0, n, 100_000):
            m = min(100_000, n - start)
            x = np.asarray(family(m * (k + 1))).reshape(m, k + 1)
            history = x[:, :k]
            qn = np.partition(np.abs(history[:, i] - history[:, j]), rank, axis=1)[:, rank]
            found.append(np.abs(x[:, k] - np.median(history, axis=1)) / qn)
        return np.concatenate(found)

    table = {}
    for k in range(4, most + 1):
        # t(2) sets every quantile, and the tail it sets needs the most draws; the lighter
        # families are checked with a quarter as many
        worst = np.max(
            [
                np.quantile(ratios(f, k, draws if name == "t2" else draws // 4), [1 - a for a in levels])
                for name, f in families.items()
            ],
            axis=0,
        )
        best = None
        for df in np.arange(1.0, 8.01, 0.25):
            quantiles = np.array([t.ppf(1 - a / 2, df) for a in levels])
            scale = float(np.max(worst / quantiles))
            excess = float(np.max(np.log(scale * quantiles / worst)[2:]))  # at 5% and below
            if best is None or excess < best[0]:
                best = (excess, float(df), scale)
        assert best is not None
        table[k] = (best[1], round(best[2], 4))
        print(f"k={k}: df {best[1]}, scale {best[2]:.4f}, at most {math.exp(best[0]):.3f}x the worst family's")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aa", type=int, default=2000, help="A/A comparisons per row")
    parser.add_argument("--ab", type=int, default=200, help="A/B comparisons per row and factor")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--histories", type=int, nargs="+", default=[4, 10], help="runs of A's code")
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--metrics", type=int, nargs="*", default=[4, 10], help="runs of arms: metrics per arm")
    parser.add_argument("--table", action="store_true", help="refit HISTORY_TAILS instead")
    parser.add_argument("--table-draws", type=int, default=200_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.table:
        table = fit_tails(args.table_draws, max(HISTORY_TAILS), args.seed)
        print(json.dumps({str(k): v for k, v in table.items()}) if args.json else table)
        return
    rows = []
    started = time.monotonic()
    grid = [(s, k) for s in args.scenarios for k in args.histories]
    for n, (name, k) in enumerate(grid):
        rows.append(row(SCENARIOS[name], k, args.aa, args.ab, args.seed + n))
        print(f"[{n + 1}/{len(grid)}] {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    for m in args.metrics:
        rows.append(metrics_row(m, args.aa, args.seed + 1000 + m))
        print(f"[{m} metrics] {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| scenario | cells | runs of A's code | A/A: any flag (95% CI) | no verdict | power 1.1x | 1.5x | 2x |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        low, high = r["false_alarm_95"]  # type: ignore[misc]
        power: dict[str, float | None] = r["power"]  # type: ignore[assignment]
        shown = ["-" if power.get(f) is None else f"{100 * power[f]:.0f}%" for f in ("1.1x", "1.5x", "2x")]  # type: ignore[operator]
        print(
            f"| {r['scenario']} | {r['cells']} | {r['history_runs']} | {100 * r['false_alarm_rate']:.1f}% "  # type: ignore[operator]
            f"({100 * low:.1f}-{100 * high:.1f}) | {100 * r['no_verdict_rate']:.0f}% | "  # type: ignore[operator]
            f"{' | '.join(shown)} |"
        )


if __name__ == "__main__":
    main()
