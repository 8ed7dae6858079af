"""The thin command-line layer: parse arguments, call the library, print.

Library modules are imported inside each command, so that a quick command such as
`ptreg show` pays only for what it uses.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from typer.exceptions import TyperException  # base of the (vendored) Click exceptions, typer >= 0.28

from . import __version__, cli_bench, cli_evaluator, cli_proposal
from .cli_common import JsonFlag, load, print_json, progress_bar, registry_dir, room_left, state, table
from .errors import EXIT_CHECK_FAILED, EXIT_UNUSABLE, PtregError
from .interrupt import Interrupted

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
        typer.echo(f"ptreg {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    registry: Optional[str] = typer.Option(
        None,
        "--registry",
        "-r",
        envvar="PTREG_REGISTRY",
        help="Registry directory (default: ./attempts).",
        show_envvar=True,
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    state["registry"] = registry


@app.command()
def init(
    directory: Optional[Path] = typer.Argument(None, help="Where to create it (default: the --registry directory)."),
) -> None:
    """Create an empty registry with the default vocabularies."""
    from .registry import init_registry

    root = directory or registry_dir()
    path = init_registry(root)
    typer.echo(f"created {path}")


@app.command()
def validate(
    path: Optional[Path] = typer.Argument(
        None, help="A registry directory, one record file of it, or an attempts.json file (default: the registry)."
    ),
    check_sources: Optional[Path] = typer.Option(
        None, "--check-sources", metavar="DIR", help="Also require local evidence sources to exist under DIR (URLs are not checked)."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Check every record against the schema and the registry's rules, reporting all problems."""
    from .problems import count_errors
    from .rules import validate_path

    target = path or registry_dir()
    if check_sources is not None and not check_sources.is_dir():
        raise PtregError(f"{check_sources}: --check-sources needs a directory")
    with progress_bar() as progress:
        registry, problems = validate_path(target, check_sources, progress)
    errors = count_errors(problems)
    if as_json:
        print_json(
            {
                "path": str(target),
                "attempts": len(registry.records),
                "errors": errors,
                "warnings": len(problems) - errors,
                "valid": errors == 0,
                "problems": [p.to_json() for p in problems],
            }
        )
    else:
        for p in problems:
            who = f" {p.attempt_id}:" if p.attempt_id else ""
            typer.echo(f"{p.location()}: {p.severity} [{p.rule}]{who} {p.message}")
        verdict = "valid" if errors == 0 else "invalid"
        typer.echo(f"{target}: {len(registry.records)} attempts, {errors} errors, {len(problems) - errors} warnings: {verdict}")
    if errors:
        raise typer.Exit(EXIT_CHECK_FAILED)


class Format(str, Enum):
    text = "text"
    markdown = "markdown"
    json = "json"


@app.command()
def repair(
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be done; change nothing."),
    as_json: bool = JsonFlag,
) -> None:
    """Put right what a killed ptreg left: link orphaned runs, finish a cut-short import, remove staged files.

    Every write is atomic, so a kill never leaves a partial record; it can leave a complete run folder that its attempt does not link yet, or staged temporary files. `ptreg validate` reports them as warnings. Exit 0 when nothing is left to put right, 1 when something needs a person (the message says what).
    """
    from .repair import repair as put_right

    root = registry_dir()
    report = put_right(root, dry_run=dry_run)
    if as_json:
        print_json(report.to_json())
    else:
        verb = "would " if dry_run else ""
        if report.journal_renames:
            typer.echo(f"finished an import that was cut short ({report.journal_renames} files)")
        for leftover in report.linked:
            typer.echo(f"{verb}link run {leftover.run_id} to {leftover.attempt_id} ({leftover.path})")
        for leftover in report.removed:
            typer.echo(f"{verb}remove {leftover.path} ({leftover.kind})")
        for leftover in report.left:
            typer.echo(f"left alone: {leftover.path}: {leftover.message}")
        if not (report.journal_renames or report.linked or report.removed or report.left):
            typer.echo(f"{root}: nothing to repair")
    if report.left:
        raise typer.Exit(EXIT_CHECK_FAILED)


@app.command()
def show(
    attempt_id: str = typer.Argument(..., metavar="ID", help="The attempt's id."),
    fmt: Format = typer.Option(Format.text, "--format", "-f", help="text, markdown or json."),
) -> None:
    """The dossier of one attempt: evidence, lesson, why it stopped, scope, disposition, lineage, sources."""
    from .dossier import render_json, render_markdown, render_text, sections
    from .registry import check_id, load_lineage

    registry = load_lineage(registry_dir(), check_id(attempt_id))
    attempt = registry.get(attempt_id)
    record = next(r for r in registry.records if r.attempt is attempt)
    parts = sections(attempt, registry.by_id(), registry.meta, record.file, registry.root)
    if fmt is Format.json:
        print_json(render_json(attempt, parts))
    elif fmt is Format.markdown:
        typer.echo(render_markdown(attempt, parts), nl=False)
    else:
        typer.echo(render_text(attempt, parts), nl=False)


