"""Comparing runs: is run B slower than run A, cell by cell, and the history of one evaluator.

Repeats inside one run share that run's moment; two runs an hour apart do not. So a verdict
across runs adds to each run's own spread the drift of a cell's center from run to run,
estimated from the other complete runs under the same evaluator on the same machine (at least
three), or, without such a history, a floor measured on these machines (``DRIFT_FLOOR``). The
cells of one comparison are many questions at once: their p-values are adjusted together
(Benjamini-Hochberg) before any cell is called slower or faster.

Only runs made under the same frozen evaluator are compared, unless asked to compare across
evaluators, and then only the cells whose workload, config, backend, threads and step plan
agree. Runs from different machines are compared too, but their differences are listed first
and no verdict is given: absolute times from two machines say nothing about the code.
"""

from __future__ import annotations

import difflib
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.environment import machine, measuring_environment
from ..engine.stats import between_run_drift, center_interval, false_discovery, shift
from ..engine.workloads import workload_named
from ..engine.workloads.base import BackendsWorkload
from ..errors import EXIT_CHECK_FAILED, EXIT_UNUSABLE, PtregError, UnknownAttempt, UnusableInput
from ..records.evaluator import EvaluatorSpec
from ..records.run import RunResults
from ..store.directory import attempt_files, record_path
from ..store.evaluators import evaluator_files
from ..store.jsonio import read_json
from ..store.runs import ENVIRONMENT_FILE, RESULTS_FILE, RUNS_DIR, read_results
from .arms_comparison import MetricHistoryRow, MetricShift, is_arms_run, metric_history, metric_shifts

# The drift of a cell's center between two runs of unchanged code, as a standard deviation in
# log units, used when no history of the evaluator on the machine says better. A/A runs on the
# shared 2-core VMs this project runs on gave 0.17-0.24 at the 90% bound
# (docs/measurements.md#comparing-runs); a floor below that calls a busy hour a regression.
DRIFT_FLOOR = 0.20
FALSE_DISCOVERY_RATE = 0.05
# What must agree for a cell to be compared across two evaluators.
STEP_PLAN = ("workload", "threads", "warmup_steps", "timed_steps")


@dataclass(frozen=True)
class FoundRun:
    """A run as comparisons read it: its results, its machine, where it is."""

    results: RunResults
    environment: dict[str, Any] | None
    folder: Path

    @property
    def label(self) -> str:
        return f"{self.results.attempt}/{self.results.run_id}"


def _runs(root: Path) -> list[Path]:
    return sorted(p.parent for p in (root / RUNS_DIR).glob(f"*/*/{RESULTS_FILE}") if not p.parent.name.startswith("."))


def _read(root: Path, folder: Path) -> FoundRun:
    results = read_results(folder, root)
    try:
        environment = read_json(folder / ENVIRONMENT_FILE)
    except PtregError:
        environment = None  # unknown machine: never the same as any other
    # the machine the cells ran on: on a cluster, not the driver that wrote the file
    return FoundRun(results, measuring_environment(environment if isinstance(environment, dict) else None), folder)


def find_run(root: Path, reference: str) -> FoundRun:
    """``ATTEMPT/RUN_ID``, or ``ATTEMPT`` for its latest complete run; an unknown one names the
    closest, and one whose results do not validate is refused, naming the file."""
    folders = _runs(root)
    labels = [f"{f.parent.name}/{f.name}" for f in folders]
    if "/" in reference:
        if reference in labels:
            return _read(root, folders[labels.index(reference)])
    else:
        mine = [f for f in folders if f.parent.name == reference]
        if not mine:
            _known_attempt(root, reference)
        if mine:
            complete = [run for run in (_read(root, f) for f in mine) if run.results.status == "complete"]
            if not complete:
                raise PtregError(f"{reference} has no complete run ({len(mine)} run(s) in all)", EXIT_UNUSABLE)
            return complete[-1]
    close = difflib.get_close_matches(reference, labels + sorted({f.parent.name for f in folders}), n=3, cutoff=0.5)
    hint = f" (did you mean: {', '.join(close)}?)" if close else ""
    raise PtregError(f"no run {reference!r} in {root / RUNS_DIR}{hint}", EXIT_UNUSABLE)


