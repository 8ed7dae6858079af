"""The vocabularies on disk: ``registry.json`` names the folder, and each term is a file of its
own, ``vocabulary/<vocabulary>/<term file>.json``, so that two clones adding different terms
touch different files and git merges them without a conflict.

A registry of the older layout (every vocabulary inside ``registry.json``, schema_version 2) is
still read; any write to it is refused until `ptreg repair` migrates it (``migrate``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import UnusableInput
from ..records.attempt import CONFIDENCES, SCHEMA_VERSION, RegistryMeta
from ..records.problems import Problem, every_schema_error, one_line, schema_problems
from ..records.refs import ID_MAX_LENGTH, ID_RE
from ..records.vocabulary import LAYOUT_VERSION, VOCABULARIES, RegistryLayout, TermFile, layout
from ..text import json_type, shorten
from .jsonio import JsonError, atomic_write_text, decode_json, dumps_pretty, fsync_directory, read_bytes
from .names import REGISTRY_FILE, VOCABULARY_DIR
from .term_folder import STRAY, list_term_folder

# A term file is a few hundred bytes; anything near this is not one.
TERM_FILE_MAX_BYTES = 64 * 1024
# Where `ptreg repair` builds the folder of term files before renaming it into place.
MIGRATION_STAGING = ".tmp-vocabulary"


def term_file_name(term: str) -> str:
    """The file a term is kept in: the term itself when it is a slug, else ``~`` and 12 hex
    digits of its SHA-256 (a term imported from a ledger may hold any character)."""
    if len(term) <= ID_MAX_LENGTH and ID_RE.fullmatch(term):
        return f"{term}.json"
    return f"~{hashlib.sha256(term.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}.json"


def term_path(root: Path, vocabulary: str, term: str) -> Path:
    return root / VOCABULARY_DIR / vocabulary / term_file_name(term)


def parse_meta(raw: Any, where: str) -> RegistryMeta:
    """The vocabularies as one schema_version 2 object held them (an older ``registry.json``, or
    the part of an attempts.json or bundle that carries them)."""
    if not isinstance(raw, dict):
        raise UnusableInput(f"{where}: expected a JSON object, got {json_type(raw)}")
    _refuse_newer(raw, where)
    try:
        return RegistryMeta.model_validate(raw)
    except ValidationError as exc:
        raise UnusableInput(every_schema_error(exc, where)) from None


def _refuse_newer(raw: dict[str, Any], where: str) -> None:
    version = raw.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > LAYOUT_VERSION:
        raise UnusableInput(
            f"{where}: schema_version {shorten(version)} is newer than this ptreg reads (up to {LAYOUT_VERSION}); upgrade ptreg"
        )


def is_term_layout(raw: Any) -> bool:
    """Whether a parsed ``registry.json`` is of the layout with term files."""
    return isinstance(raw, dict) and raw.get("schema_version") == LAYOUT_VERSION


def read_registry_file(root: Path) -> Any:
    """``registry.json`` parsed, not followed through a symlink."""
    path = root / REGISTRY_FILE
    return decode_json(_read(path, TERM_FILE_MAX_BYTES * 64), str(path))


def _read(path: Path, limit: int) -> bytes:
    # never through a symlink: a term file or registry.json elsewhere is not the registry's
    return read_bytes(path, limit, follow=False)


def load_vocabularies(root: Path) -> RegistryMeta:
    """The registry's vocabularies, of either layout: refused in one line naming the file when
    ``registry.json`` or any term file is unusable. A stray file (``term_folder.py``) is left out."""
    meta, problems = read_vocabularies(root)
    refuse_first(problems)
    return meta


def read_vocabularies(root: Path) -> tuple[RegistryMeta, list[Problem]]:
    """The registry's vocabularies from every term file that can be used, and a problem for each
    one that cannot (an error) and each stray file (a warning): what `validate` reports in one
    pass. An unusable ``registry.json`` is refused (its layout says where the terms are)."""
    raw = read_registry_file(root)
    where = str(root / REGISTRY_FILE)
    if not is_term_layout(raw):
        return parse_meta(raw, where), []
    _check_layout(raw, where)
    listing = list_term_folder(root, VOCABULARIES)
    problems = [Problem("term-file", why, file=str(path)) for path, why in listing.problems]
    problems += [Problem("stray-file", STRAY, file=str(path), severity="warning") for path in listing.strays]
    held: list[TermMember] = []
    for vocabulary, path in listing.terms:
        try:
            held.append((vocabulary, path.name, _read(path, TERM_FILE_MAX_BYTES), str(path)))
        except JsonError as exc:
            problems.append(Problem("json", exc.problem, None, exc.pointer, str(path)))
    meta, unusable = _vocabularies(held, str(root / VOCABULARY_DIR))
    problems += unusable
    return meta, sorted(problems, key=lambda p: p.file or "")


def refuse_first(problems: list[Problem]) -> None:
    """Raise the first error of ``problems`` (every problem of its file, in one line)."""
    first = next((p for p in problems if p.severity == "error"), None)
    if first is not None:
        where = first.file or ""
        raise UnusableInput(one_line([p for p in problems if p.file == first.file and p.severity == "error"], where))


# (vocabulary, file name, bytes, where to say it is) of one term file
TermMember = tuple[str, str, bytes, str]


def vocabularies_of(raw: Any, held: list[TermMember], where: str, folder: str) -> RegistryMeta:
    """The vocabularies of a term-layout ``registry.json`` (``raw``, parsed) and its term files,
    from a bundle: refused in one line at the first term file that cannot be used."""
    _check_layout(raw, where)
    meta, problems = _vocabularies(held, folder)
    refuse_first(problems)
    return meta


def _check_layout(raw: Any, where: str) -> None:
    try:
        RegistryLayout.model_validate(raw)
    except ValidationError as exc:
        raise UnusableInput(every_schema_error(exc, where)) from None


def _vocabularies(held: list[TermMember], folder: str) -> tuple[RegistryMeta, list[Problem]]:
    """The vocabularies of the term files ``held`` that can be used, and the problems of the
    others, each left out."""
    found: dict[str, dict[str, TermFile]] = {v: {} for v in VOCABULARIES}
    problems: list[Problem] = []
    for vocabulary, name, data, shown in held:
        term, wrong = _term_of(data, name, shown, vocabulary)
        problems += wrong
        if term is None:
            continue
        if term.term in found[vocabulary]:
            problems.append(
                Problem(
                    "term-file",
                    f"holds the term {shorten(term.term)}, which another file of {folder}/{vocabulary} holds too; keep one",
                    file=shown,
                )
            )
            continue
        found[vocabulary][term.term] = term
    fields: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    for vocabulary, field in VOCABULARIES.items():
        ordered = sorted(found[vocabulary].values(), key=lambda t: (t.order, t.term))
        fields[field] = {t.term: t.description for t in ordered}
    try:
        return RegistryMeta.model_validate(fields), problems
    except ValidationError as exc:  # each term passed TermFile, which holds the same constraints
        raise UnusableInput(every_schema_error(exc, folder)) from None


def _term_of(data: bytes, name: str, where: str, vocabulary: str) -> tuple[TermFile | None, list[Problem]]:
    """The term the file ``where`` holds, or None and every problem that keeps it from use."""
    try:
        raw = decode_json(data, where)
    except JsonError as exc:
        return None, [Problem("json", exc.problem, None, exc.pointer, where)]
    if not isinstance(raw, dict):
        return None, [Problem("schema", f"expected a JSON object, got {json_type(raw)}", file=where)]
    try:
        term = TermFile.model_validate(raw)
    except ValidationError as exc:
        return None, list(schema_problems(exc, attempt_id=None, pointer="", file=where))
    if term_file_name(term.term) != name:
        why = (
            f"the file holds the term {shorten(term.term)}, which is kept in {term_file_name(term.term)}; "
            "rename the file or correct the term"
        )
        return None, [Problem("term-file", why, None, "/term", where)]
    if vocabulary == "confidence" and term.term not in CONFIDENCES:
        why = f"{shorten(term.term)} is not a confidence of the record format (one of {', '.join(CONFIDENCES)})"
        return None, [Problem("term-file", why, None, "/term", where)]
    return term, []


def term_files(root: Path) -> list[tuple[str, Path]]:
    """(vocabulary, path) of every term file, in name order; refused in one line for anything
    that may not be in the folder (a symlink, a folder where a file belongs, an unknown
    vocabulary). Stray files are no term files, and are left out."""
    listing = list_term_folder(root, VOCABULARIES)
    if listing.problems:
        path, why = listing.problems[0]
        raise UnusableInput(f"{path}: {why}")
    return listing.terms


def is_old_layout(root: Path) -> bool:
    """Whether the registry keeps its vocabularies inside ``registry.json`` (read-only)."""
    try:
        raw = read_registry_file(root)
    except UnusableInput:
        return False  # reading the registry says what is wrong with it
    return not is_term_layout(raw)


def refuse_old_layout(root: Path) -> None:
    """Refuse a write to a registry of the older layout, before anything is written."""
    if is_old_layout(root):
        raise UnusableInput(
            f"{root / REGISTRY_FILE}: this registry keeps its vocabularies inside registry.json, the layout "
            "before each term had its own file; run `ptreg repair` to migrate it, then retry"
        )


def next_order(meta: RegistryMeta, vocabulary: str) -> int:
    """The order of a term added now: after every term the vocabulary holds (two clones that
    each add one give both the same order; the term's name then decides)."""
    return len(getattr(meta, VOCABULARIES[vocabulary]))


def write_term(root: Path, vocabulary: str, term: str, description: str | None, order: int) -> Path:
    """Write one term's file whole (a new term, or a definition given to an imported one)."""
    held = TermFile(term=term, description=description, order=order)
    path = term_path(root, vocabulary, term)
    _folder(root, vocabulary)
    atomic_write_text(path, dumps_pretty(held.model_dump(mode="json")))
    return path


def delete_term(root: Path, vocabulary: str, term: str) -> None:
    path = term_path(root, vocabulary, term)
    os.unlink(path)
    fsync_directory(path.parent)


def _folder(root: Path, vocabulary: str) -> Path:
    """The folder of ``vocabulary``'s term files, created when missing; never a symlink."""
    folder = root / VOCABULARY_DIR / vocabulary
    for path in (root / VOCABULARY_DIR, folder):
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise UnusableInput(f"{path}: not a folder of the registry (a symlink or a file); nothing written")
        if not path.exists():
            path.mkdir()
            fsync_directory(path.parent)
    return folder


def term_layout_files(meta: RegistryMeta) -> list[tuple[str, str]]:
    """(path relative to the registry, content) of ``registry.json`` and every term file that
    hold ``meta``: what a new registry, an import or a migration writes."""
    files = [(REGISTRY_FILE, dumps_pretty(layout().model_dump(mode="json")))]
    for vocabulary, field in VOCABULARIES.items():
        for order, (term, description) in enumerate(getattr(meta, field).items()):
            held = TermFile(term=term, description=description, order=order)
            files.append(
                (
                    f"{VOCABULARY_DIR}/{vocabulary}/{term_file_name(term)}",
                    dumps_pretty(held.model_dump(mode="json")),
                )
            )
    return files


def write_term_folder(root: Path, meta: RegistryMeta, staging: Path) -> None:
    """Build the folder of term files for ``meta`` in ``staging`` (created here), every file
    fsynced, ready to be renamed into place."""
    staging.mkdir()
    for relative, text in term_layout_files(meta)[1:]:
        path = staging / Path(relative).relative_to(VOCABULARY_DIR)
        if not path.parent.exists():
            path.parent.mkdir()
        atomic_write_text(path, text)
    for folder in (*staging.iterdir(), staging):
        fsync_directory(folder)


def migrate(root: Path) -> bool:
    """Move an older registry's vocabularies into term files; whether there was anything to do.
    Called under the registry lock. The term folder is built aside and renamed into place, then
    ``registry.json`` is rewritten: that rename is the commit point, so a kill before it leaves
    the older layout (its half-made folder is rebuilt by the next repair) and a kill after it the
    new one; a second run finds nothing to do."""
    raw = read_registry_file(root)
    if is_term_layout(raw):
        load_vocabularies(root)  # a new-layout registry is migrated already; refuse a broken one
        return False
    meta = parse_meta(raw, str(root / REGISTRY_FILE))
    target = root / VOCABULARY_DIR
    staging = root / MIGRATION_STAGING
    for leftover in (staging, target):  # made by a migration killed before its commit point
        if leftover.is_symlink() or leftover.is_file():
            raise UnusableInput(f"{leftover}: in the way of the term folder (a symlink or a file); move it away")
        if leftover.exists():
            shutil.rmtree(leftover)
    write_term_folder(root, meta, staging)
    os.rename(staging, target)
    fsync_directory(root)
    atomic_write_text(root / REGISTRY_FILE, term_layout_files(meta)[0][1])
    return True


def read_meta_json(root: Path) -> dict[str, Any]:
    """The vocabularies validated, as JSON (for the query index to keep)."""
    return load_vocabularies(root).model_dump(mode="json")
