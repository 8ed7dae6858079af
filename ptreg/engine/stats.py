"""Statistics of timing samples: medians, spread and 95% intervals, kept apart from measuring them.

A machine shared with others is noisy, so a cell is summarised by its median and its spread
(min, max and interquartile range) over repeats, and flagged when the spread is too wide to
trust. Its center and every ratio carry a 95% interval.

The interval is Student's t on the logarithms of the values (for a ratio, of the per-round
ratios), with the quantile from ``scipy.stats.t``. Timing noise is multiplicative, and at the
3 to 12 repeats ptreg takes a percentile bootstrap of the median covers the truth in only
76-93% of draws where this holds at 94-97%, heavy tails included
(docs/measurements.md#intervals). It is an interval of the typical value (the unloaded truth,
and the median): when busy moments only ever slow a repeat, the geometric mean is pulled up
with them and the interval covers it less often than 95%, so it is not labelled as one.
Nothing here times anything or imports NumPy; the summaries are part of the results record
(``records/run_results.py``).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..records.intervals import LEVEL, VarianceOf, t_quantile, t_quantile_df
from ..records.run_results import Interval, MetricSummary, Ratio, SignedInterval, Summary

# How one pair came out for the arm: the words of the won/lost/tied counts.
PairVerdict = Literal["won", "lost", "tied"]

METHOD = "Student's t on log values (interval of the typical value: true and median), scipy.stats.t"
# Rounds of one run are not independent: a load that lasts several rounds, or a drift, moves
# neighbouring rounds' ratios together, and an interval that treats them as independent is too
# narrow. The per-round log ratios' variance adds their lag-1 autocovariance (Newey and West,
# 1987, with the truncated kernel of lag 1), never going below the independent variance
# (benchmarks/interleaving.py; docs/measurements.md#interleaved-rounds).
PAIRED_METHOD = (
    "Student's t on per-round log ratios, lag-1 autocovariance added, never below independent "
    "(interval of the typical ratio: true and median), scipy.stats.t"
)
# An adaptive plan stops once its intervals look narrow, and stopping on a narrow look selects
# samples whose spread came out small. At the plain 95% quantile its intervals held the truth in
# only 91-93% of simulated plans, and after an early stop (3 to 5 rounds) under harsh noise in
# 64%. So the rule may not stop before ADAPTIVE_MIN_ROUNDS rounds, and its intervals, for the
# rule and the record alike, are taken at a quantile that depends on when it stopped: wider the
# earlier (benchmarks/adaptive_coverage.py; docs/measurements.md#adaptive-plans).
ADAPTIVE_MIN_ROUNDS = 6
ADAPTIVE_QUANTILE_LEVEL = 0.99
EARLY_QUANTILE_LEVEL = 0.999
EARLY_ROUNDS = 15  # below this many rounds, the early level


def adaptive_level(rounds: int) -> float:
    """The quantile level an adaptive plan's interval is taken at after ``rounds`` rounds."""
    return EARLY_QUANTILE_LEVEL if rounds < EARLY_ROUNDS else ADAPTIVE_QUANTILE_LEVEL


ADAPTIVE_NOTE = (
    f"; adaptive: no stop before {ADAPTIVE_MIN_ROUNDS} rounds, quantile {100 * EARLY_QUANTILE_LEVEL:g}% below "
    f"{EARLY_ROUNDS} rounds, else {100 * ADAPTIVE_QUANTILE_LEVEL:g}%"
)
ADAPTIVE_METHOD = METHOD + ADAPTIVE_NOTE
ADAPTIVE_PAIRED_METHOD = PAIRED_METHOD + ADAPTIVE_NOTE


def _dependent_variance(logs: Sequence[float]) -> float:
    """The variance of values taken one after another, for the interval of their mean: the
    sample variance plus twice the lag-1 autocovariance (on the same n - 1 scale), or the
    sample variance when that is larger (a negative autocovariance, as alternating orders can
    give, is not allowed to narrow the interval)."""
    independent = statistics.variance(logs)
    centre = statistics.fmean(logs)
    lag1 = sum((a - centre) * (b - centre) for a, b in itertools.pairwise(logs)) / (len(logs) - 1)
    return max(independent, independent + 2 * lag1)


