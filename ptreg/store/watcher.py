"""The change watcher: ``ptreg index watch`` follows one registry directory through Linux's
inotify (through ``inotify_simple``, which hands over the kernel's event masks as they are,
queue overflow included) and tells each command that asks (``watch.ask``) which ``*.json`` names changed since
the index was last brought up to date, so the command looks at those instead of every file.

The watcher numbers every change it sees; the index keeps the watcher's id and the number it
was last brought up to date at, and asks only for the names changed after that.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import selectors
import signal
import socket
import stat
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UnusableInput
from .names import SOCKET_FILE, WATCH_LOCK_FILE
from .watch import ASK_TIMEOUT_S, REQUEST_MAX_BYTES, Answer, directory, is_count, read_line, socket_path
from .workfiles import ForeignFile, open_working_file, problem_with

# inotify's event bits (linux/inotify.h, the kernel's ABI)
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
IN_ONLYDIR = 0x1000000
CHANGES = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
ENDED = IN_DELETE_SELF | IN_UNMOUNT | IN_IGNORED  # the watch is gone: nothing more will come

# File systems whose files another machine can change without this kernel seeing it.
NETWORK_FILE_SYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "gpfs", "fuse.sshfs"}
)


@dataclass
class ChangeLog:
    """What the watcher remembers: for each name, the number of its last change; and the number
    at which it last lost track (events lost, or the watch ended)."""

    watcher: str
    seq: int = 0
    last: dict[str, int] = field(default_factory=dict)
    lost_at: int = 0

    def note(self, name: str) -> None:
        self.seq += 1
        self.last.pop(name, None)  # kept in the order of the last changes, oldest first
        self.last[name] = self.seq

    def lose(self) -> None:
        self.seq += 1
        self.lost_at = self.seq
        self.last.clear()

    def answer(self, watcher: Any, since: Any) -> Answer:
        """The names changed after ``since``, a number this watcher gave; None for a number it
        did not give, or one from before it last lost track."""
        if watcher != self.watcher or not is_count(since) or not self.lost_at <= since <= self.seq:
            return Answer(self.watcher, self.seq, None)
        changed = []
        for name, at in reversed(self.last.items()):
            if at <= since:
                break
            changed.append(name)
        return Answer(self.watcher, self.seq, sorted(changed))


class _Inotify:
    """One inotify watch on a directory, read without blocking."""

    def __init__(self, root: Path):
        # imported here: the optional extra ptreg[watch], and about 20 ms that only `ptreg index
        # watch` pays (it loads the C-calling module of the standard library)
        try:
            from inotify_simple import INotify
        except ModuleNotFoundError:
            raise UnusableInput("the watcher needs the inotify_simple package: pip install 'ptreg[watch]'") from None
        self.source = INotify(nonblocking=True)  # close-on-exec, as inotify_simple opens it by default
        try:
            self.source.add_watch(root, CHANGES | IN_MOVE_SELF | IN_ONLYDIR)
        except OSError:
            self.source.close()
            raise
        self.fd = self.source.fileno()

    def events(self) -> list[tuple[int, str]]:
        """(mask, name) of every queued event, until the queue is dry."""
        found: list[tuple[int, str]] = []
        while batch := self.source.read(timeout=0):
            found.extend((event.mask, event.name) for event in batch)
        return found

    def close(self) -> None:
        self.source.close()


def file_system_type(root: Path) -> str | None:
    """The type of the file system ``root`` is on, from /proc/self/mountinfo; None if unknown."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
    except OSError:
        return None
    return mount_type(os.path.realpath(root), mounts)


def mount_type(target: str, mounts: str) -> str | None:
    """The type of the mount (a line of ``mounts``, in /proc/self/mountinfo's format) that holds
    the absolute path ``target``: the one with the longest mount point above it."""
    best, kind = "", None
    for line in mounts.splitlines():
        before, _, after = line.partition(" - ")
        fields = before.split()
        if len(fields) < 5 or not after:
            continue
        point = fields[4].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, after.split()[0]
    return kind


def apply(log: ChangeLog, events: list[tuple[int, str]]) -> bool:
    """Note ``events`` in ``log``; whether the watch has ended."""
    for mask, name in events:
        if mask & (IN_Q_OVERFLOW | ENDED):
            log.lose()
            if mask & ENDED:
                return True
        elif mask & CHANGES and name.endswith(".json"):
            log.note(name)
    return False


