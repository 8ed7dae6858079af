"""The ``command`` workload: any experiment a command line can run, its arms compared on the
metrics its evaluator declares.

Each repeat runs the evaluator's argv (no shell) with the arm's parameters and the round's
seed put in for ``{name}`` and ``{seed}``, in the project root, with a minimal environment
plus ``PTREG_ARM``, ``PTREG_SEED``, ``PTREG_METRICS``, ``PTREG_ITEMS`` and ``PTREG_DECLARED``
(docs/workloads.md).
The command runs as a process tree of its own inside its worker's (``processes.py``), so that
the timeout kills all of it, and the budget, Ctrl-C, SIGTERM and SIGHUP (which kill the
worker's tree) too; its wall time and its tree's peak memory are measured from outside, so the
command need not measure them. Whatever it writes is
hostile: a line that is not a JSON object, a metric nobody declared, a value that is not a
finite number, is one line naming the arm, the repeat and the problem, recorded with the run
(``command_output.py``). A spec may give ``stages`` in place of the one command line
(``stages.py``): each stage runs as a command does, ``once`` per arm and seed or ``each`` repeat.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...errors import PtregError, UnusableInput
from ...records.evaluator import AnySpec, ArmsSpec, MetricDeclaration
from ...records.run_results import MetricSample, StageRecord
from ...store.code_digests import code_digests
from ...store.input_digests import digest_inputs, project_root
from ...text import shorten
from ..backends import Backend
from ..environment import WORKER_VARIABLES
from ..processes import Tree, start
from ..protocol import AnyEvent, CellTask, Progress
from .arms import ArmsWorkload, arms_spec
from .base import CellRun, Record, ReportProgress
from .command_output import missing_metric, read_items, written_metrics
from .command_output import read_metrics as read_metrics  # where harness tests and plugins have read it from
from .named_code import command_lines, named_code
from .stages import (
    ARM,
    EACH,
    ONCE,
    SEED,
    OnceRecords,
    Stage,
    Written,
    command_line,
    filled_outputs,
    not_frozen,
    outputs_problem,
    placeholders,
    stage_key,
    stage_problem,
    stages_of,
)

# Kept from the caller's environment: what finds programs, the home and the locale.
KEPT_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "VIRTUAL_ENV")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
POLL_SECONDS = 0.02


def environment(spec: ArmsSpec, arm: str, seed: int, metrics: Path, items: Path) -> dict[str, str]:
    """A minimal environment: nothing of the caller's but what finds programs and speaks its
    locale, the variables the evaluator names in ``env`` that are set (one not set stays
    unset), the thread count when the evaluator fixes one, and ptreg's five variables."""
    env = {k: os.environ[k] for k in KEPT_VARIABLES if k in os.environ}
    env.update({k: os.environ[k] for k in spec.env or () if k in os.environ})
    if "PATH" in env:
        # a relative entry (or an empty one, the working directory) finds programs in the
        # project the command runs in, which no consent covers
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if os.path.isabs(p))
    if spec.threads is not None:
        env.update(dict.fromkeys(THREAD_VARIABLES, str(spec.threads)))
    env.update(PTREG_ARM=arm, PTREG_SEED=str(seed), PTREG_METRICS=str(metrics), PTREG_ITEMS=str(items))
    # the names read_metrics accepts, so that ptreg.harness refuses any other at the call
    env["PTREG_DECLARED"] = json.dumps(sorted(spec.metrics))
    return env


def _exit_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(number).name}"
        return f"killed by signal {number}"
    return f"exited with status {os.WEXITSTATUS(status)}"


OUTPUT_TAIL = 64 * 1024  # of a command's stdout and stderr: enough for its last words
OUTPUT_EVERY = 1.0  # seconds between two reports of a running command's last line, at most
OUTPUT_LINE = 200  # characters of that line


