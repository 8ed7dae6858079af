"""The Ray executor: the cells of a run on the nodes of a Ray cluster, the registry on the driver.

The unit handed to a node is one backend's parity check, or one config's interleaved rounds for
all its backends. A unit runs on the node exactly as locally: a Ray task starts the local
``Executor`` there, which starts today's worker processes (``python -m ptreg.engine.worker``)
and interleaves their repeats (``measurement.config_rounds``). Every line a worker writes is
streamed back at once through a Ray streaming generator, so the driver holds every sample that
had arrived when a node is lost, the budget ends or Ctrl-C comes.

Each unit asks for the evaluator's threads as CPUs and for one ``ptreg_bench``, a resource every
benchmark node offers once: no two timed units ever share a node. A config's rounds stay on one
node, so each ratio pairs repeats of one machine taken seconds apart; which machine each config
ran on is recorded with the cells (``worker.node``) and in environment.json (``machines``).

Only the driver writes: units send events and return nothing to disk. Ray is imported here
and nowhere else, and this module only when ``--executor ray`` is asked for.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import ray
import ray.exceptions

from ..errors import UnusableInput
from ..records.configs import CONFIGS, step_flops
from ..records.evaluator import AnySpec, EvaluatorSpec, parse_spec
from ..records.run_results import Cell, ConfigRounds, ParityOutcome, Roles
from .environment import fingerprint, machine_environment
from .executor import Executor, TaskOutcome, TaskProgress, keep
from .interruption import HANDLED, Interrupted, deferred, signal_of
from .measurement import Places, build_cell, config_rounds, parity_outcome, parity_task
from .plan import NOT_CHECKED, PlannedCell, parity_shapes, round_order
from .protocol import ParityTask, decode_event
from .workloads import workload_named

UNIT_RESOURCE = "ptreg_bench"
POLL_SECONDS = 0.2
CONNECT_SECONDS = 10.0
# How long the driver waits, after cancelling, for what a unit had already sent.
DRAIN_SECONDS = 10.0
# Ray's own errors that mean the machine (or the process Ray ran the unit in) went away.
LOST = (
    ray.exceptions.NodeDiedError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.ObjectLostError,
    ray.exceptions.OwnerDiedError,
    ray.exceptions.RaySystemError,
)


# --------------------------------------------------------------------------------- on the node


def node_info() -> dict[str, Any]:
    """Which node this is and the machine it runs on: the environment a cell's times belong to."""
    environment = machine_environment()
    context = ray.get_runtime_context()
    return {
        "id": context.get_node_id(),
        "address": ray.util.get_node_ip_address(),
        "hostname": environment["hostname"],
        "fingerprint": fingerprint(environment),
        "environment": environment,
    }


