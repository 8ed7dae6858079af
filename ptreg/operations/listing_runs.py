"""The runs in progress of a registry (`ptreg runs`, MCP's ``list_runs``): what their
in-progress folders say (``store/progress.py``), and for a run submitted as a Ray job, the job's
state as Ray reports it. Kept apart from ``detaching.py`` so that listing loads neither the run
models nor the engine's runner: `ptreg runs` costs what `ptreg list` does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..engine.ray_jobs import FINISHED, JobClient, job_client, job_state
from ..store.progress import InProgress, runs_in_progress


def list_runs(root: Path, make_client: Callable[[str | None], JobClient] = job_client) -> list[InProgress]:
    """The runs in progress of the registry at ``root``, each a Ray job's state asked of Ray
    (unknown when it cannot be). The caller has made sure ``root`` is a registry."""
    found = runs_in_progress(root)
    for run in found:
        if run.job is not None:
            state = job_state(run.job["address"] or None, run.job["job_id"], make_client)
            run.job = {**run.job, "state": state or "unknown"}
            if run.state in ("process gone", "starting") and state is not None and state not in FINISHED:
                run.state = "running"  # on a node whose processes this machine does not see
    return found
