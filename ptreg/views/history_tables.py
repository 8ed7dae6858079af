"""`ptreg history` as tables a terminal holds: one table per metric (runs of arms) or per cell
(config and backend), the runs as rows, oldest first. A run is named by its id alone when every
run is of one attempt (the title says which); the unit and the direction go in the title, once,
not in every row."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..text import Table
from .arms_comparison import MetricHistoryRow
from .comparison import HistoryRow


def _number(value: float) -> str:
    return f"{value:.4g}"


def _interval(low: float | None, high: float | None, shown: Callable[[float], str] = _number) -> str:
    return "unknown" if low is None or high is None else f"{shown(low)} to {shown(high)}"


def _run_names(labels: Sequence[str]) -> tuple[dict[str, str], str]:
    """Each run's name in a row, and what the titles say of the runs: when every run is of one
    attempt, its run ids alone ("runs of ATTEMPT"); else attempt/run."""
    attempts = {label.rsplit("/", 1)[0] for label in labels}
    if len(attempts) == 1:
        return {label: label.rsplit("/", 1)[1] for label in labels}, f"runs of {next(iter(attempts))}"
    return {label: label for label in labels}, "runs"


def metric_tables(rows: Sequence[MetricHistoryRow], *, wide: bool) -> list[Table]:
    """A table per metric of runs of arms. ``wide``: a row per run, a column per arm, each
    cell the arm's mean and its 95% interval; else a row per run and arm (a table with many
    arms, which a column each would make too wide)."""
    ordered = sorted(rows, key=lambda m: m.started_at)  # stable: the arms keep their order within a run
    names, of_runs = _run_names([m.run for m in ordered])
    tables = []
    for metric in dict.fromkeys(m.metric for m in ordered):
        mine = [m for m in ordered if m.metric == metric]
        first = mine[0]
        repeats = {m.repeats for m in mine}
        said = f"{metric} ({first.unit}, {first.better} is better), {of_runs}, oldest first: each arm's mean"
        if wide and len(repeats) == 1:
            arms = list(dict.fromkeys(m.arm for m in mine))
            by_run: dict[str, dict[str, MetricHistoryRow]] = {}
            for m in mine:
                by_run.setdefault(m.run, {})[m.arm] = m
            table_rows = [[names[run], *(_cell(found.get(arm)) for arm in arms)] for run, found in by_run.items()]
            title = f"{said} over {repeats.pop()} repeats (95% interval)"
            tables.append(Table(title, table_rows, ["run", *arms]))
        else:
            table_rows = [
                [names[m.run], m.arm, _number(m.mean), _interval(m.low, m.high), str(m.repeats)] for m in mine
            ]
            tables.append(Table(f"{said} over its repeats", table_rows, ["run", "arm", "mean", "95% CI", "repeats"]))
    return tables


def _cell(row: MetricHistoryRow | None) -> str:
    if row is None:
        return "unknown"  # the arm has no value of this metric in this run: never drawn
    return f"{_number(row.mean)} ({_interval(row.low, row.high)})"


def _span(low: float | None, high: float | None, shown: Callable[[float], str]) -> str:
    """An interval of amounts with their unit once: "498.52-503.49 ms"."""
    if low is None or high is None:
        return "unknown"
    first, last = shown(low), shown(high)
    number, _, unit = last.partition(" ")
    return (
        f"{first.removesuffix(' ' + unit)}-{number} {unit}"
        if unit and first.endswith(" " + unit)
        else f"{first}-{last}"
    )


def cell_tables(rows: Sequence[HistoryRow], amount: Callable[[str], Callable[[float], str]]) -> list[Table]:
    """A table per cell of runs of steps: each run's median, the 95% interval of the typical
    value over repeats, and the median over the first run's. ``amount`` gives how a unit's
    values read (a time, or an instruction count)."""
    ordered = sorted(rows, key=lambda r: r.run.results.started_at)
    names, of_runs = _run_names([r.run.label for r in ordered])
    tables = []
    for config, backend in dict.fromkeys((r.config, r.backend) for r in ordered):
        mine = [r for r in ordered if (r.config, r.backend) == (config, backend)]
        table_rows = []
        for r in mine:
            shown = amount(r.unit)
            versus = "first" if r.versus_first is None else f"{r.versus_first:.3f}x"
            table_rows.append([names[r.run.label], shown(r.seconds), _span(r.low, r.high, shown), versus])
        title = f"config {config}, backend {backend}, {of_runs}, oldest first"
        tables.append(Table(title, table_rows, ["run", "median", "95% CI", "vs first"]))
    return tables
