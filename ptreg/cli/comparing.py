"""`ptreg compare` and `ptreg history`: runs against runs, and an evaluator's runs over time."""

from __future__ import annotations

import typer

from ..errors import EXIT_CHECK_FAILED
from ..text import counted
from .common import JsonFlag, print_json, registry_dir


def _seconds(value: float | None) -> str:
    return "unknown" if value is None else f"{1000 * value:,.2f} ms"


def _times(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3f}x"


def _ratio(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:.3f}x" if low is None or high is None else f"{value:.3f}x ({low:.3f}-{high:.3f})"


def compare(
    a: str = typer.Argument(
        ..., metavar="A", help="The run compared against: ATTEMPT/RUN_ID, or ATTEMPT for its latest complete run."
    ),
    b: str = typer.Argument(..., metavar="B", help="The run compared: ATTEMPT/RUN_ID, or ATTEMPT."),
    threshold: float = typer.Option(
        0.05, "--threshold", metavar="FRACTION", help="The change that counts, as a fraction: 0.05 is 5%."
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
    fail_on_regression: bool = typer.Option(
        False, "--fail-on-regression", help="Exit 1 when any cell of B is slower than A beyond the threshold."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Is run B slower than run A? Per cell: both medians, B/A with its 95% interval, and a verdict.

    The error term adds to each run's spread the drift between runs, from the evaluator's history on the machine or a floor; the cells' p-values are adjusted together (Benjamini-Hochberg). Machines that differ are listed first, and then no verdict is given. Exit 1 when the runs were made under different evaluators (unless --across-evaluators), or, with --fail-on-regression, when a cell is slower.
    """
    from ..views.comparison import FALSE_DISCOVERY_RATE
    from ..views.comparison import compare as compare_runs
    from ..views.tables import plain

    found = compare_runs(
        registry_dir(), a, b, threshold=threshold, across_evaluators=across_evaluators, relative_to=relative_to
    )
    if as_json:
        print_json(found.to_json())
    else:
        typer.echo(f"A: {found.a.label} ({found.a.results.evaluator}, started {found.a.results.started_at})")
        typer.echo(f"B: {found.b.label} ({found.b.results.evaluator}, started {found.b.results.started_at})")
        if found.across_evaluators:
            typer.echo(
                "ACROSS EVALUATORS: only the cells whose workload, config, backend, threads and step plan agree "
                f"are compared (the specs differ in: {', '.join(found.spec_differences) or 'the code version'})"
            )
        if found.machine_differences:
            typer.echo("the machines differ, so absolute times are not comparable and no verdict is given:")
            for line in found.machine_differences:
                typer.echo(f"  {line}")
        else:
            typer.echo("machines: the same (CPU, features, cores, BLAS, NumPy, numba, Python, variables)")
        typer.echo(f"error term: {found.error_term}")
        if relative_to is not None:
            typer.echo(f"each cell as a ratio to {relative_to}'s time in the same round of its run")
        value = _seconds if relative_to is None else _times
        rows = [
            [
                c.config,
                c.backend,
                value(c.a_seconds),
                value(c.b_seconds),
                _ratio(c.ratio, c.low, c.high),
                c.verdict,
            ]
            for c in found.cells
        ]
        if rows:
            typer.echo(
                plain(rows, ["config", "backend", "A median", "B median", "B/A (95% CI)", "verdict"], shrink=(5,))
            )
        typer.echo(
            f"{counted(len(found.cells), 'cell')} compared at a {100 * threshold:g}% threshold: "
            f"{found.moved('slower')} slower, {found.moved('faster')} faster "
            f"(Benjamini-Hochberg at a false discovery rate of {100 * FALSE_DISCOVERY_RATE:g}%)"
        )
    if fail_on_regression and found.moved("slower"):
        raise typer.Exit(EXIT_CHECK_FAILED)


def history(
    attempt: str | None = typer.Argument(
        None, metavar="[ATTEMPT]", help="The attempt whose evaluator to follow (or give --evaluator)."
    ),
    evaluator: str | None = typer.Option(
        None, "--evaluator", metavar="NAME[@HASH]", help="The frozen evaluator whose runs to list."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Every complete run under one evaluator, oldest first, per cell: median, 95% interval and B/A against the first run."""
    from ..errors import PtregError
    from ..views.comparison import evaluator_history
    from ..views.tables import plain

    if (attempt is None) == (evaluator is None):
        raise PtregError("give an ATTEMPT or --evaluator NAME[@HASH], one of them")
    rows = evaluator_history(
        registry_dir(),
        evaluator=evaluator,
        attempt=attempt,
        unreadable=lambda why: typer.echo(f"ptreg: warning: {why} (skipped)", err=True),
    )
    if as_json:
        print_json([r.to_json() for r in rows])
        return
    shown = [
        [
            r.config,
            r.backend,
            r.run.label,
            r.run.results.started_at,
            _seconds(r.seconds),
            "unknown" if r.low is None else f"{_seconds(r.low)}-{_seconds(r.high)}",
            "first" if r.versus_first is None else _ratio(*r.versus_first),
        ]
        for r in sorted(rows, key=lambda r: (r.config, r.backend, r.run.results.started_at))
    ]
    headers = ["config", "backend", "run", "started", "median", "95% CI", "vs first (95% CI)"]
    typer.echo(plain(shown, headers, drop=(3,)))
    runs = len({r.run.label for r in rows})
    typer.echo(f"{counted(runs, 'complete run')}; times are per step's worth of work, medians over whole repeats")
