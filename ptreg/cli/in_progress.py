"""`ptreg runs`: the runs in progress of the registry, and where each stands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import EXIT_UNUSABLE
from .common import JsonFlag, print_json, registry_dir, say

if TYPE_CHECKING:
    from ..store.progress import InProgress

HEADERS = ["attempt", "run", "state", "round", "elapsed", "budget left", "last output"]


def runs(as_json: bool = JsonFlag) -> None:
    """The runs in progress: each attempt's runs begun and not yet written (runs/ID/.running-RUN/).

    For each: its state (running; process gone: killed or crashed, resumable with `ptreg run ID --resume`; unreadable, naming the file), its round, the time since it started, the budget left and the last output line; a run submitted as a Ray job, its job and the job's state. Exit 0; 2 when the registry, or a run's progress.json, cannot be read (every other run is still listed).
    """
    import typer

    from ..operations.listing_runs import list_runs
    from ..store.index import usable_directory
    from ..views.tables import plain

    root = registry_dir()
    if not usable_directory(root):  # says in one line why not, or finishes a cut-short import
        from ..store.directory import load_meta

        load_meta(root)
    found = list_runs(root)
    if as_json:
        print_json([run.to_json() for run in found])
    elif not found:
        say("no run in progress")
    else:
        say(plain([_row(run) for run in found], HEADERS, shrink=(6,), drop=(6, 5)))
        for run in found:
            if run.state == "process gone":
                log = f" (its log: {run.log})" if run.log is not None else ""
                say(
                    f"{run.attempt} {run.run_id}: its process is gone (killed or crashed){log}; "
                    f"`ptreg run {run.attempt} --resume` continues it"
                )
            elif run.state == "written":
                say(f"{run.attempt} {run.run_id}: written; its in-progress folder {run.folder} outlived it")
            if run.job is not None:
                say(f"{run.attempt} {run.run_id}: Ray job {run.job['job_id']} ({run.job.get('state', 'unknown')})")
    for run in found:
        if run.problem is not None:
            say(f"ptreg: error: {run.problem}", err=True, one_line=True)
    if any(run.state == "unreadable" for run in found):
        raise typer.Exit(EXIT_UNUSABLE)


def _row(run: InProgress) -> list[object]:
    state = run.state
    rounds = None if run.round is None else f"{run.round}/{run.total}" if run.total else str(run.round)
    return [
        run.attempt,
        run.run_id,
        state,
        rounds,
        None if run.elapsed is None else _duration(run.elapsed),
        None if run.budget_left is None else _duration(run.budget_left),
        run.last_line,
    ]


def _duration(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