def _known_attempt(root: Path, attempt_id: str) -> None:
    """Refuses an id that names no attempt of the registry, as every command does."""
    if record_path(root, attempt_id).exists():
        return
    if any(p.name.startswith(f"{attempt_id}@") for p in evaluator_files(root)):
        raise UnusableInput(
            f"no attempt {attempt_id!r} in {root}; it names a frozen evaluator: `--evaluator {attempt_id}`"
        )
    with_runs = {f.parent.name for f in _runs(root)}
    raise UnknownAttempt(attempt_id, str(root), sorted({p.stem for p in attempt_files(root)} | with_runs))


def machine_differences(a: FoundRun, b: FoundRun) -> list[str]:
    """One line per property of the machines that differs or is unknown on either side."""
    ma, mb = machine(a.environment), machine(b.environment)
    return [
        f"{key}: {ma[key] or 'unknown'} -> {mb[key] or 'unknown'}"
        for key in ma
        if ma[key] != mb[key] or ma[key] is None
    ]


def spec_differences(a: RunResults, b: RunResults) -> list[str]:
    sa, sb = a.spec.model_dump(exclude_none=True), b.spec.model_dump(exclude_none=True)
    return [key for key in sorted(set(sa) | set(sb)) if sa.get(key) != sb.get(key)]


def cell_values(results: RunResults, relative_to: str | None = None) -> dict[tuple[str, str], list[float]]:
    """Each cell's seconds per step's worth of work, one value per whole repeat; with
    ``relative_to``, each divided by that backend's in the same round of the same config (the
    backend's own cell left out), which cancels whatever slowed or sped up the whole round."""
    workload = workload_named(results.spec.workload)
    if not isinstance(workload, BackendsWorkload) or not isinstance(results.spec, EvaluatorSpec):
        raise PtregError(
            f"run {results.attempt}/{results.run_id} compares arms ({results.spec.workload}): across runs, compare and "
            "history read runs of backends for now; its arms are compared within the run (`ptreg show`)",
            EXIT_UNUSABLE,
        )
    seconds = {(c.config, c.backend): workload.repeat_seconds(results.spec, c) for c in results.cells}
    found = {}
    for (config, backend), by_round in seconds.items():
        if relative_to is None:
            values = list(by_round.values())
        elif backend == relative_to:
            continue
        else:
            theirs = seconds.get((config, relative_to), {})
            values = [v / theirs[r] for r, v in by_round.items() if theirs.get(r)]
        if values:
            found[(config, backend)] = values
    return found


@dataclass
class CellShift:
    config: str
    backend: str
    a_seconds: float | None  # median over repeats (a ratio to the --relative-to backend, with one)
    b_seconds: float | None
    a_repeats: int
    b_repeats: int
    ratio: float | None = None  # B over A, of time per step: above 1 is slower
    low: float | None = None
    high: float | None = None
    p: float | None = None
    q: float | None = None  # after the false-discovery adjustment across the comparison's cells
    verdict: str = "unknown"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Comparison:
    a: FoundRun
    b: FoundRun
    threshold: float
    across_evaluators: bool
    spec_differences: list[str]
    machine_differences: list[str]
    drift: float
    error_term: str
    relative_to: str | None = None  # each cell's time as a ratio to this backend's, round by round
    cells: list[CellShift] = field(default_factory=list)
    metrics: list[MetricShift] = field(default_factory=list)  # runs of arms: each arm's metrics

    @property
    def same_machine(self) -> bool:
        return not self.machine_differences

    def moved(self, verdict: str) -> int:
        return sum(c.verdict == verdict for c in self.cells) + sum(m.verdict == verdict for m in self.metrics)

    @property
    def regressed(self) -> int:
        """Cells slower, or arms' metrics worse, in B."""
        return self.moved("slower") + self.moved("worse")

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a.label,
            "b": self.b.label,
            "evaluator_a": self.a.results.evaluator,
            "evaluator_b": self.b.results.evaluator,
            "across_evaluators": self.across_evaluators,
            "spec_differences": self.spec_differences,
            "same_machine": self.same_machine,
            "machine_differences": self.machine_differences,
            "threshold": self.threshold,
            "false_discovery_rate": FALSE_DISCOVERY_RATE,
            "drift": self.drift,
            "error_term": self.error_term,
            "relative_to": self.relative_to,
            "slower": self.moved("slower"),
            "faster": self.moved("faster"),
            "worse": self.moved("worse"),
            "better": self.moved("better"),
            "cells": [c.to_json() for c in self.cells],
            "metrics": [m.to_json() for m in self.metrics],
        }


