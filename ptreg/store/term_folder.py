"""The entries of a registry's term folder, ``vocabulary/``, sorted out by name and kind
without reading any: the term files, the stray files a person left there, and what may not be
there. Free of pydantic, so that a read command can name the stray files it left out without
building a model (``store/vocabulary_files.py`` reads the term files themselves).

A stray file is a regular file whose name is not a term file's (``<term>.json``): a README,
notes. It is no part of the registry: no reader takes it for a term, no bundle carries it, and
`validate` names it in a warning. Anything else out of place (a symlink, a folder where a term
file belongs, a folder of a vocabulary that does not exist) may be a term hidden or misplaced,
so it is a problem: reading the vocabularies stops at it, `validate` reports it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from .names import VOCABULARY_DIR

TERM_SUFFIX = ".json"
# What a stray file is called wherever it is reported.
STRAY = f"not a term file (<term>{TERM_SUFFIX}); ignored"


@dataclass
class TermFolder:
    terms: list[tuple[str, Path]] = field(default_factory=list)  # (vocabulary, term file), in name order
    strays: list[Path] = field(default_factory=list)  # left out, each worth a warning
    problems: list[tuple[Path, str]] = field(default_factory=list)  # (path, why): nothing of it read


def is_stray(name: str, mode: int) -> bool:
    """Whether an entry of this name and ``st_mode`` is a stray file (see the module)."""
    return stat.S_ISREG(mode) and not name.endswith(TERM_SUFFIX)


def list_term_folder(root: Path, vocabularies: Collection[str] | None = None) -> TermFolder:
    """The term folder of the registry at ``root`` sorted out, in name order; a folder of a
    vocabulary not among ``vocabularies`` (when given) is a problem, and not listed."""
    base = root / VOCABULARY_DIR
    found = TermFolder()
    for name, mode in _entries(base, found):
        path = base / name
        if is_stray(name, mode):
            found.strays.append(path)
        elif vocabularies is not None and name not in vocabularies:
            found.problems.append((path, f"not a vocabulary (one of {', '.join(vocabularies)}); not read"))
        else:
            for term, term_mode in _entries(path, found):
                if is_stray(term, term_mode):
                    found.strays.append(path / term)
                elif stat.S_ISREG(term_mode):
                    found.terms.append((name, path / term))
                else:
                    found.problems.append((path / term, "not a term file (<term>.json); not read"))
    return found


def _entries(folder: Path, found: TermFolder) -> list[tuple[str, int]]:
    """(name, ``lstat`` mode) of each visible entry of ``folder``, in name order (hidden names
    are a write's staged files, never terms); a problem, and none, when ``folder`` is a
    symlink (it could lead out of the registry) or no folder."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return []
    except OSError as exc:
        found.problems.append((folder, f"cannot read: {exc.strerror}"))
        return []
    if stat.S_ISLNK(info.st_mode):
        found.problems.append((folder, "a symlink; the vocabularies are read only from the registry itself"))
        return []
    if not stat.S_ISDIR(info.st_mode):
        found.problems.append((folder, "not a folder; not read"))
        return []
    try:
        with os.scandir(folder) as entries:
            return sorted(
                (e.name, e.stat(follow_symlinks=False).st_mode) for e in entries if not e.name.startswith(".")
            )
    except OSError as exc:
        found.problems.append((folder, f"cannot read: {exc.strerror}"))
        return []
