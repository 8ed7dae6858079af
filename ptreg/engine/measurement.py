"""Measuring one evaluator: parity, then the planned cells, each task through the executor.

``measure`` returns what was found and the run's status. Speedups are taken only between
cells of the same run, because a ratio of numbers measured hours apart on a shared machine
says little. Which backends the ratios are taken over comes from the backends' own metadata
(their declared roles), never from their names.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import UnusableInput
from ..records.evaluator import AnySpec, EvaluatorSpec
from ..records.run_journal import AnySample, JournalRound
from ..records.run_results import (
    Cell,
    CellStatus,
    ConfigRounds,
    Measurement,
    MetricSample,
    ParityOutcome,
    Roles,
    StageRecord,
)
from .backends import describe_all, roles
from .callgrind import counted_under, valgrind
from .ceilings import run_floors
from .executor import Executor, TaskOutcome, Worker
from .interruption import Interrupted, deferred, signal_of
from .plan import (
    NOT_CHECKED,
    PlannedCell,
    cells,
    estimate_round,
    interrupted_reason,
    narrow_enough,
    order_seed,
    parity_shapes,
    round_order,
    run_status,
)
from .protocol import CellTask, ParityTask
from .stats import ADAPTIVE_MIN_ROUNDS
from .workloads.base import Workload, backends_spec
from .workloads.discovery import require_measurable

CELL_STATUS_OF_ENDING: dict[str, CellStatus] = {
    "done": "measured",
    "budget": "budget-exhausted",
    "interrupted": "interrupted",
}


class SpreadExecutor(Protocol):
    """An executor that hands whole units to other machines (``ray_executor.py``): each
    backend's parity check, and each config's interleaved rounds, which run there through the
    local ``Executor`` (``config_rounds``), so that a config's ratios come from one machine."""

    budget_hit: bool
    interrupted: int | None

    def start(self) -> None: ...

    def parity(self, spec: EvaluatorSpec, ratio_roles: Roles) -> list[ParityOutcome]:
        """Every backend's parity; cut short (fewer outcomes) once a signal stopped it."""
        ...

    def configs(
        self,
        spec: AnySpec,
        runnable: dict[str, list[str]],
        ratio_roles: Roles,
        round_cap: int | None,
        places: Places,
    ) -> list[tuple[list[Cell], ConfigRounds]]:
        """Each config's cells and rounds; a config never started is left out, or, when the
        budget stopped it, given as cells ``not-started``."""
        ...

    def provenance(self) -> dict[str, Any]:
        """What environment.json adds for this executor: the machines it measured on."""
        ...

    def close(self) -> None:
        """Leave the cluster: the measurement is over."""
        ...


def measure(
    spec: AnySpec,
    executor: Executor | SpreadExecutor,
    round_cap: int | None = None,
    root: Path | None = None,
    arm_roots: Mapping[str, Path] | None = None,
    import_folders: Mapping[str, Path] | None = None,
    seed_of_orders: int | None = None,
    kept: Mapping[tuple[str, str], Mapping[int, list[AnySample]]] | None = None,
    journal: Callable[[JournalRound], None] | None = None,
) -> Measurement:
    """Parity (for a workload of backends), then every config's cells in interleaved rounds.
    ``round_cap`` is the most rounds the budget allows a config (its ``max_repeats``), when it
    says; ``root`` is the project root, where an arms workload's commands run, and
    ``arm_roots`` the project root of each arm that runs elsewhere (a checkout of its revision);
    ``import_folders`` the folder of a checkout each backend taken at a revision is imported from;
    ``seed_of_orders`` seeds the rounds' orders, drawn afresh for the run when not given.
    A resumed run gives ``kept``, the samples of each (config, arm)'s rounds measured whole by
    the run it continues, by round: those rounds are not measured again. ``journal`` is told of
    each arm's round as soon as it is measured whole (``store/rounds_journal.py`` keeps it)."""
    workload = require_measurable(spec, f"evaluator {spec.name}")
    if (arm_roots or import_folders) and not isinstance(executor, Executor):
        # a checkout lives on this machine only, for this run only
        what = "its arms name" if arm_roots else "its backends are taken at"
        raise UnusableInput(f"evaluator {spec.name}: {what} git revisions, which run on this machine only")
    counts = isinstance(spec, EvaluatorSpec) and spec.counts_instructions
    if counts:
        valgrind()  # refused before anything runs when it is missing
    executor.start()
    ratio_roles = roles(describe_all()) if workload.kind == "backends" else Roles(reference=None, peer=None)
    orders = order_seed() if seed_of_orders is None else seed_of_orders
    places = Places(root, orders, dict(arm_roots or {}), dict(import_folders or {}), dict(kept or {}), journal)
    if places.kept and not isinstance(executor, Executor):
        raise UnusableInput(f"evaluator {spec.name}: a resumed run is measured on this machine only")
    parity: list[ParityOutcome] = []
    measured: list[Cell] = []
    rounds: list[ConfigRounds] = []
    try:
        if isinstance(executor, Executor):
            if workload.kind == "backends":
                _check_parity(backends_spec(spec), executor, ratio_roles, parity, places)
            if executor.interrupted is None:
                _measure_cells(spec, workload, executor, parity, ratio_roles, measured, rounds, round_cap, places)
        else:
            try:
                if workload.kind == "backends":
                    parity += executor.parity(backends_spec(spec), ratio_roles)
                if executor.interrupted is None:
                    runnable = {config: _runnable(spec, config, parity, measured) for config in spec.config_names}
                    wanted = {c: b for c, b in runnable.items() if b}
                    for found, taken in executor.configs(spec, wanted, ratio_roles, round_cap, places):
                        measured += found
                        rounds.append(taken)
                    _in_plan_order(spec, measured)
            finally:
                executor.close()
    except (Interrupted, KeyboardInterrupt) as exc:  # between two workers
        executor.interrupted = signal_of(exc)
    workload.compare(spec, measured, ratio_roles)
    counted = counted_under([_counting(c) for c in measured if c.worker]) if counts else None
    # the ceilings are this machine's: a spread executor's cells ran on others, whose are unknown
    floors = run_floors(spec) if isinstance(executor, Executor) else None
    if executor.interrupted is not None:
        why = interrupted_reason(spec, measured, signal.Signals(executor.interrupted).name)
        return Measurement(
            parity, measured, ratio_roles, rounds, "interrupted", why, executor.interrupted, counted, floors
        )
    status, reason = run_status(spec, parity, measured, executor.budget_hit)
    return Measurement(parity, measured, ratio_roles, rounds, status, reason, counted=counted, floors=floors)