def history(root: Path, like: FoundRun, leave_out: FoundRun | None = None) -> list[FoundRun]:
    """Every complete run under the same frozen evaluator on the same machine as ``like``,
    oldest first (``leave_out`` excepted). Runs whose files cannot be read are passed over."""
    same: list[FoundRun] = []
    for folder in _runs(root):
        try:
            run = _read(root, folder)
        except PtregError:
            continue
        if leave_out is not None and run.folder == leave_out.folder:
            continue
        if (
            run.results.status == "complete"
            and run.results.evaluator_sha256 == like.results.evaluator_sha256
            and machine(run.environment) == machine(like.environment)
            and None not in machine(run.environment).values()
        ):
            same.append(run)
    return sorted(same, key=lambda r: r.results.started_at)


def compare(
    root: Path,
    a_ref: str,
    b_ref: str,
    *,
    threshold: float = 0.05,
    across_evaluators: bool = False,
    relative_to: str | None = None,
) -> Comparison:
    """Run B against run A, cell by cell (see the module's text); with ``relative_to``, each
    cell's time as a ratio to that backend's in the same round."""
    if not 0 < threshold < 1:
        raise PtregError(
            f"--threshold must be between 0 and 1 (a fraction such as 0.05), not {threshold}", EXIT_UNUSABLE
        )
    a, b = find_run(root, a_ref), find_run(root, b_ref)
    if a.folder == b.folder:
        raise PtregError(f"{a.label} and {b.label} are the same run; give two runs to compare", EXIT_UNUSABLE)
    differing = spec_differences(a.results, b.results)
    same_evaluator = a.results.evaluator_sha256 is not None and a.results.evaluator_sha256 == b.results.evaluator_sha256
    if not same_evaluator and not across_evaluators:
        raise PtregError(
            f"{a.label} ({a.results.evaluator}) and {b.label} ({b.results.evaluator}) were measured under different "
            f"evaluators; these fields differ: {', '.join(differing) or 'the evaluator code version'}; "
            "--across-evaluators compares the cells that agree",
            EXIT_CHECK_FAILED,
        )
    if relative_to is not None:
        for run in (a, b):
            if relative_to not in run.results.spec.arm_names:
                raise PtregError(
                    f"--relative-to {relative_to!r}: {run.label} has no such backend "
                    f"(its backends: {', '.join(run.results.spec.arm_names)})",
                    EXIT_UNUSABLE,
                )
    if is_arms_run(a.results) or is_arms_run(b.results):
        return _compare_arms(a, b, threshold, same_evaluator, differing, relative_to)
    drift, term = _error_term(root, a, b, relative_to)
    comparison = Comparison(
        a, b, threshold, not same_evaluator, differing, machine_differences(a, b), drift, term, relative_to
    )
    plan_agrees = all(getattr(a.results.spec, k, None) == getattr(b.results.spec, k, None) for k in STEP_PLAN)
    values_a, values_b = cell_values(a.results, relative_to), cell_values(b.results, relative_to)
    keys = [k for k in values_a if k in values_b] if plan_agrees else []
    for config, backend in keys:
        va, vb = values_a[(config, backend)], values_b[(config, backend)]
        cell = CellShift(config, backend, statistics.median(va), statistics.median(vb), len(va), len(vb))
        found = shift(va, vb, drift, threshold)
        if found is not None:
            cell.ratio, cell.low, cell.high, cell.p = found.ratio, found.low, found.high, found.p
        comparison.cells.append(cell)
    _verdicts(comparison)
    return comparison


