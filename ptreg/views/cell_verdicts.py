"""A cell of run B against its history of runs of A's code, and the verdicts of a comparison's
cells taken together: the part of ``comparison.py`` that judges, apart from the part that
finds runs, so that the calibration (``benchmarks/compare_calibration.py``) calls exactly what
`ptreg compare` does.

The history's runs are grouped into batches by their times (runs taken back to back share a
session), and B's centre is judged against the batches' centres (``engine/stats.py
shift_from_history``); the cells' p-values are adjusted together with Holm's step-down, so
that an unchanged cell is flagged in at most ``FAMILY_ERROR_RATE`` of comparisons whatever
the other cells did.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ..engine.comparison_rules import FAMILY_ERROR_RATE, MIN_HISTORY
from ..engine.stats import MAX_HISTORY, batches, holm, run_centre, shift_from_history, shift_of_counts
from ..text import counted


@dataclass(frozen=True)
class HistoryRun:
    """One run of A's code as a cell's history holds it: its values for the cell (each repeat's
    time, or ratio with ``--relative-to``) and when it ran, which groups it into a batch."""

    label: str
    values: list[float]
    started_at: str
    finished_at: str


@dataclass
class CellShift:
    config: str
    backend: str
    a_seconds: float | None  # median over repeats (a ratio to the --relative-to backend, with one)
    b_seconds: float | None
    a_repeats: int
    b_repeats: int
    history: list[str] = field(default_factory=list)  # the runs of A's code B is judged against, A first
    batches: int = 0  # the batches those runs form (runs taken back to back are one): the unit
    same_code: bool | None = None  # whether B measured the code A did in this cell; None when unknown
    drift: float | None = None  # the spread of the history's centres (log units): this cell's own
    ratio: float | None = None  # B over the median of the batches' centres, of time per step: above 1 is slower
    low: float | None = None
    high: float | None = None
    p: float | None = None
    q: float | None = None  # after Holm's adjustment across the comparison's cells
    verdict: str = "unknown"
    counted: bool = False  # instruction counts: judged by the two runs' repeats (stats.shift_of_counts)

    @property
    def runs_needed(self) -> int:
        """How many more runs of A's code, each apart from the others (a batch of its own),
        would give this cell a verdict (none for counts)."""
        return 0 if self.counted else max(MIN_HISTORY - self.batches, 0)

    @property
    def too_short(self) -> str:
        """Why the history gives no verdict, in words."""
        if self.batches == len(self.history):
            return f"{counted(len(self.history), 'run')} of A's code, {MIN_HISTORY} needed ({self.runs_needed} more)"
        return (
            f"history is {counted(self.batches, 'batch', 'batches')} of {counted(len(self.history), 'run')} taken "
            f"back to back; {MIN_HISTORY} batches needed ({counted(self.runs_needed, 'more run')}, each apart)"
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "runs_needed": self.runs_needed}


def batch_centres(history: list[HistoryRun]) -> tuple[list[float], list[str], int]:
    """The history's runs grouped into batches by their times (``stats.batches``), the latest
    ``MAX_HISTORY`` of them: each batch's centre (the median of its runs' centres), the runs
    they hold, and how many batches the whole history formed."""
    ordered = sorted(history, key=lambda run: run.started_at)
    grouped = batches([(run.started_at, run.finished_at) for run in ordered])
    centres: list[float] = []
    used: list[str] = []
    for batch in grouped[-MAX_HISTORY:]:
        known = [c for i in batch if (c := run_centre(ordered[i].values)) is not None]
        if known:
            centres.append(statistics.median(known))
        used.extend(ordered[i].label for i in batch)
    return centres, used, len(grouped)


def judge_cell(
    config: str,
    backend: str,
    history: list[HistoryRun],
    b_values: list[float],
    threshold: float,
    counted: bool = False,
) -> CellShift:
    """One cell of B against its history: each run of A's code, A first. The verdict is left
    to ``decide``, which sees every cell of the comparison."""
    a_values = history[0].values
    cell = CellShift(
        config,
        backend,
        statistics.median(a_values) if a_values else None,
        statistics.median(b_values) if b_values else None,
        len(a_values),
        len(b_values),
        history=[run.label for run in history],
        counted=counted,
    )
    if counted:  # counts do not drift between runs: the two runs' repeats are the evidence
        cell.history, cell.batches = cell.history[:1], 1
        found = shift_of_counts(a_values, b_values, threshold)
        if found is not None:
            cell.ratio, cell.low, cell.high, cell.p = found.ratio, found.low, found.high, found.p
        return cell
    centres, used, cell.batches = batch_centres(history)
    cell.history = [label for label in cell.history if label in used]
    b_centre = run_centre(b_values)
    if len(centres) >= 2:
        cell.drift = statistics.stdev(centres)
    if b_centre is not None:
        found = shift_from_history(centres, b_centre, threshold)
        if found is not None:
            cell.ratio, cell.low, cell.high, cell.p = found.ratio, found.low, found.high, found.p
    return cell


def decide(cells: list[CellShift], same_machine: bool) -> None:
    """Slower or faster only when the p-value adjusted across the cells that can have a verdict
    (Holm) is below ``FAMILY_ERROR_RATE``; no verdict at all across machines, nor where the
    history is too short."""
    tested = [c for c in cells if c.p is not None and not c.runs_needed and c.a_repeats and c.b_repeats]
    for cell, q in zip(tested, holm([c.p for c in tested if c.p is not None]), strict=True):
        cell.q = q
    for cell in cells:
        if cell.a_repeats == 0 or cell.b_repeats == 0:
            cell.verdict = "unknown: no whole repeat on a side"
        elif not same_machine:
            cell.verdict = "not comparable: different machines"
        elif cell.runs_needed:
            cell.verdict = f"no verdict: {cell.too_short}"
        elif cell.p is None:
            cell.verdict = "unknown: a value that is not positive"
        elif cell.q is not None and cell.q < FAMILY_ERROR_RATE:
            cell.verdict = "slower" if (cell.ratio or 1.0) > 1 else "faster"
        else:
            cell.verdict = "no difference resolved"
