"""How often the 95% intervals of arms comparisons cover the truth, and how often two identical
arms are called different, by simulation through ptreg's own functions.

Run: python benchmarks/metric_coverage.py [--replications N] [--json FILE]

Every number comes out of ``compare_arms``, ``better_word`` and ``summarize_arm_metric``
(engine/workloads/arms.py), fed ``MetricSample``s as a command's repeats would record them.

- An evaluation whose seeds matter: each seed trains a model of its own, so each arm has a seed
  effect (normal on the logit scale, sd 0 to 0.2, the two arms' effects in one seed correlated
  0 or 0.8). Items are drawn afresh from a population every replication (difficulty normal on
  the logit scale, sd 1.2; under the candidate each item gains unequally, some lose), each scored
  0/1 by every seed. The truth is the population's mean over items and seeds (Gauss-Hermite
  quadrature): for A/B the candidate's gain, for A/A zero, and for an arm alone its mean score.
  Reported: the share of A/A comparisons given a verdict (better or worse: a false alarm) with
  its Wilson interval, or with one seed the share given "no verdict"; the coverage of the true
  difference in A/B (what the run records, and as runs before results version 8 recorded it:
  items averaged over the seeds, Student's t over the items); and the coverage of each arm's
  own interval of its mean.
- A training metric without items: per-seed losses with heavy tails (Student's t, 3 degrees of
  freedom) and now and then a seed that goes wrong (as seed 4 of warmup-heldout-loss did).
  Paired by round.

Nothing here times anything; the output is a table. A simulation, so the same on any machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import expit
from scipy.stats import binomtest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptreg.engine.workloads.arms import better_word, compare_arms, summarize_arm_metric
from ptreg.records.evaluator import MetricDeclaration
from ptreg.records.run_results import MetricSample

SCORE = MetricDeclaration(better="higher", unit="fraction")
LOSS = MetricDeclaration(better="lower", unit="nats/byte")
BEFORE = 7  # the last results version whose item-paired interval ignored the seeds

# The item population, on the logit scale.
DIFFICULTY_MEAN, DIFFICULTY_SD = 0.4, 1.2
GAIN_MEAN, GAIN_SD = 0.15, 0.35


@dataclass(frozen=True)
class Scenario:
    items: int
    seeds: int
    seed_sd: float  # each arm's seed effect, logit
    correlation: float  # of the two arms' seed effects in one seed

    @property
    def name(self) -> str:
        tied = f", arms' seed effects correlated {self.correlation:g}" if self.correlation else ""
        return f"{self.items} items x {self.seeds} seed(s), seed sd {self.seed_sd:g} logit{tied}"


NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(120)


def expected(mean: float, variance: float) -> float:
    """E[expit(X)] for X normal: the population's chance of a correct answer."""
    return float(np.sum(WEIGHTS * expit(mean + np.sqrt(variance) * NODES)) / np.sum(WEIGHTS))


def truths(s: Scenario, gain: bool) -> tuple[float, float]:
    """The true difference (candidate minus baseline) and the baseline's true mean score."""
    base = expected(DIFFICULTY_MEAN, DIFFICULTY_SD**2 + s.seed_sd**2)
    if not gain:
        return 0.0, base
    cand = expected(DIFFICULTY_MEAN + GAIN_MEAN, DIFFICULTY_SD**2 + GAIN_SD**2 + s.seed_sd**2)
    return cand - base, base


def samples(scores: np.ndarray) -> list[MetricSample]:
    """One arm's repeats, as a command writes them: a score per seed and its items."""
    names = [f"q{i}" for i in range(scores.shape[0])]
    return [
        MetricSample(
            repeat=r,
            seed=r,
            values={"score": float(scores[:, r].mean())},
            items={"score": dict(zip(names, scores[:, r].tolist(), strict=True))},
        )
        for r in range(scores.shape[1])
    ]


def draw(rng: np.random.Generator, s: Scenario, gain: bool) -> tuple[list[MetricSample], list[MetricSample]]:
    """The candidate's repeats and the baseline's, on the same freshly drawn items."""
    difficulty = rng.normal(DIFFICULTY_MEAN, DIFFICULTY_SD, s.items)
    lift = rng.normal(GAIN_MEAN, GAIN_SD, s.items) if gain else np.zeros(s.items)
    z = rng.normal(size=(2, s.seeds))
    mine = s.seed_sd * z[0]
    theirs = s.seed_sd * (s.correlation * z[0] + np.sqrt(1 - s.correlation**2) * z[1])
    cand = rng.random((s.items, s.seeds)) < expit(difficulty[:, None] + lift[:, None] + mine[None, :])
    base = rng.random((s.items, s.seeds)) < expit(difficulty[:, None] + theirs[None, :])
    return samples(cand.astype(float)), samples(base.astype(float))