def log_interval(values: Sequence[float], adaptive: bool = False, in_order: bool = False) -> tuple[float, float] | None:
    """The 95% interval of the typical value of positive values, as (low, high); unknown with
    fewer than two values or a value that is not positive. ``adaptive``: taken from a plan that
    stopped when its intervals looked narrow (``adaptive_level``); ``in_order``: the values
    are in the order they were taken, one a round, and may not be independent
    (``_dependent_variance``)."""
    if len(values) < 2 or any(not v > 0 for v in values):
        return None
    logs = [math.log(v) for v in values]
    level = adaptive_level(len(logs)) if adaptive else LEVEL
    variance = _dependent_variance(logs) if in_order else statistics.variance(logs)
    half = t_quantile(len(logs), level) * math.sqrt(variance / len(logs))
    center = statistics.fmean(logs)
    return math.exp(center - half), math.exp(center + half)


def _interval(found: tuple[float, float] | None, adaptive: bool, paired: bool = False) -> Interval | None:
    if found is None:
        return None
    if paired:
        method = ADAPTIVE_PAIRED_METHOD if adaptive else PAIRED_METHOD
    else:
        method = ADAPTIVE_METHOD if adaptive else METHOD
    return Interval(low=found[0], high=found[1], level=LEVEL, method=method)


def center_interval(values: Sequence[float], adaptive: bool = False) -> Interval | None:
    return _interval(log_interval(values, adaptive), adaptive)


def summarize(values: Sequence[float], adaptive: bool = False) -> Summary:
    if not values:
        raise ValueError("no values to summarise")
    ordered = sorted(values)
    median = statistics.median(ordered)
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    spread = (ordered[-1] - ordered[0]) / median if len(ordered) >= 2 and median > 0 else None
    return Summary(
        n=len(ordered),
        median=median,
        min=ordered[0],
        max=ordered[-1],
        q1=q1,
        q3=q3,
        relative_spread=spread,
        ci=center_interval(ordered, adaptive),
    )


def paired_ratio(
    numerator: Mapping[int, float], denominator: Mapping[int, float], adaptive: bool = False
) -> Ratio | None:
    """``numerator / denominator`` round by round, over the rounds both have: the median of the
    per-round ratios and its 95% interval, the ratios taken in round order as they may not be
    independent. Unknown when no round has both."""
    rounds = sorted(set(numerator) & set(denominator))
    ratios = [numerator[r] / denominator[r] for r in rounds if denominator[r] > 0]
    if not ratios:
        return None
    ci = _interval(log_interval(ratios, adaptive, in_order=True), adaptive, paired=True)
    return Ratio(median=statistics.median(ratios), n=len(ratios), ci=ci)


def resolved(value: Ratio | None) -> bool | None:
    """Whether the interval of a ratio excludes 1 (a difference this run resolves); unknown
    without an interval."""
    if value is None or value.ci is None:
        return None
    return not value.ci.low <= 1.0 <= value.ci.high


def inverted(summary: Summary, numerator: float) -> Summary:
    """Summary of ``numerator / x`` from a summary of positive x (e.g. tokens/s from s/step):
    the order reverses, so min and max swap and so do the quartiles and the interval's ends."""
    ci = summary.ci
    return Summary(
        n=summary.n,
        median=numerator / summary.median,
        min=numerator / summary.max,
        max=numerator / summary.min,
        q1=numerator / summary.q3,
        q3=numerator / summary.q1,
        relative_spread=(numerator / summary.min - numerator / summary.max) / (numerator / summary.median)
        if summary.n >= 2
        else None,
        ci=None if ci is None else ci.model_copy(update={"low": numerator / ci.high, "high": numerator / ci.low}),
    )


def too_wide(summary: Summary, limit: float) -> bool | None:
    """Whether the spread exceeds ``limit``; unknown with a single value."""
    if summary.relative_spread is None:
        return None
    return summary.relative_spread > limit


# --------------------------------------------------------------------------- metrics of arms

MEAN_METHOD = "Student's t on the values (interval of the mean), scipy.stats.t"
DIFFERENCE_METHOD = "Student's t on paired differences (interval of their mean), scipy.stats.t"
CROSSED_METHOD = (
    "two-way random effects, items crossed with seeds: (MS_items + MS_seeds - MS_residual) / (items x seeds), "
    "Student's t with Satterthwaite's degrees of freedom; never narrower than over the items or the seeds alone"
)
ITEMS_ONLY_METHOD = "Student's t over one seed's items: items only; seed variance unknown"
SEEDS_METHOD = "Student's t over the seeds, each averaged over its items"


