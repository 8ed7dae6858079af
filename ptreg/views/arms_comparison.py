"""Comparing runs of arms across runs: is an arm better or worse in run B than in run A, metric
by metric, in each metric's own terms.

Runs under one evaluator give round r the same seed, so a difference metric is paired across
the runs as it is within one: by item where both runs wrote items (each item averaged over the
seeds), else by round. A deterministic command run twice shows a difference of exactly zero. A
ratio metric (a time, a throughput, memory) moves with the machine's load between runs, so it
is judged as backends' times are (``cell_verdicts.py``): batches of runs as the unit, B's centre
against the batches of runs of A's code for that arm, with no verdict from fewer than
``MIN_HISTORY`` batches; and across machines no verdict is given. Each interval is at 95%, one
per (arm, metric); the verdicts are adjusted across every (arm, metric) of the comparison
(Holm), so that an unchanged one is called better or worse in at most 5% of comparisons.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from ..engine.comparison_rules import FAMILY_ERROR_RATE, MIN_HISTORY
from ..engine.stats import MAX_HISTORY, batches, holm, run_centre, shift_from_history
from ..engine.workloads import workload_named
from ..engine.workloads.arms import better_word, compare_arms, declared, metric_values
from ..records.evaluator import ArmsSpec, MetricDeclaration
from ..records.intervals import t_quantile_df
from ..records.run_results import Cell, RunResults
from ..text import counted


@dataclass
class MetricShift:
    """One arm's metric, run B against run A."""

    arm: str
    metric: str
    unit: str
    better: str
    kind: str  # ratio or difference
    a_mean: float | None
    b_mean: float | None
    a_repeats: int
    b_repeats: int
    estimate: float | None = None  # B - A, or B / A
    low: float | None = None
    high: float | None = None
    paired_by: str | None = None  # item, round, or runs (a ratio judged against the runs of A's code)
    history: list[str] | None = None  # a ratio metric: the runs of A's code B was judged against, A first
    batches: int | None = None  # a ratio metric: the batches those runs form (runs back to back are one)
    p: float | None = None  # that B differs from A (a ratio: beyond the threshold), before adjustment
    q: float | None = None  # after Holm's adjustment across the comparison's (arm, metric)s
    verdict: str = "unknown"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def is_arms_run(results: RunResults) -> bool:
    return isinstance(results.spec, ArmsSpec)


def _cells(results: RunResults) -> dict[str, Cell]:
    return {c.backend: c for c in results.cells}


def _mean(cell: Cell | None, metric: str) -> float | None:
    summary = (cell.metrics or {}).get(metric) if cell is not None else None
    return summary.mean if summary is not None else None


def _label(results: RunResults) -> str:
    return f"{results.attempt}/{results.run_id}"


def metric_shifts(
    a: RunResults,
    b: RunResults,
    *,
    earlier: list[RunResults],
    threshold: float,
    same_machine: bool,
) -> list[MetricShift]:
    """Every (arm, metric) both runs recorded, B against A; ``earlier``: the other complete runs
    under A's evaluator on A's machine, from which each arm's runs of A's code are taken."""
    metrics = declared(b.spec, workload_named(b.spec.workload), [*a.cells, *b.cells])
    cells_a, cells_b = _cells(a), _cells(b)
    found = []
    for arm, cell_b in cells_b.items():
        cell_a = cells_a.get(arm)
        if cell_a is None:
            continue
        for metric, declaration in metrics.items():
            values_a = metric_values(cell_a.metric_samples or [], metric)
            values_b = metric_values(cell_b.metric_samples or [], metric)
            if not values_a or not values_b:
                continue
            row = MetricShift(
                arm,
                metric,
                declaration.unit,
                declaration.better,
                declaration.compare,
                _mean(cell_a, metric),
                _mean(cell_b, metric),
                len(values_a),
                len(values_b),
            )
            code = a.cell_code(arm)
            ours = [r for r in earlier if code is not None and r.cell_code(arm) == code]
            history = [(a, cell_a), *((r, c) for r in ours if (c := _cells(r).get(arm)) is not None)]
            _decide(row, history, cell_b, declaration, threshold, same_machine)
            found.append(row)
    _adjust(found)
    return found


def _adjust(rows: list[MetricShift]) -> None:
    """Holm across the comparison's (arm, metric)s: a better or worse stands only when its
    adjusted p is below ``FAMILY_ERROR_RATE``; one that does not is no difference resolved."""
    unjudged = ("no verdict", "not comparable", "unknown", "unresolved (one pair)")
    tested = [r for r in rows if r.p is not None and not r.verdict.startswith(unjudged)]
    for row, q in zip(tested, holm([r.p for r in tested if r.p is not None]), strict=True):
        row.q = q
        if row.verdict in ("better", "worse") and q >= FAMILY_ERROR_RATE:
            row.verdict = "no difference resolved"