class _Tail:
    """Reads a command's output as it comes and keeps only its last bytes, so that a command
    printing without end fills neither memory nor a disk."""

    def __init__(self, fd: int):
        self.fd, self.kept = fd, b""
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self.fd, 65536):
                self.kept = (self.kept + chunk)[-OUTPUT_TAIL:]
        os.close(self.fd)

    def latest(self) -> str | None:
        """The last line printed so far, shortened and on one line; None before any."""
        lines = [line for line in self.kept[-4096:].decode("utf-8", errors="replace").splitlines() if line.strip()]
        return lines[-1].strip()[:OUTPUT_LINE] if lines else None  # its control characters are the reader's to remove

    def last_line(self) -> str:
        """': ' and the last line it printed, shortened, or nothing. Waits briefly for the pipe
        to close (a child it left behind may hold it open; it is not waited for)."""
        self.thread.join(timeout=2)
        lines = [line for line in self.kept.decode("utf-8", errors="replace").splitlines() if line.strip()]
        return ": " + shorten(lines[-1].strip(), 200) if lines else ""


@dataclass
class _Execution:
    """How one command line ran, measured from outside; what it wrote, when it ended well."""

    wall: float | None
    peak: float | None
    exit_code: int | None = None
    problem: str | None = None
    values: dict[str, float] = field(default_factory=dict)
    items: dict[str, dict[str, float]] | None = None
    accelerators: dict[str, Any] | None = None  # measured only where a GPU was there to measure


def _accelerator_peak(measured: list[dict[str, Any] | None], walls: list[float | None]) -> dict[str, Any]:
    """A repeat's accelerator use over its each stages: the largest memory, the utilisation
    averaged over their time. Known only when every stage was measured: one unmeasured stage
    could have held more."""
    if not measured or any(m is None for m in measured):
        return {}
    taken = [m for m in measured if m is not None]
    found: dict[str, Any] = {}
    memory = [m["accelerator_memory_mb"] for m in taken if m.get("accelerator_memory_mb") is not None]
    if len(memory) == len(taken):
        found["accelerator_memory_mb"] = max(memory)
        ways = {m.get("accelerator_memory_by") for m in taken}
        found["accelerator_memory_by"] = "device" if "device" in ways else "processes"
    use = [(m.get("accelerator_utilisation"), w) for m, w in zip(taken, walls, strict=True)]
    if use and all(u is not None and w is not None for u, w in use):
        total = sum(w for _, w in use if w is not None)
        if total > 0:
            found["accelerator_utilisation"] = sum(u * w for u, w in use if u is not None and w is not None) / total
    return found