@app.command("list")
def list_attempts(
    status: List[str] = typer.Option([], "--status", help="Only this status (repeatable)."),
    family: List[str] = typer.Option([], "--family", help="Only this family (repeatable)."),
    kind: List[str] = typer.Option([], "--kind", help="Only this kind (repeatable)."),
    method: List[str] = typer.Option([], "--method", help="Uses any of these methods (repeatable; OR)."),
    base: List[str] = typer.Option([], "--base", help="Uses any of these bases (repeatable; OR)."),
    objective: List[str] = typer.Option([], "--objective", help="Only this objective (repeatable)."),
    failures_only: bool = typer.Option(False, "--failures-only", help="Only failed, regressed and inconclusive."),
    as_json: bool = JsonFlag,
) -> None:
    """List attempts, filtered by shape: has anything like this been tried?"""
    from .model import STATUSES
    from .queries import Filter, select

    unknown = [s for s in status if s not in STATUSES]
    if unknown:
        raise PtregError(f"--status: unknown status {unknown[0]!r} (one of: {', '.join(STATUSES)})")
    registry = load()
    query = Filter(status, family, kind, method, base, objective, failures_only)
    found = select(registry.attempts, query)
    if as_json:
        print_json([a.to_json_dict() for a in found])
        return
    rows = [[a.id, a.status, a.family, a.kind, a.objective or "", ",".join(a.methods or ()), a.lesson] for a in found]
    if rows:
        headers = ["id", "status", "family", "kind", "objective", "methods", "lesson"]
        typer.echo(table(rows, headers, {6: room_left(rows, headers, 6)}))
    typer.echo(f"{len(found)} of {len(registry.attempts)} attempts")


@app.command()
def lineage(
    attempt_id: str = typer.Argument(..., metavar="ID", help="The attempt's id."),
    as_json: bool = JsonFlag,
) -> None:
    """The varied_from chain of an attempt, oldest first, and what superseded it."""
    from .lineage import ancestry, successors
    from .registry import check_id, load_lineage

    registry = load_lineage(registry_dir(), check_id(attempt_id))
    by_id = registry.by_id()
    chain = ancestry(attempt_id, by_id)
    later = successors(attempt_id, by_id)
    if as_json:
        print_json(
            {
                "id": attempt_id,
                "chain": [{"id": a.id, "status": a.status, "varied_from": a.varied_from, "varied": a.varied} for a in chain],
                "missing_ancestor": chain[0].varied_from,
                "superseded_by": [
                    {"id": s.attempt.id, "depth": s.depth, "status": s.attempt.status, "varied": s.attempt.varied} for s in later
                ],
            }
        )
        return
    if chain[0].varied_from is not None:
        typer.echo(f"   ({chain[0].varied_from}: not in this registry)")
    for step, a in enumerate(chain, start=1):
        marker = "*" if a.id == attempt_id else " "
        typer.echo(f"{marker}{step:>2}. {a.id} [{a.status}]")
        if a.varied is not None:
            typer.echo(f"      varied: {a.varied}")
    if later:
        typer.echo("superseded by:")
        for s in later:
            typer.echo(f"  {'  ' * (s.depth - 1)}{s.attempt.id} [{s.attempt.status}]" + (f": {s.attempt.varied}" if s.attempt.varied else ""))
    else:
        typer.echo("superseded by: nothing yet")


@app.command()
def streaks(as_json: bool = JsonFlag) -> None:
    """Per objective, the negatives at the tip of its deepest chain: CAUTION at 2, STOP AND RETHINK at 3+."""
    from .streaks import OK, streaks as find_streaks

    found = find_streaks(load().attempts)
    if as_json:
        print_json([s.to_json() for s in found])
        return
    rows = [[s.level, s.objective, s.negatives, len(s.chain), " -> ".join(a.id for a in s.chain)] for s in found]
    typer.echo(table(rows, ["level", "objective", "negatives", "depth", "chain (oldest first)"], {4: 90}))
    for s in found:
        if s.level != OK:
            typer.echo(f"\n{s.level}: {s.objective} ends in {s.negatives} negatives at {s.tip.id}.")
            typer.echo(f"  tip lesson: {s.tip.lesson or 'unknown'}")


@app.command()
def coverage(as_json: bool = JsonFlag) -> None:
    """How many non-infrastructure attempts carry each shape field, and the vocabulary in use."""
    from .queries import coverage as compute

    registry = load()
    result = compute(registry.attempts, registry.meta)
    if as_json:
        print_json(result.to_json())
        return
    typer.echo(f"shape fields of {result.shaped_total} non-infrastructure attempts")
    rows = [[f.field, f.carried, f.total, "n/a" if f.share is None else f"{f.share:.0%}"] for f in result.fields]
    typer.echo(table(rows, ["field", "carried", "of", "share"]))
    typer.echo("\nvocabulary in use")
    labels = {True: "", False: "NOT IN VOCABULARY", None: "(no vocabulary)"}
    rows = [[t.vocabulary, t.term, t.count, labels[t.defined]] for t in result.terms]
    typer.echo(table(rows, ["vocabulary", "term", "attempts", "note"]))