def _p_of_interval(estimate: float, low: float, high: float, df: float) -> float:
    """The two-sided p-value that a difference is zero, read off its 95% interval as the
    Student's t interval it is, with its own degrees of freedom (n - 1 pairs, or Satterthwaite's
    over items and seeds): the half-width towards zero over the t quantile is its standard error
    (``records/intervals.py``)."""
    from scipy.stats import t

    half = estimate - low if estimate > 0 else high - estimate
    if df < 1 or half <= 0:
        return 0.0 if estimate != 0 else 1.0
    return float(2 * t.sf(abs(estimate) / (half / t_quantile_df(df)), df))


def _decide(
    row: MetricShift,
    history: list[tuple[RunResults, Cell]],
    cell_b: Cell,
    declaration: MetricDeclaration,
    threshold: float,
    same_machine: bool,
) -> None:
    cell_a = history[0][1]
    if declaration.compare == "difference":
        found = compare_arms(cell_b.metric_samples or [], cell_a.metric_samples or [], row.metric, declaration)
        if found is None:
            return
        row.estimate, row.paired_by = found.estimate, found.paired_by
        if found.ci is not None:
            row.low, row.high = found.ci.low, found.ci.high
            if all(math.isfinite(v) for v in (found.estimate, found.ci.low, found.ci.high)):
                df = found.df if found.df is not None else found.n - 1
                row.p = _p_of_interval(found.estimate, found.ci.low, found.ci.high, df)
        row.verdict = better_word(found, declaration)
        return
    ordered = sorted(history, key=lambda run: run[0].started_at)
    grouped = batches([(r.started_at, r.finished_at) for r, _ in ordered])[-MAX_HISTORY:]
    row.paired_by, row.batches = "runs", len(grouped)
    used = {_label(ordered[i][0]) for batch in grouped for i in batch}
    row.history = [label for label in (_label(r) for r, _ in history) if label in used]
    centres = []
    for batch in grouped:
        known = [
            c
            for i in batch
            if (c := run_centre(list(metric_values(ordered[i][1].metric_samples or [], row.metric).values())))
            is not None
        ]
        if known:
            centres.append(statistics.median(known))
    b_centre = run_centre(list(metric_values(cell_b.metric_samples or [], row.metric).values()))
    moved = None if b_centre is None else shift_from_history(centres, b_centre, threshold)
    if moved is not None:
        row.estimate, row.low, row.high, row.p = moved.ratio, moved.low, moved.high, moved.p
    if not same_machine:
        row.verdict = "not comparable: different machines"
    elif len(grouped) < MIN_HISTORY:
        more = MIN_HISTORY - len(grouped)
        if len(grouped) == len(history):
            row.verdict = f"no verdict: {len(history)} run(s) of A's code, {MIN_HISTORY} needed ({more} more)"
        else:
            row.verdict = (
                f"no verdict: history is {counted(len(grouped), 'batch', 'batches')} of {len(history)} runs taken back "
                f"to back; {MIN_HISTORY} batches needed ({counted(more, 'more run')}, each apart)"
            )
    elif moved is None:
        row.verdict = "unknown: a value that is not positive"
    else:
        row.verdict = "no difference resolved"
        if moved.p < 0.05:
            row.verdict = "better" if (moved.ratio > 1) == (declaration.better == "higher") else "worse"


@dataclass
class MetricHistoryRow:
    """One arm's metric in one run of an evaluator's history."""

    run: str
    started_at: str
    arm: str
    metric: str
    unit: str
    better: str
    mean: float
    low: float | None
    high: float | None
    repeats: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def metric_history(runs: list[tuple[str, RunResults]]) -> list[MetricHistoryRow]:
    """Each arm's mean and interval of every metric, run by run (oldest first, as given)."""
    rows = []
    for label, results in runs:
        metrics = declared(results.spec, workload_named(results.spec.workload), results.cells)
        for cell in results.cells:
            for metric, declaration in metrics.items():
                summary = (cell.metrics or {}).get(metric)
                if summary is None:
                    continue
                rows.append(
                    MetricHistoryRow(
                        label,
                        results.started_at,
                        cell.backend,
                        metric,
                        declaration.unit,
                        declaration.better,
                        summary.mean,
                        summary.ci.low if summary.ci else None,
                        summary.ci.high if summary.ci else None,
                        summary.n,
                    )
                )
    return rows
