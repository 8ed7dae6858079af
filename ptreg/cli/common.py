"""What every command shares: the registry option's value, JSON output, progress bars and the
query index's load that reports unusable records as warnings.

The command modules import the library inside each command, not at their top: the whole
library costs about 200 ms to import (pydantic models built at import, measured with
``python -X importtime``), two thirds of a `ptreg show`, and each command needs only its part
of it. Everything else in ``cli/`` is imported at the top (docs/architecture.md).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..text import printable, printable_json

if TYPE_CHECKING:
    from ..store.reader import RegistryReader

REGISTRY_ENV = "PTREG_REGISTRY"
DEFAULT_REGISTRY_DIR = "attempts"

state: dict[str, str | None] = {"registry": None}
command_state: dict[str, list[str]] = {"argv": []}  # as given to main(), for the run's provenance

JsonFlag = typer.Option(False, "--json", help="Print JSON for scripts instead of text.")


def with_registry_option(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with its own ``--registry`` option, so that it works after the command's name
    as well as before it (where the root command takes it)."""

    @functools.wraps(command)
    def run(*args: Any, registry: str | None = None, **options: Any) -> None:
        if registry is not None:
            state["registry"] = registry
        command(*args, **options)

    option = typer.Option(None, "--registry", "-r", metavar="DIR", help="Registry directory (default: ./attempts).")
    signature = inspect.signature(command)
    own = inspect.Parameter("registry", inspect.Parameter.KEYWORD_ONLY, default=option, annotation=str | None)
    run.__signature__ = signature.replace(parameters=[*signature.parameters.values(), own])  # type: ignore[attr-defined]
    return run


def command_line() -> list[str]:
    return ["ptreg", *command_state["argv"]]


def registry_dir() -> Path:
    return resolve_registry_dir(state["registry"])


def resolve_registry_dir(option: str | None) -> Path:
    """--registry wins, then $PTREG_REGISTRY, then ./attempts."""
    if option:
        return Path(option)
    env = os.environ.get(REGISTRY_ENV)
    return Path(env) if env else Path(DEFAULT_REGISTRY_DIR)


def say(text: str = "", *, err: bool = False, nl: bool = True, one_line: bool = False) -> None:
    """Print ``text`` for a person, on stdout (or stderr with ``err``). Every line ptreg prints
    goes through here, and through ``printable`` (ptreg/text.py): records are hostile, and a
    lesson holding an escape sequence must show it, not have the terminal act on it (set its
    title, its colours, or reorder the line with a bidi override). ``one_line`` escapes
    newlines too, for an error or problem line quoting a value."""
    typer.echo(printable(text, lines=not one_line), err=err, nl=nl)


def print_json(data: Any) -> None:
    # JSON escapes C0 controls itself; printable_json escapes what it leaves raw (C1, bidi,
    # zero-width) as \uXXXX, so a script reads the same value and a terminal acts on nothing
    say(printable_json(json.dumps(data, indent=2, ensure_ascii=False)))


@contextmanager
def progress_bar() -> Iterator[Callable[[str, int, int], None] | None]:
    """A progress bar on stderr for long reads and writes, only when a person is watching."""
    if not sys.stderr.isatty():
        yield None
        return
    # rich.progress costs 44 ms to import: only at a terminal
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def update(what: str, done: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total)
            bar.update(tasks[what], completed=done, total=total)

        yield update


def _warn_problems(problems: list[tuple[str, str]]) -> None:
    if problems:
        for location, message in problems[:5]:
            say(f"ptreg: warning: {location}: {message} (skipped)", err=True, one_line=True)
        more = len(problems) - 5
        say(
            f"ptreg: warning: {len(problems)} record problem(s)"
            + (f", {more} more not shown" if more > 0 else "")
            + "; run `ptreg validate`",
            err=True,
        )


def load_index(*, warn: bool = True) -> RegistryReader:
    """The registry's query index, checked against its files first (``store/index.py``), with
    a warning for each record that cannot be used, as ``load`` gives them. Close it when done.
    With ``PTREG_INDEX=off`` every file is read instead, and no index is used or made."""
    from ..store.index import open_index, usable_directory

    root = registry_dir()
    index: RegistryReader
    if os.environ.get("PTREG_INDEX") == "off":
        from ..store.full_read import FullRead

        index = FullRead(root)
    else:
        if not usable_directory(root):
            from ..store.directory import load_meta

            load_meta(root)  # says in one line why this is no registry, or finishes a cut-short import
        with progress_bar() as progress:  # a first build reads every record
            index = open_index(root, progress=progress)
    if warn:
        _warn_problems(index.problems())
    return index
