"""What the operating system says of its processes, on each platform ptreg runs commands on.

On macOS there is no cgroup and no child subreaper: a tree is held by ``process-tree``, and an
orphan (re-parented to launchd, so no one's descendant) is found by the tree's mark, looked for
every ``processes.STRAY_SECONDS`` while the tree runs (``psutil.Process.environ``, which macOS allows for
the user's own processes) and at its end; a command does not die with its worker when the
worker is killed outright (no ``PR_SET_PDEATHSIG``), but the worker's tree's end kills it.
Process states come from psutil there, from /proc on Linux. Windows is refused in one line: it
has no sessions, signals or fork to hold a tree by.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import psutil

from .. import PLATFORMS
from ..errors import UnusableInput
from .cgroups import MB


def linux() -> bool:
    return sys.platform.startswith("linux")


def refuse_platform() -> None:
    """UnusableInput on a platform where a process tree cannot be held (Windows)."""
    if not sys.platform.startswith(PLATFORMS):
        raise UnusableInput(
            f"ptreg cannot run processes on {sys.platform}: it holds a command's process tree on Linux and macOS only"
        )


# psutil's names of the states that matter here, as /proc writes them.
STATE_LETTERS = {psutil.STATUS_ZOMBIE: "Z", psutil.STATUS_STOPPED: "T", psutil.STATUS_RUNNING: "R"}


def maxrss_units() -> int:
    """``ru_maxrss`` units in a MB: Linux counts kilobytes, macOS bytes."""
    return 1024 if linux() else MB


def state(pid: int) -> str | None:
    """A process's state letter (R, S, T, Z, ...), None when there is no such process."""
    if not linux():
        try:
            status = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            return None
        except psutil.Error:
            return "S"  # there, but not ours to look at: alive, as far as anyone can tell
        return None if status == psutil.STATUS_DEAD else STATE_LETTERS.get(status, "S")
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[0] if fields else None


def alive(pids: Iterable[int]) -> set[int]:
    return {pid for pid in pids if state(pid) not in (None, "Z")}


def children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from one listing of the processes."""
    children: dict[int, list[int]] = {}
    for process in psutil.process_iter(["ppid"]):
        ppid = process.info.get("ppid")
        if isinstance(ppid, int):
            children.setdefault(ppid, []).append(process.pid)
    return children


def descendants(roots: set[int], children: dict[int, list[int]]) -> set[int]:
    found, pending = set(), list(roots)
    while pending:
        pid = pending.pop()
        if pid not in found:
            found.add(pid)
            pending += children.get(pid, [])
    return found
