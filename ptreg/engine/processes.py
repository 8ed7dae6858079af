"""Every process ptreg runs, started one way and supervised as a whole tree.

``start`` runs an argv in a session of its own as the root of a *tree*: the root and everything
it starts, however it regroups (``setsid``, a double fork, another process group). The
``Tree`` it returns measures the tree's memory, bounds it, and kills all of it. The executor
starts its workers this way, and a worker the commands of the ``command`` workload, so a
command's tree is a tree inside its worker's.

How a tree is held, the first of these the machine offers (``PTREG_SUPERVISION`` names one):

- ``cgroup-v1``: a cgroup of its own in cgroup v1's memory hierarchy (``cgroups.py``), made
  under the caller's own cgroup and joined by the child before it runs anything of its own. Its
  members are the processes in it and in the cgroups below it, and, since root may move a
  process out of its cgroup, their descendants and the root's too, and what this process
  adopted as a child subreaper. Its memory is what the kernel charges it (the
  resident pages of its processes and the page cache they brought in), its peak
  ``memory.max_usage_in_bytes``, and a budget is ``memory.limit_in_bytes``: the kernel never
  lets the tree past it, and a tree that has reached it (``memory.failcnt``) is over budget;
  the resident memory of a member moved out of the cgroup is added, sampled every
  ``STRAY_SECONDS``.
- ``cgroup-v2``: the same on the unified hierarchy (``memory.current``, ``memory.peak``,
  ``memory.max``, ``memory.events``) when the memory controller is enabled for the new cgroup;
  without it, the cgroup still gives the members, and memory is sampled as below.
- ``process-tree``: no cgroup. The members are the root and its descendants (psutil), the
  orphans adopted by this process when it is a child subreaper (a worker, and the executor,
  which adopts what a worker's tree leaves when the worker dies), and, when the tree is
  ended, any process whose environment still carries the tree's mark (``PTREG_TREE``). Memory is
  the members' resident memory added up, sampled at most every ``SAMPLE_SECONDS`` (as often as
  the caller polls): a spike between two samples is missed, and a page two members share counts
  twice.

Ending a tree stops every member (SIGSTOP, so that none forks again), lists the members again
until no new one appears, kills them all (SIGKILL), reaps those that are this process's
children, and starts over until none is left, for at most ``END_SECONDS`` (a time, not a number
of rounds, so that no depth of nested daemons outlasts it); what is still alive then is
returned by pid, for the caller to report.

On macOS and Windows, see ``platforms.py``.

Python workers start with ``python_argv``: ``python -P -s`` (no working directory or script
folder on ``sys.path``, no user site) with no ``PYTHON*`` variable of the caller's, which is what
``-I`` does but for ``-E``: ``-E`` would also drop the ``PYTHONHASHSEED`` a counted worker is
given. The import path is then set explicitly from the caller's own ``sys.path``
(``import_path``), and the worker runs in a folder of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, cast

import psutil

from ..errors import UnusableInput
from ..text import shorten
from .accelerators import AcceleratorUse
from .cgroups import MB, CgroupMemory, make_cgroup
from .platforms import alive, children_by_parent, descendants, linux, maxrss_units, refuse_platform, state

Method = Literal["cgroup-v1", "cgroup-v2", "process-tree"]
METHODS: tuple[Method, ...] = ("cgroup-v1", "cgroup-v2", "process-tree")
METHOD_VARIABLE = "PTREG_SUPERVISION"  # one of METHODS (or "auto"): how trees are held here
TREE_VARIABLE = "PTREG_TREE"  # the marks of the trees a process belongs to, innermost last
SAMPLE_SECONDS = 0.1
# With a cgroup, how often the tree's processes outside it (root moved them out) are looked for
# and their memory sampled: a listing of every process, too dear to take as often as the cgroup's
# own count is read.
STRAY_SECONDS = 1.0
END_SECONDS = 10.0

# How each method counts memory, as a run records it.
MEASURED_BY = {
    "cgroup-v1": "cgroup v1 memory.max_usage_in_bytes of the tree",
    "cgroup-v2": "cgroup v2 memory.peak of the tree",
    "sampled": "resident memory of the tree's processes added up, sampled (a spike between samples is missed)",
}
BOUNDED_BY = {
    "cgroup-v1": "cgroup v1 memory.limit_in_bytes",
    "cgroup-v2": "cgroup v2 memory.max",
    "sampled": "the sampled memory checked against the budget; killed when over",
}

# Python's switches for a worker: -P no working directory or script folder on sys.path, -s no
# user site, -u events unbuffered. The caller's PYTHON* variables are dropped instead of -E.
PYTHON_SWITCHES = ("-P", "-s", "-u")
# Sets the import path the caller chose, before anything but the standard library is imported,
# then runs the module as ``python -m`` would. argv: the path as JSON, then the module.
BOOTSTRAP = (
    "import json, runpy, sys\n"
    "order, extra = json.loads(sys.argv.pop(1))\n"
    "own = list(sys.path)\n"
    "sys.path[:] = [p for p in order if p in own or p in extra] + [p for p in own if p not in order]\n"
    "runpy.run_module(sys.argv[1], run_name='__main__', alter_sys=True)\n"
)

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PR_SET_CHILD_SUBREAPER = 36

_live_roots: set[int] = set()  # roots of this process's trees not yet reaped
_subreaper = {"on": False}
_chosen: dict[str, Method] = {}


# --------------------------------------------------------------------------- Python workers


def import_path(path: Sequence[str], refused: Iterable[Path], script: str | None) -> list[str]:
    """The entries of ``path`` (the caller's ``sys.path``) a worker may import from on top of
    its interpreter's own (the standard library, site-packages and what their .pth files add,
    which it always keeps): absolute ones only; not a ``refused`` folder (the caller's working
    directory, the registry) or the folder of the script the caller was started as; and inside
    a refused folder only a folder pip installed packages into (it holds a ``.dist-info``). So a
    plugin on PYTHONPATH carries over, and a module in the working directory does not."""
    folders = [os.path.realpath(f) for f in refused]
    exact = list(folders)
    if script:
        exact.append(os.path.realpath(os.path.dirname(os.path.abspath(script))))
    kept = []
    for entry in path:
        if not entry or not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        if real in exact:
            continue
        if any(real.startswith(f.rstrip(os.sep) + os.sep) for f in folders) and not _installed_into(real):
            continue
        kept.append(entry)
    return kept


def _installed_into(folder: str) -> bool:
    """Whether pip installed a package into ``folder`` (a site-packages, a ``--target``)."""
    try:
        return any(entry.name.endswith(".dist-info") and entry.is_dir() for entry in os.scandir(folder))
    except OSError:
        return False


def python_argv(
    python: str,
    module: str,
    path: Sequence[str],
    refused: Iterable[Path],
    script: str | None,
    first: Sequence[str] = (),
) -> list[str]:
    """The command line that runs ``module`` in an isolated interpreter with the import path
    ``import_path`` allows, after ``first`` (a backend's folder of a revision's checkout)."""
    chosen = json.dumps([[*first, *path], [*first, *import_path(path, refused, script)]])
    return [python, *PYTHON_SWITCHES, "-c", BOOTSTRAP, chosen, module]


def python_environment(environ: dict[str, str]) -> dict[str, str]:
    """The caller's environment without its PYTHON* variables, which would change what a worker
    imports or how it runs."""
    return {k: v for k, v in environ.items() if not k.startswith("PYTHON")}


def become_subreaper() -> None:
    """Whatever this process starts stays its descendant when its parent dies (re-parented to
    this process, not to init), so that a tree can be found and ended whole."""
    if not linux():
        return  # no such thing on macOS: orphans are found by their mark (``Tree.members``)
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
            _subreaper["on"] = True


# --------------------------------------------------------------------------- choosing a method


def supervision_method() -> Method:
    """How this process holds its trees: ``PTREG_SUPERVISION`` when it names a method (a worker is
    given its executor's), else the first this machine offers; found once per process.
    UnusableInput when the variable names none, or a cgroup this machine does not offer, or on
    a platform where no tree can be held."""
    refuse_platform()
    asked = os.environ.get(METHOD_VARIABLE, "auto") or "auto"
    if asked not in _chosen:
        _chosen[asked] = _choose(asked)
    return _chosen[asked]


def _choose(asked: str) -> Method:
    if asked == "auto":
        return _probe()
    for method in METHODS:
        if asked == method:
            if method != "process-tree":
                try:
                    make_cgroup(method).rmdir()
                except OSError as exc:
                    raise UnusableInput(
                        f"{METHOD_VARIABLE}={method}: this machine offers no such cgroup ({exc})"
                    ) from None
            return method
    raise UnusableInput(f"{METHOD_VARIABLE}={shorten(asked, 40)} is not one of auto, {', '.join(METHODS)}")


def _probe() -> Method:
    if not linux():
        return "process-tree"
    for method in METHODS[:2]:
        try:
            folder = make_cgroup(method)
        except OSError:
            continue
        with contextlib.suppress(OSError):
            folder.rmdir()
        return method
    return "process-tree"


# --------------------------------------------------------------------------- a tree


@dataclass
class Tree:
    """A process started by ``start`` and everything it starts."""

    process: subprocess.Popen[Any]
    method: Method
    token: str
    cgroup: Path | None = None
    limit_mb: float | None = None
    memory: CgroupMemory | None = None
    status: int | None = None  # the root's wait status, once reaped
    usage: Any = None  # the root's resource usage (os.wait4), once reaped
    sampled_peak: float | None = None
    sampled_last: float | None = None
    sampled_at: float = field(default=-1e9)
    # without a subreaper: the processes found by the tree's mark, looked for every STRAY_SECONDS
    marked: set[int] = field(default_factory=set)
    marked_at: float = field(default=-1e9)
    peak_seen: float | None = None  # the cgroup's peak as last read (the cgroup goes with the tree)
    # with a cgroup: its memory with that of the tree's processes outside it, when there were any, sampled
    strays_last: float = 0.0
    strays_peak: float | None = None
    strays_at: float = field(default=-1e9)
    reached: bool = False  # whether it reached its limit, kept once seen (the cgroup goes with the tree)
    ended: bool = False
    accelerators: AcceleratorUse | None = None  # what it takes of the machine's GPUs, when asked and there are any

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def measured_by(self) -> str:
        return MEASURED_BY[self.memory.version if self.memory is not None else "sampled"]

    @property
    def bounded_by(self) -> str | None:
        if self.limit_mb is None:
            return None
        return BOUNDED_BY[self.memory.version if self.memory is not None else "sampled"]

    def reap(self, block: bool = False) -> bool:
        """Whether the root has ended (and is reaped, its status and usage kept)."""
        if self.status is not None:
            return True
        try:
            found, status, usage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped already by someone else: its status is unknown
            found, status, usage = self.pid, 0, None
        if found != self.pid:
            return False
        self.status, self.usage = status, usage
        self.process.returncode = os.waitstatus_to_exitcode(status)
        _live_roots.discard(self.pid)
        return True

    def sample(self) -> float | None:
        """The tree's memory now, in MB; with the sampled method, a new sample when the last is
        ``SAMPLE_SECONDS`` old (so a caller may poll faster than it samples)."""
        if self.ended:
            return None
        if self.accelerators is not None and self.accelerators.due():
            self.accelerators.sample(self.members())
        if self.memory is not None:
            current = self.memory.read(self.memory.current)
            self.peak_mb()
            if current is None:
                return None
            total = current / MB + self._strays_mb()
            if self.strays_last:
                self.strays_peak = max(total, self.strays_peak or 0.0)
            return total
        now = time.monotonic()
        if now - self.sampled_at >= SAMPLE_SECONDS:
            self.sampled_at = now
            total = 0
            for pid in self.members():
                with contextlib.suppress(psutil.Error):
                    total += psutil.Process(pid).memory_info().rss
            self.sampled_last = total / MB
            self.sampled_peak = max(self.sampled_last, self.sampled_peak or 0.0)
        return self.sampled_last

    def _strays_mb(self) -> float:
        """The resident memory of the tree's processes outside its cgroup (root may move a
        process out of it), in MB, sampled every ``STRAY_SECONDS``; 0 when there are none."""
        now = time.monotonic()
        if now - self.strays_at >= STRAY_SECONDS:
            self.strays_at = now
            in_cgroup, related = self._membership()
            total = 0
            for pid in related - in_cgroup:
                with contextlib.suppress(psutil.Error):
                    total += psutil.Process(pid).memory_info().rss
            self.strays_last = total / MB
        return self.strays_last

    def peak_mb(self) -> float | None:
        """The tree's peak memory so far, in MB; None when nothing measured it."""
        if self.memory is not None:
            if not self.ended:
                peak = self.memory.read(self.memory.peak) if self.memory.peak else None
                if peak is not None:
                    self.peak_seen = peak / MB
            found = [v for v in (self.peak_seen, self.strays_peak) if v is not None]
            return max(found) if found else None
        # a sample can miss a short-lived process; the kernel's largest resident size of any
        # process reaped below the root cannot (when the root was reaped with its usage)
        largest = self.usage.ru_maxrss / maxrss_units() if self.usage is not None and self.usage.ru_maxrss > 0 else None
        found = [v for v in (self.sampled_peak, largest) if v is not None]
        return max(found) if found else None

    def over_limit(self) -> bool:
        """Whether the tree has reached its memory limit."""
        if self.limit_mb is None or self.reached or self.ended:
            return self.reached
        if self.memory is not None:
            strays = self.strays_peak is not None and self.strays_peak > self.limit_mb
            self.reached = strays or self.memory.reached()
        else:
            self.reached = self.sampled_last is not None and self.sampled_last > self.limit_mb
        return self.reached

    def members(self, scan: bool = False) -> set[int]:
        """The tree's processes now (never this one): those in its cgroup, and, whatever a
        process did to its cgroup (root may move one out of it), the root's descendants, what
        this process adopted as a child subreaper, and their descendants; ``scan`` adds every
        process whose environment carries the tree's mark."""
        in_cgroup, related = self._membership()
        found = in_cgroup | related
        if scan:
            found.update(_marked(self.token))
        found.discard(os.getpid())
        return found

    def _orphans(self) -> set[int]:
        """Without a subreaper (macOS), what the tree's processes left when they died is
        re-parented to init, no one's descendant: those found by the tree's mark, looked for
        every ``STRAY_SECONDS`` (a listing of every process's environment, too dear to take at
        every sample). Nothing with a subreaper, which adopts them."""
        if _subreaper["on"]:
            return set()
        now = time.monotonic()
        if now - self.marked_at >= STRAY_SECONDS:
            self.marked_at = now
            self.marked = _marked(self.token)
        return self.marked

    def _membership(self) -> tuple[set[int], set[int]]:
        """(the processes in the tree's cgroup, those and the root and what this process
        adopted with all their descendants), never this process."""
        in_cgroup: set[int] = set()
        if self.cgroup is not None:
            for folder, _, _ in os.walk(self.cgroup):
                with contextlib.suppress(OSError, ValueError):
                    in_cgroup.update(int(p) for p in Path(folder, "cgroup.procs").read_text().split())
        children = children_by_parent()
        roots = in_cgroup | set(_adopted(children)) | self._orphans()
        if self.status is None:
            roots.add(self.pid)
        related = descendants(roots, children)
        me = os.getpid()
        in_cgroup.discard(me)
        related.discard(me)
        return in_cgroup, related

    def end(self) -> list[int]:
        """Kill the whole tree and reap what is this process's to reap; the pids of any member
        still alive after ``END_SECONDS`` (none, unless a process cannot be killed)."""
        deadline = time.monotonic() + END_SECONDS
        while True:
            stopped = self._stop_all(deadline)
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            self._reap_all(stopped, deadline)
            left = alive(self.members(scan=True))
            if not left or time.monotonic() >= deadline:
                break
        if not self.reap() and state(self.pid) in (None, "Z"):
            self.reap(block=True)
        _reap_adopted()
        self.peak_mb()  # read once more before the cgroup goes
        self.over_limit()
        self.ended = True
        self._remove_cgroup(deadline)
        return sorted(left)

    def _stop_all(self, deadline: float) -> set[int]:
        """SIGSTOP every member, the root first, until a listing finds no new one."""
        stopped: set[int] = set()
        if self.status is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGSTOP)
            stopped.add(self.pid)
        while True:
            fresh = self.members(scan=True) - stopped
            for pid in fresh:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGSTOP)
            stopped |= fresh
            if not fresh or time.monotonic() >= deadline:
                return stopped

    def _reap_all(self, pids: set[int], deadline: float) -> None:
        """Wait until every killed pid is reaped here, or is no child of this process and gone
        (or a zombie its own parent reaps)."""
        pending = set(pids)
        while pending:
            for pid in list(pending):
                if pid == self.pid:
                    if self.reap():
                        pending.discard(pid)
                    continue
                try:
                    found, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    if state(pid) in (None, "Z"):
                        pending.discard(pid)
                    continue
                if found:
                    pending.discard(pid)
            if not pending or time.monotonic() >= deadline:
                return
            time.sleep(0.002)

    def _remove_cgroup(self, deadline: float) -> None:
        if self.cgroup is None:
            return
        while True:
            for folder, _, _ in os.walk(self.cgroup, topdown=False):
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
            if not self.cgroup.exists() or time.monotonic() >= deadline:
                return
            time.sleep(0.005)


