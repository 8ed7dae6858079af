"""The command line: a tree of small command modules over the library, which never imports it.

Each module parses its options, calls the library and prints; ``main`` turns every failure
into one line on stderr and a stable exit code (0 ok, 1 a check failed, 2 unusable input).
"""

from __future__ import annotations

import sys

import typer

from .. import __version__, without_working_directory
from ..engine.interruption import Interrupted
from ..errors import EXIT_CHECK_FAILED, EXIT_UNUSABLE, PtregError
from . import (
    comparing,
    disposition,
    evaluator_commands,
    in_progress,
    index,
    items_command,
    managing,
    measuring,
    proposing,
    reading,
    readmit_commands,
    serving,
    site,
    suggesting,
    vocabularies,
)
from .common import REGISTRY_ENV, REGISTRY_HELP, CliState, RegistryCommand, help_when_alone, say


def _usage_error() -> type[Exception]:
    """Click's UsageError, the base of every usage error (unknown option, missing argument, bad
    value): typer 0.26 vendors Click and exports it only as the parent of its BadParameter."""
    base = typer.BadParameter.__base__
    assert base is not None and issubclass(base, Exception)
    return base


USAGE_ERROR = _usage_error()

app = typer.Typer(
    name="ptreg",
    help=(
        "An honest registry of experiment attempts: what was tried, what happened, what it taught. "
        f"Exit codes: 0 ok, {EXIT_CHECK_FAILED} a check failed, {EXIT_UNUSABLE} unusable input."
    ),
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        say(f"ptreg {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    context: typer.Context,
    registry: str | None = typer.Option(
        None,
        "--registry",
        "-r",
        metavar="DIR",
        envvar=REGISTRY_ENV,
        help=REGISTRY_HELP,
        show_envvar=True,
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    context.ensure_object(CliState).registry = registry
    help_when_alone(context)


# `ptreg --help` groups the commands in these panels (each command in one), shown in the order
# their first command is registered; within a panel, commands keep the order below.
RECORDS = "Records: the registry and its files"
READING = "Reading and comparing"
PROPOSING = "Proposing: the gate and frozen evaluators"
MEASURING = "Measuring and concluding"
SERVING = "Serving: the site and agents"
PANELS = (RECORDS, READING, PROPOSING, MEASURING, SERVING)

app.command(cls=RegistryCommand, rich_help_panel=RECORDS)(managing.init)
app.command(cls=RegistryCommand, rich_help_panel=RECORDS)(managing.validate)
app.command(cls=RegistryCommand, rich_help_panel=RECORDS)(managing.repair)
app.command(cls=RegistryCommand, rich_help_panel=READING)(reading.show)
app.command("list", cls=RegistryCommand, rich_help_panel=READING)(reading.list_attempts)
app.command(cls=RegistryCommand, rich_help_panel=READING)(reading.lineage)
app.command(cls=RegistryCommand, rich_help_panel=READING)(reading.streaks)
app.command(cls=RegistryCommand, rich_help_panel=READING)(reading.coverage)
app.add_typer(index.app, rich_help_panel=RECORDS)
app.command("import", cls=RegistryCommand, rich_help_panel=RECORDS)(managing.import_)
app.command(cls=RegistryCommand, rich_help_panel=RECORDS)(managing.export)
app.command(cls=RegistryCommand, rich_help_panel=RECORDS)(managing.schema)
app.command(cls=proposing.ProposalCommand, rich_help_panel=PROPOSING)(proposing.new)
app.command(cls=RegistryCommand, rich_help_panel=PROPOSING)(proposing.gate)
app.command(cls=RegistryCommand, rich_help_panel=PROPOSING)(readmit_commands.readmit)
app.command(cls=RegistryCommand, rich_help_panel=PROPOSING)(proposing.precedents)
app.command("next", cls=RegistryCommand, rich_help_panel=READING)(suggesting.next_attempts)
app.add_typer(evaluator_commands.app, rich_help_panel=PROPOSING)
app.add_typer(vocabularies.app, rich_help_panel=RECORDS)
app.command(cls=RegistryCommand, rich_help_panel=MEASURING)(measuring.backends)
app.command(cls=RegistryCommand, rich_help_panel=MEASURING)(measuring.workloads)
app.command(cls=RegistryCommand, rich_help_panel=MEASURING)(measuring.bench)
app.command(cls=RegistryCommand, rich_help_panel=MEASURING)(measuring.run)
app.command(cls=RegistryCommand, rich_help_panel=MEASURING)(in_progress.runs)
app.command(cls=RegistryCommand, rich_help_panel=MEASURING)(measuring.conclude)
app.add_typer(disposition.app, rich_help_panel=MEASURING)
app.command(cls=RegistryCommand, rich_help_panel=READING)(comparing.compare)
app.command(cls=RegistryCommand, rich_help_panel=READING)(comparing.history)
app.command(cls=RegistryCommand, rich_help_panel=READING)(items_command.items)
app.command(cls=RegistryCommand, rich_help_panel=SERVING)(site.site)
app.command(cls=RegistryCommand, rich_help_panel=SERVING)(serving.mcp)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure becomes one line on stderr and a stable exit code."""
    if argv is None:  # ptreg as a program, not called by other Python code
        sys.path[:] = without_working_directory(sys.path)
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=argv, prog_name="ptreg", standalone_mode=False, obj=CliState(argv=given))
    except PtregError as exc:
        say(f"ptreg: error: {exc.message}", err=True, one_line=True)
        sys.exit(exc.exit_code)
    except USAGE_ERROR as exc:  # every usage error exits 2
        context, message = getattr(exc, "ctx", None), getattr(exc, "format_message", None)
        command = context.command_path if context is not None else "ptreg"
        text = message() if callable(message) else str(exc)
        say(f"ptreg: error: {text} (see `{command} --help`)", err=True, one_line=True)
        sys.exit(EXIT_UNUSABLE)
    except typer.Abort as exc:
        if isinstance(exc.__context__, KeyboardInterrupt):  # Ctrl-C at a prompt: as anywhere else
            say("ptreg: interrupted", err=True)
            sys.exit(130)
        say("ptreg: aborted", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (e.g. `| head`); nothing left to say
        sys.exit(0)
    except KeyboardInterrupt:
        say("ptreg: interrupted", err=True)
        sys.exit(130)
    except Interrupted as exc:  # SIGTERM (or SIGINT) while `run` or `bench` measured
        say(f"ptreg: interrupted by {exc.name}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        say(f"ptreg: error: {where}{exc.strerror or exc}", err=True, one_line=True)
        sys.exit(EXIT_UNUSABLE)
    sys.exit(code if isinstance(code, int) else 0)
