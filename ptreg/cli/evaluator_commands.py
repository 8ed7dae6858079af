"""`ptreg evaluator freeze|list|show|verify|trust|remove`: the registry's frozen evaluators."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from ..errors import EXIT_CHECK_FAILED, PtregError
from ..text import counted, printable_json
from .common import JsonFlag, RegistryCommand, help_when_alone, print_json, registry_dir, say, say_wrapped

app = typer.Typer(
    name="evaluator",
    help="Frozen evaluators: hash-pinned specs of how an attempt is measured (evaluators/<name>@<hash12>.json).",
    invoke_without_command=True,
    callback=help_when_alone,
)


@app.command(cls=RegistryCommand)
def freeze(
    spec: Path = typer.Argument(..., metavar="SPEC.json", help="The evaluator spec to freeze."),
    as_json: bool = JsonFlag,
) -> None:
    """Store SPEC.json under its identity (sha256 of canonical JSON + evaluator code version); never rewritten."""
    from ..gate.freezing import freeze as freeze_spec

    done = freeze_spec(registry_dir(), spec)
    if as_json:
        print_json(
            {
                "ref": done.evaluator.ref,
                "sha256": done.evaluator.sha256,
                "path": str(done.path),
                "created": done.created,
                "warnings": done.warnings,
            }
        )
        return
    verb = "froze" if done.created else "already frozen:"
    say(f"{verb} {done.evaluator.ref} ({done.path})")
    for warning in done.warnings:
        say_wrapped(f"ptreg: warning: {warning}", err=True)
    say(f"use it with: ptreg new ... --evaluator {done.evaluator.ref}")


@app.command("list", cls=RegistryCommand)
def list_evaluators(as_json: bool = JsonFlag) -> None:
    """Every frozen evaluator, whether it verifies (its file, its inputs, the code its command runs), and what it measures."""
    from ..gate.verification import verify_evaluator
    from ..records.evaluator import ArmsSpec, EvaluatorSpec
    from ..store.directory import load_meta
    from ..store.evaluator_files import evaluator_files
    from ..views.tables import plain

    root = registry_dir()
    load_meta(root)
    rows, items, stale = [], [], []
    for path in evaluator_files(root):
        found = verify_evaluator(root, path)
        frozen, mismatch = found.frozen, found.problem
        spec = frozen.spec if frozen else None
        ref = path.name[: -len(".json")]
        items.append(
            {
                "ref": ref,
                "path": str(path),
                "verified": mismatch is None,
                "problem": mismatch,
                "workload": spec.workload if spec else None,
                "configs": spec.config_names if spec else None,
                "backends": spec.backends if isinstance(spec, EvaluatorSpec) else None,
                "arms": spec.arm_names if isinstance(spec, ArmsSpec) else None,
            }
        )
        if mismatch is not None:
            stale.append(f"{ref} {found.said}")
        rows.append(
            [
                ref,
                "yes" if mismatch is None else "NO",
                spec.workload if spec else None,
                ",".join(spec.config_names) if spec else None,
                ",".join(spec.arm_names) if spec else None,
            ]
        )
    if as_json:
        print_json(items)
        return
    if rows:
        say(plain(rows, ["evaluator", "verifies", "workload", "configs", "backends or arms"]))  # lists never cut
    for line in stale:
        say_wrapped(line)
    say_wrapped(f"{counted(len(rows), 'frozen evaluator')} in {root / 'evaluators'}")


@app.command(cls=RegistryCommand)
def show(
    ref: str = typer.Argument(..., metavar="NAME[@HASH]", help="An evaluator reference, or a name frozen once."),
    as_json: bool = JsonFlag,
) -> None:
    """One frozen evaluator: identity, whether it verifies (its file, its inputs, the code its command runs; exit 1 when not), what it froze and the full spec."""
    from ..gate.verification import verify_evaluator
    from ..store.evaluator_files import resolve
    from ..store.jsonio import dumps_pretty, read_json

    root = registry_dir()
    path = resolve(root, ref)
    found = verify_evaluator(root, path)
    frozen, mismatch = found.frozen, found.problem
    if frozen is None:
        try:
            content = read_json(path)
        except PtregError:
            content = None  # not even JSON any more: the mismatch says so
        if as_json:
            print_json({"path": str(path), "verified": False, "problem": mismatch, "file": content})
        else:
            say(f"{path}: DOES NOT VERIFY: {mismatch}")
            if content is not None:
                say(printable_json(dumps_pretty(content)), nl=False)
        raise typer.Exit(EXIT_CHECK_FAILED)
    consent = found.consent
    if as_json:
        print_json(
            {
                "path": str(path),
                "verified": mismatch is None,
                "problem": mismatch,
                "consent": consent,
                "file": read_json(path),
            }
        )
        if mismatch is not None:
            raise typer.Exit(EXIT_CHECK_FAILED)
        return
    say(f"{frozen.ref}  ({path})")
    say_wrapped(f"sha256 {frozen.sha256}, evaluator code version {frozen.evaluator_version}: {found.said}")
    for title, digests in (("inputs", frozen.inputs), ("code its command runs", frozen.code)):
        if digests:
            say(f"{title}, frozen by content:")
            for name, digest in digests.items():
                say(f"  {name}  sha256 {digest}")
    if consent is not None:
        say_wrapped(consent)
    say(printable_json(dumps_pretty(frozen.spec.model_dump(mode="json", exclude_none=True))), nl=False)
    if mismatch is not None:  # the project no longer holds what it froze: shown whole, and failed
        raise typer.Exit(EXIT_CHECK_FAILED)


@app.command(cls=RegistryCommand)
def verify(
    refs: list[str] = typer.Argument(
        None, metavar="[NAME[@HASH]]...", help="Only these (default: every frozen evaluator)."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Recompute every hash and the digests of the project's files each froze (inputs, the code a command runs); name each evaluator that no longer matches what was frozen, and each run whose inputs changed under it. Exit 1 if an evaluator does not verify."""
    from ..gate.freezing import verify as verify_evaluators
    from ..store.directory import load_meta
    from ..store.evaluator_files import evaluator_files, resolve

    root = registry_dir()
    load_meta(root)
    paths = [resolve(root, r) for r in refs] if refs else evaluator_files(root)
    found = verify_evaluators(root, paths)
    bad = [(p, m) for p, m in found.checked if m is not None]
    if as_json:
        print_json(
            {
                "checked": len(found.checked),
                "mismatched": [{"path": str(p), "problem": m} for p, m in bad],
                "inputs_changed_during_runs": [{"run": r, "changed": c} for r, c in found.changed_under_runs],
            }
        )
    else:
        for path, mismatch in bad:
            say(f"{path}: {mismatch}")
        for run, changed in found.changed_under_runs:
            say(f"ptreg: warning: run {run} decides nothing: inputs changed during the run ({changed})", err=True)
        verify = "does not verify" if len(bad) == 1 else "do not verify"
        say(f"{counted(len(found.checked), 'frozen evaluator')} checked, {len(bad)} {verify}")
    if bad:
        raise typer.Exit(EXIT_CHECK_FAILED)


