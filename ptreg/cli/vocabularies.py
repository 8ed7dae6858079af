"""`ptreg vocab list|add|remove`: the terms a registry's records may use."""

from __future__ import annotations

import typer

from ..errors import EXIT_UNUSABLE, PtregError
from .common import JsonFlag, RegistryCommand, help_when_alone, print_json, registry_dir, say, warn_stray_files

app = typer.Typer(
    name="vocab",
    help="The vocabularies of the registry (one file per term in vocabulary/): methods, objectives, kinds, confidences.",
    invoke_without_command=True,
    callback=help_when_alone,
)


@app.command("list", cls=RegistryCommand)
def list_terms(
    vocabulary: str | None = typer.Argument(
        None, metavar="VOCABULARY", help="method, objective, kind or confidence (default: every one)."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Every term of the registry's vocabularies, with what it means."""
    from ..records.vocabulary import VOCABULARIES, terms
    from ..store.directory import load_meta
    from ..views.tables import plain

    if vocabulary is not None and vocabulary not in VOCABULARIES:
        raise PtregError(f"no vocabulary {vocabulary!r}: one of {', '.join(VOCABULARIES)}", EXIT_UNUSABLE)
    meta = load_meta(registry_dir())
    warn_stray_files(registry_dir())
    chosen = [vocabulary] if vocabulary is not None else list(VOCABULARIES)
    if as_json:
        print_json({name: terms(meta, name) for name in chosen})
        return
    rows = [
        [name, term, text if text is not None else "(imported without a definition)"]
        for name in chosen
        for term, text in terms(meta, name).items()
    ]
    say(plain(rows, ["vocabulary", "term", "meaning"], shrink=(2,)))


@app.command("add", cls=RegistryCommand)
def add(
    vocabulary: str = typer.Argument(..., metavar="VOCABULARY", help="method, objective or kind."),
    term: str = typer.Argument(
        ..., metavar="TERM", help="The new term, as records will name it: a slug (lowercase letters, digits, '-')."
    ),
    description: str = typer.Option(..., "--description", metavar="TEXT", help="What the term means, in a sentence."),
    as_json: bool = JsonFlag,
) -> None:
    """Define a new term, so that records (and `ptreg new`) may use it.

    A term imported without a definition (its ledger used it without defining it) gets this one; a defined term is never redefined.
    """
    from ..operations.adding_terms import add_term

    if not description.strip():
        raise PtregError("--description is empty; say what the term means", EXIT_UNUSABLE)
    add_term(registry_dir(), vocabulary, term, description)
    if as_json:
        print_json({"vocabulary": vocabulary, "term": term, "description": description})
    else:
        say(f"added {term!r} to the {vocabulary} vocabulary of {registry_dir()}")


@app.command("remove", cls=RegistryCommand)
def remove(
    vocabulary: str = typer.Argument(..., metavar="VOCABULARY", help="method, objective or kind."),
    term: str = typer.Argument(..., metavar="TERM", help="The term to retire."),
    as_json: bool = JsonFlag,
) -> None:
    """Retire a term that no record uses (a mistyped or abandoned one).

    Refused (exit 1), naming them, while any record uses it, or while a record cannot be read; the vocabularies fixed by the record format (confidence) keep their terms.
    """
    from ..operations.adding_terms import remove_term

    remove_term(registry_dir(), vocabulary, term)
    if as_json:
        print_json({"vocabulary": vocabulary, "removed": term})
    else:
        say(f"removed {term!r} from the {vocabulary} vocabulary of {registry_dir()}")
