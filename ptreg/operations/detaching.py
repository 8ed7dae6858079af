"""A run started in the background (`ptreg run ID --detach`).

Every refusal a run would make before measuring (the registry, the gate, the consent, the run
lock) is made here first, in the foreground, and the run's id is chosen and its in-progress
folder made under the run lock, so that the id is this run's. Then the run is started as
``python -m ptreg run ID --run-id RUN ...``: locally as a process in a session of its own
(stdin from /dev/null, its output to ``log.txt`` in the in-progress folder), which the
terminal closing does not reach; or, with ``--executor ray``, as a job of the Ray cluster
(``engine/ray_jobs.py``), which the client leaving does not stop. The detaching process waits
for neither.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..clock import utc_now
from ..engine.processes import PYTHON_SWITCHES
from ..engine.ray_jobs import JobClient, entrypoint, job_client, submit
from ..store.input_digests import project_root
from ..store.jsonio import create_text_exclusive, dumps_pretty
from ..store.progress import (
    LOG_FILE,
    PROGRESS_FILE,
    process_create_time,
    write_job,
)
from .running import reserve_run

PROGRAM = "ptreg"  # the module the detached run runs, as `python -m ptreg`


@dataclass
class Detached:
    attempt: str
    run_id: str
    folder: Path  # the in-progress folder
    log: Path | None  # None for a Ray job: its output is the job's (`ray job logs`)
    pid: int | None = None
    job_id: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "attempt": self.attempt,
            "run_id": self.run_id,
            "folder": str(self.folder),
            "log": str(self.log) if self.log is not None else None,
            "pid": self.pid,
            "job_id": self.job_id,
        }


def _run_argv(root: Path, attempt_id: str, run_id: str, flags: Sequence[str], python: str) -> list[str]:
    """``python -m ptreg run ...`` with the switches a worker gets: nothing on its import path from
    the working directory (-P) or the user's site (-s). Its environment is this process's, as
    the same run in the foreground would have it."""
    tail = ["--registry", str(root.absolute()), "run", attempt_id, "--run-id", run_id, *flags]
    return [python, *PYTHON_SWITCHES, "-m", PROGRAM, *tail]


def detach_run(root: Path, attempt_id: str, flags: Sequence[str], python: str = sys.executable) -> Detached:
    """Start the attempt's run in the background, in a session of its own, and return at once."""
    run_id, folder = reserve_run(root, attempt_id, resume="--resume" in flags)
    log = folder / LOG_FILE
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # nothing was started: the id is free again
        raise
    try:
        child = subprocess.Popen(
            _run_argv(root, attempt_id, run_id, flags, python),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            cwd=project_root(root),
            start_new_session=True,  # setsid: no controlling terminal, so no SIGHUP when it closes
            close_fds=True,
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        os.close(fd)
    # who runs it, known at once: the run rewrites this from its first event (unless it already has)
    started = {
        "pid": child.pid,
        "created": process_create_time(child.pid),
        "attempt": attempt_id,
        "run_id": run_id,
        "started": utc_now(),
        "phase": "starting",
    }
    with contextlib.suppress(FileExistsError):
        create_text_exclusive(folder / PROGRESS_FILE, dumps_pretty(started))
    # never waited for: the run is its own, and this process ends at once (nor warned about when collected)
    child.returncode = 0
    return Detached(attempt_id, run_id, folder, log, pid=child.pid)


def submit_run(
    root: Path,
    attempt_id: str,
    flags: Sequence[str],
    address: str | None,
    make_client: Callable[[str | None], JobClient] = job_client,
    python: str = sys.executable,
) -> Detached:
    """Submit the attempt's run as a Ray job, after the same refusals, and return at once."""
    run_id, folder = reserve_run(root, attempt_id, resume="--resume" in flags)
    project = project_root(root)
    command = entrypoint(project, _run_argv(root, attempt_id, run_id, flags, python))
    try:
        job_id = submit(
            address,
            command,
            f"ptreg-{attempt_id}-{run_id}",
            {"ptreg_attempt": attempt_id, "ptreg_run": run_id},
            make_client,
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # nothing was started: the id is free again
        raise
    write_job(folder, job_id, address or "")
    return Detached(attempt_id, run_id, folder, None, job_id=job_id)