def mean_interval(values: Sequence[float]) -> SignedInterval | None:
    """The 95% interval of the arithmetic mean: a score or a loss is averaged, not multiplied,
    and may be zero or negative. Unknown with fewer than two values."""
    if len(values) < 2:
        return None
    half = t_quantile(len(values)) * statistics.stdev(values) / math.sqrt(len(values))
    center = statistics.fmean(values)
    return SignedInterval(low=center - half, high=center + half, level=LEVEL, method=MEAN_METHOD)


def summarize_metric(values: Sequence[float], variance: VarianceOf | None = None) -> MetricSummary:
    """A metric's values over the repeats (one per seed), with the interval of their mean;
    ``variance``: what they vary over, from version 8 on (unknown before)."""
    if not values:
        raise ValueError("no values to summarise")
    return MetricSummary(
        n=len(values),
        mean=statistics.fmean(values),
        median=statistics.median(values),
        min=min(values),
        max=max(values),
        ci=mean_interval(values),
        variance=variance,
    )


def summarize_positive(values: Sequence[float]) -> MetricSummary:
    """A positive metric (a time, memory: one compared as a ratio) over the rounds: its mean and
    spread, and the 95% interval of its geometric mean, taken on the log scale so that it stays
    positive (``log_interval``; unknown with one round or a value that is not positive)."""
    found = summarize_metric(values, "rounds")
    span = log_interval(values)
    ci = None if span is None else SignedInterval(low=span[0], high=span[1], level=LEVEL, method=METHOD)
    return found.model_copy(update={"ci": ci, "scale": "log"})


@dataclass(frozen=True)
class Crossed:
    """The mean of a grid of values, items crossed with seeds, and its 95% interval."""

    mean: float
    ci: SignedInterval | None
    variance: VarianceOf
    df: float | None  # the t quantile's degrees of freedom, where they are not n - 1
    items: int
    seeds: int


def crossed_mean(grid: Sequence[Sequence[float]]) -> Crossed:
    """The mean of ``grid[item][seed]`` (every item scored in every seed) and its 95% interval,
    with items and seeds both drawn from populations: the next evaluation draws other items,
    and each seed trains a model of its own, so neither is fixed.

    The value of item i in seed s is taken as mean + item effect + seed effect + the rest
    (crossed random effects). The variance of the grand mean is then
    (MS_items + MS_seeds - MS_residual) / (I S) unbiased, from a two-way analysis of variance
    (Owen 2007, "The pigeonhole bootstrap", for why neither one-way view holds); the t quantile
    takes Satterthwaite's (1946) degrees of freedom for that sum of mean squares. The interval
    is never narrower than either one-way interval (over the items' means, or the seeds'): with
    few seeds the two-way estimate is itself noisy, a seed spread that happened to come out
    small would make it narrower than the items alone give, and two identical arms were then
    called different too often; the floor errs wide instead where seeds barely matter.
    benchmarks/metric_coverage.py checks false alarms and coverage under seed effects of 0 to
    0.2 logit (docs/workloads.md).

    One seed: the interval is over the items only, and says that the seeds' variance is
    unknown. One item: over the seeds. One of each: no interval."""
    items = len(grid)
    seeds = len(grid[0]) if items else 0
    if items == 0 or seeds == 0 or any(len(row) != seeds for row in grid):
        raise ValueError("a grid of items crossed with seeds, every item in every seed")
    item_means = [sum(row) / seeds for row in grid]
    seed_means = [sum(column) / items for column in zip(*grid, strict=True)]
    grand = sum(item_means) / items
    if seeds == 1 or items == 1:
        variance: VarianceOf = "items only" if seeds == 1 else "seeds"
        ci = mean_interval(item_means if seeds == 1 else seed_means)
        if ci is not None:
            ci = ci.model_copy(update={"method": ITEMS_ONLY_METHOD if seeds == 1 else SEEDS_METHOD})
        return Crossed(grand, ci, variance, None, items, seeds)
    cells = items * seeds
    ms_items = seeds * sum((m - grand) ** 2 for m in item_means) / (items - 1)
    ms_seeds = items * sum((m - grand) ** 2 for m in seed_means) / (seeds - 1)
    df_residual = (items - 1) * (seeds - 1)
    ms_residual = (
        sum(
            (v - m - c + grand) ** 2
            for row, m in zip(grid, item_means, strict=True)
            for v, c in zip(row, seed_means, strict=True)
        )
        / df_residual
    )
    two_way = (ms_items + ms_seeds - ms_residual) / cells
    # each view as (half-width, degrees of freedom): the two-way one, then either one-way one
    views = [(t_quantile_df(items - 1.0) * math.sqrt(ms_items / cells), items - 1.0)]
    views.append((t_quantile_df(seeds - 1.0) * math.sqrt(ms_seeds / cells), seeds - 1.0))
    if two_way > 0:
        spread = (ms_items**2 / (items - 1) + ms_seeds**2 / (seeds - 1) + ms_residual**2 / df_residual) / cells**2
        df = two_way**2 / spread
        views.insert(0, (t_quantile_df(df) * math.sqrt(two_way), df))
    half, df = max(views, key=lambda view: view[0])  # the first of the widest: the two-way one on a tie
    ci = SignedInterval(low=grand - half, high=grand + half, level=LEVEL, method=CROSSED_METHOD)
    return Crossed(grand, ci, "items and seeds", df, items, seeds)