@app.command("import")
def import_(
    file: Path = typer.Argument(..., help="An attempts.json file, schema_version 1 or 2."),
    replace: bool = typer.Option(False, "--replace", help="Overwrite attempts whose ids the registry already holds."),
    as_json: bool = JsonFlag,
) -> None:
    """Import a single-file attempts.json into the registry (creating it if needed): all or nothing."""
    from .interchange import ImportRefused, import_file

    root = registry_dir()
    try:
        with progress_bar() as progress:
            report = import_file(root, file, replace=replace, progress=progress)
    except ImportRefused as refused:
        for p in refused.problems[:20]:
            typer.echo(f"{p.location()}: {p.message}", err=True)
        raise
    if as_json:
        print_json(report.to_json())
        return
    verb = "created" if report.created_registry else "into"
    typer.echo(f"imported {len(report.imported)} attempts from {file} (schema_version {report.schema_version}) {verb} {root}")
    if report.replaced:
        typer.echo(f"replaced: {', '.join(report.replaced)}")
    for key, terms in report.vocabulary_added.items():
        typer.echo(f"added to {key}: {', '.join(terms)}")
    for conflict in report.vocabulary_conflicts:
        typer.echo(f"kept the registry's definition of {conflict} (the file defines it differently)")
    for name, count in report.unknown_fields.items():
        typer.echo(f"unknown (left unset, not invented): {name} in {count} of {len(report.imported)}")
    if report.problems_after:
        typer.echo(f"{len(report.problems_after)} rule problem(s) in the imported records; see `ptreg validate`")


@app.command()
def export(
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write to this file (atomically) instead of stdout."),
) -> None:
    """Export the registry as one attempts.json (schema_version 2)."""
    from .interchange import export_registry
    from .jsonio import atomic_write_text, dumps_pretty
    from .registry import load_directory

    with progress_bar() as progress:
        document = export_registry(load_directory(registry_dir(), progress))
    text = dumps_pretty(document)
    if output is None:
        typer.echo(text, nl=False)
        return
    if not output.parent.is_dir():
        raise PtregError(f"{output}: directory {output.parent} does not exist")
    atomic_write_text(output, text)
    typer.echo(f"wrote {len(document['attempts'])} attempts to {output}", err=True)


@app.command()
def schema(
    out: Path = typer.Option(Path("schemas"), "--out", help="Directory of the schema files."),
    check: bool = typer.Option(False, "--check", help="Only compare: exit 1 if the files differ from the models."),
) -> None:
    """Write (or check) the JSON Schema files generated from the models."""
    from .schema import check_schemas, write_schemas

    if check:
        stale = check_schemas(out)
        for name in stale:
            typer.echo(f"{out / name}: differs from the models; run `ptreg schema --out {out}`", err=True)
        if stale:
            raise typer.Exit(EXIT_CHECK_FAILED)
        typer.echo(f"{out}: schemas match the models")
        return
    for path in write_schemas(out):
        typer.echo(f"wrote {path}")


# Proposing and gating attempts, and the frozen evaluators they are measured by.
app.command()(cli_proposal.new)
app.command()(cli_proposal.gate)
app.command()(cli_proposal.precedents)
app.add_typer(cli_evaluator.app)
app.command()(cli_bench.backends)
app.command()(cli_bench.bench)
app.command()(cli_bench.run)
app.command()(cli_bench.conclude)


def main(argv: Optional[list[str]] = None) -> None:
    """Console entry point: every failure becomes one line on stderr and a stable exit code."""
    from .cli_common import command_state

    command_state["argv"] = list(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=argv, prog_name="ptreg", standalone_mode=False)
    except PtregError as exc:
        typer.echo(f"ptreg: error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except TyperException as exc:  # a usage error: unknown option, missing argument, bad value
        if type(exc).__name__ == "NoArgsIsHelpError":
            # `ptreg` alone: the help is the answer (rich has printed it already; plain Click
            # hands it over as the message), with Click's usual exit code 2.
            if exc.format_message().strip():
                typer.echo(exc.format_message())
            sys.exit(exc.exit_code)
        context = getattr(exc, "ctx", None)
        command = context.command_path if context is not None else "ptreg"
        typer.echo(f"ptreg: error: {exc.format_message()} (see `{command} --help`)", err=True)
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("ptreg: aborted", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (e.g. `| head`); nothing left to say
        sys.exit(0)
    except KeyboardInterrupt:
        typer.echo("ptreg: interrupted", err=True)
        sys.exit(130)
    except Interrupted as exc:  # SIGTERM (or SIGINT) while `run` or `bench` measured
        typer.echo(f"ptreg: interrupted by {exc.name}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"ptreg: error: {where}{exc.strerror or exc}", err=True)
        sys.exit(EXIT_UNUSABLE)
    sys.exit(code if isinstance(code, int) else 0)