class _CommandRun(CellRun):
    def __init__(self, task: CellTask, spec: ArmsSpec, declared: dict[str, MetricDeclaration]):
        assert task.root is not None
        self.task, self.spec, self.declared = task, spec, declared
        self.root = Path(task.root)
        self.stages = stages_of(spec.settings)
        self.staged = "stages" in spec.settings
        self.once = OnceRecords(self.root, spec.inputs, task.reuse_stages or [])

    emit: Callable[[AnyEvent], None] | None = None

    def attach(self, emit: Callable[[AnyEvent], None]) -> None:
        self.emit = emit  # to say the command's last output line while it runs

    def warm_up(self, progress: ReportProgress) -> None:
        progress("ready", 1, 1)  # a command has nothing to warm: each repeat is a fresh process

    def run_repeat(self, repeat: int, record: Record, progress: ReportProgress) -> None:
        seed = self.spec.round_seed(repeat)
        scratch = Path(tempfile.mkdtemp(prefix="ptreg-command-"))
        try:
            record(self._repeat(repeat, seed, scratch))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        progress("command", 1, 1)

    def _repeat(self, repeat: int, seed: int, scratch: Path) -> MetricSample:
        arm = self.task.backend
        params = self.spec.arms[arm]
        records: list[StageRecord] = []
        written = Written()
        upstream: list[dict[str, str]] = []
        problem: str | None = None
        for index, stage in enumerate(s for s in self.stages if s.repeat == ONCE):
            found, fresh = self._once(stage, arm, params, seed, upstream, scratch / f"once-{index}")
            if fresh:
                records.append(found)
            if found.problem is not None:
                problem = f"stage {stage.name} (once, seed {seed}): {found.problem}"
                break
            upstream.append(found.artifacts or {})
            problem = written.add(stage.name, found.values or {}, found.items)
            if problem is not None:
                break
        walls: list[float | None] = []
        peaks: list[float] = []
        accelerators: list[dict[str, Any] | None] = []
        for index, stage in enumerate(s for s in self.stages if s.repeat == EACH):
            if problem is not None:
                break
            done = self._execute(command_line(stage.argv, params, seed, arm), arm, seed, scratch / f"each-{index}")
            walls.append(done.wall)
            peaks += [done.peak] if done.peak is not None else []
            accelerators.append(done.accelerators)
            records.append(
                StageRecord(
                    name=stage.name,
                    repeat=EACH,
                    wall_seconds=done.wall,
                    peak_memory_mb=done.peak,
                    exit_code=done.exit_code,
                    problem=done.problem,
                )
            )
            if done.problem is not None:
                problem = f"stage {stage.name}: {done.problem}" if self.staged else done.problem
                break
            problem = written.add(stage.name, done.values, done.items)
        if problem is None:
            problem = missing_metric(written.values, self.declared)
        measured: dict[str, Any] = {
            "repeat": repeat,
            "seed": seed,
            # the repeat is its each stages: their time added up, the largest of their peaks
            "wall_seconds": sum(w for w in walls if w is not None) if walls and None not in walls else None,
            "peak_memory_mb": max(peaks) if peaks else None,
            "stages": records if self.staged else None,
            **_accelerator_peak(accelerators, walls),
        }
        if problem is not None:
            return MetricSample(**measured, values={}, problem=problem)
        return MetricSample(**measured, values=written.values, items=written.items or None)

    def _once(
        self, stage: Stage, arm: str, params: dict[str, str], seed: int, upstream: list[dict[str, str]], scratch: Path
    ) -> tuple[StageRecord, bool]:
        """The record a once stage stands on for this arm and seed, and whether it is new to this
        repeat: one standing already or reused (``OnceRecords``), or the stage run now."""
        argv = command_line(stage.argv, params, seed, arm)
        outputs = command_line(stage.outputs, params, seed, arm)
        try:
            key = stage_key(argv, arm, seed, outputs, self.once.inputs(), upstream)
        except PtregError as exc:
            return StageRecord(name=stage.name, repeat=ONCE, problem=exc.message), True
        found = self.once.standing_for(stage.name, seed, key, outputs)
        if found is not None:
            return found
        done = self._execute(argv, arm, seed, scratch)
        artifacts, problem = None, done.problem
        if problem is None:
            try:
                artifacts = digest_inputs(self.root, outputs, what="output")
            except PtregError as exc:
                problem = exc.message
        ran = StageRecord(
            name=stage.name,
            repeat=ONCE,
            wall_seconds=done.wall,
            peak_memory_mb=done.peak,
            exit_code=done.exit_code,
            problem=problem,
            key=key,
            artifacts=artifacts,
            values=(done.values or None) if problem is None else None,
            items=done.items if problem is None else None,
        )
        self.once.keep(seed, ran)
        return ran, True

    def _execute(self, argv: list[str], arm: str, seed: int, scratch: Path) -> _Execution:
        scratch.mkdir(mode=0o700)
        metrics, items = scratch / "metrics.jsonl", scratch / "items.jsonl"
        env = environment(self.spec, arm, seed, metrics, items)
        started = time.monotonic()
        reading, writing = os.pipe()
        try:
            # a tree of its own inside the worker's: the timeout kills all it started, wherever it
            # went; and the command dies with its worker, should that be killed outright
            tree = start(
                argv,
                cwd=self.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=writing,
                stderr=writing,
                die_with_parent=True,
                measure_accelerators=True,
            )
        except (OSError, PtregError) as exc:
            os.close(reading)
            why = exc.message if isinstance(exc, PtregError) else exc.strerror or str(exc)
            return _Execution(None, None, problem=f"could not start {shorten(argv[0], 80)}: {why}")
        finally:
            os.close(writing)
        output = _Tail(reading)
        try:
            timed_out = self._wait(tree, output)
        finally:
            # whatever it left running, in its cgroup or re-parented to this worker; all of it
            # when the worker is told to end meanwhile
            survivors = tree.end()
        wall = time.monotonic() - started
        measured = _Execution(wall if wall > 0 else None, tree.peak_mb())
        if tree.accelerators is not None:  # a GPU was there to measure: what the tree took of it
            measured.accelerators = tree.accelerators.measured()
        if survivors:
            shown = ", ".join(str(pid) for pid in survivors[:5])
            measured.problem = f"{len(survivors)} of its processes outlived it: {shown}"
            return measured
        if timed_out:
            measured.problem = f"killed at its timeout of {self.spec.timeout_seconds:g} s"
            return measured
        status = tree.status if tree.status is not None else 0
        if os.WIFEXITED(status):
            measured.exit_code = os.WEXITSTATUS(status)
        if status != 0:
            measured.problem = _exit_text(status) + output.last_line()
            return measured
        try:
            measured.values = written_metrics(metrics, self.declared)
            measured.items = read_items(items, self.declared)
        except ValueError as exc:
            measured.problem = str(exc)
        return measured

    def _wait(self, tree: Tree, output: _Tail) -> bool:
        """Wait for the command, sampling its tree's memory and saying its last output line
        when it changed (at most every OUTPUT_EVERY seconds); True when its timeout came first
        (the caller then ends the tree, the command with it)."""
        deadline = time.monotonic() + self.spec.timeout_seconds
        said, when = None, time.monotonic()
        while not tree.reap():
            now = time.monotonic()
            if now >= deadline:
                return True
            if self.emit is not None and now - when >= OUTPUT_EVERY:
                latest, when = output.latest(), now
                if latest is not None and latest != said:
                    said = latest
                    self.emit(Progress(phase="command", done=0, total=1, line=latest))
            tree.sample()
            time.sleep(POLL_SECONDS)
        return False


