"""The dossier's run sections: what a run measured, under what, and on which machine; and the
disposition's condition, decided on the latest complete run."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import PtregError
from ..records.attempt import Attempt, RunRef
from ..records.run_results import RunResults
from ..store.runs import read_environment, read_results, run_folder
from ..text import Table
from .dispositions import decide_disposition
from .plans import decide_plan
from .run_report import tables, verdict


def condition_lines(root: Path, attempt: Attempt) -> list[str]:
    """The condition, the values it reads now and its truth, beside what it was when set."""
    decided = decide_disposition(root, attempt)
    if decided is None:
        return []
    condition = decided.condition
    then = {True: "held", False: "did not hold", None: "could not be decided"}[condition.held_at_conclusion]
    lines = [
        f"- Continue if: {condition.text}",
        f"- Now it {decided.summary()}.",
        f"- When it was set ({condition.set_at}, on run {condition.run}) it {then}.",
    ]
    if decided.decision is not None:
        lines += [f"- Reads {r.quantity} = {r.shown}." for r in decided.decision.readings]
    return lines


def plan_lines(root: Path, attempt: Attempt) -> list[str | Table]:
    """The plan decided now on its deciding runs: which runs those are, and, before the attempt
    is concluded, the status it gives with the values it reads."""
    outcome = decide_plan(root, attempt)
    if outcome is None:
        return []
    lines: list[str | Table] = [f"- Runs: {outcome.runs_text()}."]
    if attempt.status == "not-tried":
        lines.append(f"- Not concluded yet; on these runs its plan decides {outcome.status}: {outcome.because}.")
        lines += [f"- {line}" for line in outcome.readout]
    elif attempt.plan_decision is not None and outcome.status != attempt.plan_decision.status:
        lines.append(
            f"- Decided again now, its plan gives {outcome.status}: {outcome.because} (the runs' files changed)."
        )
    return lines


def run_lines(
    root: Path, attempt_id: str, ref: RunRef, margins: Mapping[str, float] | None = None
) -> list[str | Table]:
    """A run's section: how it was measured, its tables (each metric of a run of arms judged
    against the plan's ``margins``), where a step's time goes, and its machine."""
    folder = run_folder(root, attempt_id, ref.run_id)
    try:
        results = read_results(folder, root)
    except PtregError as exc:
        return [f"- The run's results cannot be read: {exc.message}"]
    relative = folder.relative_to(root) if folder.is_relative_to(root) else folder
    spec = results.spec
    lines: list[str | Table] = [
        f"- Status: {results.status}" + (f" ({results.reason})" if results.reason else "") + ".",
        f"- Evaluator: {results.evaluator} (engine version {results.evaluator_version}); {spec.measures()}; "
        f"{spec.procedure()}.",
        f"- Budget: {results.budget.describe() if results.budget else 'none'}.",
        f"- Started {results.started_at}, finished {results.finished_at}, by `{' '.join(results.command)}`.",
        f"- Folder: {relative}.",
    ]
    lines += _environment(root, folder)
    lines.append(_threads(results))
    lines.append("")
    for table in tables(results, margins):
        lines += [f"{table.title}:", "", table]
    for line in verdict(results):
        lines.append(f"- {line}.")
    return lines


def _threads(results: RunResults) -> str:
    """The threads the cells really ran with, as their workers reported them."""
    pools: set[str] = set()
    for cell in results.cells:
        state = (cell.worker or {}).get("threads")
        for pool in state.get("pools", []) if isinstance(state, dict) else []:
            if isinstance(pool, dict):
                pools.add(f"{pool.get('internal_api')} {pool.get('num_threads')}")
    ran = ", ".join(sorted(pools)) or "unknown"
    asked = results.spec.threads if results.spec.threads is not None else "none (the command sets its own)"
    return f"- Threads: the evaluator asked for {asked}; the cells' thread pools ran {ran}."


def _environment(root: Path, folder: Path) -> list[str]:
    try:
        env = read_environment(root, folder)
    except PtregError as exc:
        return [f"- Environment: cannot be read: {exc.message}."]

    def get(*path: str) -> Any:
        value: Any = env
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return "unknown" if value is None else value

    blas = env.get("blas")
    pools = [b for b in blas if isinstance(b, dict)] if isinstance(blas, list) else []
    # the pools' thread counts here are the parent process's defaults, not what the cells ran
    libraries = ", ".join(f"{b.get('internal_api')} {b.get('version')}" for b in pools) or "unknown"
    given = env.get("variables")
    variables: dict[str, Any] = given if isinstance(given, dict) else {}
    set_vars = ", ".join(f"{k}={v}" for k, v in variables.items() if v is not None) or "none set"
    dirty = get("git", "dirty")
    return [
        *_cluster(env),
        f"- Machine: {get('cpu', 'model')}, {get('cpu', 'usable_cores')} usable of {get('cpu', 'logical_cores')} cores, "
        f"{get('os', 'platform')}, host {get('hostname')}.",
        f"- Software: ptreg {get('ptreg_version')}, Python {get('python', 'version')}, NumPy {get('numpy_version')}, "
        f"numba {get('numba_version')}; BLAS {libraries}.",
        _repository(env, get("git", "commit"), dirty),
        f"- BLAS and threading variables: {set_vars}.",
        *_command_side(env),
    ]


def _command_side(env: dict[str, Any]) -> list[str]:
    """The accelerators the machine had and the variables the command was given (redacted as
    recorded), when the run recorded them; each value cut short, as the file is not trusted."""
    lines = []
    found = env.get("accelerators")
    if isinstance(found, dict):
        listed = found.get("devices")
        devices: list[Any] = listed if isinstance(listed, list) else []
        names = ", ".join(_cut(d.get("name") or "unknown", 80) for d in devices if isinstance(d, dict))
        driver, cuda = (_cut(found.get(k) or "unknown", 40) for k in ("driver_version", "cuda_driver_version"))
        lines.append(f"- Accelerators: {names or 'unknown'}; driver {driver}, CUDA driver {cuda}.")
    given = env.get("command_variables")
    if isinstance(given, dict) and given:
        shown = ", ".join(f"{_cut(k, 64)}={'unset' if v is None else _cut(v, 120)}" for k, v in given.items())
        lines.append(f"- Variables given to the command: {shown}.")
    return lines


def _cut(value: Any, limit: int) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _repository(env: dict[str, Any], commit: Any, dirty: Any) -> str:
    git = env.get("git")
    if isinstance(git, dict) and git.get("repository") and git.get("commit") is None:
        return "- Repository: no commit yet, so the code it ran is in no commit."
    return f"- Repository: commit {commit}" + (" with uncommitted changes" if dirty is True else "") + "."


def _cluster(env: dict[str, Any]) -> list[str]:
    """For a run measured on a Ray cluster: the machines its cells ran on (the lines after it
    describe the driver, which only wrote the run)."""
    machines = env.get("machines")
    if not isinstance(machines, list) or not machines:
        return []
    described = []
    for entry in machines:
        if not isinstance(entry, dict):
            continue
        machine = _mapping(entry.get("environment"))
        cpu = _mapping(machine.get("cpu"))
        nodes = entry.get("nodes")
        nodes = nodes if isinstance(nodes, list) else []
        described.append(
            f"{entry.get('fingerprint') or 'unknown fingerprint'}: {cpu.get('model') or 'unknown CPU'}, "
            f"{cpu.get('usable_cores') or 'unknown'} usable cores, {len(nodes)} node(s)"
        )
    return [
        f"- Measured on a Ray cluster, {len(described)} machine(s): {'; '.join(described)}. "
        "The lines below describe the driver, which wrote the run."
    ]


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
