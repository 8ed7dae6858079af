"""`ptreg compare` and `ptreg history`: runs against runs, and an evaluator's runs over time."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import typer

from ..engine.comparison_rules import ADJUSTMENT, COUNTS_THRESHOLD, FAMILY_ERROR_RATE, MIN_HISTORY, TIMES_THRESHOLD
from ..errors import EXIT_CHECK_FAILED
from ..records.intervals import LEVEL
from ..text import counted
from .common import JsonFlag, print_json, registry_dir, say, say_wrapped


def _percent(fraction: float) -> str:
    return f"{100 * fraction:g}%"


def _seconds(value: float | None) -> str:
    return "unknown" if value is None else f"{1000 * value:,.2f} ms"


def _count(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.0f} instr"


def _amount(unit: str) -> Any:
    """How a cell's value is shown: a time, or an instruction count under the instructions timer."""
    return _count if unit == "instructions" else _seconds


def _times(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3f}x"


def _ratio(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:.3f}x" if low is None or high is None else f"{value:.3f}x ({low:.3f}-{high:.3f})"


class NoVerdict(StrEnum):
    """What a comparison that leaves a cell undecided does to --fail-on-regression's exit code."""

    fail = "fail"
    passes = "pass"


def compare(
    a: str = typer.Argument(
        ..., metavar="A", help="The run compared against: ATTEMPT/RUN_ID, or ATTEMPT for its latest complete run."
    ),
    b: str = typer.Argument(..., metavar="B", help="The run compared: ATTEMPT/RUN_ID, or ATTEMPT."),
    threshold: float | None = typer.Option(
        None,
        "--threshold",
        metavar="FRACTION",
        help="The change that counts, as a fraction: 0.05 is 5%. Default: "
        f"{_percent(COUNTS_THRESHOLD)} for instruction counts (their resolution), {_percent(TIMES_THRESHOLD)} for "
        "times and arms' metrics.",
    ),
    across_evaluators: bool = typer.Option(
        False,
        "--across-evaluators",
        help="Compare runs made under different evaluators: only the cells whose workload, config, backend, threads "
        "and step plan agree.",
    ),
    relative_to: str | None = typer.Option(
        None,
        "--relative-to",
        metavar="BACKEND",
        help="Compare each cell's time as a ratio to this backend's in the same round of its run: what slows or "
        "speeds up a whole run (a busy machine) cancels out.",
    ),
    history_runs: list[str] | None = typer.Option(
        None,
        "--history",
        metavar="RUN",
        help="A run of A's code to judge B against (repeatable): ATTEMPT/RUN_ID or ATTEMPT. Without it, the history "
        "is every complete run under A's evaluator on A's machine whose recorded code is A's, cell by cell.",
    ),
    fail_on_regression: bool = typer.Option(
        False,
        "--fail-on-regression",
        help="A CI gate: exit 1 when any cell of B is slower than A beyond the threshold, or any arm's metric is "
        "worse, after Holm's adjustment across them all; and exit 1 when any is given no verdict (too few runs of "
        "A's code, machines that differ, an unknown value) or nothing is compared, unless --no-verdict=pass.",
    ),
    no_verdict: NoVerdict = typer.Option(
        NoVerdict.fail,
        "--no-verdict",
        metavar="fail|pass",
        help="With --fail-on-regression, what a cell or metric given no verdict does to the exit code: fail (the "
        "default: a gate never passes on nothing) or pass (only a regression found fails).",
    ),
    as_json: bool = JsonFlag,
) -> None:
    from ..errors import UnusableInput
    from ..views.comparison import compare as compare_runs
    from ..views.tables import plain

    if no_verdict is not NoVerdict.fail and not fail_on_regression:
        raise UnusableInput("--no-verdict decides the exit code of --fail-on-regression; give both or neither")
    found = compare_runs(
        registry_dir(),
        a,
        b,
        threshold=threshold,
        across_evaluators=across_evaluators,
        relative_to=relative_to,
        history_refs=history_runs,
    )
    if as_json:
        print_json(found.to_json())
    else:
        say_wrapped(f"A: {found.a.label} ({found.a.results.evaluator}, started {found.a.results.started_at})")
        say_wrapped(f"B: {found.b.label} ({found.b.results.evaluator}, started {found.b.results.started_at})")
        if found.across_evaluators:
            say_wrapped(
                "ACROSS EVALUATORS: only the cells whose workload, config, backend, threads and step plan agree "
                f"are compared (the specs differ in: {', '.join(found.spec_differences) or 'the code version'})"
            )
        if found.machine_differences:
            say_wrapped("the machines differ, so absolute times are not comparable and no verdict is given:")
            for line in found.machine_differences:
                say_wrapped(f"  {line}")
        elif found.machine_unknowns:
            say_wrapped("machines: the same in all that is known of both; unknown on a side, so not compared:")
            for line in found.machine_unknowns:
                say_wrapped(f"  {line}")
        else:
            say_wrapped("machines: the same (CPU, features, cores, BLAS, NumPy, numba, Python, variables)")
        say_wrapped(f"method: {found.method}")
        if found.cells:
            say_wrapped(_history_line(found))
        if relative_to is not None:
            say_wrapped(f"each cell as a ratio to {relative_to}'s time in the same round of its run")
        value = _amount(found.unit) if relative_to is None else _times
        rows = [
            [
                c.config,
                c.backend,
                value(c.a_seconds),
                value(c.b_seconds),
                str(len(c.history)),
                _ratio(c.ratio, c.low, c.high),
                c.verdict,
            ]
            for c in found.cells
        ]
        if rows:
            headers = ["config", "backend", "A median", "B median", "runs", "B vs A's code (95% CI)", "verdict"]
            say(plain(rows, headers))  # the verdict is never cut: a table too wide is stacked
        if found.metrics:
            # nothing is cut, in a pipe or not: the means give way first, then a table still too
            # wide is laid out otherwise, its cells wrapped (an interval is a value, whole)
            say(plain([_metric_row(m) for m in found.metrics], METRIC_HEADERS, drop=(3, 4)))
            say_wrapped(
                f"{counted(len(found.metrics), 'arm metric')} compared, each interval at 95%: "
                f"{found.moved('worse')} worse, {found.moved('better')} better in B "
                f"({ADJUSTMENT} across them: any unchanged one flagged at most {100 * FAMILY_ERROR_RATE:g}% of the time)"
            )
        else:
            say_wrapped(
                f"{counted(len(found.cells), 'cell')} compared at a {100 * found.threshold:g}% threshold: "
                f"{found.moved('slower')} slower, {found.moved('faster')} faster "
                f"({ADJUSTMENT} across the cells: any unchanged one flagged at most {100 * FAMILY_ERROR_RATE:g}% "
                "of the time)"
            )
            if found.without_verdict:
                most = max(c.runs_needed for c in found.cells)
                say_wrapped(
                    f"{counted(found.without_verdict, 'cell')} without a verdict: too few batches of runs of A's code "
                    f"to judge B against (runs taken back to back are one); {counted(most, 'more run')} of A's code, "
                    "each apart from the others (or --history RUN ...), would give one"
                )
    if fail_on_regression and found.regressed:
        raise typer.Exit(EXIT_CHECK_FAILED)
    if fail_on_regression and not found.decided and no_verdict is NoVerdict.fail:
        what = (
            f"{counted(found.undecided, 'arm metric' if found.metrics else 'cell')} of B given no verdict"
            if found.undecided
            else "nothing compared"
        )
        say(
            f"ptreg: --fail-on-regression: {what}, so no regression is ruled out; the gate fails "
            "(--no-verdict=pass lets it pass)",
            err=True,
        )
        raise typer.Exit(EXIT_CHECK_FAILED)


