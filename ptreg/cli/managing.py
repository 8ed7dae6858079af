"""`ptreg init|validate|repair|import|export|schema`: the registry as a whole."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from ..errors import EXIT_CHECK_FAILED, PtregError
from ..store.names import DEFAULT_REGISTRY_NAME
from ..text import counted, printable_json
from .common import JsonFlag, cli_state, found_registry, print_json, progress_bar, registry_dir, say


def init(
    directory: Path | None = typer.Argument(
        None, metavar="DIR", help="Where to create it (default: the --registry directory)."
    ),
) -> None:
    """Create an empty registry with the default vocabularies.

    Given no DIR, --registry or $PTREG_REGISTRY, it is ./attempts, here; a registry in a folder above (which
    commands run here would otherwise find) is named on stderr, since this one now takes its place here."""
    from ..store.directory import init_registry

    state = cli_state()
    named = directory or (Path(state.registry) if state.registry else None)
    above = None if named is not None or Path(DEFAULT_REGISTRY_NAME).exists() else found_registry()
    path = init_registry(named or Path(DEFAULT_REGISTRY_NAME))
    say(f"created {path}")
    if above is not None:
        say(
            f"note: a registry exists above, {above}: commands run from here now use this new one, "
            f"and `-r {above}` that one",
            err=True,
        )


def validate(
    path: Path | None = typer.Argument(
        None,
        metavar="PATH",
        help="A registry directory, one record file of it, or an attempts.json file (default: the registry).",
    ),
    check_sources: bool = typer.Option(
        False,
        "--check-sources",
        help="Also require every local source to exist. Sources are paths relative to the registry directory "
        "(URLs are not checked).",
    ),
    sources_base: Path | None = typer.Option(
        None,
        "--sources-base",
        metavar="DIR",
        help="Resolve sources from DIR instead of the registry directory (implies --check-sources): for "
        "records written relative to another folder, such as an imported ledger's project.",
    ),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Hold records imported from an older format to the whole record: a field their format did not "
        "have is an error, not a warning.",
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Check every record against the schema and the registry's rules, reporting all problems.

    Errors exit 1, warnings do not. A field that a record's own older format did not have (a schema_version 1 ledger has no lesson) is a warning naming that origin, unless --strict.
    """
    from ..operations.validate import validate_path
    from ..records.problems import count_errors

    target = path or registry_dir()
    if sources_base is not None and not sources_base.is_dir():
        raise PtregError(f"{sources_base}: --sources-base needs a directory")
    base = sources_base or ((target if target.is_dir() else target.parent) if check_sources else None)
    with progress_bar() as progress:
        registry, problems = validate_path(target, base, progress, strict=strict)
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
            say(f"{p.location()}: {p.severity} [{p.rule}]{who} {p.message}", one_line=True)
        verdict = "valid" if errors == 0 else "invalid"
        say(
            f"{target}: {counted(len(registry.records), 'attempt')}, {counted(errors, 'error')}, "
            f"{counted(len(problems) - errors, 'warning')}: {verdict}"
        )
    if errors:
        raise typer.Exit(EXIT_CHECK_FAILED)


def repair(
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be done; change nothing."),
    as_json: bool = JsonFlag,
) -> None:
    """Put right what a killed ptreg left (orphaned runs, a cut-short import, staged files), and update an older registry.

    Every write is atomic, so a kill never leaves a partial record; it can leave a complete run folder that its attempt does not link yet, or staged temporary files. `ptreg validate` reports them as warnings. Sources an older ptreg wrote relative to the git repository are rewritten relative to the registry directory, and the vocabularies of an older registry.json move into one file per term. Exit 0 when nothing is left to put right, 1 when something needs a person (the message says what).
    """
    from ..operations.repair import repair as put_right

    root = registry_dir()
    report = put_right(root, dry_run=dry_run)
    if as_json:
        print_json(report.to_json())
    else:
        verb = "would " if dry_run else ""
        if report.journal_renames:
            say(f"finished an import that was cut short ({report.journal_renames} files)")
        if report.migrated:
            say(
                f"{verb}move the vocabularies of {root / 'registry.json'} into one file per term in {root / 'vocabulary'}"
            )
        for leftover in report.linked:
            say(f"{verb}link run {leftover.run_id} to {leftover.attempt_id} ({leftover.path})")
        for leftover in report.removed:
            say(f"{verb}remove {leftover.path} ({leftover.kind})")
        for leftover in report.left:
            say(f"left alone: {leftover.path}: {leftover.message}")
        if report.ignore_file:
            say(f"{verb}write {root / '.gitignore'} for the registry's working files")
        for moved in report.sources:
            say(
                f"{verb}rewrite {moved.attempt_id} {moved.field}: {moved.old} -> {moved.new} (relative to the registry)"
            )
        if not (
            report.journal_renames
            or report.linked
            or report.removed
            or report.left
            or report.sources
            or report.ignore_file
            or report.migrated
        ):
            say(f"{root}: nothing to repair")
    if report.left:
        raise typer.Exit(EXIT_CHECK_FAILED)