def run_unit(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A unit on its node: first the node, then every worker line and progress event as it
    comes, last the unit's result (or its error)."""
    yield {"kind": "node", "node": node_info()}
    items: queue.Queue[dict[str, Any] | None] = queue.Queue()
    deadline = payload["deadline"]
    executor = Executor(
        wall_clock_seconds=None if deadline is None else deadline - time.time(),
        max_memory_mb=payload["max_memory_mb"],
        progress=lambda event: items.put({"kind": "progress", "event": asdict(event)}),
        listener=lambda label, line: items.put({"kind": "line", "label": label, "line": line}),
        registry=None if payload.get("registry") is None else Path(payload["registry"]),
    )

    def body() -> None:
        try:
            executor.start()
            items.put(_unit_result(payload, executor))
        except Exception as exc:  # reported to the driver as this unit's failure
            items.put({"kind": "error", "message": getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"})
        finally:
            items.put(None)

    # The workers are started (and die with) this thread, which lives until they have ended.
    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    while (item := items.get()) is not None:
        yield item
    thread.join()


def _unit_result(payload: dict[str, Any], executor: Executor) -> dict[str, Any]:
    spec = parse_spec(payload["spec"], "the unit's spec")
    if payload["unit"] == "parity":
        task = ParityTask.model_validate(payload["task"])
        outcome = executor.execute(f"parity {task.backend}", task)
        found = parity_outcome(task.backend, outcome)
        return {"kind": "parity", "parity": found.model_dump(mode="json"), "budget_hit": executor.budget_hit}
    workload = workload_named(spec.workload)
    ratio_roles = Roles.model_validate(payload["roles"])
    root = payload.get("root")
    cells, taken = config_rounds(
        spec,
        workload,
        executor,
        payload["config"],
        payload["backends"],
        ratio_roles,
        payload["round_cap"],
        {},
        Places(Path(root) if root is not None else None, payload["order_seed"]),
    )
    return {
        "kind": "cells",
        "cells": [c.model_dump(mode="json") for c in cells],
        "rounds": taken.model_dump(mode="json"),
        "budget_hit": executor.budget_hit,
    }


@ray.remote(num_returns="streaming", max_retries=0)
def _unit(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    # max_retries=0: a unit retried on another node would mix two machines' samples in a cell.
    yield from run_unit(payload)


# -------------------------------------------------------------------------------- on the driver


@dataclass
class Unit:
    """One unit as the driver follows it: where it runs, what its workers said, how it ended."""

    key: str  # "parity naive" or "tiny"
    backends: list[str]
    payload: dict[str, Any]
    generator: Any = None
    node: dict[str, Any] | None = None  # known once the unit has started on a node
    outcomes: dict[str, TaskOutcome] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    lost: str | None = None  # why Ray gave up on it (a lost node, a failed task)
    stopped: tuple[str, str] | None = None  # (ended, reason) when the driver stopped it
    over: bool = False
    # the driver's clock (time.monotonic): submitted, first word from its node, its end
    submitted: float | None = None
    began: float | None = None
    ended: float | None = None

    def timing(self) -> dict[str, Any]:
        """How long the unit waited for a node and how long it took there, as the driver saw it."""
        waited = None if self.began is None or self.submitted is None else self.began - self.submitted
        took = None if self.ended is None or self.began is None else self.ended - self.began
        node = None if self.node is None else self.node["id"]
        return {"unit": self.key, "node": node, "queued_seconds": waited, "seconds": took}


@dataclass
class RayExecutor:
    """Hands units to a Ray cluster and follows them; keeps the budget and signals on the driver."""

    address: str | None = None
    wall_clock_seconds: float | None = None
    max_memory_mb: float | None = None
    progress: Callable[[TaskProgress], None] | None = None
    clock: Callable[[], float] = time.monotonic
    started: float | None = None
    budget_hit: bool = False
    interrupted: int | None = None
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # node id -> node_info()
    units: list[Unit] = field(default_factory=list)  # every unit submitted, for provenance
    connect_seconds: float | None = None
    joined: bool = False  # whether this executor joined the cluster (and so leaves it)
    # While joined, Ray prints what its cluster reports (a node it marked dead, say) on stdout,
    # from a thread of its own and at any moment: ptreg's stdout is the results (``--json``),
    # so until the executor leaves, that goes to stderr.
    _stdout: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    registry: Path | None = None  # kept off the workers' import path on a node where it exists too

    def start(self) -> None:
        begun = time.monotonic()
        self._connect()
        self.connect_seconds = time.monotonic() - begun
        self.started = self.clock()

    def budget_left(self) -> float | None:
        if self.wall_clock_seconds is None or self.started is None:
            return None
        return self.wall_clock_seconds - (self.clock() - self.started)

    def _connect(self) -> None:
        where = self.address or os.environ.get("RAY_ADDRESS") or "auto"
        if not ray.is_initialized():
            _reachable(where)
            # Ray's core writes its warnings to stderr, where ptreg's errors are one line each.
            os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
            # ray.init sets a SIGTERM handler of its own (exit at once): the run's stay.
            handlers = {s: signal.getsignal(s) for s in HANDLED}
            try:
                with _quiet_stderr():
                    ray.init(address=where, logging_level=logging.ERROR, log_to_driver=False)
                self.joined = True
                self._stdout.enter_context(contextlib.redirect_stdout(sys.stderr))
            except Exception as exc:  # ConnectionError, or Ray's own on a bad address
                raise UnusableInput(f"--address {where}: cannot join the Ray cluster: {_first_line(exc)}") from None
            finally:
                if threading.current_thread() is threading.main_thread():
                    for signum, handler in handlers.items():
                        if handler is not None:
                            signal.signal(signum, handler)
        offering = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(UNIT_RESOURCE)]
        if not offering:
            self.close()
            raise UnusableInput(
                f"--address {where}: no node of the Ray cluster offers {UNIT_RESOURCE}; start each benchmark node "
                f"with `ray start --resources '{{\"{UNIT_RESOURCE}\": 1}}'` (docs/ray.md)",
            )
        self._offering = offering

    def _check_threads(self, spec: AnySpec) -> None:
        most = max(n.get("Resources", {}).get("CPU", 0) for n in self._offering)
        if most < (spec.threads or 1):
            raise UnusableInput(
                f"threads: the evaluator asks for {spec.threads} CPUs per unit, and no {UNIT_RESOURCE} node of the "
                f"Ray cluster has more than {most:g}",
            )

    # ------------------------------------------------------------------ the SpreadExecutor API

    def parity(self, spec: EvaluatorSpec, ratio_roles: Roles) -> list[ParityOutcome]:
        self._check_threads(spec)
        shapes = parity_shapes(spec)
        units = [
            Unit(
                f"parity {b}",
                [b],
                {"unit": "parity", "task": parity_task(spec, b, ratio_roles, shapes).model_dump(mode="json")},
            )
            for b in spec.backends
        ]
        self._run(spec, units)
        if self.interrupted is not None:
            return []  # a parity check cut short establishes nothing
        found = []
        for unit in units:
            backend = unit.backends[0]
            if unit.result is not None and unit.result.get("kind") == "parity":
                found.append(ParityOutcome.model_validate(unit.result["parity"]))
            elif unit.node is None and unit.stopped is not None:
                found.append(
                    ParityOutcome(backend=backend, passed=False, summary=f"{NOT_CHECKED}: {unit.stopped[1]}", checks=[])
                )
            else:
                found.append(parity_outcome(backend, self._ending(unit, backend)))
        return found

    def configs(
        self,
        spec: AnySpec,
        runnable: dict[str, list[str]],
        ratio_roles: Roles,
        round_cap: int | None,
        places: Places,
    ) -> list[tuple[list[Cell], ConfigRounds]]:
        # an arms workload's commands run in the project root, which each node must hold too
        root = str(places.root) if places.root is not None else None
        shared = {
            "roles": ratio_roles.model_dump(mode="json"),
            "round_cap": round_cap,
            "root": root,
            "order_seed": places.order_seed,
        }
        # Largest config first: Ray starts units in the order they come, and the longest ones
        # started first leave the shortest to fill in (the makespan stays near its bound).

        def work(config: str) -> int:
            return step_flops(CONFIGS[config]) if config in CONFIGS else 1

        largest_first = sorted(runnable.items(), key=lambda item: -work(item[0]) * len(item[1]))
        units = [
            Unit(config, backends, {"unit": "config", "config": config, "backends": backends, **shared})
            for config, backends in largest_first
        ]
        self._run(spec, units)
        workload = workload_named(spec.workload)
        found: list[tuple[list[Cell], ConfigRounds]] = []
        for unit in units:
            config: str = unit.payload["config"]
            if unit.node is None:  # never reached a node
                if unit.stopped is not None and unit.stopped[0] == "budget":
                    cells = [
                        Cell(backend=b, config=config, status="not-started", reason=unit.stopped[1])
                        for b in unit.backends
                    ]
                    found.append(
                        (
                            cells,
                            ConfigRounds(
                                config=config, order_seed=places.order_seed, orders=[], stopped=unit.stopped[1]
                            ),
                        )
                    )
                elif unit.lost is not None:
                    cells = [Cell(backend=b, config=config, status="failed", reason=unit.lost) for b in unit.backends]
                    found.append(
                        (cells, ConfigRounds(config=config, order_seed=places.order_seed, orders=[], stopped=unit.lost))
                    )
                continue
            if unit.result is not None and unit.result.get("kind") == "cells":
                cells = [Cell.model_validate(c) for c in unit.result["cells"]]
                taken = ConfigRounds.model_validate(unit.result["rounds"])
            else:  # lost, stopped or failed on its node: what its workers had sent
                cells = [
                    build_cell(spec, workload, PlannedCell(config, b), self._ending(unit, b)) for b in unit.backends
                ]
                taken = self._rounds_seen(spec, unit, cells)
            for cell in cells:
                cell.worker = {**(cell.worker or {}), "node": _node_summary(unit.node)}
            found.append((cells, taken))
        planned: list[str] = list(runnable)  # back in the plan's order, as a local run reports them
        found.sort(key=lambda pair: planned.index(pair[1].config))
        return found

    def close(self) -> None:
        if self.joined:  # a caller that joined the cluster itself stays in it
            try:
                ray.shutdown()  # which ends the thread that prints Ray's reports
            finally:
                self.joined = False
                self._stdout.close()

    def provenance(self) -> dict[str, Any]:
        """environment.json's additions: the executor, and one entry per machine used."""
        machines: dict[str | None, dict[str, Any]] = {}
        for info in self.nodes.values():
            entry = machines.setdefault(
                info["fingerprint"] if info["fingerprint"] is not None else f"unknown {info['id']}",
                {"fingerprint": info["fingerprint"], "nodes": [], "environment": info["environment"]},
            )
            entry["nodes"].append({k: info[k] for k in ("id", "address", "hostname")})
        return {
            "executor": {
                "kind": "ray",
                "address": self.address,
                "ray_version": ray.__version__,
                "connect_seconds": self.connect_seconds,
                "units": [u.timing() for u in self.units],
            },
            "machines": list(machines.values()),
        }

    # ----------------------------------------------------------------------------- following

    def _run(self, spec: AnySpec, units: list[Unit]) -> None:
        """Submit every unit and follow them until each has ended, the budget ends or a signal.

        Ray prints what its cluster reports (a raylet that died, say) on the driver's stdout,
        which is ptreg's results (``--json``); meanwhile that goes to stderr, beside the progress
        (and, when this executor joined the cluster, until it leaves: see ``close``).
        """
        with contextlib.redirect_stdout(sys.stderr):
            self._follow(spec, units)

    def _follow(self, spec: AnySpec, units: list[Unit]) -> None:
        arrived: queue.Queue[tuple[Unit, dict[str, Any] | None]] = queue.Queue()
        left = self.budget_left()
        deadline = None if left is None else time.time() + left
        spec_json = spec.model_dump(mode="json")
        self.units += units
        for unit in units:
            unit.payload.update(
                spec=spec_json,
                deadline=deadline,
                max_memory_mb=self.max_memory_mb,
                registry=None if self.registry is None else str(self.registry),
            )
            if left is not None and left <= 0:
                self.budget_hit = True
                unit.stopped, unit.over = ("budget", "the budget's wall clock is used up"), True
                continue
            unit.submitted = time.monotonic()
            unit.generator = _unit.options(num_cpus=spec.threads or 1, resources={UNIT_RESOURCE: 1}).remote(
                unit.payload
            )
            threading.Thread(target=_pump, args=(unit, arrived), daemon=True).start()
        try:
            while not all(u.over for u in units):
                left = self.budget_left()
                if left is not None and left <= 0:
                    self.budget_hit = True
                    self._cancel(units, "budget", "killed at the budget's wall-clock limit")
                    break
                try:
                    unit, item = arrived.get(
                        timeout=POLL_SECONDS if left is None else max(0.01, min(POLL_SECONDS, left))
                    )
                except queue.Empty:
                    continue
                self._take(unit, item)
        except (Interrupted, KeyboardInterrupt) as exc:
            with deferred():  # a second Ctrl-C must not leave a unit running
                self.interrupted = signal_of(exc)
                self._cancel(units, "interrupted", f"interrupted by {signal.Signals(self.interrupted).name}")
        with deferred():  # keep what the cancelled units had already sent
            end = time.monotonic() + DRAIN_SECONDS
            while not all(u.over for u in units) and time.monotonic() < end:
                with contextlib.suppress(queue.Empty):
                    self._take(*arrived.get(timeout=POLL_SECONDS))

    def _cancel(self, units: list[Unit], ended: str, reason: str) -> None:
        for unit in units:
            if unit.over:
                continue
            unit.stopped = (ended, reason if unit.node is not None else f"not started: {reason}")
            with contextlib.suppress(Exception):  # a unit that just ended cannot be cancelled
                ray.cancel(unit.generator, force=True)

    def _take(self, unit: Unit, item: dict[str, Any] | None) -> None:
        if item is None:
            unit.over, unit.ended = True, time.monotonic()
            return
        kind = item["kind"]
        if kind == "node":
            unit.node, unit.began = item["node"], time.monotonic()
            self.nodes[item["node"]["id"]] = item["node"]
        elif kind == "line":
            found = decode_event(item["line"])
            label: str = item["label"]  # "parity naive" or "naive/tiny"
            backend = label.removeprefix("parity ") if label.startswith("parity ") else label.rsplit("/", 1)[0]
            keep(unit.outcomes.setdefault(backend, TaskOutcome()), found)
        elif kind == "progress":
            where = f" on node {unit.node['id'][:8]}" if unit.node else ""
            self._notify(TaskProgress(**{**item["event"], "task": f"{item['event']['task']}{where}", "pid": None}))
        elif kind in ("parity", "cells"):
            unit.result = item
            self.budget_hit = self.budget_hit or bool(item.get("budget_hit"))
        elif kind == "error":
            unit.lost = f"the unit failed on its node: {item['message']}"
        elif kind == "lost":
            unit.lost = item["message"]

    def _ending(self, unit: Unit, backend: str) -> TaskOutcome:
        """A backend's outcome in a unit that did not finish: what arrived, and why it ended."""
        outcome = unit.outcomes.get(backend, TaskOutcome())
        if unit.stopped is not None:
            outcome.ended, outcome.reason = unit.stopped
        elif unit.lost is not None:
            outcome.ended, outcome.reason = "crashed", unit.lost
        else:
            outcome.ended, outcome.reason = "crashed", "the unit ended without a result"
        return outcome

    def _rounds_seen(self, spec: AnySpec, unit: Unit, cells: list[Cell]) -> ConfigRounds:
        """The rounds of a unit that did not finish, from the samples that arrived: the plan's
        order of each round that any backend had begun."""
        config = unit.payload["config"]
        begun: dict[int, set[str]] = {}
        for cell in cells:
            for sample in cell.step_samples or []:
                begun.setdefault(sample.repeat, set()).add(cell.backend)
            for kernel_sample in cell.kernel_samples or []:
                begun.setdefault(kernel_sample.repeat, set()).add(cell.backend)
        seed: int = unit.payload["order_seed"]
        orders = [[b for b in round_order(seed, config, r, unit.backends) if b in begun[r]] for r in sorted(begun)]
        why = unit.stopped[1] if unit.stopped is not None else unit.lost or "the unit ended without a result"
        return ConfigRounds(config=config, order_seed=seed, orders=orders, stopped=why)

    def _notify(self, event: TaskProgress) -> None:
        if self.progress is not None:
            self.progress(event)


def _pump(unit: Unit, arrived: queue.Queue[tuple[Unit, dict[str, Any] | None]]) -> None:
    """Carry one unit's stream to the driver's queue; a Ray error ends it with the reason."""
    try:
        for ref in unit.generator:
            arrived.put((unit, ray.get(ref)))
    except ray.exceptions.TaskCancelledError:
        pass  # the driver cancelled it and knows why
    except LOST as exc:
        arrived.put((unit, {"kind": "lost", "message": f"its Ray node was lost ({type(exc).__name__})"}))
    except Exception as exc:
        arrived.put((unit, {"kind": "lost", "message": f"Ray failed the unit: {_first_line(exc)}"}))
    arrived.put((unit, None))


def _reachable(address: str) -> None:
    """Refuse at once an address where nothing listens: Ray itself retries for minutes."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray resolves itself (ray://...)
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise UnusableInput(
            f"--address {address}: nothing answers there ({exc.strerror or exc}); is the head node started?",
        ) from None


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send what Ray's native code writes to file descriptor 2 while it starts to nowhere: it
    says, among other things, that it looked for this machine's address."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as sink:
            os.dup2(sink.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _node_summary(info: dict[str, Any]) -> dict[str, Any]:
    return {k: info[k] for k in ("id", "address", "hostname", "fingerprint")}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
