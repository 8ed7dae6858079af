"""Asking the optional change watcher (``watcher.py``) which record files changed, instead of
``stat``-ing every one of them (docs/index.md, "The change watcher").

``ptreg index watch`` runs ``watcher.serve``; the index's check calls ``ask``. Their
conversation is one JSON line each way over a Unix socket inside the registry directory (``SOCKET_FILE``,
mode 0600, reached through the directory's descriptor so that its path is short and names
this very directory). The watcher numbers every change it sees to a ``*.json`` name; the index
keeps the watcher's id and the number it was last brought up to date at, and asks only for the
names changed after that.

Why a drained queue is enough: Linux queues an inotify event inside the system call that made
the change, before that call returns. So when a command's question arrives, every change made
before the command started is already queued, and the watcher reads the queue dry before it
answers. A lost event (the kernel's queue overflowed) or a watch that ended makes the watcher
answer "cannot say" for everything before it, and the index then checks every file.

Not seen by inotify, so never vouched for: changes made on another machine to a network file
system (the watcher refuses to start on one), writes through a shared memory map or through a
hard link in another directory, and the target of a symlinked record (a symlink is re-read by
every command, watched or not).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .names import SOCKET_FILE

# Set to "off" to check every file even when a watcher runs (to compare, or to distrust it).
WATCHER_VARIABLE = "PTREG_WATCHER"
ASK_TIMEOUT_S = 1.0  # a watcher that does not answer within this is not waited for
REQUEST_MAX_BYTES = 4096


@dataclass
class Answer:
    """A watcher's answer: its id, the number of changes it has seen, and the names changed
    after the number asked about (None: it cannot say, so every file must be checked)."""

    watcher: str
    seq: int
    changed: list[str] | None


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _record_name(name: Any) -> bool:
    """Whether ``name`` is one a watcher can name: a ``*.json`` file of the directory itself."""
    return isinstance(name, str) and name.endswith(".json") and "/" not in name and "\0" not in name


def socket_path(directory_fd: int) -> str:
    # through the directory's descriptor: short whatever the registry's path, and this directory
    return f"/proc/self/fd/{directory_fd}/{SOCKET_FILE}"


@contextlib.contextmanager
def directory(root: Path) -> Iterator[int]:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- asking


def ask(root: Path, watcher: str | None, since: int | None) -> Answer | None:
    """The answer of the watcher of ``root``, asked for the changes after ``since`` (a number
    ``watcher`` gave); None when no watcher answers, or ``PTREG_WATCHER=off``."""
    if os.environ.get(WATCHER_VARIABLE) == "off" or not sys.platform.startswith("linux"):
        return None
    try:
        with directory(root) as fd, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            if not _ours(os.stat(SOCKET_FILE, dir_fd=fd, follow_symlinks=False)):
                return None  # a symlink, a file, or another user's socket: every file is checked
            conn.settimeout(ASK_TIMEOUT_S)
            conn.connect(socket_path(fd))
            if _peer_uid(conn) != os.geteuid():
                return None  # a process of another user is not believed about what changed
            conn.sendall(json.dumps({"watcher": watcher, "since": since}).encode() + b"\n")
            reply = read_line(conn)
    except OSError:  # no watcher (no socket, or one left by a killed watcher), or it timed out
        return None
    return _answer(reply)


def _ours(info: os.stat_result) -> bool:
    """Whether the socket's name holds a socket of this user (connect() would follow a symlink)."""
    return stat.S_ISSOCK(info.st_mode) and info.st_uid == os.geteuid()


def _peer_uid(conn: socket.socket) -> int | None:
    """The user id of the process at the other end of a Unix socket (Linux's SO_PEERCRED)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def read_line(conn: socket.socket, most: int | None = None) -> bytes:
    data = b""
    while not data.endswith(b"\n") and (most is None or len(data) <= most):
        part = conn.recv(1 << 16)
        if not part:
            break
        data += part
    return data


def _answer(reply: bytes) -> Answer | None:
    try:
        value = json.loads(reply)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("watcher"), str) or not is_count(value.get("seq")):
        return None
    changed = value.get("changed")
    if changed is not None and not (isinstance(changed, list) and all(map(_record_name, changed))):
        return None
    return Answer(value["watcher"], value["seq"], changed)
