"""Measuring one evaluator: parity, then the planned cells, each task through the executor.

``measure`` returns what was found and the run's status. Speedups are taken only between
cells of the same run, because a ratio of numbers measured hours apart on a shared machine
says little. Which backends the ratios are taken over comes from the backends' own metadata
(their declared roles), never from their names.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from ..records.attempt import RunStatus
from ..records.evaluator import EvaluatorSpec
from ..records.run import Cell, CellStatus, ParityOutcome, Roles
from .backends import describe_all, roles
from .executor import Executor, TaskOutcome
from .interruption import Interrupted, signal_of
from .plan import NOT_CHECKED, PlannedCell, cells, estimate, interrupted_reason, parity_shapes, run_status
from .protocol import CellTask, ParityTask
from .workloads import workload_named
from .workloads.base import Workload

CELL_STATUS_OF_ENDING: dict[str, CellStatus] = {
    "done": "measured",
    "budget": "budget-exhausted",
    "interrupted": "interrupted",
}


@dataclass
class Measurement:
    parity: list[ParityOutcome]
    cells: list[Cell]
    roles: Roles
    status: RunStatus
    reason: str | None
    interrupted_by: int | None = None  # the signal that stopped it


def measure(spec: EvaluatorSpec, executor: Executor) -> Measurement:
    executor.start()
    workload = workload_named(spec.workload)
    ratio_roles = roles(describe_all())
    parity: list[ParityOutcome] = []
    measured: list[Cell] = []
    try:
        _check_parity(spec, executor, ratio_roles, parity)
        if executor.interrupted is None:
            _measure_cells(spec, workload, executor, parity, measured)
    except (Interrupted, KeyboardInterrupt) as exc:  # between two workers
        executor.interrupted = signal_of(exc)
    workload.compare(spec, measured, ratio_roles)
    if executor.interrupted is not None:
        why = interrupted_reason(spec, measured, signal.Signals(executor.interrupted).name)
        return Measurement(parity, measured, ratio_roles, "interrupted", why, executor.interrupted)
    status, reason = run_status(spec, parity, measured, executor.budget_hit)
    return Measurement(parity, measured, ratio_roles, status, reason)


def _check_parity(spec: EvaluatorSpec, executor: Executor, ratio_roles: Roles, parity: list[ParityOutcome]) -> None:
    """One parity task per backend; returns early once a signal has stopped the executor."""
    shapes = parity_shapes(spec)
    for backend in spec.backends:
        allowed, why = executor.fits(None)
        if not allowed:
            parity.append(ParityOutcome(backend=backend, passed=False, summary=f"{NOT_CHECKED}: {why}", checks=[]))
            continue
        task = ParityTask(
            backend=backend,
            reference=ratio_roles.reference,
            shapes=shapes,
            rtol=spec.tolerance.rtol,
            atol=spec.tolerance.atol,
            seed=spec.seed,
            threads=spec.threads,
        )
        outcome = executor.execute(f"parity {backend}", task)
        if executor.interrupted is not None:
            return  # a parity check cut short establishes nothing
        parity.append(_parity_outcome(backend, outcome))


def _parity_outcome(backend: str, outcome: TaskOutcome) -> ParityOutcome:
    if outcome.ended == "done" and outcome.parity is not None:
        return outcome.parity
    reason = outcome.reason or "the parity worker stopped without a result"
    return ParityOutcome(backend=backend, passed=False, summary=f"parity not established: {reason}", checks=[])


def _measure_cells(
    spec: EvaluatorSpec, workload: Workload, executor: Executor, parity: list[ParityOutcome], measured: list[Cell]
) -> None:
    """Every planned cell whose backend passed parity and whose estimate fits the budget."""
    summary = {p.backend: p for p in parity}
    durations: dict[PlannedCell, float] = {}
    for planned in cells(spec):
        checked = summary[planned.backend]
        if not checked.passed:
            measured.append(
                Cell(backend=planned.backend, config=planned.config, status="parity-failed", reason=checked.summary)
            )
            continue
        allowed, why = executor.fits(estimate(durations, planned, spec))
        if not allowed:
            measured.append(Cell(backend=planned.backend, config=planned.config, status="not-started", reason=why))
            continue
        task = CellTask(
            backend=planned.backend,
            workload=spec.workload,
            config=planned.config,
            warmup_steps=spec.warmup_steps,
            timed_steps=spec.timed_steps,
            repeats=spec.repeats,
            seed=spec.seed,
            threads=spec.threads,
        )
        outcome = executor.execute(planned.label, task)
        measured.append(build_cell(spec, workload, planned, outcome))  # an interrupted cell keeps its whole repeats
        if executor.interrupted is not None:
            return
        if outcome.ended == "done" and outcome.wall_seconds is not None:
            durations[planned] = outcome.wall_seconds


def build_cell(spec: EvaluatorSpec, workload: Workload, planned: PlannedCell, outcome: TaskOutcome) -> Cell:
    """The cell as its worker left it: how it ended, what the worker reported, its summaries."""
    worker: dict[str, Any] = {}
    if outcome.ready is not None:
        worker.update(pid=outcome.ready.pid, threads=outcome.ready.threads.model_dump())
    if outcome.done is not None:
        worker["runtime"] = outcome.done.runtime
    worker["peak_rss_mb"] = outcome.peak_rss_mb
    cell = Cell(
        backend=planned.backend,
        config=planned.config,
        status=CELL_STATUS_OF_ENDING.get(outcome.ended, "failed"),
        reason=outcome.reason,
        wall_seconds=outcome.wall_seconds,
        worker=worker,
    )
    workload.summarize(spec, cell, outcome.samples)
    return cell