def _compare_arms(
    a: FoundRun, b: FoundRun, threshold: float, same_evaluator: bool, differing: list[str], relative_to: str | None
) -> Comparison:
    """Runs of arms: each (arm, metric) in its own terms (``arms_comparison.py``)."""
    if not (is_arms_run(a.results) and is_arms_run(b.results)):
        raise PtregError(f"{a.label} and {b.label}: one compares arms and the other backends", EXIT_UNUSABLE)
    if relative_to is not None:
        raise PtregError("--relative-to takes a backend; runs of arms compare each arm in its own terms", EXIT_UNUSABLE)
    machines = machine_differences(a, b)
    term = (
        "differences paired by item or by round (the seeds agree under one evaluator); ratios with each run's "
        f"spread plus the floor of {100 * DRIFT_FLOOR:g}% between-run drift"
    )
    comparison = Comparison(a, b, threshold, not same_evaluator, differing, machines, DRIFT_FLOOR, term)
    comparison.metrics = metric_shifts(
        a.results, b.results, drift=DRIFT_FLOOR, threshold=threshold, same_machine=not machines
    )
    return comparison


def _error_term(root: Path, a: FoundRun, b: FoundRun, relative_to: str | None) -> tuple[float, str]:
    """The drift a cell's center shows between runs: from this evaluator's history on this
    machine, or the floor."""
    earlier = history(root, a, leave_out=b)
    if len(earlier) >= 3:
        per_run = [cell_values(run.results, relative_to) for run in earlier]
        keys = set.intersection(*(set(v) for v in per_run))
        estimates = [d for key in keys if (d := between_run_drift([v[key] for v in per_run])) is not None]
        if estimates:
            drift = statistics.median(estimates)
            return drift, (
                f"each run's spread over repeats, plus a between-run drift of {100 * drift:.1f}% (the 90% upper "
                f"bound of its estimate from {len(earlier)} complete runs under this evaluator on this machine)"
            )
    return DRIFT_FLOOR, (
        f"each run's spread over repeats, plus the floor of {100 * DRIFT_FLOOR:g}% between-run drift: fewer than 3 "
        f"complete runs under this evaluator on this machine ({len(earlier)}) to estimate it from"
    )


def _verdicts(comparison: Comparison) -> None:
    """Slower or faster only when the adjusted p-value says so at the false discovery rate;
    no verdict at all across machines."""
    tested = [c for c in comparison.cells if c.p is not None]
    for cell, q in zip(tested, false_discovery([c.p for c in tested if c.p is not None]), strict=True):
        cell.q = q
    for cell in comparison.cells:
        if cell.p is None:
            cell.verdict = "unknown: fewer than 2 whole repeats on a side"
        elif not comparison.same_machine:
            cell.verdict = "not comparable: different machines"
        elif cell.q is not None and cell.q < FALSE_DISCOVERY_RATE:
            cell.verdict = "slower" if (cell.ratio or 1.0) > 1 else "faster"
        else:
            cell.verdict = "no difference resolved"


@dataclass
class HistoryRow:
    """One cell of one run in an evaluator's history, and how it stands to the same cell of the
    first run on the same machine (B over A, with the drift floor: an orientation, not a test)."""

    run: FoundRun
    config: str
    backend: str
    seconds: float  # median over whole repeats, per step's worth of work
    low: float | None
    high: float | None
    repeats: int
    versus_first: tuple[float, float, float] | None = None  # ratio, low, high

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run.label,
            "started_at": self.run.results.started_at,
            "evaluator": self.run.results.evaluator,
            "config": self.config,
            "backend": self.backend,
            "seconds": self.seconds,
            "ci": None if self.low is None else [self.low, self.high],
            "repeats": self.repeats,
            "versus_first": None if self.versus_first is None else list(self.versus_first),
        }


