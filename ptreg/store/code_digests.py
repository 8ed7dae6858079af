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
import re
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
    maybe_scripts: Iterable[str] = (),
) -> dict[str, str]:
    """The sha256 of each project file a command runs, by its path relative to ``root``: each
    of ``named`` (arguments as the command line gives them) that is a regular file inside the
    root, and each importable file of ``import_folders``, of each of ``scripts``' folders (a
    script that is a folder is run from itself), and of the folder of each of ``maybe_scripts``
    (arguments of a command line that names no Python interpreter) that is a Python script
    (``runs_as_python``: run by its ``#!`` line, or by a program that runs Python scripts).
    ``registry``: the name of the registry directory in the root, never walked. CheckFailed
    naming the file for a symlink or a walk past its bounds."""
    exempt = _Exempt(not_frozen or {})
    real_root = os.path.realpath(root)
    found: dict[str, str] = {}
    folders: set[str] = set()
    maybe = set(maybe_scripts)
    for argument in sorted(set(named) | maybe):
        place = _resolve(real_root, argument, exempt)
        if place is not None and place[0] and stat.S_ISREG(place[1].st_mode):
            found[place[0]] = _digest(root, place[0])
            if argument in maybe and runs_as_python(root / place[0]):
                folders.add(str(PurePosixPath(place[0]).parent))
    for script in set(scripts):
        place = _resolve(real_root, script, exempt)
        if place is not None and stat.S_ISDIR(place[1].st_mode):
            folders.add(place[0])
        elif place is not None:
            folders.add(str(PurePosixPath(place[0]).parent))
        else:
            folders.add(str(PurePosixPath(script).parent))
    walk = _Walk(root, exempt, registry, found)
    for folder in sorted(folders | set(import_folders)):
        place = _resolve(real_root, folder, exempt)
        if place is not None and stat.S_ISDIR(place[1].st_mode):
            walk.folder(place[0])
    return dict(sorted(found.items()))


# A first line that runs Python: ``#!/usr/bin/python3``, ``#!/usr/bin/env python3 -u``, ``#!.venv/bin/pypy3``;
# then the options it is given.
SHEBANG = re.compile(rb"^#![ \t]*(?:\S*/)?(?:env[ \t]+(?:-\S+[ \t]+)*)?(?:\S*/)?(?:python|pypy)[0-9.]*(?=[ \t]|$)(.*)")
# -I or -P among them: Python puts no script folder on its path
SHEBANG_SAFE = re.compile(rb"(?:^|[ \t])-[A-Za-z]*[IP]")


def runs_as_python(path: Path) -> bool:
    """Whether a file that a command line names, where it names no Python interpreter, is a
    Python script that puts its folder first on the import path: by its ``#!`` line when it is
    run as a program, or by its name (``.py``) when a program that runs Python scripts is given
    it (``torchrun train.py``, ``coverage run t.py``). Not when its ``#!`` line asks for -I or -P."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return path.name.endswith(".py")
    with os.fdopen(fd, "rb") as handle:
        first = handle.read(256).split(b"\n", 1)[0]
    line = SHEBANG.match(first)
    if line is not None:
        return not SHEBANG_SAFE.search(line.group(1))
    return path.name.endswith(".py")


def _resolve(real_root: str, argument: str, exempt: _Exempt) -> tuple[str, os.stat_result] | None:
    """Where an argument leads inside the project (``real_root``, its real path), as a path
    relative to it ('' for the root itself) and its lstat; None when it names nothing there (a
    flag, a number, a file outside the project, a path not there). Taken as the kernel takes it:
    from the root, or from '/' for an absolute path; outside the project through whatever
    symlinks lie there, so that '../<project>/bench.py' and an absolute path through a symlinked
    folder lead back in; inside it, each folder on the way must be a real folder, and a symlink
    is refused."""
    path = PurePosixPath(argument)
    here = "/" if path.is_absolute() else real_root
    parts = [p for p in path.parts if p not in ("", ".", "/")]
    for index, part in enumerate(parts):
        if part == "..":
            here = os.path.dirname(here)  # a real path: its parent is the kernel's '..'
            continue
        following = os.path.join(here, part)
        if not _within(here, real_root):
            try:
                here = os.path.realpath(following)  # outside the project: not its to judge
            except (OSError, ValueError):
                return None
            continue
        relative = os.path.relpath(following, real_root)
        if exempt(relative):
            return None
        try:
            found = os.lstat(following)
        except (OSError, ValueError):  # not there, a name too long, a NUL: names nothing
            return None
        if stat.S_ISLNK(found.st_mode):
            raise CheckFailed(
                f"the command names {shorten(argument)}, and {relative} is a symlink; not followed: name the file "
                f"itself, {UNFROZEN_HINT}"
            )
        if index < len(parts) - 1 and not stat.S_ISDIR(found.st_mode):
            return None
        here = following
    if not _within(here, real_root):
        return None  # outside the project: not its code
    relative = "" if here == real_root else os.path.relpath(here, real_root)
    if relative and exempt(relative):
        return None
    try:
        return relative, os.lstat(here)
    except (OSError, ValueError):
        return None


def _within(path: str, real_root: str) -> bool:
    return path == real_root or path.startswith(real_root.rstrip("/") + "/")


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
