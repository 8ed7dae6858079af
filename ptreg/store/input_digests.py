"""The inputs an evaluator reads (a data split, a harness script), frozen by their content.

Paths are relative to the project root (the folder that holds the registry directory), and
hostile like every file ptreg reads: a path that leaves the root, passes through a symlink,
or names anything but plain files and folders is refused in one line. A folder's digest is
the sha256 of its files' relative paths and digests, in sorted order, so adding, removing,
renaming or editing any file below it changes it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from ..errors import CheckFailed, PtregError, UnusableInput
from ..text import shorten

MAX_FILES = 100_000  # files and folders below one input folder: more is not a frozen data split
CHUNK = 1 << 20


def project_root(registry: Path) -> Path:
    """The folder that holds the registry directory: where inputs live and commands run."""
    return registry.absolute().parent


def _checked(root: Path, relative: str, what: str = "input") -> tuple[Path, os.stat_result]:
    """The input's path and its lstat, after checking every component is a real folder."""
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or any(p in ("..", ".") for p in parts):
        raise UnusableInput(f"{what} {shorten(relative)}: not a path inside the project root")
    here = root
    for index, part in enumerate(parts):
        here = here / part
        try:
            found = os.lstat(here)
        except FileNotFoundError:
            raise CheckFailed(f"{what} {shorten(relative)}: {here} does not exist") from None
        if stat.S_ISLNK(found.st_mode):
            raise CheckFailed(f"{what} {shorten(relative)}: {here} is a symlink; not followed")
        if index < len(parts) - 1 and not stat.S_ISDIR(found.st_mode):
            raise CheckFailed(f"{what} {shorten(relative)}: {here} is not a folder")
    return here, found


def file_digest(path: Path) -> str:
    """The sha256 of a regular file's content, never read through a symlink."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _folder_digest(path: Path, relative: str, what: str = "input") -> str:
    entries: list[tuple[str, str]] = []
    seen = 0  # folders count too: a million empty ones is no data split either
    for folder, names, files in os.walk(path, followlinks=False):
        names.sort()
        for name in [*names, *files]:
            seen += 1
            if seen > MAX_FILES:
                raise CheckFailed(f"{what} {shorten(relative)}: over {MAX_FILES:,} files and folders")
            full = Path(folder) / name
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                raise CheckFailed(f"{what} {shorten(relative)}: {full} is a symlink; not followed")
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise CheckFailed(f"{what} {shorten(relative)}: {full} is not a plain file")
            if stat.S_ISREG(mode):
                entries.append((full.relative_to(path).as_posix(), file_digest(full)))
    digest = hashlib.sha256()
    for name, found in sorted(entries):
        digest.update(f"{name}\0{found}\n".encode())
    return digest.hexdigest()


def digest_inputs(root: Path, inputs: list[str], what: str = "input") -> dict[str, str]:
    """Each input's content digest, by its path; PtregError naming the first unusable one.
    ``what`` names them in that error (a stage's outputs are digested the same way)."""
    found = {}
    for relative in inputs:
        path, status = _checked(root, relative, what)
        if stat.S_ISREG(status.st_mode):
            found[relative] = file_digest(path)
        elif stat.S_ISDIR(status.st_mode):
            found[relative] = _folder_digest(path, relative, what)
        else:
            raise CheckFailed(f"{what} {shorten(relative)}: {path} is not a plain file or folder")
    return found


def changed_inputs(root: Path, frozen: dict[str, str]) -> str | None:
    """What differs between the inputs as frozen and as they are now, naming the first file
    or folder that changed; None when every one still has its frozen content."""
    for relative, digest in frozen.items():
        try:
            now = digest_inputs(root, [relative])[relative]
        except PtregError as exc:
            return exc.message
        if now != digest:
            return f"input {relative} changed since it was frozen (sha256 {digest[:12]}, now {now[:12]})"
    return None
