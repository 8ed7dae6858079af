"""What every command shares: the registry option's value, JSON and table output, progress
bars and the warning-reporting registry load."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import typer

state: dict[str, Optional[str]] = {"registry": None}
command_state: dict[str, list[str]] = {"argv": []}  # as given to main(), for the run's provenance


def command_line() -> list[str]:
    return ["ptreg", *command_state["argv"]]

JsonFlag = typer.Option(False, "--json", help="Print JSON for scripts instead of text.")


def registry_dir() -> Path:
    from .registry import resolve_registry_dir

    return resolve_registry_dir(state["registry"])


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


@contextmanager
def progress_bar() -> Iterator[Optional[Callable[[str, int, int], None]]]:
    """A progress bar on stderr for long reads and writes, only when a person is watching."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(what: str, done: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total)
            bar.update(tasks[what], completed=done, total=total)

        yield update


def load():
    """The registry, with a warning on stderr for each record that cannot be used."""
    from .registry import load_directory

    with progress_bar() as progress:
        registry = load_directory(registry_dir(), progress)
    if registry.problems:
        for p in registry.problems[:5]:
            typer.echo(f"ptreg: warning: {p.location()}: {p.message} (skipped)", err=True)
        more = len(registry.problems) - 5
        typer.echo(
            f"ptreg: warning: {len(registry.problems)} record problem(s)"
            + (f", {more} more not shown" if more > 0 else "")
            + "; run `ptreg validate`",
            err=True,
        )
    return registry


def table(rows: list[list[Any]], headers: list[str], widths: Optional[dict[int, int]] = None) -> str:
    """A plain table; long text columns are cut to keep one row a line."""
    from tabulate import tabulate

    def cut(value: Any, width: Optional[int]) -> Any:
        text = "unknown" if value is None else value
        if width and isinstance(text, str) and len(text) > width:
            return text[: width - 1] + "…"
        return text

    widths = widths or {}
    shown = [[cut(v, widths.get(i)) for i, v in enumerate(row)] for row in rows]
    return tabulate(shown, headers=headers, tablefmt="simple", disable_numparse=True)


def room_left(rows: list[list[Any]], headers: list[str], column: int) -> int:
    """Characters left for ``column`` once the other columns fit the terminal (at least 24)."""
    import shutil

    used = sum(
        max(len(str(h)), *(len(str(r[i] if r[i] is not None else "unknown")) for r in rows)) + 2
        for i, h in enumerate(headers)
        if i != column
    )
    return max(24, shutil.get_terminal_size((120, 24)).columns - used)
