"""`ptreg vocab add`: define a new term in a registry's vocabulary, atomically and under its lock."""

from __future__ import annotations

from pathlib import Path

from ..errors import EXIT_CHECK_FAILED, EXIT_UNUSABLE, PtregError
from ..records.attempt import TERM_MAX_LENGTH, TEXT_MAX_LENGTH, RegistryMeta
from ..records.vocabulary import EXTENSIBLE, VOCABULARIES, terms
from ..store.directory import REGISTRY_FILE, load_meta, write_meta
from ..store.locks import registry_lock
from ..text import shorten


def add_term(root: Path, vocabulary: str, term: str, description: str) -> RegistryMeta:
    """The registry's vocabularies with ``term`` added, or defined when it was imported without
    a definition; refused, with nothing written, when the vocabulary is not one that grows, the
    term is defined already, or either text is unusable."""
    if vocabulary not in EXTENSIBLE:
        why = "is fixed by the record format" if vocabulary in VOCABULARIES else "does not exist"
        raise PtregError(
            f"the vocabulary {vocabulary!r} {why}; terms are added to {', '.join(EXTENSIBLE)}", EXIT_UNUSABLE
        )
    if not term or term != term.strip() or len(term) > TERM_MAX_LENGTH:
        raise PtregError(
            f"term {shorten(term)}: use 1 to {TERM_MAX_LENGTH} characters, no spaces at either end", EXIT_UNUSABLE
        )
    if not description.strip() or len(description) > TEXT_MAX_LENGTH:
        raise PtregError(f"--description: say in 1 to {TEXT_MAX_LENGTH} characters what the term means", EXIT_UNUSABLE)
    load_meta(root)  # a missing registry is refused before any lock file is made
    with registry_lock(root):
        meta = load_meta(root)
        known = terms(meta, vocabulary)
        if known.get(term) is not None:  # a term imported without a definition may be given one
            raise PtregError(
                f"{root / REGISTRY_FILE}: {term!r} is already in the {vocabulary} vocabulary: {known[term]!r}",
                EXIT_CHECK_FAILED,
            )
        raw = meta.model_dump(mode="json")
        raw[VOCABULARIES[vocabulary]][term] = description
        updated = RegistryMeta.model_validate(raw)
        write_meta(root, updated)
    return updated
