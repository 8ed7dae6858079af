"""What every command shares: its state in Typer's context object (the registry option's value,
the command line), the command classes that give each command `--registry`, JSON output,
progress bars and the query index's load that reports unusable records as warnings.

The command modules import the library inside each command, not at their top: the whole
library costs about 200 ms to import (pydantic models built at import, measured with
``python -X importtime``), two thirds of a `ptreg show`, and each command needs only its part
of it. Everything else in ``cli/`` is imported at the top (docs/architecture.md).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.main import get_current_context

from ..store.names import DEFAULT_REGISTRY_NAME, nearest_registry
from ..text import printable, printable_json

if TYPE_CHECKING:
    from ..store.reader import RegistryReader

REGISTRY_ENV = "PTREG_REGISTRY"

JsonFlag = typer.Option(False, "--json", help="Print JSON for scripts instead of text.")
REGISTRY_HELP = (
    "Registry directory (default: ./attempts, else the nearest attempts/ above, up to the repository's root)."
)


@dataclass
class CliState:
    """What the command line was given, kept in Typer's context object (``main`` makes it)."""

    registry: str | None = None  # --registry, before the command's name or after it
    argv: list[str] = field(default_factory=list)  # as given to main(), for a run's provenance


def cli_state() -> CliState:
    """The state of the command being run: the context object of its root command."""
    return get_current_context().find_root().ensure_object(CliState)


def _keep_registry(context: typer.Context, _: Any, value: str | None) -> None:
    if value is not None:
        context.find_root().ensure_object(CliState).registry = value


def _registry_option() -> TyperOption:
    """``--registry`` given after a command's name (the root command takes it before)."""
    return TyperOption(
        param_decls=["--registry", "-r"],
        type=str,
        metavar="DIR",
        help=REGISTRY_HELP,
        expose_value=False,
        callback=_keep_registry,
    )


class RegistryCommand(TyperCommand):
    """A command that takes ``--registry`` after its name as well as before it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(_registry_option())


class RegistryGroup(TyperGroup):
    """A group of commands (``ptreg index``) that takes ``--registry`` after its name too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(_registry_option())


def help_when_alone(context: typer.Context) -> None:
    """A group's callback: given no command, it prints its help, and nothing has failed."""
    if context.invoked_subcommand is None:
        text = context.get_help()  # rich prints it itself and gives back nothing
        if text.strip():
            say(text)
        raise typer.Exit()


def command_line() -> list[str]:
    return ["ptreg", *cli_state().argv]


def registry_dir() -> Path:
    return resolve_registry_dir(cli_state().registry)


def resolve_registry_dir(option: str | None) -> Path:
    """--registry wins, then $PTREG_REGISTRY, then ./attempts or the nearest above it
    (``store/names.py``'s walk); with none anywhere, ./attempts, whose absence is then said."""
    if option:
        return Path(option)
    env = os.environ.get(REGISTRY_ENV)
    return Path(env) if env else found_registry() or Path(DEFAULT_REGISTRY_NAME)


def found_registry() -> Path | None:
    """The registry walked up to from the working directory, relative to it (``../../attempts``)
    so that every line naming it reads as the person would type it."""
    cwd = Path.cwd()
    found = nearest_registry(cwd)
    return None if found is None else Path(os.path.relpath(found, cwd))


def say(text: str = "", *, err: bool = False, nl: bool = True, one_line: bool = False) -> None:
    """Print ``text`` for a person, on stdout (or stderr with ``err``). Every line ptreg prints
    goes through here, and through ``printable`` (ptreg/text.py): records are hostile, and a
    lesson holding an escape sequence must show it, not have the terminal act on it (set its
    title, its colours, or reorder the line with a bidi override). ``one_line`` escapes
    newlines too, for an error or problem line quoting a value."""
    typer.echo(printable(text, lines=not one_line), err=err, nl=nl)


def say_wrapped(text: str, *, hang: str = "  ", err: bool = False) -> None:
    """``say`` a sentence wrapped to the terminal's width (``$COLUMNS``, else 120 in a pipe, as
    tables are fitted), its further lines indented by ``hang``: a long name or path is never
    cut, only carried to the next line."""
    import textwrap

    from ..views.tables import terminal_width

    lead = text[: len(text) - len(text.lstrip(" "))]
    lines = textwrap.wrap(
        text,
        terminal_width(),
        initial_indent="",
        subsequent_indent=lead + hang,
        break_long_words=False,
        break_on_hyphens=False,
    )
    say("\n".join(lines) if lines else text, err=err)


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


def warn_stray_files(root: Path) -> None:
    """One warning on stderr for each stray file of the term folder (a README), which the
    vocabularies were read without."""
    from ..store.term_folder import STRAY, list_term_folder

    for path in list_term_folder(root).strays:
        say(f"ptreg: warning: {path}: {STRAY}", err=True, one_line=True)


def load_index(*, warn: bool = True) -> RegistryReader:
    """The registry's query index, checked against its files first (``store/index/``), with
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
    warn_stray_files(root)
    if warn:
        _warn_problems(index.problems())
    return index