def inside(ci: object, truth: float) -> bool | None:
    low, high = getattr(ci, "low", None), getattr(ci, "high", None)
    return None if low is None or high is None else bool(low <= truth <= high)


def share(flags: list[bool | None]) -> str:
    known = [f for f in flags if f is not None]
    return f"{sum(known) / len(known):.3f}" if known else "unknown"


def wilson(hits: int, n: int) -> str:
    found = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="wilson")
    return f"{hits / n:.3f} ({found.low:.3f}-{found.high:.3f})"


def evaluation(s: Scenario, replications: int, seed: int) -> dict[str, str]:
    rng = np.random.default_rng(seed)
    difference, base_mean = truths(s, gain=True)
    alarms = no_verdict = 0
    now: list[bool | None] = []
    before: list[bool | None] = []
    own: list[bool | None] = []
    label = ""
    for _ in range(replications):
        mine, theirs = draw(rng, s, gain=False)
        found = compare_arms(mine, theirs, "score", SCORE)
        assert found is not None and found.variance is not None
        word = better_word(found, SCORE)
        alarms += word in ("better", "worse")
        no_verdict += word.startswith("no verdict")
        mine, theirs = draw(rng, s, gain=True)
        found = compare_arms(mine, theirs, "score", SCORE)
        assert found is not None and found.variance is not None
        label = found.variance
        now.append(inside(found.ci, difference))
        before.append(inside(getattr(compare_arms(mine, theirs, "score", SCORE, BEFORE), "ci", None), difference))
        summary = summarize_arm_metric(theirs, "score", SCORE, 8)
        own.append(inside(getattr(summary, "ci", None), base_mean))
    return {
        "case": s.name,
        "interval over": label if label != "items only" else "items only; seed variance unknown",
        "A/A verdicts (false alarms)": wilson(alarms, replications) if s.seeds > 1 else "-",
        "A/A no verdict": f"{no_verdict / replications:.3f}",
        "A/B coverage": share(now),
        "A/B coverage before (items averaged over seeds)": share(before),
        "arm's own interval, coverage": share(own),
    }


def training(rng: np.random.Generator, seeds: int, difference: float, bad: float) -> bool | None:
    def arm(shift: float) -> list[MetricSample]:
        losses = 1.05 + shift + 0.02 * rng.standard_t(3, size=seeds)
        losses = losses + np.where(rng.random(seeds) < bad, 0.3, 0.0)  # a seed that goes wrong
        return [MetricSample(repeat=s, seed=s, values={"loss": float(v)}) for s, v in enumerate(losses)]

    found = compare_arms(arm(difference), arm(0.0), "loss", LOSS)
    return inside(getattr(found, "ci", None), difference)


SCENARIOS = [
    *(Scenario(items, seeds, sd, 0.0) for sd in (0.0, 0.04, 0.1, 0.2) for items in (300, 1000) for seeds in (1, 5)),
    *(Scenario(items, 5, sd, 0.8) for sd in (0.1, 0.2) for items in (300, 1000)),
    Scenario(300, 2, 0.1, 0.0),
    Scenario(60, 5, 0.1, 0.0),
]
COLUMNS = [
    "case",
    "interval over",
    "A/A verdicts (false alarms)",
    "A/A no verdict",
    "A/B coverage",
    "A/B coverage before (items averaged over seeds)",
    "arm's own interval, coverage",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [evaluation(s, args.replications, 2026 + n) for n, s in enumerate(SCENARIOS)]
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + " --- |" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(row[c] for c in COLUMNS) + " |")
    rng = np.random.default_rng(2026)
    training_rows = []
    for seeds, bad in ((5, 0.0), (5, 0.1), (10, 0.1)):
        flags = [training(rng, seeds, -0.01, bad) for _ in range(args.replications)]
        training_rows.append(
            {"case": f"training loss, {seeds} seeds, t(3) noise, {bad:.0%} of seeds go wrong", "coverage": share(flags)}
        )
    print()
    print("| training metric, no items (paired by round, over the seeds) | coverage |")
    print("| --- | --- |")
    for row in training_rows:
        print(f"| {row['case']} | {row['coverage']} |")
    if args.json is not None:
        found = {"replications": args.replications, "rows": rows, "training": training_rows}
        args.json.write_text(json.dumps(found, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