class CommandWorkload(ArmsWorkload):
    name = "command"
    description = (
        "Any command line: its arms (parameters put into the argv) compared on the metrics the evaluator declares."
    )
    spec_fields: ClassVar[dict[str, str]] = {
        "command": "the command line, a list of arguments run without a shell; {name} is the arm's value of that "
        "parameter, {seed} the round's seed",
        "stages": "in place of command: a list of {name, command, outputs, repeat}, each command run without a "
        "shell, once per arm and seed (repeat 'once', its outputs digested as artifacts) or each repeat ('each')",
    }
    # one of the two is given, never both (check_settings)
    optional_fields: ClassVar[frozenset[str]] = frozenset({"command", "stages"})
    runs_code = True
    checks_out_revisions = True

    def check_settings(self, spec: AnySpec) -> str | None:
        spec = arms_spec(spec)
        problem = stage_problem(spec.settings)
        if problem is not None:
            return problem
        if not spec.metrics:
            return "a command evaluator declares its metrics (metrics: {name: {better, unit}})"
        # the worker a command runs in has these set whatever the caller has: never the caller's value
        set_here = sorted(set(spec.env or ()) & {*KEPT_VARIABLES, *THREAD_VARIABLES, *WORKER_VARIABLES})
        if set_here:
            return f"env: {set_here[0]} is set by ptreg itself (kept from the caller, by threads, or for every worker)"
        stages = stages_of(spec.settings)
        staged = "stages" in spec.settings
        for stage in stages:
            what = f"stage {stage.name}" if staged else "command"
            try:
                names = placeholders(stage.argv) + placeholders(stage.outputs)
            except ValueError as exc:
                return f"{what}: {exc}"
            for name in names:
                if name == SEED or (name == ARM and staged):
                    continue
                lacking = [arm for arm, params in spec.arms.items() if name not in params]
                if lacking:
                    return f"{what} names {{{name}}}, which arm {lacking[0]!r} does not give"
            problem = outputs_problem(spec, stage)
            if problem is not None:
                return problem
        try:
            command_lines(spec)
            filled_outputs(spec)
        except ValueError as exc:
            return str(exc)
        return None

    def prepare(self, task: CellTask, backend: Backend | None) -> CellRun:
        assert task.spec is not None
        spec = ArmsSpec.model_validate(task.spec)
        return _CommandRun(task, spec, {**self.metrics, **spec.metrics})

    def code(self, spec: AnySpec, registry: Path) -> dict[str, str] | None:
        spec = arms_spec(spec)
        # an arm that names a git revision runs that revision's files, not the working tree's:
        # what it runs is recorded with each run (engine/revisions.py), and consent covers the
        # revisions by name
        spec = spec.model_copy(update={"arms": {a: p for a, p in spec.arms.items() if a not in spec.revisions}})
        try:
            named = named_code(spec)
            unfrozen = not_frozen(spec)
        except ValueError as exc:
            raise UnusableInput(f"evaluator {spec.name}: {exc}") from None
        return code_digests(
            project_root(registry),
            named.arguments,
            named.scripts,
            named.import_folders,
            unfrozen,
            registry=registry.absolute().name,
            maybe_scripts=named.maybe_scripts,
        )
