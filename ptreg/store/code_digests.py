"""The project's files a command runs, frozen by content, so that consent to run an evaluator
covers the code it executes and not only its spec.

Two kinds of file are frozen (``engine/workloads/command.py`` says which paths a command line
names):

- each argument of the command line that names a regular file inside the project root (its
  script, ``bench.py``, a config file): a file there now that was not at freezing, or one gone
  or changed, is a different command;
- where a Python interpreter runs it, every file Python can import from the folder it puts
  first on its path (the script's folder; the project root for ``-c`` and ``-m``; none under
  ``-I`` or ``-P``): each module there whose name could be imported (``.py``, ``.pyc``, an
  extension module), and the modules of every folder below with such a name (packages, and
  folders imported as namespace packages), ``__pycache__`` left out, since Python rewrites it.
  A module beside the script is imported before any installed one of the same name, so a
  ``json.py`` placed there is code the command runs.

Paths are hostile like every other: nothing outside the project root is read, a symlink is
never followed (one where a file would be frozen is refused, naming it, unless the spec says
why it is not frozen in ``not_frozen``), and the walk is bounded. The registry directory holds
no code and is not walked.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from importlib.machinery import all_suffixes
from pathlib import Path, PurePosixPath

from ..errors import CheckFailed
from ..records.evaluator import MAX_CODE_FILES
from ..text import shorten
from .input_digests import file_digest

# What Python imports a module from, the longest first (an extension module's is several).
MODULE_SUFFIXES = tuple(sorted(all_suffixes(), key=len, reverse=True))
MAX_WALKED = 20_000  # files and folders looked at where Python imports from
SKIPPED = "__pycache__"
UNFROZEN_HINT = "or say why it is not frozen in the spec's not_frozen"


class _Exempt:
    """The spec's ``not_frozen`` paths: each, and everything below it."""

    def __init__(self, paths: Iterable[str]):
        self.paths = tuple(paths)

    def __call__(self, relative: str) -> bool:
        return any(relative == p or relative.startswith(p + "/") for p in self.paths)


def module_name(name: str) -> str | None:
    """The module a file of this name is imported as, or None when no import names it."""
    suffix = next((s for s in MODULE_SUFFIXES if name.endswith(s)), None)
    if suffix is None:
        return None
    stem = name[: -len(suffix)]
    return stem if stem.isidentifier() else None


def code_digests(
    root: Path,
    named: Iterable[str],
    scripts: Iterable[str],
    import_folders: Iterable[str],
    not_frozen: Mapping[str, str] | None = None,
    registry: str | None = None,
) -> dict[str, str]:
    """The sha256 of each project file a command runs, by its path relative to ``root``: each
    of ``named`` (arguments as the command line gives them) that is a regular file inside the
    root, and each importable file of ``import_folders`` and of each of ``scripts``' folders (a
    script that is a folder is run from itself). ``registry``: the name of the registry directory
    in the root, never walked. CheckFailed naming the file for a symlink or a walk past its
    bounds."""
    exempt = _Exempt(not_frozen or {})
    found: dict[str, str] = {}
    for argument in sorted(set(named)):
        place = _resolve(root, argument, exempt)
        if place is not None and stat.S_ISREG(place[1].st_mode):
            found[place[0]] = _digest(root, place[0])
    folders: set[str] = set()
    for script in set(scripts):
        place = _resolve(root, script, exempt)
        if place is not None and stat.S_ISDIR(place[1].st_mode):
            folders.add(place[0])
        else:
            folders.add(str(PurePosixPath(script).parent))
    walk = _Walk(root, exempt, registry, found)
    for folder in sorted(folders | set(import_folders)):
        place = _resolve(root, folder, exempt) if folder not in ("", ".") else ("", os.lstat(root))
        if place is not None and stat.S_ISDIR(place[1].st_mode):
            walk.folder(place[0])
    return dict(sorted(found.items()))


