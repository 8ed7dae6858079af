"""ptreg's own working files, and the paths its manifests and journals name.

A working file (the query index and its SQLite journals, the import journal and its staged
files, the lock and holder files, the site manifest) is one ptreg made, so it is tempting to
trust it; but anyone who can write the directory can put a symlink, a folder or another user's
file under its name. Each is therefore opened without following a symlink and only when it is a
regular file of this process's user: anything else is refused in one line, and neither it nor
what it points to is touched.

A manifest or journal names further files, relative to the directory that owns it. ``inside``
is the one place such a name becomes a path: plain names below the directory, never absolute,
never through ``..`` or a symlinked folder, so that no deletion or write it drives can leave
the directory, whatever the file says.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import UnusableInput
from ..text import shorten

# A working file is opened with these: never through a symlink, never waiting on a FIFO.
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class ForeignFile(UnusableInput):
    """A working file's name holds something ptreg did not make: a symlink, a folder, a
    device or pipe, or a file of another user."""

    def __init__(self, path: Path, problem: str, advice: str):
        super().__init__(f"{path}: {problem}; left alone: {advice}")
        self.path = path
        self.problem = problem


def problem_with(info: os.stat_result) -> str | None:
    """Why a file with this ``lstat`` cannot be one of ptreg's working files; None when it can."""
    if stat.S_ISLNK(info.st_mode):
        return "is a symlink, and ptreg never follows one to its working files"
    if stat.S_ISDIR(info.st_mode):
        return "is a directory, not ptreg's working file"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file, so not ptreg's working file"
    if info.st_uid != os.geteuid():
        return f"belongs to another user (uid {info.st_uid}), so not ptreg's working file"
    return None


def file_problem(path: Path) -> str | None:
    """Why the file at ``path`` cannot be one of ptreg's working files, read without following a
    symlink; None when it can be, or when there is none."""
    try:
        return problem_with(os.lstat(path))
    except FileNotFoundError:
        return None
    except OSError as exc:  # a parent that is a file, or a folder we may not search
        return f"cannot be examined ({exc.strerror})"


def check_working_file(path: Path, advice: str) -> bool:
    """Whether ``path`` exists as a working file ptreg may use (False: there is none); raise
    ForeignFile, touching nothing, when its name holds anything else."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ForeignFile(path, f"cannot be examined ({exc.strerror})", advice) from None
    problem = problem_with(info)
    if problem is not None:
        raise ForeignFile(path, problem, advice)
    return True


def open_working_file(path: Path, flags: int, advice: str, mode: int = 0o666) -> int:
    """``os.open`` of a working file without following a symlink; the descriptor of a regular
    file of this user, or ForeignFile (nothing created, truncated or followed)."""
    try:
        fd = os.open(path, flags | _NOFOLLOW, mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        try:
            info = os.lstat(path)
        except OSError:
            raise ForeignFile(path, f"cannot be opened ({exc.strerror})", advice) from None
        raise ForeignFile(path, problem_with(info) or f"cannot be opened ({exc.strerror})", advice) from None
    try:
        problem = problem_with(os.fstat(fd))
    except OSError as exc:
        problem = f"cannot be examined ({exc.strerror})"
    if problem is not None:
        os.close(fd)
        raise ForeignFile(path, problem, advice)
    return fd


def read_working_file(path: Path, max_bytes: int, advice: str = "move it away") -> bytes | None:
    """The bytes of a working file (None: there is none); ForeignFile when its name holds
    anything else, or it is larger than ``max_bytes``."""
    try:
        fd = open_working_file(path, os.O_RDONLY, advice)
    except FileNotFoundError:
        return None
    try:
        data = os.read(fd, max_bytes + 1)
        while data and len(data) <= max_bytes:
            more = os.read(fd, max_bytes + 1 - len(data))
            if not more:
                break
            data += more
    except OSError as exc:
        raise ForeignFile(path, f"cannot be read ({exc.strerror})", advice) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ForeignFile(path, f"is larger than the {max_bytes} bytes ptreg ever writes there", advice)
    return data


def plain_relative(name: object) -> str | None:
    """Why ``name`` is not a plain relative path of names joined by '/' (None: it is)."""
    if not isinstance(name, str) or not name:
        return "not a file name"
    if name.startswith("/"):
        return "an absolute path"
    if "\0" in name or "\\" in name:
        return "holds a NUL byte or a backslash"
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "not a plain path below the directory (an empty part, '.' or '..')"
    return None


def inside(owner: Path, name: object, what: str, *, link_at_end: bool = False) -> Path:
    """``owner / name`` for a ``name`` that ``what`` (a manifest, a journal) gives, checked to
    stay strictly inside ``owner``: a plain relative path, each folder on the way a real folder
    (not a symlink, not a file), and the last part, when it exists, not a folder, nor a symlink
    unless ``link_at_end`` (the caller renames over the link itself, never through it).
    Raises PtregError naming ``what`` and ``name`` otherwise. The one gate for every path a
    working file makes ptreg write or delete."""
    problem = plain_relative(name)
    if problem is not None:
        raise UnusableInput(f"{what}: names {shorten(str(name))}, {problem}; nothing written or deleted")
    assert isinstance(name, str)
    path = owner
    parts = name.split("/")
    for n, part in enumerate(parts):
        path = path / part
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return owner.joinpath(*parts)  # what follows does not exist yet: made as real folders
        except OSError as exc:
            raise UnusableInput(f"{path}: cannot be examined ({exc.strerror}); nothing written or deleted") from None
        last = n == len(parts) - 1
        if stat.S_ISLNK(info.st_mode) and not (last and link_at_end):
            raise UnusableInput(
                f"{path}: a symlink inside {owner}, named by {what}; ptreg never writes or deletes through one",
            )
        if not last and not stat.S_ISDIR(info.st_mode):
            raise UnusableInput(f"{path}: not a folder, named by {what}; nothing written or deleted")
        if last and stat.S_ISDIR(info.st_mode):
            raise UnusableInput(f"{path}: a folder where {what} names a file; nothing written or deleted")
    return path
