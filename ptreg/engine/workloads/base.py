"""What a workload is: the thing a cell measures, from its timed loop to its report columns.

A workload owns, in one object:
- its cell, run inside the worker process: set up and warmed up once, then timed one repeat
  at a time (the executor interleaves the repeats of all backends, round by round), and the
  samples it records;
- the summary of a cell's samples, and the ratios between cells of one run, paired by round;
- the tables and sentences a reader sees.

The engine calls these and never asks which workload it has. A workload is a plugin, found
through the ``ptreg.workloads`` entry points (``registry.py``, docs/workloads.md): a subclass of
``Workload`` registered by name, ptreg's own exactly like a third party's.

Two kinds share this contract. A ``backends`` workload compares kernel backends on model
configs (parity first, then cells of (backend, config)); an ``arms`` workload compares named
arms on metrics it or its evaluator declares (``arms.py``), one cell per arm.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar, Literal, TypeVar

from ...records.counting import UNIT
from ...records.evaluator import AnySpec, EvaluatorSpec, MetricDeclaration
from ...records.run_results import (
    INTERVALS_FROM_VERSION,
    Cell,
    Kernel,
    KernelSample,
    MetricSample,
    Ratio,
    Roles,
    RunResults,
    StepSample,
    Summary,
)
from ...text import Table
from ..backends import Backend
from ..callgrind import WALL_CLOCK, Stopwatch
from ..protocol import AnyEvent, CellTask
from ..stats import paired_ratio

AnySample = StepSample | KernelSample | MetricSample
KERNEL_LABEL: dict[Kernel, str] = {"forward": "forward", "backward_da": "backward_dA", "backward_db": "backward_dB"}
Record = Callable[[AnySample], None]  # hands one sample to the executor, at once
ReportProgress = Callable[[str, int, int], None]  # (phase, done, total)


class CellRun(ABC):
    """One cell inside its worker, set up: warmed up once, then timed one repeat at a time.

    A workload that can count instructions (``Workload.counts_instructions``) takes every timed
    region through ``stopwatch``, which the worker replaces with a counting one under the
    instructions timer."""

    stopwatch: Stopwatch = WALL_CLOCK

    def attach(self, emit: Callable[[AnyEvent], None]) -> None:
        """Given the worker's event stream, for a cell with more to say than its samples (a
        command announces its process group, so that it dies with the worker)."""
        return None  # a cell that only records samples needs nothing of it

    @abstractmethod
    def warm_up(self, progress: ReportProgress) -> None: ...

    @abstractmethod
    def run_repeat(self, repeat: int, record: Record, progress: ReportProgress) -> None:
        """Time one repeat of ``timed_steps``, recording every sample as soon as it is taken."""


class Workload(ABC):
    name: ClassVar[str]
    unit: ClassVar[str]  # of ``headline``, as the evidence line says it
    kind: ClassVar[Literal["backends", "arms"]]
    description: ClassVar[str]
    # backends: the metric its evaluators name (records/evaluator.py Metric); arms: None
    metric: ClassVar[str | None] = None
    # arms: the metrics the workload itself declares (its evaluators may declare more)
    metrics: ClassVar[dict[str, MetricDeclaration]] = {}
    # arms: the workload's own fields of an evaluator spec, each with what it is; all required
    # but those in optional_fields (whose check_settings says which of them a spec gives)
    spec_fields: ClassVar[dict[str, str]] = {}
    optional_fields: ClassVar[frozenset[str]] = frozenset()
    # whether an evaluator of it runs code the spec names (then trusted only where frozen)
    runs_code: ClassVar[bool] = False
    # Whether an arm may name a git revision of the project (``"revision": "HEAD~1"``), its
    # command then run in a checkout of that revision (engine/revisions.py).
    checks_out_revisions: ClassVar[bool] = False
    # whether its cells time every region through ``CellRun.stopwatch``, and so can count
    # instructions (an evaluator's ``"timer": "instructions"``)
    counts_instructions: ClassVar[bool] = False
    # The modules a workload needs beyond ptreg's own (its evaluation tool, in an extra of its
    # own), and how to install them: without them it is listed as not installed, and not run.
    requires_modules: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str | None] = None

    def check_settings(self, spec: AnySpec) -> str | None:
        """Why the spec's own fields cannot be measured (one line), or None."""
        return None

    def code(self, spec: AnySpec, registry: Path) -> dict[str, str] | None:
        """For a workload that runs code: the sha256 of each file of the project (the folder
        holding ``registry``) that the spec makes it run, by its path, frozen with the evaluator
        so that consent to it covers them; None when it names no such files."""
        return None

    @abstractmethod
    def prepare(self, task: CellTask, backend: Backend | None) -> CellRun:
        """In the worker: the cell of ``task`` on ``backend`` (None for an arms workload), set
        up and not yet warmed up."""

    @abstractmethod
    def summarize(self, spec: AnySpec, cell: Cell, samples: list[AnySample]) -> None:
        """Fill in the cell's samples and summaries; only whole repeats are summarised."""

    @abstractmethod
    def compare(self, spec: AnySpec, cells: list[Cell], roles: Roles) -> None:
        """Fill in every ratio between cells of the same config in this run, paired by round."""

    @abstractmethod
    def tables(self, results: RunResults) -> list[Table]:
        """The tables of this workload's cells, after the parity table."""

    @abstractmethod
    def headline(self, cell: Cell) -> float | None:
        """The one number of a measured cell that the evidence line quotes, in ``unit``."""

    def verdict(self, results: RunResults) -> list[str]:
        """Sentences on what bounds the measured thing; none unless the workload can say."""
        return []

    def evidence(self, results: RunResults) -> list[str]:
        """The parts of the run's evidence line: one per backend that reached a headline
        number, with its speedup over the reference."""
        reference = results.ratio_roles.reference
        counted = results.counted is not None
        parts = []
        for backend in results.spec.arm_names:
            mine = [c for c in results.cells if c.backend == backend and c.status == "measured"]
            values = [(c.config, value) for c in mine if (value := self._headline(c, counted)) is not None]
            if not values:
                continue
            if counted:  # a count, in whole instructions, of what the workload's seconds would time
                reached = ", ".join(f"{config} {value:,.0f}" for config, value in values)
                of = self.seconds_of if isinstance(self, BackendsWorkload) else "repeat"
                sentence = f"{backend} counted {reached} instructions per {of}"
            else:
                reached = ", ".join(f"{config} {value:,.1f}" for config, value in values)
                sentence = f"{backend} reached {reached} {self.unit}"
            speedups = [c.vs_naive for c in mine if c.vs_naive is not None]
            if backend != reference and speedups:
                low, high = min(speedups), max(speedups)
                span = f"{low:.2f}x" if abs(high - low) < 0.005 else f"{low:.2f}-{high:.2f}x"
                sentence += f", or about {span} over {reference}"
            parts.append(sentence)
        return parts

    def _headline(self, cell: Cell, counted: bool) -> float | None:
        """The headline, or under the instructions timer the cell's instructions per step."""
        if counted:
            return cell.instructions_per_step.median if cell.instructions_per_step is not None else None
        return self.headline(cell)