def paired_difference(mine: Mapping[str, float], theirs: Mapping[str, float], higher_is_better: bool) -> Paired | None:
    """``mine - theirs`` over the keys both have (items, or rounds): the mean difference, its
    95% interval, and how many pairs went each way. Unknown when no key is shared."""
    keys = sorted(set(mine) & set(theirs))
    if not keys:
        return None
    differences = [mine[k] - theirs[k] for k in keys]
    won, lost, tied = _counted(differences, higher_is_better)
    interval = mean_interval(differences)
    if interval is not None:
        interval = interval.model_copy(update={"method": DIFFERENCE_METHOD})
    return Paired(statistics.fmean(differences), interval, len(keys), won, lost, tied)


def crossed_difference(
    mine: Mapping[str, Sequence[float]], theirs: Mapping[str, Sequence[float]], higher_is_better: bool
) -> Paired | None:
    """``mine - theirs`` item by item and seed by seed: each maps an item to its values in the
    same seeds, in the same order, on both sides. The mean difference with its interval over
    items and seeds (``crossed_mean``), and the items won, lost and tied (each item's
    difference averaged over the seeds). Unknown when no item is shared."""
    keys = sorted(set(mine) & set(theirs))
    if not keys:
        return None
    grid = [[a - b for a, b in zip(mine[k], theirs[k], strict=True)] for k in keys]
    found = crossed_mean(grid)
    won, lost, tied = _counted(list(item_differences(mine, theirs).values()), higher_is_better)
    return Paired(found.mean, found.ci, len(keys), won, lost, tied, found.variance, found.df)


