"""The cgroups a process tree is held by (``processes.py``): where this process's own cgroup is
in the hierarchy a method uses, a new cgroup made below it (after removing the empty ones a
ptreg that died without ending its trees left there), and the kernel's count of a cgroup's
memory: current, peak, limit, and whether the limit was reached."""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

MB = 1024 * 1024

_made = itertools.count()
_swept: set[Path] = set()  # the folders whose leftover cgroups this process has removed


def hierarchy(method: str) -> Path:
    """The folder of this process's own cgroup in the hierarchy ``method`` uses; OSError when
    there is none."""
    mount = mount_root = None
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) < 5 or len(rest) < 3:
                continue
            if (method == "cgroup-v1" and rest[0] == "cgroup" and "memory" in rest[2].split(",")) or (
                method == "cgroup-v2" and rest[0] == "cgroup2"
            ):
                mount_root, mount = fields[3], fields[4]
                break
    own = None
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            number, controllers, path = line.rstrip("\n").split(":", 2)
            if (method == "cgroup-v1" and "memory" in controllers.split(",")) or (
                method == "cgroup-v2" and number == "0" and not controllers
            ):
                own = path
    if mount is None or mount_root is None or own is None:
        raise OSError(f"no {method} hierarchy is mounted for this process")
    if mount_root != "/" and (own == mount_root or own.startswith(mount_root + "/")):
        own = own[len(mount_root) :]
    return Path(mount) / own.lstrip("/")


def make_cgroup(method: str) -> Path:
    parent = hierarchy(method)
    if parent not in _swept:
        _swept.add(parent)
        _sweep(parent)
    folder = parent / f"ptreg-{os.getpid()}-{next(_made)}-{secrets.token_hex(3)}"
    folder.mkdir()
    if not (folder / "cgroup.procs").exists():
        with contextlib.suppress(OSError):
            folder.rmdir()
        raise OSError(f"{folder} is not a cgroup")
    return folder


def _sweep(parent: Path) -> None:
    """Remove the empty cgroups a ptreg that died without ending its trees (SIGKILL) left here:
    ``ptreg-<pid>-...`` whose process is gone. A cgroup that still holds a process stays."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            owner = entry.name.split("-")
            if len(owner) < 2 or owner[0] != "ptreg" or not owner[1].isdigit() or not entry.is_dir():
                continue
            try:
                os.kill(int(owner[1]), 0)
                continue  # alive (or its pid taken again): not ours to judge
            except ProcessLookupError:
                pass
            except OSError:
                continue
            for folder, _, _ in os.walk(entry.path, topdown=False):
                with contextlib.suppress(OSError):
                    os.rmdir(folder)


@dataclass
class CgroupMemory:
    """The kernel's count of a cgroup's memory: current, peak, limit, and whether it was reached."""

    folder: Path
    current: str
    peak: str | None
    limit: str
    version: Literal["cgroup-v1", "cgroup-v2"]

    @classmethod
    def of(cls, folder: Path, version: str) -> CgroupMemory | None:
        if version == "cgroup-v1" and (folder / "memory.max_usage_in_bytes").exists():
            return cls(
                folder, "memory.usage_in_bytes", "memory.max_usage_in_bytes", "memory.limit_in_bytes", "cgroup-v1"
            )
        if version == "cgroup-v2" and (folder / "memory.current").exists() and (folder / "memory.peak").exists():
            return cls(folder, "memory.current", "memory.peak", "memory.max", "cgroup-v2")
        return None

    def read(self, name: str) -> int | None:
        try:
            return int((self.folder / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def set_limit(self, megabytes: float) -> None:
        limit = str(int(megabytes * MB))
        (self.folder / self.limit).write_text(limit)
        # swap is not a way past the budget
        for name, value in (("memory.memsw.limit_in_bytes", limit), ("memory.swap.max", "0")):
            if (self.folder / name).exists():
                with contextlib.suppress(OSError):
                    (self.folder / name).write_text(value)

    def reached(self) -> bool:
        """Whether the kernel refused the tree memory at its limit at least once."""
        if self.version == "cgroup-v1":
            # its peak at the limit (hierarchical, so a command's cgroup below counts), or the
            # kernel's own counts of refusals and of processes killed here
            peak, limit = self.read(self.peak or ""), self.read(self.limit)
            if peak is not None and limit is not None and peak >= limit:
                return True
            with contextlib.suppress(OSError, ValueError, IndexError):
                for line in (self.folder / "memory.oom_control").read_text().splitlines():
                    name, value = line.split()
                    if name == "oom_kill" and int(value) > 0:
                        return True
            return (self.read("memory.failcnt") or 0) > 0
        try:
            events = dict(line.split() for line in (self.folder / "memory.events").read_text().splitlines())
        except (OSError, ValueError):
            return False
        return any(int(events.get(name, "0")) > 0 for name in ("max", "oom", "oom_kill"))