def import_(
    file: Path = typer.Argument(
        ...,
        metavar="FILE",
        help="An attempts.json file (schema_version 1 or 2), or a bundle: a .tar.gz file or folder written by "
        "`ptreg export --bundle`.",
    ),
    replace: bool = typer.Option(False, "--replace", help="Overwrite attempts whose ids the registry already holds."),
    origin: str | None = typer.Option(
        None,
        "--origin",
        metavar="NAME",
        help="What each record's provenance calls FILE, e.g. its path in the repository it comes from "
        "(docs/attempts.json); default: FILE as given.",
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Import an attempts.json or a bundle into the registry (creating it if needed): all or nothing.

    Every version of attempts.json is read: schema_version 2, schema_version 2 from before its vocabularies, and schema_version 1. A vocabulary the file lacks is taken from the terms its records use, each without a definition (never ptreg's defaults); a field a record's format did not have stays unknown. Each record keeps where it came from (file, schema_version, position, key order), which `show` names and `export` gives back. A bundle brings frozen evaluators and runs with the records; one the registry already has must be the same bytes.
    """
    from ..operations.importing import import_into
    from ..store.interchange import ImportRefused

    if origin is not None and not origin.strip():
        raise PtregError("--origin is empty; name the file as its own project knows it, or leave --origin out")
    root = registry_dir()
    try:
        with progress_bar() as progress:
            report = import_into(root, file, replace=replace, progress=progress, origin_name=origin)
    except ImportRefused as refused:
        for p in refused.problems[:20]:
            say(f"{p.location()}: {p.message}", err=True)
        raise
    if as_json:
        print_json(report.to_json())
        return
    verb = "created" if report.created_registry else "into"
    say(
        f"imported {counted(len(report.imported), 'attempt')} from {file} (schema_version {report.schema_version}) {verb} {root}"
    )
    if report.replaced:
        say(f"replaced: {', '.join(report.replaced)}")
    if report.inferred_vocabularies:
        missing = list(report.inferred_vocabularies)
        say(
            f"the file has no {', '.join(missing)}: each is taken from the terms the records use, imported without "
            "a definition (`ptreg vocab add` defines one)"
        )
        for key, terms in report.inferred_vocabularies.items():
            say(f"  {key}: {', '.join(terms) if terms else 'no term in use'}")
    if report.lacks:
        say(
            f"its format has no {', '.join(report.lacks)}: unknown where a record does not say, "
            "reported by `ptreg validate` as warnings (errors with --strict)"
        )
    for key, terms in report.vocabulary_added.items():
        say(f"added to {key}: {', '.join(terms)}")
    for conflict in report.vocabulary_conflicts:
        say(f"kept the registry's definition of {conflict} (the file defines it differently)")
    for name, count in report.unknown_fields.items():
        say(f"unknown (left unset, not invented): {name} in {count} of {len(report.imported)}")
    if report.evaluators or report.runs:
        say(f"with them: {counted(report.evaluators, 'frozen evaluator')}, {counted(report.runs, 'run')}")
    if report.problems_after:
        errors = sum(1 for p in report.problems_after if p.severity == "error")
        say(
            f"{counted(errors, 'error')} and {counted(len(report.problems_after) - errors, 'warning')} in the "
            "imported records; see `ptreg validate`"
        )


def export(
    output: str | None = typer.Option(
        None,
        "--output",
        "-o",
        metavar="FILE",
        help="Write to FILE instead of stdout: a file is replaced whole (atomically, through a symlink to it); "
        "a device, pipe, socket, - or /dev/stdout is written in place.",
    ),
    bundle: Path | None = typer.Option(
        None,
        "--bundle",
        metavar="FILE",
        help="Write the whole registry instead: records, frozen evaluators and runs, as a .tar.gz file (or a new "
        "folder, or a .tar.gz stream to a pipe, -, or /dev/stdout) that `ptreg import` restores.",
    ),
    sort: str | None = typer.Option(
        None,
        "--sort",
        metavar="KEY",
        help="'id' sorts the attempts by id. By default they keep the ledger's order: as imported, then as created.",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace the --bundle .tar.gz file if it exists (refused otherwise)."
    ),
    schema_version: int | None = typer.Option(
        None,
        "--schema-version",
        metavar="N",
        help="2, or 1: the older format, only id, name, status, evidence and source; refused, naming them, when "
        "records hold more. Default: the version the records came in (1 for a registry imported from a "
        "schema_version 1 ledger, else 2; a mix of both is refused, asking for this option).",
    ),
) -> None:
    """Export the registry as one attempts.json, or whole as a bundle.

    attempts.json keeps the ledger's order and each imported record's key order, so a file imported and exported comes back value for value. It carries the records and vocabularies only; what it leaves out (frozen evaluators, runs, terms without a definition) is said on stderr.
    """
    from ..store.bundle import write_bundle
    from ..store.directory import load_directory
    from ..store.evaluator_files import evaluator_files
    from ..store.interchange import export_notes, export_registry
    from ..store.jsonio import dumps_pretty
    from ..store.outputs import open_output
    from ..store.runs import RESULTS_FILE, RUNS_DIR

    if bundle is not None and output is not None:
        raise PtregError("--bundle and --output write different things; give one of them")
    if sort not in (None, "id"):
        raise PtregError(f"--sort {sort!r}: the one key is 'id' (leave --sort out for the ledger's order)")
    if schema_version not in (None, 1, 2):
        raise PtregError(f"--schema-version {schema_version}: ptreg writes 1 or 2")
    if bundle is not None and (sort is not None or schema_version is not None):
        raise PtregError("a bundle holds the registry's own files; --sort and --schema-version shape attempts.json")
    root = registry_dir()
    with progress_bar() as progress:
        registry = load_directory(root, progress)
    if bundle is not None:
        written = write_bundle(root, registry, bundle, overwrite=overwrite)
        say(f"wrote {counted(written, 'file')} of {root} to {bundle}", err=True)
        return
    if schema_version is None:
        from ..store.interchange import export_version

        schema_version = export_version(registry)  # the version the records came in
    document = export_registry(registry, sort_by_id=sort == "id", schema_version=schema_version)
    text = dumps_pretty(document)
    evaluators, runs = len(evaluator_files(root)), len(list((root / RUNS_DIR).glob(f"*/*/{RESULTS_FILE}")))
    if output is None:  # JSON's own escapes for what a terminal would act on; -o keeps the bytes
        say(printable_json(text), nl=False)
    else:
        if output.endswith(os.sep):  # as `>` refuses it: the name of a folder, not of a file to write
            raise PtregError(f"{output}: ends in {os.sep}, so names a folder; give the name of a file to write")
        with open_output(
            Path(output), registry=root
        ) as out:  # a terminal gets what stdout gets: nothing it would act on
            out.handle.write((printable_json(text) if out.terminal else text).encode("utf-8"))
        say(f"wrote {counted(len(document['attempts']), 'attempt')} to {output}", err=True)
    for note in export_notes(registry, document):
        say(f"ptreg: note: {note}", err=True)
    if evaluators or runs:
        say(
            f"ptreg: note: attempts.json leaves out {counted(evaluators, 'frozen evaluator')} and "
            f"{counted(runs, 'run')}; `ptreg export --bundle FILE.tar.gz` carries them",
            err=True,
        )


def schema(
    out: Path = typer.Option(Path("schemas"), "--out", metavar="DIR", help="Directory of the schema files."),
    check: bool = typer.Option(False, "--check", help="Only compare: exit 1 if the files differ from the models."),
) -> None:
    """Write (or check) the JSON Schema files generated from the models."""
    from ..store.schema_files import check_schemas, write_schemas

    if check:
        stale = check_schemas(out)
        for name in stale:
            say(f"{out / name}: differs from the models; run `ptreg schema --out {out}`", err=True)
        if stale:
            raise typer.Exit(EXIT_CHECK_FAILED)
        say(f"{out}: schemas match the models")
        return
    for path in write_schemas(out, registry_dir()):
        say(f"wrote {path}")
