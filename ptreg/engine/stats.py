"""Statistics of timing samples: medians, spread and 95% intervals, kept apart from measuring them.

A machine shared with others is noisy, so a cell is summarised by its median and its spread
(min, max and interquartile range) over repeats, and flagged when the spread is too wide to
trust. Its center and every ratio carry a 95% interval.

The interval is Student's t on the logarithms of the values (for a ratio, of the per-round
ratios), i.e. an interval of their geometric mean, with the quantile from ``scipy.stats.t``.
Timing noise is multiplicative, and at the 3 to 12 repeats ptreg takes a percentile bootstrap
of the median covers the truth in only 76-93% of draws where this holds at 94-97%, heavy
tails included (docs/measurements.md#intervals). Nothing here times anything or imports
NumPy; the summaries are part of the results record (``records/run_results.py``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..records.intervals import LEVEL, t_quantile
from ..records.run_results import Interval, MetricSummary, Ratio, SignedInterval, Summary

METHOD = "Student's t on log values (interval of the geometric mean), scipy.stats.t"
# An adaptive plan stops once its intervals look narrow, and stopping on a narrow look selects
# samples whose spread came out small: its 95% intervals held the truth in only 91-93% of
# simulated plans. Taken at the 99% quantile, for the stopping rule and the record alike, they
# held it in at least 97.6% of every setting simulated (benchmarks/adaptive_coverage.py;
# docs/measurements.md#adaptive-plans), so the 95% they claim is kept.
ADAPTIVE_QUANTILE_LEVEL = 0.99
ADAPTIVE_METHOD = f"{METHOD}; an adaptive plan's, at the 99% quantile so that it covers 95% after the stopping rule"


def log_interval(values: Sequence[float], adaptive: bool = False) -> tuple[float, float] | None:
    """The 95% interval of the geometric mean of positive values, as (low, high); unknown with
    fewer than two values or a value that is not positive. ``adaptive``: taken from a plan
    that stopped when its intervals looked narrow (``ADAPTIVE_QUANTILE_LEVEL``)."""
    if len(values) < 2 or any(not v > 0 for v in values):
        return None
    logs = [math.log(v) for v in values]
    level = ADAPTIVE_QUANTILE_LEVEL if adaptive else LEVEL
    half = t_quantile(len(logs), level) * statistics.stdev(logs) / math.sqrt(len(logs))
    center = statistics.fmean(logs)
    return math.exp(center - half), math.exp(center + half)


def _interval(found: tuple[float, float] | None, adaptive: bool) -> Interval | None:
    if found is None:
        return None
    return Interval(low=found[0], high=found[1], level=LEVEL, method=ADAPTIVE_METHOD if adaptive else METHOD)


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
    per-round ratios and its 95% interval. Unknown when no round has both."""
    rounds = sorted(set(numerator) & set(denominator))
    ratios = [numerator[r] / denominator[r] for r in rounds if denominator[r] > 0]
    if not ratios:
        return None
    ci = _interval(log_interval(ratios, adaptive), adaptive)
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


def mean_interval(values: Sequence[float]) -> SignedInterval | None:
    """The 95% interval of the arithmetic mean: a score or a loss is averaged, not multiplied,
    and may be zero or negative. Unknown with fewer than two values."""
    if len(values) < 2:
        return None
    half = t_quantile(len(values)) * statistics.stdev(values) / math.sqrt(len(values))
    center = statistics.fmean(values)
    return SignedInterval(low=center - half, high=center + half, level=LEVEL, method=MEAN_METHOD)


def summarize_metric(values: Sequence[float]) -> MetricSummary:
    if not values:
        raise ValueError("no values to summarise")
    return MetricSummary(
        n=len(values),
        mean=statistics.fmean(values),
        median=statistics.median(values),
        min=min(values),
        max=max(values),
        ci=mean_interval(values),
    )


def paired_difference(mine: Mapping[str, float], theirs: Mapping[str, float], higher_is_better: bool) -> Paired | None:
    """``mine - theirs`` over the keys both have (items, or rounds): the mean difference, its
    95% interval, and how many pairs went each way. Unknown when no key is shared."""
    keys = sorted(set(mine) & set(theirs))
    if not keys:
        return None
    differences = [mine[k] - theirs[k] for k in keys]
    better = sum((d > 0) == higher_is_better and d != 0 for d in differences)
    tied = sum(d == 0 for d in differences)
    interval = mean_interval(differences)
    if interval is not None:
        interval = interval.model_copy(update={"method": DIFFERENCE_METHOD})
    return Paired(statistics.fmean(differences), interval, len(keys), better, len(keys) - better - tied, tied)


@dataclass(frozen=True)
class Paired:
    """Paired differences, summarised."""

    mean: float
    ci: SignedInterval | None
    n: int
    won: int
    lost: int
    tied: int


# --------------------------------------------------------------------------- across runs


# A verdict across runs needs the spread of a cell's centre from batch to batch, and k batches
# estimate it from k values. Fewer than 4 give no verdict: the older test's false alarms
# passed 5% at 3 runs, and the tail below is fitted from 4 on.
MIN_HISTORY = 4
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