def item_differences(mine: Mapping[str, Sequence[float]], theirs: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Each item both sides have, by id: its difference ``mine - theirs`` seed by seed,
    averaged over the seeds; what the items won, lost and tied count."""
    keys = sorted(set(mine) & set(theirs))
    return {k: statistics.fmean([a - b for a, b in zip(mine[k], theirs[k], strict=True)]) for k in keys}


def pair_verdict(difference: float, higher_is_better: bool) -> PairVerdict:
    """A pair (an item, or a round) won, lost or tied, by the sign of its difference and the
    metric's direction: the one rule behind the counts and `ptreg items`."""
    if difference == 0:
        return "tied"
    return "won" if (difference > 0) == higher_is_better else "lost"


def _counted(differences: Sequence[float], higher_is_better: bool) -> tuple[int, int, int]:
    """Pairs won, lost and tied (``pair_verdict``)."""
    verdicts = [pair_verdict(d, higher_is_better) for d in differences]
    return verdicts.count("won"), verdicts.count("lost"), verdicts.count("tied")


@dataclass(frozen=True)
class Paired:
    """Paired differences, summarised."""

    mean: float
    ci: SignedInterval | None
    n: int
    won: int
    lost: int
    tied: int
    variance: VarianceOf | None = None  # what the interval is over, where the pairs are items x seeds
    df: float | None = None


# --------------------------------------------------------------------------- across runs


# The fewest batches a verdict across runs needs is MIN_HISTORY (engine/comparison_rules.py).
# The calibration (HISTORY_TAILS) goes to 30 batches; a longer history uses its latest 30.
MAX_HISTORY = 30
# Runs taken one after another share whatever the machine was doing then (its load, its
# temperature, a build cache, a neighbour's job), and a history made of such runs measures
# none of the spread between one session and the next. Consecutive runs are one batch when the
# next starts less than this after the previous one finished.
BATCH_GAP_SECONDS = 30 * 60
# How far B's centre may lie from the history's median, in units of the history's spread (the
# raw Qn, ``spread``), when nothing changed: the tail of that ratio is Student's t with these
# degrees of freedom at this scale, per number of batches k. Fitted by simulation over run
# effects from normal to t(2) (t(2), the heaviest, sets every quantile), so that each fitted
# quantile from 20% down to 0.05% is at or above the worst family's
# (`python benchmarks/compare_calibration.py --table --table-draws 2000000 --seed 2026`;
# docs/comparing.md#calibration).
HISTORY_TAILS: dict[int, tuple[float, float]] = {
    4: (1.75, 1.5588),
    5: (1.75, 2.4999),
    6: (2.0, 1.5924),
    7: (2.0, 2.1818),
    8: (2.0, 1.4219),
    9: (2.0, 1.8505),
    10: (2.0, 1.4326),
    11: (2.0, 1.7496),
    12: (2.0, 1.4489),
    13: (2.0, 1.6985),
    14: (2.0, 1.4529),
    15: (2.0, 1.6702),
    16: (2.0, 1.4491),
    17: (2.0, 1.6605),
    18: (2.0, 1.4776),
    19: (2.0, 1.6584),
    20: (2.0, 1.4869),
    21: (2.0, 1.6361),
    22: (2.0, 1.5006),
    23: (2.0, 1.6315),
    24: (2.0, 1.4937),
    25: (2.0, 1.6400),
    26: (2.0, 1.5336),
    27: (2.0, 1.6357),
    28: (2.0, 1.5044),
    29: (2.0, 1.6627),
    30: (2.0, 1.5225),
}
RUNS_METHOD = (
    "B's centre against the median of the history's batch centres, in units of their Qn spread "
    "(Rousseeuw & Croux 1993), with a tail calibrated for run effects up to t(2)"
)


def run_centre(values: Sequence[float]) -> float | None:
    """A run's centre for one cell, in log units: the median of its repeats. A busy moment only
    slows a repeat, so a mean would follow it; the median does not. Unknown without a value or
    with one that is not positive."""
    if not values or any(not v > 0 for v in values):
        return None
    return math.log(statistics.median(values))


def _moment(text: str) -> datetime | None:
    try:
        found = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return found if found.tzinfo is not None else None


def batches(spans: Sequence[tuple[str, str]]) -> list[list[int]]:
    """Runs grouped into batches, given each run's (started_at, finished_at) in time order:
    indices of consecutive runs, the next starting less than ``BATCH_GAP_SECONDS`` after the
    previous finished. A time that cannot be read (or a run that ends before it starts) shows
    no gap: the run after it joins its batch."""
    grouped: list[list[int]] = []
    finished: datetime | None = None
    for index, (start, end) in enumerate(spans):
        begun, ended = _moment(start), _moment(end)
        apart = finished is not None and begun is not None and (begun - finished).total_seconds() >= BATCH_GAP_SECONDS
        if not grouped or apart:
            grouped.append([index])
        else:
            grouped[-1].append(index)
        if ended is None or begun is None or ended < begun:
            finished = None  # when this run ended is not known: the next cannot be shown apart from it
        else:
            finished = ended if finished is None else max(finished, ended)
    return grouped


def spread(centres: Sequence[float]) -> float:
    """The raw Qn of Rousseeuw & Croux (1993): the (h choose 2)-th smallest distance between
    two of the k values, h = k // 2 + 1. Half the values may be wild before it is; its
    constant is left out, since ``HISTORY_TAILS`` is calibrated on this raw value."""
    k = len(centres)
    h = k // 2 + 1
    distances = sorted(abs(a - b) for i, a in enumerate(centres) for b in centres[i + 1 :])
    return distances[h * (h - 1) // 2 - 1]


@dataclass(frozen=True)
class RunsShift:
    """Run B's centre against the centres of ``runs`` batches of runs of the code A measured:
    the ratio (B over their median), its 95% interval, and the two-sided p-value that B's code
    differs from theirs by more than the threshold."""

    ratio: float
    low: float
    high: float
    p: float
    runs: int


def shift_from_history(history: Sequence[float], b: float, threshold: float) -> RunsShift | None:
    """Batches are the unit: ``history`` holds the centres of k batches of runs of unchanged
    code (each the median of its runs' ``run_centre``), ``b`` the centre of the run under test.
    Whatever moves a batch's centre (a busy session, a drift of this one cell, a run slowed
    whole) is in the spread of those k centres, so B is judged against it. Run effects on a
    shared machine have heavy tails, and a mean and standard deviation of 4 to 10 of them
    follow one wild run (Student's t there raised 7-19% false alarms under t(2) effects): so
    ``(b - median) / spread`` instead, whose tail under every run effect from normal to t(2)
    lies within Student's t of ``HISTORY_TAILS[k]`` (a prediction interval for one more batch,
    Hahn & Meeker 1991, calibrated by simulation). Two-sided, against "B is within
    ``threshold`` of the history either way". Unknown with fewer than ``MIN_HISTORY`` or more
    than ``MAX_HISTORY`` centres."""
    from scipy.stats import t  # 0.7 s to import: only where runs are compared

    k = len(history)
    if k not in HISTORY_TAILS:
        return None
    centre = statistics.median(history)
    d = b - centre
    bound = math.log1p(threshold)
    scale = spread(history)
    if scale == 0:
        if max(history) == min(history):  # identical centres (a deterministic metric): beyond the bound or not
            exact = 0.0 if abs(d) > bound else 1.0
            return RunsShift(math.exp(d), math.exp(d), math.exp(d), exact, k)
        # ties hide the spread: the widest distance instead, which only errs towards no verdict
        scale = max(history) - min(history)
    df, factor = HISTORY_TAILS[k]
    se = scale * factor
    half = float(t.ppf(0.5 + LEVEL / 2, df)) * se
    beyond_slower = float(t.sf((d - bound) / se, df))
    beyond_faster = float(t.cdf((d + bound) / se, df))
    p = min(1.0, 2 * min(beyond_slower, beyond_faster))
    return RunsShift(math.exp(d), math.exp(d - half), math.exp(d + half), p, k)


# Instruction counts of the same code, counted the same way, do not drift between runs: five
# runs counted a kernel cell identically, and starting from another folder moved a count by
# 0.02% (docs/measurements.md#instruction-counts-amd-epyc). Two counted runs are compared by
# their repeats, with this allowance (log units, five times the largest move seen) for what
# a run's surroundings may still change between runs.
COUNT_DRIFT = 0.001


def shift_of_counts(a: Sequence[float], b: Sequence[float], threshold: float) -> RunsShift | None:
    """Run B's instruction counts against run A's for one cell: the ratio of their medians, and
    Welch's t on the log repeats with ``COUNT_DRIFT`` added once per run, two-sided against "B
    is within ``threshold`` of A" as ``shift_from_history`` is. Unknown with fewer than two
    positive counts on a side."""
    from scipy.stats import t

    if len(a) < 2 or len(b) < 2 or any(not v > 0 for v in (*a, *b)):
        return None
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    d = math.log(statistics.median(b)) - math.log(statistics.median(a))
    wa, wb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    variance = wa + wb + 2 * COUNT_DRIFT**2
    se = math.sqrt(variance)
    spread = wa**2 / (len(la) - 1) + wb**2 / (len(lb) - 1)
    df = min(variance**2 / spread, 1e6) if spread > 0 else 1e6
    half = float(t.ppf(0.5 + LEVEL / 2, df)) * se
    bound = math.log1p(threshold)
    p = min(1.0, 2 * min(float(t.sf((d - bound) / se, df)), float(t.cdf((d + bound) / se, df))))
    return RunsShift(math.exp(d), math.exp(d - half), math.exp(d + half), p, 2)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values: a hypothesis is rejected at level alpha when
    its adjusted p is below it, and the chance that any true one is rejected stays within alpha
    whatever the others are (BH's false discovery rate does not: with half of 60 cells changed,
    an unchanged one was flagged in 31% of comparisons)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [1.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