def _evaluators(complete: list[FoundRun], evaluator: str) -> set[str]:
    """The frozen evaluators ``evaluator`` names: one ``name@hash``, or every hash of a name."""
    refs = {r.results.evaluator for r in complete if r.results.evaluator is not None}
    wanted = {e for e in refs if e == evaluator or e.split("@")[0] == evaluator}
    if len(wanted) > 1:
        raise PtregError(f"evaluator name {evaluator!r} is ambiguous: give one of {', '.join(sorted(wanted))}")
    if not wanted:
        close = difflib.get_close_matches(evaluator, sorted(refs), n=3, cutoff=0.4)
        hint = f" (did you mean: {', '.join(close)}?)" if close else ""
        raise PtregError(f"no complete run under evaluator {evaluator!r}{hint}")
    return wanted


def history_runs(
    root: Path,
    evaluator: str | None = None,
    attempt: str | None = None,
    unreadable: Callable[[str], None] | None = None,
) -> list[FoundRun]:
    """Every complete run under one frozen evaluator (``name@hash``, a name frozen once, or the
    evaluator of an attempt's runs), oldest first. A run that cannot be read is told to
    ``unreadable`` (why, naming its file) and left out."""
    complete: list[FoundRun] = []
    for folder in _runs(root):
        try:
            run = _read(root, folder)
        except PtregError as exc:
            if unreadable is not None:
                unreadable(exc.message)
            continue  # a history reads what it can
        if run.results.status == "complete" and run.results.evaluator is not None:
            complete.append(run)
    if attempt is not None:
        wanted = {r.results.evaluator for r in complete if r.results.attempt == attempt}
        if not wanted:
            _known_attempt(root, attempt)  # an id that names no attempt says so, with the closest
            raise PtregError(f"{attempt} has no complete run in {root / RUNS_DIR}")
    else:
        assert evaluator is not None
        wanted = set(_evaluators(complete, evaluator))
    chosen = sorted((r for r in complete if r.results.evaluator in wanted), key=lambda r: r.results.started_at)
    return chosen


def evaluator_history(
    root: Path,
    evaluator: str | None = None,
    attempt: str | None = None,
    unreadable: Callable[[str], None] | None = None,
) -> list[HistoryRow]:
    """Every complete run under one frozen evaluator, oldest first (``history_runs``), cell by
    cell, each against the same cell of the first of those runs on the same machine."""
    chosen = [r for r in history_runs(root, evaluator, attempt, unreadable) if not is_arms_run(r.results)]
    rows: list[HistoryRow] = []
    first: dict[tuple[str, str, str], list[float]] = {}
    for run in chosen:
        where = repr(sorted(machine(run.environment).items()))
        for (config, backend), values in cell_values(run.results).items():
            ci = center_interval(values)
            row = HistoryRow(
                run,
                config,
                backend,
                statistics.median(values),
                ci.low if ci else None,
                ci.high if ci else None,
                len(values),
            )
            key = (where, config, backend)
            if key in first:
                found = shift(first[key], values, DRIFT_FLOOR, 0.05)
                if found is not None:
                    row.versus_first = (found.ratio, found.low, found.high)
            else:
                first[key] = values
            rows.append(row)
    return rows


def arms_history(root: Path, evaluator: str | None = None, attempt: str | None = None) -> list[MetricHistoryRow]:
    """The same runs when they compare arms: each arm's metrics, run by run."""
    chosen = [r for r in history_runs(root, evaluator, attempt) if is_arms_run(r.results)]
    return metric_history([(r.label, r.results) for r in chosen])
