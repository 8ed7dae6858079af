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
import stat
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import UnusableInput
from ..records.attempt import SCHEMA_VERSION, RegistryMeta
from ..records.problems import every_schema_error
from ..records.refs import ID_MAX_LENGTH, ID_RE
from ..records.vocabulary import LAYOUT_VERSION, VOCABULARIES, RegistryLayout, TermFile, layout
from ..text import json_type, shorten
from .jsonio import atomic_write_text, decode_json, dumps_pretty, fsync_directory, read_bytes
from .names import REGISTRY_FILE, VOCABULARY_DIR

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
    ``registry.json`` or any term file is unusable."""
    raw = read_registry_file(root)
    if not is_term_layout(raw):
        return parse_meta(raw, str(root / REGISTRY_FILE))
    held = [
        (vocabulary, path.name, _read(path, TERM_FILE_MAX_BYTES), str(path)) for vocabulary, path in term_files(root)
    ]
    return vocabularies_of(raw, held, str(root / REGISTRY_FILE), str(root / VOCABULARY_DIR))


# (vocabulary, file name, bytes, where to say it is) of one term file
TermMember = tuple[str, str, bytes, str]


def vocabularies_of(raw: Any, held: list[TermMember], where: str, folder: str) -> RegistryMeta:
    """The vocabularies of a term-layout ``registry.json`` (``raw``, parsed) and its term files,
    from a registry directory or a bundle alike."""
    try:
        RegistryLayout.model_validate(raw)
    except ValidationError as exc:
        raise UnusableInput(every_schema_error(exc, where)) from None
    found: dict[str, dict[str, TermFile]] = {v: {} for v in VOCABULARIES}
    for vocabulary, name, data, shown in held:
        term = _term_of(data, name, shown)
        if term.term in found[vocabulary]:
            raise UnusableInput(
                f"{shown}: holds the term {shorten(term.term)}, which another file of {folder}/{vocabulary} holds too; keep one"
            )
        found[vocabulary][term.term] = term
    fields: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    for vocabulary, field in VOCABULARIES.items():
        ordered = sorted(found[vocabulary].values(), key=lambda t: (t.order, t.term))
        fields[field] = {t.term: t.description for t in ordered}
    try:
        return RegistryMeta.model_validate(fields)
    except ValidationError as exc:  # a confidence term the record format does not know
        raise UnusableInput(every_schema_error(exc, f"{folder}/confidence")) from None


def _term_of(data: bytes, name: str, where: str) -> TermFile:
    raw = decode_json(data, where)
    if not isinstance(raw, dict):
        raise UnusableInput(f"{where}: expected a JSON object, got {json_type(raw)}")
    try:
        term = TermFile.model_validate(raw)
    except ValidationError as exc:
        raise UnusableInput(every_schema_error(exc, where)) from None
    if term_file_name(term.term) != name:
        raise UnusableInput(
            f"{where}#/term: the file holds the term {shorten(term.term)}, which is kept in "
            f"{term_file_name(term.term)}; rename the file or correct the term"
        )
    return term


def term_files(root: Path) -> list[tuple[str, Path]]:
    """(vocabulary, path) of every term file, in name order; refused in one line for anything
    else in the folder (a symlink, a folder where a file belongs, an unknown vocabulary). Hidden
    names are a write's staged files, never terms."""
    base = root / VOCABULARY_DIR
    found: list[tuple[str, Path]] = []
    for vocabulary, _ in _listed(base, root):  # each one a real folder: _listed below says so
        if vocabulary not in VOCABULARIES:
            raise UnusableInput(f"{base / vocabulary}: not a vocabulary (one of {', '.join(VOCABULARIES)}); not read")
        for name, is_file in _listed(base / vocabulary, root):
            if not name.endswith(".json") or not is_file:
                raise UnusableInput(f"{base / vocabulary / name}: not a term file (<term>.json); not read")
            found.append((vocabulary, base / vocabulary / name))
    return found


def _listed(folder: Path, root: Path) -> list[tuple[str, bool]]:
    """(name, is a plain folder or file as expected) of each visible entry of ``folder``; a
    symlinked ``folder`` is refused, since it could lead out of the registry."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UnusableInput(f"{folder}: cannot read: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise UnusableInput(f"{folder}: a symlink; the vocabularies are read only from the registry itself")
    if not stat.S_ISDIR(info.st_mode):
        raise UnusableInput(f"{folder}: not a folder; not read")
    depth = len(folder.relative_to(root).parts)
    with os.scandir(folder) as entries:
        listed = sorted(
            (e.name, e.is_dir(follow_symlinks=False) if depth == 1 else e.is_file(follow_symlinks=False))
            for e in entries
            if not e.name.startswith(".")
        )
    return listed


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