def start(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: dict[str, str],
    stdin: int | IO[Any] | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    text: bool = False,
    memory_limit_mb: float | None = None,
    die_with_parent: bool = False,
    death_signal: int = signal.SIGKILL,
    method: Method | None = None,
    measure_accelerators: bool = False,
) -> Tree:
    """Start ``argv`` as the root of a tree held by ``method`` (default: ``supervision_method``),
    in a session of its own; its memory bounded by ``memory_limit_mb`` when given, and sent
    ``death_signal`` when this thread dies, when ``die_with_parent``; with
    ``measure_accelerators``, what it takes of the machine's NVIDIA GPUs is sampled with its
    memory (``accelerators.py``). OSError when it cannot be started; UnusableInput when the
    method cannot hold it here."""
    refuse_platform()
    method = method or supervision_method()
    token = secrets.token_hex(8)
    env = {**env, TREE_VARIABLE: " ".join(filter(None, [os.environ.get(TREE_VARIABLE), token]))}
    cgroup = memory = None
    if method != "process-tree":
        try:
            cgroup = make_cgroup(method)
            memory = CgroupMemory.of(cgroup, method)
            if memory is not None and memory_limit_mb is not None:
                memory.set_limit(memory_limit_mb)
        except OSError as exc:
            if cgroup is not None:
                with contextlib.suppress(OSError):
                    cgroup.rmdir()
            raise UnusableInput(f"cannot hold a process tree in a {method} cgroup here: {exc}") from None
    procs = os.open(cgroup / "cgroup.procs", os.O_WRONLY) if cgroup is not None else None
    prctl = _prctl() if die_with_parent and linux() else None  # macOS has no parent-death signal
    parent = os.getpid()

    def in_the_child() -> None:
        # after fork, before exec: only calls that take no lock
        if procs is not None:
            os.write(procs, b"0")  # "0": the writing process joins the tree's cgroup
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, death_signal)
            if os.getppid() != parent:  # the parent died before the signal was asked for
                os.kill(os.getpid(), death_signal)

    try:
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            text=text,
            start_new_session=True,
            preexec_fn=in_the_child if procs is not None or prctl is not None else None,
        )
    except subprocess.SubprocessError as exc:  # the child could not join its cgroup
        if cgroup is not None:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        raise UnusableInput(f"cannot start a process in its {method} cgroup: {exc}") from None
    except OSError:
        if cgroup is not None:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        raise
    finally:
        if procs is not None:
            os.close(procs)
    _live_roots.add(process.pid)
    tree = Tree(process, method, token, cgroup, memory_limit_mb, memory)
    if measure_accelerators:
        tree.accelerators = AcceleratorUse.here()
    return tree


def _prctl() -> Callable[..., int]:
    import ctypes

    return cast(Callable[..., int], ctypes.CDLL(None, use_errno=True).prctl)


def _marked(token: str) -> set[int]:
    """Every process whose environment carries the tree mark ``token``."""
    found = set()
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if token in process.environ().get(TREE_VARIABLE, "").split():
                found.add(process.pid)
    return found


def _adopted(children: dict[int, list[int]] | None = None) -> list[int]:
    """The processes this child subreaper adopted: its children that are no tree's root and
    run in a session other than its own (every tree starts one, and no process joins another
    session), so never a child it started itself (``git``, ``valgrind``) or a tree not ended yet."""
    if not _subreaper["on"]:
        return []
    me = os.getpid()
    own = os.getsid(0)
    found = []
    for pid in (children if children is not None else children_by_parent()).get(me, []):
        if pid in _live_roots:
            continue
        with contextlib.suppress(OSError):
            if os.getsid(pid) != own:
                found.append(pid)
    return found


def _reap_adopted() -> None:
    """Reap the zombies this subreaper adopted (its trees' killed orphans); never a live root
    nor a child another part of this process waits for."""
    for pid in _adopted():
        if state(pid) == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
