"""What a workload is: the thing a cell measures, from its timed loop to its report columns.

A workload owns, in one object:
- its cell loop, run inside the worker process, and the samples it records;
- the summary of a cell's samples, and the ratios between cells of one run;
- the tables and sentences a reader sees.

The engine calls these and never asks which workload it has; a new workload is a new module
beside the others, listed in ``workloads/__init__.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar, TypeVar

from ...records.evaluator import EvaluatorSpec
from ...records.run import Cell, Kernel, KernelSample, Roles, RunResults, StepSample
from ...text import Table
from ..backends import Backend
from ..protocol import CellTask

AnySample = StepSample | KernelSample
KERNEL_LABEL: dict[Kernel, str] = {"forward": "forward", "backward_da": "backward_dA", "backward_db": "backward_dB"}
Record = Callable[[AnySample], None]  # hands one sample to the executor, at once
ReportProgress = Callable[[str, int, int], None]  # (phase, done, total)


class Workload(ABC):
    name: ClassVar[str]
    unit: ClassVar[str]  # of ``headline``, as the evidence line says it

    @abstractmethod
    def run_cell(self, task: CellTask, backend: Backend, record: Record, progress: ReportProgress) -> None:
        """In the worker: warm up, then time ``task.repeats`` × ``task.timed_steps``, recording
        every sample as soon as it is taken."""

    @abstractmethod
    def summarize(self, spec: EvaluatorSpec, cell: Cell, samples: list[AnySample]) -> None:
        """Fill in the cell's samples and summaries; only whole repeats are summarised."""

    @abstractmethod
    def compare(self, spec: EvaluatorSpec, cells: list[Cell], roles: Roles) -> None:
        """Fill in every ratio between cells of the same config in this run."""

    @abstractmethod
    def tables(self, results: RunResults) -> list[Table]:
        """The tables of this workload's cells, after the parity table."""

    @abstractmethod
    def headline(self, cell: Cell) -> float | None:
        """The one number of a measured cell that the evidence line quotes, in ``unit``."""

    def verdict(self, results: RunResults) -> list[str]:
        """Sentences on what bounds the measured thing; none unless the workload can say."""
        return []


# --------------------------------------------------------------------------- shared by workloads

S = TypeVar("S", StepSample, KernelSample)


def complete_repeats(samples: Sequence[S], per_repeat: int) -> dict[int, list[S]]:
    """The repeats that finished, by number; a repeat cut short is kept as samples only."""
    by_repeat: dict[int, list[S]] = {}
    for sample in samples:
        by_repeat.setdefault(sample.repeat, []).append(sample)
    return {r: s for r, s in by_repeat.items() if len(s) == per_repeat}


def number(value: float | None, digits: int = 1) -> str:
    return "unknown" if value is None else f"{value:,.{digits}f}"


def times(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.2f}x"


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
    )