def _history_line(found: Any) -> str:
    """Which runs formed the cells' histories: one list when every cell shares it."""
    histories = {tuple(c.history) for c in found.cells}
    how = "named with --history" if found.named_history else "runs of A's code on A's machine"
    if len(histories) == 1:
        runs = next(iter(histories))
        return f"history ({how}): {', '.join(runs)}"
    counts = sorted({len(h) for h in histories})
    return f"history ({how}): {counts[0]} to {counts[-1]} runs per cell (--json lists them)"


METRIC_HEADERS = ["arm", "metric", "better", "A mean", "B mean", "B vs A (95% CI)", "verdict"]


def _value(value: float | None, unit: str) -> str:
    return "unknown" if value is None else f"{value:.4g} {unit}"


def _metric_row(m: Any) -> list[str]:
    """A row of the comparison of two runs of arms (a views.arms_comparison.MetricShift)."""
    if m.estimate is None:
        versus = "unknown"
    elif m.kind == "ratio":
        versus = _ratio(m.estimate, m.low, m.high)
    else:
        span = "" if m.low is None or m.high is None else f" ({m.low:+.4g} to {m.high:+.4g})"
        versus = f"{m.estimate:+.4g} {m.unit}{span}, by {m.paired_by}"
    return [
        m.arm,
        m.metric,
        m.better,
        _value(m.a_mean, m.unit),
        _value(m.b_mean, m.unit),
        versus,
        m.verdict,
    ]