def _counting(cell: Cell) -> tuple[str, str, dict[str, Any] | None]:
    """A cell's worker's report of how it counted (what the worker said once warm)."""
    report = (cell.worker or {}).get("counting")
    return cell.backend, cell.config, report if isinstance(report, dict) else None


def _check_parity(
    spec: EvaluatorSpec, executor: Executor, ratio_roles: Roles, parity: list[ParityOutcome], places: Places
) -> None:
    """One parity task per backend; returns early once a signal has stopped the executor."""
    shapes = parity_shapes(spec)
    for backend in spec.backends:
        allowed, why = executor.fits(None)
        if not allowed:
            parity.append(ParityOutcome(backend=backend, passed=False, summary=f"{NOT_CHECKED}: {why}", checks=[]))
            continue
        task = parity_task(spec, backend, ratio_roles, shapes, places.import_folders.get(backend))
        outcome = executor.execute(f"parity {backend}", task)
        if executor.interrupted is not None:
            return  # a parity check cut short establishes nothing
        parity.append(parity_outcome(backend, outcome))


def parity_task(
    spec: EvaluatorSpec,
    backend: str,
    ratio_roles: Roles,
    shapes: list[tuple[int, int, int]],
    import_folder: Path | None = None,
) -> ParityTask:
    return ParityTask(
        backend=backend,
        reference=ratio_roles.reference,
        shapes=shapes,
        rtol=spec.tolerance.rtol,
        atol=spec.tolerance.atol,
        seed=spec.seed,
        threads=spec.threads,
        op_configs=list(spec.configs),
        import_folder=None if import_folder is None else str(import_folder),
    )


def parity_outcome(backend: str, outcome: TaskOutcome) -> ParityOutcome:
    if outcome.ended == "done" and outcome.parity is not None:
        return outcome.parity
    reason = outcome.reason or "the parity worker stopped without a result"
    return ParityOutcome(backend=backend, passed=False, summary=f"parity not established: {reason}", checks=[])


@dataclass(frozen=True)
class Places:
    """Where a cell's worker is told its work lives: the project root, for arms workloads; and
    the run's own seed of the rounds' orders (``plan.round_order``)."""

    root: Path | None
    order_seed: int
    arm_roots: dict[str, Path] = field(default_factory=dict)  # an arm's own, where it is not ``root``
    # a backend taken at a revision: the folder of the checkout its worker imports it from
    import_folders: dict[str, Path] = field(default_factory=dict)
    # a resumed run: the rounds each (config, arm) already has, by round, with their samples
    kept: dict[tuple[str, str], Mapping[int, list[AnySample]]] = field(default_factory=dict)
    journal: Callable[[JournalRound], None] | None = None  # told of each arm's round measured whole

    def kept_rounds(self, config: str, arm: str) -> Mapping[int, list[AnySample]]:
        return self.kept.get((config, arm), {})