class BackendsWorkload(Workload):
    """A workload that compares kernel backends on model configs, with parity checked first."""

    kind = "backends"
    # what ``repeat_seconds`` times, as a chart's unit says it: "ms per ..."
    seconds_of: ClassVar[str] = "step"

    @abstractmethod
    def repeat_seconds(self, spec: EvaluatorSpec, cell: Cell) -> dict[int, float]:
        """Seconds of one step's worth of work in each whole repeat of a summarised cell, by
        round: what the ratios of a run pair up, round by round. Under the instructions timer,
        instructions instead (``repeat_unit``); a repeat without its count is left out."""


def repeat_unit(spec: AnySpec) -> str:
    """What ``repeat_seconds`` returns for a run under ``spec``: seconds, or instructions."""
    return UNIT if isinstance(spec, EvaluatorSpec) and spec.counts_instructions else "seconds"


def backends_spec(spec: AnySpec) -> EvaluatorSpec:
    """The spec of a backends workload; the registry lets no other reach one."""
    assert isinstance(spec, EvaluatorSpec), spec.workload
    return spec


def backend_of(backend: Backend | None) -> Backend:
    """The backend of a backends workload's cell; the worker creates one for every such cell."""
    assert backend is not None
    return backend


# --------------------------------------------------------------------------- shared by workloads

