"""The crash tests' ptreg processes, forked from a server that has ptreg imported already.

A crash sweep starts one ptreg per step and kills it there; a fresh interpreter spent most of
each step importing ptreg (seconds under load). Each command here is still a process of its
own, killed whole by its own SIGKILL, with the caller's environment and working directory: only
the imports are done once, in the server (multiprocessing's forkserver), before any fork.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import subprocess
from pathlib import Path

_FORKS = multiprocessing.get_context("forkserver")
_FORKS.set_forkserver_preload(["ptreg.cli", "ptreg.operations.repair"])


def _command(root: str, args: list[str], env: dict[str, str], log: str) -> None:
    """In the forked process: the caller's environment, ptreg's output to ``log``, the command."""
    os.environ.clear()
    os.environ.update(env)
    from ptreg.store import faults

    importlib.reload(faults)  # it reads PTREG_CRASH_AT once, when imported (in the server)
    os.chdir(Path(root).parent)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    from ptreg.cli import main

    main(["-r", root, *args])  # its SystemExit is the process's exit code


def run_forked(root: Path, args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """``ptreg -r root args`` in a forked process; its exit code (-9 when a crash point killed
    it) and its output, as ``subprocess.run`` gives them."""
    log = root.parent / f".ptreg-output-{os.urandom(4).hex()}"
    process = _FORKS.Process(target=_command, args=(str(root), list(args), env, str(log)))
    process.start()
    process.join(timeout)
    if process.exitcode is None:
        process.kill()
        process.join()
        raise subprocess.TimeoutExpired(["ptreg", *args], timeout)
    told = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    log.unlink(missing_ok=True)
    return subprocess.CompletedProcess(["ptreg", *args], process.exitcode, told, told)