def history(
    attempt: str | None = typer.Argument(
        None, metavar="[ATTEMPT]", help="The attempt whose evaluator to follow (or give --evaluator)."
    ),
    evaluator: str | None = typer.Option(
        None, "--evaluator", metavar="NAME[@HASH]", help="The frozen evaluator whose runs to list."
    ),
    as_json: bool = JsonFlag,
) -> None:
    from ..errors import PtregError
    from ..views.comparison import arms_history, evaluator_history
    from ..views.history_tables import cell_tables, metric_tables
    from ..views.tables import natural_width, terminal_width

    if (attempt is None) == (evaluator is None):
        raise PtregError("give an ATTEMPT or --evaluator NAME[@HASH], one of them")
    rows = evaluator_history(
        registry_dir(),
        evaluator=evaluator,
        attempt=attempt,
        unreadable=lambda why: say(f"ptreg: warning: {why} (skipped)", err=True, one_line=True),
    )
    metrics = arms_history(registry_dir(), evaluator=evaluator, attempt=attempt)
    if as_json:
        print_json([r.to_json() for r in rows] + [m.to_json() for m in metrics])
        return
    if metrics:
        wide = metric_tables(metrics, wide=True)
        fits = all(natural_width(t.rows, t.headers) <= terminal_width() for t in wide)
        _say_tables(wide if fits else metric_tables(metrics, wide=False))
        say_wrapped(f"{counted(len({m.run for m in metrics}), 'complete run')} of arms")
        if not rows:
            return
        say()
    _say_tables(cell_tables(rows, _amount), drop=(3,))  # "vs first", an orientation, gives way first
    runs = len({r.run.label for r in rows})
    say_wrapped(f"{counted(runs, 'complete run')}; times are per step's worth of work, medians over whole repeats")


# The help states the numbers the comparison uses, from where the comparison reads them.
compare.__doc__ = (
    f"Is run B slower (or worse) than run A? Per cell: both medians, B against the runs of A's code with its "
    f"{_percent(LEVEL)} interval, and a verdict; for runs of arms, per arm and metric, in the metric's own terms.\n\n"
    "Batches of runs are the unit: the runs of A's code (A and the earlier runs whose recorded code for the cell is "
    "A's, or the runs given with --history) are grouped into batches by their times (runs taken back to back are one "
    "batch), and each cell of B is judged against the median and robust spread of the batches' centres, with a tail "
    f"calibrated for heavy-tailed run effects; with fewer than {MIN_HISTORY} batches no verdict is given, and the "
    "output says why and how many more runs would give one. The verdicts are adjusted together "
    f"({ADJUSTMENT}), so an unchanged cell is flagged in at most {_percent(FAMILY_ERROR_RATE)} of comparisons. "
    "Machines known to differ are listed first, and then no verdict is given; what is unknown of either machine "
    "(numba not installed, CPU features not reported) is listed as unknown and is no difference. "
    f"Exit {EXIT_CHECK_FAILED} when the runs were made under different evaluators (unless --across-evaluators), or, "
    "with --fail-on-regression, when a cell is slower or, unless --no-verdict=pass, given no verdict."
)
history.__doc__ = (
    f"Every complete run under one evaluator, oldest first, the runs as rows of a table per cell (per metric for runs "
    f"of arms): median, the {_percent(LEVEL)} interval of the typical value over repeats, and the median against the "
    "first run's (an orientation; `ptreg compare` tests)."
)


def _say_tables(tables: list[Any], drop: tuple[int, ...] = ()) -> None:
    """Each table under its title, wrapped to the terminal, an empty line between them; the
    columns in ``drop`` are left out of a table too wide (``--json`` keeps them)."""
    from ..views.tables import plain

    for i, table in enumerate(tables):
        if i:
            say()
        say_wrapped(f"{table.title}:")
        say(plain(table.rows, table.headers, drop=drop))