@app.command(cls=RegistryCommand)
def trust(
    ref: str = typer.Argument(..., metavar="NAME@HASH", help="The evaluator to consent to, by its full reference."),
    as_json: bool = JsonFlag,
) -> None:
    """Consent to run an evaluator's command that you did not freeze here (it came by import, a bundle or a pull).

    Read it first with `ptreg evaluator show`. The consent names the evaluator's sha256 (its command, arms, input digests and the digests of the project's files its command runs) and is kept in your own configuration ($PTREG_CONFIG_HOME, else $XDG_CONFIG_HOME/ptreg, else ~/.config/ptreg), never in a registry, so no bundle or commit can carry it. Freezing an evaluator is consent already.
    """
    from ..errors import EXIT_UNUSABLE
    from ..gate.consent import code_change, consent_note
    from ..records.refs import EVALUATOR_REF_PATTERN
    from ..store.evaluator_files import check_file, resolve
    from ..store.trust import trust as record_trust
    from ..store.trust import trust_file

    if not re.fullmatch(EVALUATOR_REF_PATTERN, ref):
        raise PtregError(
            f"evaluator {ref!r}: give its full reference NAME@HASH, as `ptreg evaluator list` shows", EXIT_UNUSABLE
        )
    root = registry_dir()
    path = resolve(root, ref)
    frozen, mismatch = check_file(path)
    if frozen is None:
        raise PtregError(f"{path} does not verify ({mismatch}); nothing trusted", EXIT_CHECK_FAILED)
    added = record_trust(frozen.sha256)
    consent = consent_note(frozen)
    differs = code_change(frozen, root) if consent is not None else None
    if as_json:
        print_json(
            {
                "ref": frozen.ref,
                "sha256": frozen.sha256,
                "added": added,
                "file": str(trust_file()),
                "consent": consent,
                "code_differs": differs,
            }
        )
        return
    say(f"{'trusted' if added else 'already trusted:'} {frozen.ref} (sha256 {frozen.sha256}) in {trust_file()}")
    if consent is not None:
        say_wrapped(consent)
    if differs is not None:  # consent is to the code as frozen: `ptreg run` refuses what differs
        say_wrapped(f"ptreg: warning: the project's code differs from what you consented to: {differs}", err=True)


@app.command("remove", cls=RegistryCommand)
def remove(
    ref: str = typer.Argument(..., metavar="NAME@HASH", help="The frozen evaluator (or a name frozen once)."),
    as_json: bool = JsonFlag,
) -> None:
    """Delete a frozen evaluator that no attempt names and no run was measured by (one frozen by mistake).

    Refused (exit 1), naming them, while an attempt or a run uses it, or while a record or run cannot be read. A frozen evaluator is never rewritten; freezing the spec again gives it back under the same identity.
    """
    from ..gate.freezing import remove as remove_frozen

    path = remove_frozen(registry_dir(), ref)
    if as_json:
        print_json({"removed": path.name.removesuffix(".json"), "path": str(path)})
    else:
        say(f"removed {path.name.removesuffix('.json')} ({path})")
