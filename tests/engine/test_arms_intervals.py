"""Intervals of arms' metrics over items and seeds (results version 8): the two-way interval,
one seed's labelled interval that gives no verdict, items left out and counted, positive
metrics on the log scale, and runs before version 8 kept as they were."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy.stats import t

from ptreg.engine.stats import crossed_mean
from ptreg.engine.workloads.arms import better_word, compare_arms, intervals_over, summarize_arm_metric
from ptreg.engine.workloads.command import CommandWorkload
from ptreg.records.evaluator import MetricDeclaration, parse_spec
from ptreg.records.intervals import ONE_SEED
from ptreg.records.run_results import Cell, MetricSample

SCORE = MetricDeclaration(better="higher", unit="fraction")
WALL = MetricDeclaration(better="lower", unit="s", compare="ratio")


def repeats(grid: list[list[float]], metric: str = "score") -> list[MetricSample]:
    """An arm's repeats from ``grid[item][seed]``: repeat r has seed r and every item."""
    seeds = len(grid[0])
    return [
        MetricSample(
            repeat=r,
            seed=r,
            values={metric: statistics.fmean(row[r] for row in grid)},
            items={metric: {f"q{i}": row[r] for i, row in enumerate(grid)}},
        )
        for r in range(seeds)
    ]


def by_hand(grid: list[list[float]]) -> tuple[float, float, float, float]:
    """The two-way interval's half-width and Satterthwaite's degrees of freedom, and the
    half-widths over the items' means and over the seeds' means alone, from the textbook sums."""
    items, seeds = len(grid), len(grid[0])
    grand = sum(map(sum, grid)) / (items * seeds)
    rows = [sum(r) / seeds for r in grid]
    cols = [sum(r[s] for r in grid) / items for s in range(seeds)]
    ms_items = seeds * sum((m - grand) ** 2 for m in rows) / (items - 1)
    ms_seeds = items * sum((m - grand) ** 2 for m in cols) / (seeds - 1)
    df_rest = (items - 1) * (seeds - 1)
    ms_rest = sum((grid[i][s] - rows[i] - cols[s] + grand) ** 2 for i in range(items) for s in range(seeds)) / df_rest
    cells = items * seeds
    var = (ms_items + ms_seeds - ms_rest) / cells
    df = var**2 / ((ms_items**2 / (items - 1) + ms_seeds**2 / (seeds - 1) + ms_rest**2 / df_rest) / cells**2)
    over_items = t.ppf(0.975, items - 1) * statistics.stdev(rows) / math.sqrt(items)
    over_seeds = t.ppf(0.975, seeds - 1) * statistics.stdev(cols) / math.sqrt(seeds)
    return t.ppf(0.975, df) * math.sqrt(var), df, over_items, over_seeds


def test_the_two_way_interval_and_its_degrees_of_freedom_by_hand() -> None:
    # items and seeds both vary, and a little of the rest: the two-way interval is the widest
    grid = [
        [a + b + 0.05 * ((3 * i + s) % 4) for s, b in enumerate([0.0, 0.5, 0.3])]
        for i, a in enumerate([0, 1, 2, 3] * 2)
    ]
    two_way, df, over_items, over_seeds = by_hand(grid)
    assert two_way > max(over_items, over_seeds)
    found = crossed_mean(grid)
    assert found.variance == "items and seeds" and found.df == pytest.approx(df)
    assert found.ci is not None and found.ci.high - found.mean == pytest.approx(two_way)
    assert found.mean == pytest.approx(statistics.fmean(v for row in grid for v in row))


def test_the_interval_is_never_narrower_than_either_one_way_view() -> None:
    # no seed effect, and more left over than the seeds' means show: the two-way variance comes
    # out below the items' own, so the items alone give the interval, with their degrees of freedom
    grid = [[a + (0.5 if (i + s) % 2 else -0.5) for s in range(3)] for i, a in enumerate([0, 1, 2, 3] * 2)]
    two_way, _, over_items, over_seeds = by_hand(grid)
    assert over_seeds < two_way < over_items
    found = crossed_mean(grid)
    assert found.df == 7 and found.ci is not None and found.ci.high - found.mean == pytest.approx(over_items)


