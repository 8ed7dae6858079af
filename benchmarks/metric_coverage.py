"""How often the 95% intervals of arms comparisons cover the truth, by simulation.

Run: python benchmarks/metric_coverage.py [--replications N] [--json FILE]

Two cases, each through ptreg's own ``compare_arms`` (engine/workloads/arms.py):

- an evaluation: items drawn afresh from a population each replication (each item's chance of
  being answered differs, and so does its gain under the candidate), scored 0/1 by every seed.
  The truth is the population's mean gain. Compared: the interval paired by item (what ptreg
  reports) against the interval over seeds (each seed's mean score, paired by round), which
  treats the items as fixed.
- a training metric without items: per-seed losses with heavy tails (Student's t, 3 degrees of
  freedom) and now and then a seed that goes wrong (as seed 4 of warmup-heldout-loss did). The
  truth is the mean difference. Paired by round.

Nothing here times anything; the output is a table of coverages.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptreg.engine.workloads.arms import compare_arms
from ptreg.records.evaluator import MetricDeclaration
from ptreg.records.run_results import MetricSample

SCORE = MetricDeclaration(better="higher", unit="fraction")
LOSS = MetricDeclaration(better="lower", unit="nats/byte")


def covered(found: object, truth: float) -> bool | None:
    ci = getattr(found, "ci", None)
    return None if ci is None else bool(ci.low <= truth <= ci.high)


def evaluation(rng: np.random.Generator, items: int, seeds: int, gain: float) -> tuple[bool | None, bool | None]:
    base = rng.beta(2, 2, size=items)
    lift = rng.normal(gain, 0.15, size=items)  # items gain unequally; some lose
    cand = np.clip(base + lift, 0, 1)
    truth = float(np.mean(np.clip(rng.beta(2, 2, 200_000) + rng.normal(gain, 0.15, 200_000), 0, 1)) - 0.5)

    def arm(p: np.ndarray) -> list[MetricSample]:
        found = []
        for s in range(seeds):
            scores = (rng.random(items) < p).astype(float)
            found.append(
                MetricSample(
                    repeat=s,
                    seed=s,
                    values={"score": float(scores.mean())},
                    items={"score": {f"q{i}": float(v) for i, v in enumerate(scores)}},
                )
            )
        return found

    mine, theirs = arm(cand), arm(base)
    by_item = compare_arms(mine, theirs, "score", SCORE)
    # the same runs without their items: paired by round, over the seeds' means
    strip = [s.model_copy(update={"items": None}) for s in mine], [s.model_copy(update={"items": None}) for s in theirs]
    by_seed = compare_arms(strip[0], strip[1], "score", SCORE)
    return covered(by_item, truth), covered(by_seed, truth)


def training(rng: np.random.Generator, seeds: int, difference: float, bad: float) -> bool | None:
    def arm(shift: float) -> list[MetricSample]:
        losses = 1.05 + shift + 0.02 * rng.standard_t(3, size=seeds)
        losses = losses + np.where(rng.random(seeds) < bad, 0.3, 0.0)  # a seed that goes wrong
        return [MetricSample(repeat=s, seed=s, values={"loss": float(v)}) for s, v in enumerate(losses)]

    found = compare_arms(arm(difference), arm(0.0), "loss", LOSS)
    return covered(found, difference)


def rate(flags: list[bool | None]) -> str:
    known = [f for f in flags if f is not None]
    return f"{sum(known) / len(known):.3f}" if known else "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=400)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    rows = []
    for items, seeds in ((60, 1), (60, 5), (300, 1), (300, 5)):
        pairs = [evaluation(rng, items, seeds, 0.05) for _ in range(args.replications)]
        rows.append(
            {
                "case": f"evaluation, {items} items, {seeds} seed(s)",
                "paired by item": rate([p[0] for p in pairs]),
                "over seeds only": rate([p[1] for p in pairs]) if seeds > 1 else "unknown (one seed)",
            }
        )
    for seeds, bad in ((5, 0.0), (5, 0.1), (10, 0.1)):
        flags = [training(rng, seeds, -0.01, bad) for _ in range(args.replications)]
        rows.append(
            {
                "case": f"training loss, {seeds} seeds, t(3) noise, {bad:.0%} seeds go wrong",
                "paired by item": "no items",
                "over seeds only": rate(flags),
            }
        )
    print("| case | interval paired by item | interval over seeds (paired by round) |")
    print("| --- | --- | --- |")
    for row in rows:
        print(f"| {row['case']} | {row['paired by item']} | {row['over seeds only']} |")
    if args.json is not None:
        args.json.write_text(json.dumps({"replications": args.replications, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