def _resolve(root: Path, argument: str, exempt: _Exempt) -> tuple[str, os.stat_result] | None:
    """Where an argument leads inside ``root``, as a relative path and its lstat; None when it
    names nothing there (a flag, a number, a file outside the project, a path not there). Each
    folder on the way is a real folder, so '..' is taken as written."""
    path = PurePosixPath(argument)
    if path.is_absolute():
        try:
            path = path.relative_to(root.as_posix())
        except ValueError:
            return None  # outside the project: not its code
    kept: list[str] = []
    found: os.stat_result | None = None
    parts = [p for p in path.parts if p not in ("", ".")]
    for index, part in enumerate(parts):
        if part == "..":
            if not kept:
                return None
            kept.pop()
            found = None
            continue
        kept.append(part)
        relative = "/".join(kept)
        if exempt(relative):
            return None
        try:
            found = os.lstat(root / relative)
        except (OSError, ValueError):  # not there, a name too long, a NUL: names nothing
            return None
        if stat.S_ISLNK(found.st_mode):
            raise CheckFailed(
                f"the command names {shorten(argument)}, and {relative} is a symlink; not followed: name the file "
                f"itself, {UNFROZEN_HINT}"
            )
        if index < len(parts) - 1 and not stat.S_ISDIR(found.st_mode):
            return None
    if not kept:
        return None
    if found is None:  # ended on '..': the folder it leads back to
        found = os.lstat(root / "/".join(kept))
    return "/".join(kept), found


class _Walk:
    """The importable files below the folders Python imports from, into ``found``."""

    def __init__(self, root: Path, exempt: _Exempt, registry: str | None, found: dict[str, str]):
        self.root, self.exempt, self.registry, self.found = root, exempt, registry, found
        self.walked = 0
        self.seen: set[str] = set()

    def folder(self, relative: str) -> None:
        if relative in self.seen:
            return
        self.seen.add(relative)
        try:
            with os.scandir(self.root / relative if relative else self.root) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            raise CheckFailed(f"{relative or 'the project root'}: cannot be listed ({exc.strerror})") from None
        for entry in entries:
            self.walked += 1
            if self.walked > MAX_WALKED:
                raise CheckFailed(
                    f"over {MAX_WALKED:,} files and folders where the command's Python imports from "
                    f"({relative or 'the project root'}): put the script in a folder of its own, run Python with -P, "
                    f"{UNFROZEN_HINT}"
                )
            path = f"{relative}/{entry.name}" if relative else entry.name
            if self.exempt(path) or entry.name == SKIPPED or (not relative and entry.name == self.registry):
                continue
            module = module_name(entry.name)
            if entry.is_symlink():
                if module is not None or entry.name.isidentifier():
                    raise CheckFailed(
                        f"{path} is a symlink where the command's Python imports from; not followed: move the file "
                        f"there, {UNFROZEN_HINT}"
                    )
            elif entry.is_dir(follow_symlinks=False):
                if entry.name.isidentifier():
                    self.folder(path)
            elif module is not None and entry.is_file(follow_symlinks=False):
                self.found[path] = _digest(self.root, path)
                if len(self.found) > MAX_CODE_FILES:
                    raise CheckFailed(
                        f"over {MAX_CODE_FILES} files of code where the command's Python imports from "
                        f"({relative or 'the project root'}): put the script in a folder of its own, run Python with "
                        f"-P, {UNFROZEN_HINT}"
                    )


def _digest(root: Path, relative: str) -> str:
    try:
        return file_digest(root / relative)
    except OSError as exc:  # gone since it was listed, or not readable
        raise CheckFailed(f"{relative}: cannot be read ({exc.strerror or exc})") from None


def changed_code(frozen: Mapping[str, str], now: Mapping[str, str]) -> str | None:
    """The first file whose digest differs between what was frozen and what is there now,
    with both digests (``absent`` for a file not there); None when they agree."""
    for path in sorted(set(frozen) | set(now)):
        was, found = frozen.get(path), now.get(path)
        if was != found:
            return f"{path}: sha256 {_short(was)} when frozen, {_short(found)} now"
    return None


def _short(digest: str | None) -> str:
    return digest[:12] if digest is not None else "absent"