def _measure_cells(
    spec: AnySpec,
    workload: Workload,
    executor: Executor,
    parity: list[ParityOutcome],
    ratio_roles: Roles,
    measured: list[Cell],
    rounds: list[ConfigRounds],
    round_cap: int | None,
    places: Places,
) -> None:
    """Config by config: the cells whose backend passed parity, in interleaved rounds."""
    round_seconds: dict[str, float] = {}
    for config in spec.config_names:
        runnable = _runnable(spec, config, parity, measured)
        if not runnable:
            continue
        estimate = estimate_round(round_seconds, config, spec)
        allowed, why = executor.fits(None if estimate is None else estimate * least_rounds(spec))
        if not allowed:
            measured += [Cell(backend=b, config=config, status="not-started", reason=why) for b in runnable]
            continue
        found, taken = config_rounds(
            spec, workload, executor, config, runnable, ratio_roles, round_cap, round_seconds, places
        )
        measured += found
        rounds.append(taken)
        if executor.interrupted is not None:
            return
    _in_plan_order(spec, measured)


def _runnable(spec: AnySpec, config: str, parity: list[ParityOutcome], measured: list[Cell]) -> list[str]:
    """The backends of ``config`` that passed parity; the others' cells are added as
    parity-failed. Every arm of an arms spec runs (there is no parity to pass)."""
    if not isinstance(spec, EvaluatorSpec):
        return spec.arm_names
    passed = {p.backend for p in parity if p.passed}
    for backend in spec.backends:
        if backend not in passed:
            reason = next(p.summary for p in parity if p.backend == backend)
            measured.append(Cell(backend=backend, config=config, status="parity-failed", reason=reason))
    return [b for b in spec.backends if b in passed]


def _in_plan_order(spec: AnySpec, measured: list[Cell]) -> None:
    order: dict[tuple[str, str], int] = {(p.config, p.backend): i for i, p in enumerate(cells(spec))}
    measured.sort(key=lambda c: order[(c.config, c.backend)])


def least_rounds(spec: AnySpec) -> int:
    """The rounds a config takes at least: the plan's, and under an adaptive plan never fewer
    than its stopping rule's floor (``stats.ADAPTIVE_MIN_ROUNDS``), up to its ceiling."""
    if spec.target_ci is None:
        return spec.least_repeats
    return min(spec.most_repeats, max(spec.least_repeats, ADAPTIVE_MIN_ROUNDS))


def config_rounds(
    spec: AnySpec,
    workload: Workload,
    executor: Executor,
    config: str,
    backends: list[str],
    ratio_roles: Roles,
    round_cap: int | None,
    round_seconds: dict[str, float],
    places: Places,
) -> tuple[list[Cell], ConfigRounds]:
    """One config: a warm worker per backend, then round after round, each backend's repeat in
    the round's own order, until the plan, the adaptive target or the budget says stop."""
    workers: dict[str, Worker] = {}
    orders: list[list[str]] = []
    most = min(spec.most_repeats, round_cap or spec.most_repeats)
    if most < spec.most_repeats:
        stopped = f"{most} rounds, the most the budget allows"
    elif spec.target_ci is not None:
        stopped = f"{most} rounds (max_repeats) before every ratio was known within ±{100 * spec.target_ci:g}%"
    else:
        stopped = f"{most} rounds, as planned"
    opened = time.monotonic()
    try:
        for backend in backends:
            workers[backend] = executor.open(
                PlannedCell(config, backend).label, cell_task(spec, config, backend, places)
            )
            kept = places.kept_rounds(config, backend)  # carried first, as if measured in this run
            workers[backend].outcome.samples[:0] = [s for r in sorted(kept) for s in kept[r]]
            if executor.interrupted is not None or executor.budget_hit:
                break
        for number in range(most):
            live = [b for b in backends if b in workers and not workers[b].ended]
            if executor.interrupted is not None or executor.budget_hit:
                break
            if not live:
                stopped = "no backend left to measure"
                break
            if spec.target_ci is not None and number >= least_rounds(spec):
                so_far = _cells(spec, workload, config, workers)
                workload.compare(spec, so_far, ratio_roles)
                if narrow_enough(so_far, spec.target_ci):
                    stopped = f"every ratio known within ±{100 * spec.target_ci:g}% after {number} rounds"
                    break
            order = [b for b in round_order(places.order_seed, config, number, backends) if b in live]
            # a resumed run measures only the arms whose round the run it continues lacks
            wanted = [b for b in order if number not in places.kept_rounds(config, b)]
            if not wanted:
                orders.append(order)
                continue
            allowed, why = executor.fits(estimate_round(round_seconds, config, spec))
            if not allowed:
                stopped = f"stopped by the budget: {why}"
                executor.budget_hit = True
                break
            orders.append(order)
            executor.announce(f"{config} rounds", "round", number, most)
            begun = time.monotonic()
            for backend in wanted:
                if executor.run_repeat(workers[backend], number, most):
                    _journal(places, config, backend, number, workers[backend])
                if executor.interrupted is not None or executor.budget_hit:
                    break
            else:
                if len(wanted) == len(order):  # a part of a round times no round
                    round_seconds[config] = time.monotonic() - begun
    except (Interrupted, KeyboardInterrupt) as exc:  # between two repeats
        executor.interrupted = signal_of(exc)
    if executor.interrupted is not None:
        stopped = f"interrupted by {signal.Signals(executor.interrupted).name}"
    elif executor.budget_hit and not stopped.startswith("stopped by the budget"):
        stopped = "stopped by the budget: a worker reached its wall clock or memory limit"
    with deferred():  # a second signal must not leave a worker running
        for worker in workers.values():
            if executor.interrupted is not None:
                name = signal.Signals(executor.interrupted).name
                executor.kill(worker, "interrupted", f"interrupted by {name}")
            elif executor.budget_hit:
                executor.kill(worker, "budget", "stopped with the rest of its round by the budget")
            else:
                executor.close(worker)
    taken = ConfigRounds(config=config, order_seed=places.order_seed, orders=orders, stopped=stopped)
    if orders:
        executor.announce(f"{config} rounds", "finished", len(orders), most, stopped, time.monotonic() - opened)
    return _cells(spec, workload, config, workers), taken


