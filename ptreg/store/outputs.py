"""Writing where the user asked: the one writer of every output path a command takes
(`export -o FILE`, `export --bundle FILE.tar.gz`, the files of `schema --out DIR`).

A path is written as a shell's ``>`` would write it, except that a file is never seen half
written:

- a regular file, or a name nothing holds yet, is written whole: a temporary file beside it,
  fsynced, renamed over it (``jsonio.staged_file``), its mode kept;
- ``-`` and the names of this process's descriptors (``/dev/stdout``, ``/dev/stderr``,
  ``/dev/fd/N``) are written to the descriptor itself, so that ``> file`` and ``>> file``
  mean what they say;
- a character device (``/dev/null``, a terminal), a FIFO or a Unix socket is opened and
  written in place: never replaced, created or truncated;
- a symlink is followed, since the user named it: to a regular file, that file is replaced
  whole and the link stays (``cp`` too writes through a link to the file it names); a link
  that leads nowhere is refused rather than made a file;
- a directory, a block device and anything else are refused in one line, nothing written;
- a path that leads into the registry directory (its own name, a folder or a symlink on the
  way) is refused, nothing written: the registry's files are ptreg's own, written by its rules,
  and an export there would replace a record or be a stray file every command stops at.

This is for paths the user chose. ptreg's own files go through ``jsonio`` and ``workfiles``,
which follow no symlink at all.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import UnusableInput
from .faults import crash_point
from .jsonio import discard, fsync_directory, staged_file

# How a path names one of this process's descriptors: /dev/stdout leads to /proc/self/fd/1.
_STANDARD = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_DESCRIPTOR = re.compile(r"/(?:proc/(?:self|thread-self|(?P<pid>[0-9]+))/fd|dev/fd)/(?P<fd>[0-9]+)")
_MAX_LINKS = 40  # as the kernel's own limit on symlinks followed in one lookup


@dataclass(frozen=True)
class OutputTarget:
    """What a user-chosen output path holds, and so how it is written.

    ``kind`` is ``descriptor`` (``fd``), ``special`` (a character device, FIFO or socket),
    ``file`` (a regular file, at ``target``, through a symlink when
    ``path`` is one), ``absent``, ``directory``, ``dangling`` (a symlink to nothing) or
    ``other`` (a block device, anything else)."""

    path: Path
    kind: str
    target: Path
    fd: int | None = None
    mode: int = 0  # st_mode of what the path leads to, when it leads anywhere

    @property
    def in_place(self) -> bool:
        """Whether it is written in place: something a user pipes to, not a file to replace."""
        return self.kind in ("descriptor", "special")


def descriptor_named(path: Path) -> int | None:
    """The descriptor of this process that ``path`` names, directly or through the symlinks of
    its last part (``/dev/stdout``, a link to it, ``/dev/fd/3``); None when it names none."""
    current = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        if current in _STANDARD:
            return _STANDARD[current]
        named = _DESCRIPTOR.fullmatch(current)
        if named is not None and named["pid"] in (None, str(os.getpid())):
            return int(named["fd"])
        try:
            link = os.readlink(current)
        except OSError:  # not a symlink, or nothing there
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), link))
    return None


def output_target(path: Path) -> OutputTarget:
    """What ``path`` holds, as the writer will treat it (nothing is opened or refused here)."""
    if str(path) == "-":
        return OutputTarget(path, "descriptor", path, fd=1)
    fd = descriptor_named(path)
    if fd is not None:
        return OutputTarget(path, "descriptor", path, fd=fd)
    try:
        link = stat.S_ISLNK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return OutputTarget(path, "absent", path)
    except OSError as exc:
        raise UnusableInput(f"{path}: cannot be examined ({exc.strerror}); nothing written") from None
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return OutputTarget(path, "dangling", path)
    except OSError as exc:  # a symlink loop, a folder on the way that cannot be searched
        raise UnusableInput(f"{path}: cannot be examined ({exc.strerror}); nothing written") from None
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return OutputTarget(path, "file", Path(os.path.realpath(path)) if link else path, mode=mode)
    if stat.S_ISDIR(mode):
        return OutputTarget(path, "directory", path, mode=mode)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return OutputTarget(path, "special", path, mode=mode)
    return OutputTarget(path, "other", path, mode=mode)


@dataclass
class Output:
    """An output open for writing: ``handle`` takes bytes; ``terminal`` says a person will read
    them (text then goes through ``text.printable``, and binary output is refused)."""

    handle: BinaryIO
    terminal: bool
    target: OutputTarget


class OutputExists(UnusableInput):
    """A file is already at the path, and the caller may not replace it."""


def leads_into(path: Path, folder: Path) -> bool:
    """Whether ``path``, followed through its symlinks as a write to it would be (a name not there
    yet: its folder's), is ``folder`` or lies inside it."""
    home, lands = os.path.realpath(folder), os.path.realpath(path)
    return lands == home or lands.startswith(home.rstrip(os.sep) + os.sep)


def refuse_in_registry(path: Path, registry: Path | None) -> None:
    """Refused, in one line, when what ``path`` leads to lies in the ``registry`` directory;
    never a descriptor."""
    if registry is None or str(path) == "-" or descriptor_named(path) is not None:
        return
    if leads_into(path, registry):
        raise UnusableInput(
            f"{path}: leads into the registry {registry}, whose files ptreg writes by its own rules; "
            "nothing written: write it elsewhere"
        )


@contextlib.contextmanager
def open_output(path: Path, *, overwrite: bool = True, registry: Path | None = None) -> Iterator[Output]:
    """``path`` open for writing as the module says. What is written reaches the path when the
    block ends without an error; for a file, nothing does otherwise. Without ``overwrite``, a
    regular file already there is refused (OutputExists), and one created meanwhile too. A
    path into ``registry`` is refused."""
    refuse_in_registry(path, registry)
    target = output_target(path)
    if target.kind == "directory":
        raise UnusableInput(f"{path}: is a directory; give the name of a file to write")
    if target.kind == "dangling":
        raise UnusableInput(f"{path}: a symlink to {os.readlink(path)}, which does not exist; not written through it")
    if target.kind == "other":
        what = "a block device" if stat.S_ISBLK(target.mode) else "of a kind ptreg does not know"
        raise UnusableInput(f"{path}: {what}, not a file, a character device, a pipe or a socket; nothing written")
    if target.in_place:
        with _in_place(target) as output:
            yield output
        return
    if target.kind == "file" and not overwrite:
        raise OutputExists(f"{path}: exists; give another file, or --overwrite to replace it")
    with _staged(target, overwrite) as output:
        yield output


@contextlib.contextmanager
def _staged(target: OutputTarget, overwrite: bool) -> Iterator[Output]:
    """A regular file written whole: staged beside where it lands, then renamed over it (or
    linked to its name, which fails on a name taken meanwhile, when it may not be replaced)."""
    final = target.target
    if not final.parent.is_dir():
        raise UnusableInput(f"{target.path}: directory {final.parent} does not exist")
    mode = target.mode & 0o7777 if target.kind == "file" else None  # the file replaced keeps its mode
    with contextlib.ExitStack() as stack:
        try:
            handle, staged = stack.enter_context(staged_file(final.parent, prefix=f".{final.name}.", mode=mode))
        except OSError as exc:
            raise UnusableInput(f"{target.path}: cannot write in {final.parent}: {exc.strerror}") from None
        yield Output(handle, False, target)
    # flushed and fsynced: now it takes the name
    try:
        _install(staged, final, target.path, overwrite)
    except BaseException:
        discard(staged)
        raise
    crash_point()
    fsync_directory(final.parent)


def _install(staged: str, final: Path, shown: Path, overwrite: bool) -> None:
    if overwrite:
        os.replace(staged, final)
        return
    try:  # link(2) fails on a name taken meanwhile: never a silent replace
        os.link(staged, final)
    except FileExistsError:
        raise OutputExists(f"{shown}: exists; give another file, or --overwrite to replace it") from None
    os.unlink(staged)


@contextlib.contextmanager
def _in_place(target: OutputTarget) -> Iterator[Output]:
    """A descriptor, device, FIFO or socket, written as it is: no rename, no truncation."""
    if target.fd is not None:
        if target.fd in (1, 2):  # what Python holds for it goes first
            (sys.stdout if target.fd == 1 else sys.stderr).flush()
        try:
            fd = os.dup(target.fd)
        except OSError as exc:
            raise UnusableInput(f"{target.path}: descriptor {target.fd} is not open ({exc.strerror})") from None
    elif stat.S_ISSOCK(target.mode):
        with _socket_output(target) as output:
            yield output
        return
    else:
        fd = _open_special(target.path)
    with os.fdopen(fd, "wb") as handle:
        yield Output(handle, os.isatty(fd), target)
        handle.flush()


def _open_special(path: Path) -> int:
    """A character device or FIFO opened for writing, as ``>`` opens it (a FIFO waits for its
    reader); refused if it became anything else meanwhile, never created or truncated."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise UnusableInput(f"{path}: cannot be opened for writing ({exc.strerror}); nothing written") from None
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        os.close(fd)
        raise UnusableInput(f"{path}: was replaced while it was opened; nothing written")
    return fd


@contextlib.contextmanager
def _socket_output(target: OutputTarget) -> Iterator[Output]:
    """A Unix socket: a stream connection to it, closed for writing when done."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        try:
            connection.connect(str(target.path))
        except OSError as exc:
            why = "not a stream socket" if exc.errno == errno.EPROTOTYPE else exc.strerror
            raise UnusableInput(f"{target.path}: a socket that cannot be written to ({why}); nothing written") from None
        with connection.makefile("wb") as handle:
            yield Output(handle, False, target)
            handle.flush()
        connection.shutdown(socket.SHUT_WR)