S = TypeVar("S", StepSample, KernelSample)


def complete_repeats(samples: Sequence[S], per_repeat: int) -> dict[int, list[S]]:
    """The repeats that finished, by number; a repeat cut short is kept as samples only."""
    by_repeat: dict[int, list[S]] = {}
    for sample in samples:
        by_repeat.setdefault(sample.repeat, []).append(sample)
    return {r: s for r, s in by_repeat.items() if len(s) == per_repeat}


def speedup(
    seconds: dict[tuple[str, str], dict[int, float]],
    other: str | None,
    config: str,
    mine: dict[int, float],
    adaptive: bool = False,
) -> Ratio | None:
    """How many times faster a cell is than ``other``'s cell of the same config, round by round
    (``adaptive``: under a plan that stopped on narrow intervals, ``stats.log_interval``)."""
    theirs = seconds.get((other, config)) if other is not None else None
    return paired_ratio(theirs, mine, adaptive) if theirs and mine else None


# Beyond this a fixed-point number is hundreds of digits wide (validate accepts up to 1.8e308).
FIXED_MAX = 1e15


def number(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "unknown"
    return f"{value:,.{digits}f}" if abs(value) < FIXED_MAX else f"{value:.3g}"


def instructions(summary: Summary | None) -> str:
    """A count's median, in whole instructions; unknown when there is none."""
    return number(summary.median, 0) if summary is not None else "unknown"


def times(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:.2f}x" if abs(value) < FIXED_MAX else f"{value:.3g}x"


def interval(summary: Summary | None, digits: int = 1) -> str:
    """A summary's 95% interval, as low-high; unknown with one repeat."""
    if summary is None or summary.ci is None:
        return "unknown"
    return f"{number(summary.ci.low, digits)}-{number(summary.ci.high, digits)}"


NOT_RECORDED = "not recorded"


def recorded_interval(results: RunResults, summary: Summary | None, digits: int = 1) -> str:
    """A cell's 95% interval as ``interval`` gives it, or why a run from before intervals has
    none: it never recorded one (unknown is for a run that could have)."""
    return interval(summary, digits) if results.results_version >= INTERVALS_FROM_VERSION else NOT_RECORDED


def without_intervals(results: RunResults, title: str) -> str:
    """A table's title ('What: how its values are taken'), or, for a run from before intervals,
    what it is and why it has none (its ratios are of medians, with no rounds to pair)."""
    if results.results_version >= INTERVALS_FROM_VERSION:
        return title
    what = title.split(":")[0]
    return (
        f"{what}: medians; run before interleaved rounds (results version {results.results_version}), so no intervals"
    )


def ratio_text(value: float | None, found: Ratio | None) -> str:
    """A ratio with its 95% interval. One whose interval holds 1 reads as no difference resolved,
    never as a bare 1.02x; a ratio of one round has no interval to show."""
    if found is None or found.ci is None:
        return times(value)
    low, high = found.ci.low, found.ci.high
    if low == high:  # a cell against itself, or rounds that agree to the last bit
        return times(value)
    span = f"{low:.2f}-{high:.2f}x"
    return f"no difference resolved ({span})" if low <= 1.0 <= high else f"{times(value)} ({span})"


def percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def note(cell: Cell) -> str:
    if cell.status != "measured":
        return f"{cell.status}: {cell.reason}" if cell.reason else cell.status
    return "spread too wide to trust" if cell.spread_too_wide else ""


def versus(name: str | None) -> str:
    """A ratio column's header; a role no backend held reads as the role."""
    return f"vs {name or 'reference'}"


def without_twin(results: RunResults, table: Table) -> Table:
    """Drop the baseline column when the baseline is the reference: it would repeat that one."""
    reference = results.ratio_roles.reference
    if results.spec.baseline != reference:
        return table
    drop = table.headers.index(versus(reference)) + 1
    return Table(
        table.title,
        [r[:drop] + r[drop + 1 :] for r in table.rows],
        table.headers[:drop] + table.headers[drop + 1 :],
        table.text,
        table.notes,
    )
