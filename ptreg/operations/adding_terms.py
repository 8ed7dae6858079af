"""`ptreg vocab add|remove`: define a new term in a registry's vocabulary, or retire one no record
uses, atomically and under its lock."""

from __future__ import annotations

import difflib
from pathlib import Path

from ..errors import CheckFailed, UnusableInput
from ..records.attempt import TERM_MAX_LENGTH, TEXT_MAX_LENGTH, RegistryMeta
from ..records.refs import ID_RE, slug_of
from ..records.vocabulary import EXTENSIBLE, VOCABULARIES, terms
from ..store.directory import load_directory, load_meta
from ..store.locks import registry_lock
from ..store.names import VOCABULARY_DIR
from ..store.vocabulary_files import delete_term, next_order, refuse_old_layout, term_path, write_term
from ..text import shorten


def add_term(root: Path, vocabulary: str, term: str, description: str) -> RegistryMeta:
    """The registry's vocabularies with ``term`` added, or defined when it was imported without
    a definition; refused, with nothing written, when the vocabulary is not one that grows, the
    term is defined already, or either text is unusable."""
    if vocabulary not in EXTENSIBLE:
        why = "is fixed by the record format" if vocabulary in VOCABULARIES else "does not exist"
        raise UnusableInput(f"the vocabulary {vocabulary!r} {why}; terms are added to {', '.join(EXTENSIBLE)}")
    if not term or term != term.strip() or len(term) > TERM_MAX_LENGTH:
        raise UnusableInput(f"term {shorten(term)}: use 1 to {TERM_MAX_LENGTH} characters, no spaces at either end")
    if not description.strip() or len(description) > TEXT_MAX_LENGTH:
        raise UnusableInput(f"--description: say in 1 to {TEXT_MAX_LENGTH} characters what the term means")
    meta = load_meta(root)  # a missing registry is refused before any lock file is made
    refuse_old_layout(root)
    if term not in terms(meta, vocabulary) and not ID_RE.match(term):
        # a term imported without a definition may be defined as its ledger spelled it
        raise UnusableInput(
            f"term {shorten(term)}: a term is a slug like every other (lowercase letters, digits and '-', "
            f"e.g. {slug_of(term)!r})"
        )
    with registry_lock(root):
        refuse_old_layout(root)
        meta = load_meta(root)
        known = terms(meta, vocabulary)
        if known.get(term) is not None:  # a term imported without a definition may be given one
            raise CheckFailed(
                f"{term_path(root, vocabulary, term)}: {term!r} is already in the {vocabulary} vocabulary: "
                f"{known[term]!r}",
            )
        # a term defined late keeps its place; a new one goes last
        order = list(known).index(term) if term in known else next_order(meta, vocabulary)
        write_term(root, vocabulary, term, description, order)
        updated = load_meta(root)
    return updated


# The record field each growing vocabulary's terms are used in.
USED_IN = {"method": "methods", "objective": "objective", "kind": "kind"}


def remove_term(root: Path, vocabulary: str, term: str) -> RegistryMeta:
    """The registry's vocabularies without ``term``: refused, with nothing written, when a record
    uses it (naming them), when a record cannot be read (it may use it), or when the vocabulary
    is fixed by the record format."""
    if vocabulary not in EXTENSIBLE:
        why = "is fixed by the record format" if vocabulary in VOCABULARIES else "does not exist"
        raise UnusableInput(f"the vocabulary {vocabulary!r} {why}; terms are removed from {', '.join(EXTENSIBLE)}")
    load_meta(root)
    refuse_old_layout(root)
    with registry_lock(root):
        refuse_old_layout(root)
        registry = load_directory(root)
        known = terms(registry.meta, vocabulary)
        if term not in known:
            close = difflib.get_close_matches(term, list(known), n=3, cutoff=0.5)
            hint = f" (did you mean: {', '.join(close)}?)" if close else ""
            raise UnusableInput(
                f"{root / VOCABULARY_DIR / vocabulary}: no term {term!r} in the {vocabulary} vocabulary{hint}"
            )
        field = USED_IN[vocabulary]
        users = [a.id for a in registry.attempts if term in _terms_of(getattr(a, field))]
        if users:
            shown = ", ".join(users[:5]) + (f" and {len(users) - 5} more" if len(users) > 5 else "")
            raise CheckFailed(f"{term!r} is in use by {shown}: a term is retired only when no record uses it")
        if registry.unusable():
            raise CheckFailed(
                f"{registry.unusable()} record(s) cannot be read, and may use {term!r}; "
                "`ptreg validate` names them: put them right first"
            )
        delete_term(root, vocabulary, term)
        updated = load_meta(root)
    return updated


def _terms_of(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [] if value is None else [str(value)]