def test_the_two_way_variance_is_never_below_the_items_alone() -> None:
    # seeds that agree item for item add nothing: the items' own variance, with its degrees of freedom
    grid = [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    found = crossed_mean(grid)
    means = [1.0, 0.0, 1.0, 0.0, 1.0]
    half = t.ppf(0.975, 4) * statistics.stdev(means) / math.sqrt(5)
    assert found.df == 4 and found.ci is not None
    assert found.ci.high - found.mean == pytest.approx(half)


def test_a_seed_effect_makes_the_interval_wider_than_the_items_alone() -> None:
    # every item moves with its seed, the same way for the candidate: each seed trained a model
    # of its own, and the items cannot see that (averaged over the seeds, the shift cancels out)
    shift = [0.3, -0.2, 0.25, -0.35]
    base = [[0.5 + 0.01 * ((i * 7) % 5)] * 4 for i in range(40)]
    cand = [
        [v + 0.05 + shift[s] + 0.02 * (((i + s) * 3) % 4 - 1.5) for s, v in enumerate(row)]
        for i, row in enumerate(base)
    ]
    now = compare_arms(repeats(cand), repeats(base), "score", SCORE)
    before = compare_arms(repeats(cand), repeats(base), "score", SCORE, results_version=7)
    assert now is not None and before is not None and now.ci is not None and before.ci is not None
    assert now.estimate == pytest.approx(before.estimate)
    assert before.variance is None and before.ci.low > 0  # before: a confident "better"
    assert now.variance == "items and seeds" and now.df is not None and now.df < 10
    assert now.ci.high - now.ci.low > 10 * (before.ci.high - before.ci.low)
    assert now.ci.low < 0 < now.ci.high and better_word(now, SCORE) == "no difference resolved"
    assert better_word(before, SCORE) == "better"


def test_one_seed_is_labelled_and_gives_no_verdict_however_clear() -> None:
    cand = [[1.0]] * 30 + [[0.0]] * 2
    base = [[0.0]] * 30 + [[1.0]] * 2
    found = compare_arms(repeats(cand), repeats(base), "score", SCORE)
    assert found is not None and found.ci is not None and found.ci.low > 0.5
    assert found.variance == "items only" and "items only; seed variance unknown" in found.ci.method
    assert better_word(found, SCORE) == f"no verdict: {ONE_SEED}"
    assert better_word(found, SCORE, margin=0.01) == f"no verdict: {ONE_SEED}"
    own = summarize_arm_metric(repeats(cand), "score", SCORE, 8)
    assert own is not None and own.variance == "items only" and own.ci is not None
    assert intervals_over(own, found) == "items only; seed variance unknown"
    # before version 8 a seed was not told apart: the same data said better
    old = compare_arms(repeats(cand), repeats(base), "score", SCORE, results_version=7)
    assert old is not None and better_word(old, SCORE) == "better"


def test_items_missing_from_a_seed_are_left_out_and_counted() -> None:
    mine, theirs = repeats([[1.0, 1.0]] * 6), repeats([[0.0, 1.0]] * 6)
    assert mine[1].items is not None and theirs[0].items is not None
    del mine[1].items["score"]["q0"]  # seed 1 of mine lacks q0
    del theirs[0].items["score"]["q5"]  # seed 0 of theirs lacks q5
    theirs[1].items["score"]["extra"] = 1.0  # only one side, one seed
    found = compare_arms(mine, theirs, "score", SCORE)
    assert found is not None and found.paired_by == "item" and found.n == 4 and found.seeds == 2
    assert found.items_left_out == 3
    assert found.estimate == pytest.approx(0.5)
    own = summarize_arm_metric(mine, "score", SCORE, 8)
    assert own is not None and own.items == 5 and own.items_left_out == 1 and own.n == 2
    assert "1 item(s) left out" in intervals_over(own, found)


def test_an_arms_own_interval_carries_its_seeds() -> None:
    shift = [0.2, -0.2, 0.1]
    grid = [[0.5 + 0.1 * (i % 3) + shift[s] for s in range(3)] for i in range(30)]
    own = summarize_arm_metric(repeats(grid), "score", SCORE, 8)
    assert own is not None and own.variance == "items and seeds" and own.items == 30 and own.n == 3
    assert own.mean == pytest.approx(statistics.fmean(v for row in grid for v in row))
    # the seeds' means vary by the shift: the interval is about as wide as three seeds give
    seed_means = [statistics.fmean(row[s] for row in grid) for s in range(3)]
    over_seeds = t.ppf(0.975, 2) * statistics.stdev(seed_means) / math.sqrt(3)
    assert own.ci is not None and own.ci.high - own.mean >= over_seeds * 0.999
    old = summarize_arm_metric(repeats(grid), "score", SCORE, 7)
    assert old is not None and old.variance is None and old.items is None


def test_a_positive_metrics_interval_stays_positive() -> None:
    walls = [0.05, 0.06, 4.0]
    samples = [MetricSample(repeat=r, seed=r, values={}, wall_seconds=w) for r, w in enumerate(walls)]
    now = summarize_arm_metric(samples, "wall_seconds", WALL, 8)
    before = summarize_arm_metric(samples, "wall_seconds", WALL, 7)
    assert before is not None and before.ci is not None and before.ci.low < 0  # a time below zero
    assert now is not None and now.ci is not None and 0 < now.ci.low < now.ci.high
    assert now.scale == "log" and now.variance == "rounds" and "on log values" in now.ci.method
    geometric = math.exp(statistics.fmean(math.log(w) for w in walls))
    assert math.sqrt(now.ci.low * now.ci.high) == pytest.approx(geometric)
    assert intervals_over(now, None) == "rounds; log scale"


def test_the_workload_summarises_a_pool_of_older_runs_as_they_were() -> None:
    spec = parse_spec(
        {
            "name": "e",
            "workload": "command",
            "command": ["python3", "x.py"],
            "arms": {"a": {}, "b": {}},
            "baseline": "a",
            "metrics": {"score": {"better": "higher", "unit": "fraction"}},
            "repeats": 2,
            "seed": 0,
            "timeout_seconds": 10,
        },
        "spec",
    )
    samples = repeats([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    workload = CommandWorkload()
    old, new = Cell(backend="a", config="all", status="measured"), Cell(backend="a", config="all", status="measured")
    workload.summarize(spec, old, list(samples), results_version=7)
    workload.summarize(spec, new, list(samples))
    assert old.metrics is not None and new.metrics is not None
    assert old.metrics["score"].variance is None and new.metrics["score"].variance == "items and seeds"