def _journal(places: Places, config: str, arm: str, number: int, worker: Worker) -> None:
    """The arm's round, measured whole, told to the run's journal before the next is asked for."""
    if places.journal is not None:
        samples = [s for s in worker.outcome.samples if s.repeat == number]
        places.journal(JournalRound(config=config, arm=arm, round=number, samples=samples))


def once_stages(samples: list[AnySample]) -> list[StageRecord] | None:
    """The records of the once stages among the samples kept, which a resumed cell's workload
    may reuse instead of running them again (None: there are none)."""
    found = [
        stage
        for sample in samples
        if isinstance(sample, MetricSample)
        for stage in sample.stages or ()
        if stage.repeat == "once"
    ]
    return found or None


def cell_task(spec: AnySpec, config: str, backend: str, places: Places) -> CellTask:
    """What a cell's worker is told to set up: the evaluator's step plan for one backend and
    config, or an arms spec whole, with the project root its commands run in."""
    if isinstance(spec, EvaluatorSpec):
        return CellTask(
            backend=backend,
            workload=spec.workload,
            config=config,
            warmup_steps=spec.warmup_steps,
            timed_steps=spec.timed_steps,
            seed=spec.seed,
            threads=spec.threads,
            timer="instructions" if spec.counts_instructions else "wall",
            import_folder=str(places.import_folders[backend]) if backend in places.import_folders else None,
        )
    root = places.arm_roots.get(backend, places.root)
    if root is None:
        raise UnusableInput(f"evaluator {spec.name} runs in a project root, and none was given")
    return CellTask(
        backend=backend,
        workload=spec.workload,
        config=config,
        warmup_steps=0,
        timed_steps=1,
        seed=spec.seed,
        threads=spec.threads,
        spec=spec.model_dump(mode="json", exclude_none=True),
        root=str(root),
        reuse_stages=once_stages([s for r in places.kept_rounds(config, backend).values() for s in r]),
    )


def _cells(spec: AnySpec, workload: Workload, config: str, workers: dict[str, Worker]) -> list[Cell]:
    return [build_cell(spec, workload, PlannedCell(config, b), w.outcome) for b, w in workers.items()]


def build_cell(spec: AnySpec, workload: Workload, planned: PlannedCell, outcome: TaskOutcome) -> Cell:
    """The cell as its worker left it: how it ended, what the worker reported, its summaries."""
    worker: dict[str, Any] = {}
    if outcome.ready is not None:
        worker.update(pid=outcome.ready.pid, threads=outcome.ready.threads.model_dump())
    if outcome.done is not None:
        worker["runtime"] = outcome.done.runtime
    if outcome.counting is not None:
        worker["counting"] = outcome.counting.model_dump(mode="json")
    worker["peak_memory_mb"] = outcome.peak_memory_mb
    if outcome.memory is not None:
        worker["memory"] = outcome.memory
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
