"""The command line: a tree of small command modules over the library, which never imports it.

Each module parses its options, calls the library and prints; ``main`` turns every failure
into one line on stderr and a stable exit code (0 ok, 1 a check failed, 2 unusable input).
"""

from __future__ import annotations

import sys

import typer
from typer._click.exceptions import ClickException  # typer 0.26 vendors Click and exports no base

from .. import __version__
from ..engine.interruption import Interrupted
from ..errors import EXIT_UNUSABLE, PtregError
from . import (
    comparing,
    disposition,
    evaluator,
    index,
    measuring,
    proposal,
    reading,
    registry,
    serving,
    site,
    suggesting,
    vocabulary,
)
from .common import REGISTRY_ENV, command_state, say, state, with_registry_option

app = typer.Typer(
    name="ptreg",
    help=(
        "An honest registry of training-runtime attempts: what was tried, what happened, what it "
        "taught. Exit codes: 0 ok, 1 a check failed, 2 unusable input."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        say(f"ptreg {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    registry: str | None = typer.Option(
        None,
        "--registry",
        "-r",
        metavar="DIR",
        envvar=REGISTRY_ENV,
        help="Registry directory (default: ./attempts).",
        show_envvar=True,
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    state["registry"] = registry


# The registry as a whole, reading it, proposing through the gate, the frozen evaluators the
# proposals are measured by, and measuring; in the order `ptreg --help` lists them.
app.command()(with_registry_option(registry.init))
app.command()(with_registry_option(registry.validate))
app.command()(with_registry_option(registry.repair))
app.command()(with_registry_option(reading.show))
app.command("list")(with_registry_option(reading.list_attempts))
app.command()(with_registry_option(reading.lineage))
app.command()(with_registry_option(reading.streaks))
app.command()(with_registry_option(reading.coverage))
app.command()(with_registry_option(index.index))
app.command("import")(with_registry_option(registry.import_))
app.command()(with_registry_option(registry.export))
app.command()(with_registry_option(registry.schema))
app.command()(with_registry_option(proposal.new))
app.command()(with_registry_option(proposal.gate))
app.command()(with_registry_option(proposal.precedents))
app.command("next")(with_registry_option(suggesting.next_attempts))
app.add_typer(evaluator.app)
app.add_typer(vocabulary.app)
app.command()(with_registry_option(measuring.backends))
app.command()(with_registry_option(measuring.workloads))
app.command()(with_registry_option(measuring.bench))
app.command()(with_registry_option(measuring.run))
app.command()(with_registry_option(measuring.conclude))
app.add_typer(disposition.app)
app.command()(with_registry_option(comparing.compare))
app.command()(with_registry_option(comparing.history))
app.command()(with_registry_option(site.site))
app.command()(with_registry_option(serving.mcp))


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure becomes one line on stderr and a stable exit code."""
    command_state["argv"] = list(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=argv, prog_name="ptreg", standalone_mode=False)
    except PtregError as exc:
        say(f"ptreg: error: {exc.message}", err=True, one_line=True)
        sys.exit(exc.exit_code)
    except ClickException as exc:  # a usage error: unknown option, missing argument, bad value
        if type(exc).__name__ == "NoArgsIsHelpError":
            # `ptreg` alone asks what ptreg does: the help is the answer (rich has printed it
            # already; plain Click hands it over as the message), and nothing failed.
            if exc.format_message().strip():
                say(exc.format_message())
            sys.exit(0)
        context = getattr(exc, "ctx", None)
        command = context.command_path if context is not None else "ptreg"
        say(f"ptreg: error: {exc.format_message()} (see `{command} --help`)", err=True, one_line=True)
        sys.exit(exc.exit_code)
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