def serve(root: Path, ready: Callable[[str], None] | None = None, stop: threading.Event | None = None) -> str:
    """Watch ``root`` and answer the commands that ask, until SIGINT or SIGTERM (or ``stop`` is
    set, when given: then no signal is caught, so it can run in a thread), or until the directory
    goes away; why it stopped. ``ready`` is told the watcher's id once it answers. One watcher
    per directory: a second one is refused."""
    if not sys.platform.startswith("linux"):
        raise UnusableInput("the watcher needs Linux's inotify; without it every command checks every file")
    kind = file_system_type(root)
    if kind in NETWORK_FILE_SYSTEMS:
        raise UnusableInput(f"{root}: on a {kind} file system, whose changes from other machines inotify never sees")
    try:
        with directory(root) as fd:
            # one watcher per directory, by a lock file of its own: the registry lock's writers
            # lock the directory itself, and a watcher must never hold them up
            mine = open_working_file(root / WATCH_LOCK_FILE, os.O_RDWR | os.O_CREAT, "remove it; ptreg makes it")
            try:
                fcntl.flock(mine, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held while watching; dropped at exit
            except BlockingIOError:
                os.close(mine)
                raise UnusableInput(f"{root}: another watcher already watches it") from None
            inotify = _Inotify(root)  # watching before anyone can ask: no change falls between
            try:
                return _answer_until_stopped(root, fd, inotify, ready, stop)
            finally:
                os.close(mine)
                inotify.close()
                with contextlib.suppress(OSError):
                    if _own_socket(os.stat(SOCKET_FILE, dir_fd=fd, follow_symlinks=False)):
                        os.unlink(SOCKET_FILE, dir_fd=fd)  # never what another left under the name
    except OSError as exc:  # e.g. a read-only directory, or the user's inotify watches used up
        raise UnusableInput(f"{root}: cannot watch it: {exc.strerror or exc}") from None


def _own_socket(info: os.stat_result) -> bool:
    return stat.S_ISSOCK(info.st_mode) and info.st_uid == os.geteuid()


def _answer_until_stopped(
    root: Path, fd: int, inotify: _Inotify, ready: Callable[[str], None] | None, stop: threading.Event | None
) -> str:
    log = ChangeLog(f"{os.getpid()}-{secrets.token_hex(8)}")
    try:
        left = os.stat(SOCKET_FILE, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        pass
    else:
        problem = None if _own_socket(left) else problem_with(left) or "is a file, not the watcher's socket"
        if problem is not None:
            raise ForeignFile(root / SOCKET_FILE, problem, "move it away; the watcher makes its socket itself")
        os.unlink(SOCKET_FILE, dir_fd=fd)  # a socket left by a watcher that was killed (we hold the lock)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mask = os.umask(0o077)  # only this user may ask
    try:
        listener.bind(socket_path(fd))
    finally:
        os.umask(mask)
    listener.listen(16)
    stopped: list[str] = []

    def caught(number: int, _frame: Any) -> None:
        stopped.append(f"stopped by {signal.Signals(number).name}")

    signals = (signal.SIGINT, signal.SIGTERM) if stop is None else ()
    previous = {s: signal.signal(s, caught) for s in signals}
    selector = selectors.DefaultSelector()
    selector.register(inotify.fd, selectors.EVENT_READ, "events")
    selector.register(listener, selectors.EVENT_READ, "question")
    if ready is not None:
        ready(log.watcher)
    try:
        while not stopped:
            for key, _ in selector.select(timeout=0.5 if stop is None else 0.02):
                if apply(log, inotify.events()):
                    return f"{root} is gone"
                if key.data == "question":
                    _reply(listener, log)
            if stop is not None and stop.is_set():
                stopped.append("stopped")
        return stopped[0]
    finally:
        selector.close()
        listener.close()
        for s, handler in previous.items():
            signal.signal(s, handler)


def _reply(listener: socket.socket, log: ChangeLog) -> None:
    try:
        conn, _ = listener.accept()
    except OSError:
        return
    with conn:
        conn.settimeout(ASK_TIMEOUT_S)
        try:
            value = json.loads(read_line(conn, REQUEST_MAX_BYTES))
            if not isinstance(value, dict):
                return
            answer = log.answer(value.get("watcher"), value.get("since"))
            body = {"watcher": answer.watcher, "seq": answer.seq, "changed": answer.changed}
            conn.sendall(json.dumps(body).encode() + b"\n")
        except (OSError, ValueError):
            return  # a question cut short or garbled: that command checks every file
