"""Comparing runs: is run B slower than run A, cell by cell, and the history of one evaluator.

Runs are the unit. Repeats inside one run share that run's moment, and two runs an hour apart
do not; how far a cell's centre moves from run to run differs from cell to cell and cannot be
read off the repeats of one run. So each cell of B is judged against the centres of earlier
runs of the code A measured in that cell (its history: A and every complete run under the same
frozen evaluator on the same machine whose code identity for the cell equals A's, or the runs
named with ``--history``). Runs taken back to back share their session, so they are grouped
into batches by their times, and the batch is the unit: B's centre against the median of the
batches' centres, in units of their robust spread, with a tail calibrated for heavy-tailed
run effects (``engine/stats.py shift_from_history``). With fewer than ``MIN_HISTORY`` batches
no verdict is given, and the output says why and how many more runs would give one. The cells
of one comparison are many questions at once: their p-values are adjusted together (Holm's
step-down) before any cell is called slower or faster, so that an unchanged cell is flagged
in at most 5% of comparisons whatever the other cells did.

Only runs made under the same frozen evaluator are compared, unless asked to compare across
evaluators, and then only the cells whose workload, config, backend, threads and step plan
agree. Runs from different machines are compared too, but their differences are listed first
and no verdict is given: absolute times from two machines say nothing about the code.
"""

from __future__ import annotations

import difflib
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.comparison_rules import ADJUSTMENT, COUNTS_THRESHOLD, FAMILY_ERROR_RATE, TIMES_THRESHOLD
from ..engine.environment import known_differences, machine, measuring_environment, unknown_facts
from ..engine.stats import BATCH_GAP_SECONDS, RUNS_METHOD, center_interval
from ..engine.workloads import workload_named
from ..engine.workloads.base import BackendsWorkload, repeat_unit
from ..errors import CheckFailed, PtregError, UnknownAttempt, UnusableInput
from ..records.continuation import continued
from ..records.counting import counted_the_same_way
from ..records.evaluator import EvaluatorSpec
from ..records.run_results import RunResults
from ..store.directory import attempt_files, record_path
from ..store.evaluator_files import evaluator_files
from ..store.jsonio import read_json
from ..store.runs import ENVIRONMENT_FILE, RESULTS_FILE, RUNS_DIR, read_results
from .arms_comparison import MetricHistoryRow, MetricShift, is_arms_run, metric_history, metric_shifts
from .cell_verdicts import CellShift, HistoryRun, decide, judge_cell

# The verdicts that say whether B moved; every other ("no verdict: ...", "not comparable: ...",
# "unknown: ...") leaves the question open.
DECIDED = frozenset({"slower", "faster", "worse", "better", "no difference resolved"})
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


# Inside ``runs_read_once``: each run folder's reading (or the error it gave), by folder. A
# site build compares each run of an evaluator with the one before it, and every comparison
# reads every run of the registry for its history: read once, that is linear in the runs.
_READ_ONCE: ContextVar[dict[Path, FoundRun | PtregError] | None] = ContextVar("runs_read_once", default=None)


@contextmanager
def runs_read_once() -> Iterator[None]:
    """Within it, a run folder is read once and its reading reused: for a caller that reads
    many comparisons of a registry it does not change meanwhile (a site build)."""
    token = _READ_ONCE.set({})
    try:
        yield
    finally:
        _READ_ONCE.reset(token)


def _read(root: Path, folder: Path) -> FoundRun:
    seen = _READ_ONCE.get()
    if seen is None:
        return _read_folder(root, folder)
    if folder not in seen:
        try:
            seen[folder] = _read_folder(root, folder)
        except PtregError as exc:
            seen[folder] = exc
    known = seen[folder]
    if isinstance(known, PtregError):
        raise known
    return known


def _read_folder(root: Path, folder: Path) -> FoundRun:
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
            try:
                _known_attempt(root, reference)
            except UnusableInput as exc:  # the run asked for, and why: no such attempt at all
                raise UnusableInput(f"no run {reference!r} in {root / RUNS_DIR}: {exc.message}") from None
        if mine:
            complete = [run for run in (_read(root, f) for f in mine) if run.results.status == "complete"]
            if not complete:
                raise UnusableInput(f"{reference} has no complete run ({len(mine)} run(s) in all)")
            return complete[-1]
    close = difflib.get_close_matches(reference, labels + sorted({f.parent.name for f in folders}), n=3, cutoff=0.5)
    hint = f" (did you mean: {', '.join(close)}?)" if close else ""
    raise UnusableInput(f"no run {reference!r} in {root / RUNS_DIR}{hint}")


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
    """One line per property of the machines known on both sides to differ (``engine/environment.py``)."""
    return known_differences(a.environment, b.environment)


def spec_differences(a: RunResults, b: RunResults) -> list[str]:
    sa, sb = a.spec.model_dump(exclude_none=True), b.spec.model_dump(exclude_none=True)
    return [key for key in sorted(set(sa) | set(sb)) if sa.get(key) != sb.get(key)]


def cell_values(results: RunResults, relative_to: str | None = None) -> dict[tuple[str, str], list[float]]:
    """Each cell's seconds per step's worth of work, one value per whole repeat; with
    ``relative_to``, each divided by that backend's in the same round of the same config (the
    backend's own cell left out), which cancels whatever slowed or sped up the whole round."""
    workload = workload_named(results.spec.workload)
    if not isinstance(workload, BackendsWorkload) or not isinstance(results.spec, EvaluatorSpec):
        raise UnusableInput(
            f"run {results.attempt}/{results.run_id} compares arms ({results.spec.workload}): across runs, compare and "
            "history read runs of backends for now; its arms are compared within the run (`ptreg show`)",
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
class Comparison:
    a: FoundRun
    b: FoundRun
    threshold: float
    across_evaluators: bool
    spec_differences: list[str]
    machine_differences: list[str]
    method: str
    machine_unknowns: list[str] = field(default_factory=list)  # unknown on a side: shown, not a difference
    relative_to: str | None = None  # each cell's time as a ratio to this backend's, round by round
    unit: str = "seconds"  # of the cells' values: seconds, or instructions under the instructions timer
    named_history: bool = False  # the history was named with --history, not found by code identity
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

    @property
    def without_verdict(self) -> int:
        return sum(c.runs_needed > 0 for c in self.cells)

    @property
    def undecided(self) -> int:
        """Cells and arms' metrics given no verdict, whatever the reason (too short a history,
        machines known to differ, an unknown value): none of them rules a regression out."""
        return sum(c.verdict not in DECIDED for c in self.cells) + sum(m.verdict not in DECIDED for m in self.metrics)

    @property
    def decided(self) -> bool:
        """Whether the comparison says, for everything it compared, whether B moved: something
        compared, and each of it given a verdict. What a gate may pass on."""
        return bool(self.cells or self.metrics) and not self.undecided

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
            "machine_unknowns": self.machine_unknowns,
            "threshold": self.threshold,
            "adjustment": ADJUSTMENT,
            "family_error_rate": FAMILY_ERROR_RATE,
            "method": self.method,
            "relative_to": self.relative_to,
            "unit": self.unit,
            "named_history": self.named_history,
            "slower": self.moved("slower"),
            "faster": self.moved("faster"),
            "worse": self.moved("worse"),
            "better": self.moved("better"),
            "without_verdict": self.without_verdict,
            "undecided": self.undecided,
            "decided": self.decided,
            "cells": [c.to_json() for c in self.cells],
            "metrics": [m.to_json() for m in self.metrics],
        }


def each_once(runs: list[FoundRun]) -> list[FoundRun]:
    """The runs as they are counted (``records/continuation.py``): a run continued by another
    run of its attempt among them is left out, its samples being in the continuation."""
    by_attempt: dict[str | None, list[RunResults]] = {}
    for run in runs:
        by_attempt.setdefault(run.results.attempt, []).append(run.results)
    gone = {(a, r) for a, results in by_attempt.items() for r in continued(results)}
    return [r for r in runs if (r.results.attempt, r.results.run_id) not in gone]


def history(root: Path, like: FoundRun, leave_out: FoundRun | None = None) -> list[FoundRun]:
    """Every complete run under the same frozen evaluator on the same machine as ``like``,
    oldest first (``leave_out`` excepted), each counted once. Runs whose files cannot be read
    are passed over."""
    found: list[FoundRun] = []
    for folder in _runs(root):
        try:
            found.append(_read(root, folder))
        except PtregError:
            continue
    same = [r for r in each_once(found) if (leave_out is None or r.folder != leave_out.folder) and _comparable(r, like)]
    return sorted(same, key=lambda r: r.results.started_at)


def _comparable(run: FoundRun, like: FoundRun) -> bool:
    return (
        run.results.status == "complete"
        and run.results.evaluator_sha256 == like.results.evaluator_sha256
        and not known_differences(run.environment, like.environment)
    )


def _same_code(run: RunResults, a: RunResults, backend: str, relative_to: str | None) -> bool | None:
    """Whether ``run`` measured the code ``a`` did in a backend's cells (and, for ratios, in the
    backend they are taken to); unknown when either identity is."""
    for arm in (backend,) if relative_to is None else (backend, relative_to):
        mine, theirs = run.cell_code(arm), a.cell_code(arm)
        if mine is None or theirs is None:
            return None
        if mine != theirs:
            return False
    return True


def named_history(root: Path, a: FoundRun, b: FoundRun, references: list[str]) -> list[FoundRun]:
    """The runs ``--history`` names, each a complete run under A's evaluator on A's machine
    (neither B, nor A itself, which is always there): refused one by one otherwise."""
    runs: list[FoundRun] = []
    for reference in references:
        run = find_run(root, reference)
        if run.folder == b.folder:
            raise UnusableInput(f"--history {reference}: that is run B, the one under test")
        if run.folder == a.folder or any(run.folder == r.folder for r in runs):
            continue
        if not _comparable(run, a):
            raise UnusableInput(
                f"--history {reference}: {run.label} is not a complete run under {a.results.evaluator} on A's machine",
            )
        runs.append(run)
    return sorted(runs, key=lambda r: r.results.started_at)


def compare(
    root: Path,
    a_ref: str,
    b_ref: str,
    *,
    threshold: float | None = None,
    across_evaluators: bool = False,
    relative_to: str | None = None,
    history_refs: list[str] | None = None,
) -> Comparison:
    """Run B against run A, cell by cell (see the module's text); with ``relative_to``, each
    cell's time as a ratio to that backend's in the same round; with ``history_refs``, the
    history is those runs (and A) for every cell instead of the runs of A's code. Without a
    ``threshold``, 1% for instruction counts and 5% for times and arms' metrics."""
    if threshold is not None and not 0 < threshold < 1:
        raise UnusableInput(f"--threshold must be between 0 and 1 (a fraction such as 0.05), not {threshold}")
    a, b = find_run(root, a_ref), find_run(root, b_ref)
    if a.folder == b.folder:
        raise UnusableInput(f"{a.label} and {b.label} are the same run; give two runs to compare")
    differing = spec_differences(a.results, b.results)
    same_evaluator = a.results.evaluator_sha256 is not None and a.results.evaluator_sha256 == b.results.evaluator_sha256
    if not same_evaluator and not across_evaluators:
        raise CheckFailed(
            f"{a.label} ({a.results.evaluator}) and {b.label} ({b.results.evaluator}) were measured under different "
            f"evaluators; these fields differ: {', '.join(differing) or 'the evaluator code version'}; "
            "--across-evaluators compares the cells that agree",
        )
    if relative_to is not None:
        for run in (a, b):
            if relative_to not in run.results.spec.arm_names:
                raise UnusableInput(
                    f"--relative-to {relative_to!r}: {run.label} has no such backend "
                    f"(its backends: {', '.join(run.results.spec.arm_names)})",
                )
    if is_arms_run(a.results) or is_arms_run(b.results):
        if history_refs:
            raise UnusableInput("--history takes runs of backends; runs of arms compare in their own terms")
        return _compare_arms(
            root, a, b, TIMES_THRESHOLD if threshold is None else threshold, same_evaluator, differing, relative_to
        )
    counted = a.results.counted is not None or b.results.counted is not None
    if threshold is None:
        threshold = COUNTS_THRESHOLD if counted else TIMES_THRESHOLD
    if counted and history_refs:
        raise UnusableInput("--history: instruction counts are compared run against run, with no history")
    named = None if not history_refs else named_history(root, a, b, history_refs)
    # a count is compared only with a count taken the same way: any difference is one of the
    # machine's, and then no verdict is given
    counting = [f"counted: {d}" for d in counted_the_same_way(a.results.counted, b.results.counted)]
    comparison = Comparison(
        a,
        b,
        threshold,
        not same_evaluator,
        differing,
        machine_differences(a, b) + counting,
        COUNTS_METHOD if counted else METHOD,
        machine_unknowns=unknown_facts(a.environment, b.environment),
        relative_to=relative_to,
        unit=repeat_unit(a.results.spec),
        named_history=named is not None,
    )
    candidates = [] if counted else named if named is not None else history(root, a, leave_out=b)
    plan_agrees = all(getattr(a.results.spec, k, None) == getattr(b.results.spec, k, None) for k in STEP_PLAN)
    values_a, values_b = cell_values(a.results, relative_to), cell_values(b.results, relative_to)
    earlier = [(run, cell_values(run.results, relative_to)) for run in candidates if run.folder != a.folder]
    keys = [k for k in values_a if k in values_b] if plan_agrees else []
    for config, backend in keys:
        ours = [
            _history_run(run, values[(config, backend)])
            for run, values in earlier
            if (config, backend) in values
            and (named is not None or _same_code(run.results, a.results, backend, relative_to) is True)
        ]
        cell = judge_cell(
            config,
            backend,
            [_history_run(a, values_a[(config, backend)]), *ours],
            values_b[(config, backend)],
            threshold,
            counted,
        )
        cell.same_code = _same_code(b.results, a.results, backend, relative_to)
        comparison.cells.append(cell)
    decide(comparison.cells, comparison.same_machine)
    return comparison


def _history_run(run: FoundRun, values: list[float]) -> HistoryRun:
    return HistoryRun(run.label, values, run.results.started_at, run.results.finished_at)


METHOD = (
    f"batches of runs as the unit (runs less than {BATCH_GAP_SECONDS // 60} minutes apart are one batch): "
    "each cell's centre in B "
    f"(the median of its repeats) against the runs of A's code in that cell, {RUNS_METHOD}, two-sided at the "
    "threshold; the cells' p-values adjusted together (Holm)"
)


COUNTS_METHOD = (
    "instruction counts: each cell's repeats in B against A's (Welch's t on their logarithms, with an allowance "
    "of 0.1% between runs, since counts of the same code counted the same way do not drift), two-sided at the "
    "threshold; the cells' p-values adjusted together (Holm)"
)


def _compare_arms(
    root: Path,
    a: FoundRun,
    b: FoundRun,
    threshold: float,
    same_evaluator: bool,
    differing: list[str],
    relative_to: str | None,
) -> Comparison:
    """Runs of arms: each (arm, metric) in its own terms (``arms_comparison.py``)."""
    if not (is_arms_run(a.results) and is_arms_run(b.results)):
        raise UnusableInput(f"{a.label} and {b.label}: one compares arms and the other backends")
    if relative_to is not None:
        raise UnusableInput("--relative-to takes a backend; runs of arms compare each arm in its own terms")
    machines = machine_differences(a, b)
    term = (
        "differences paired by item or by round (the seeds agree under one evaluator); ratios (times, rates) "
        "with batches of runs as the unit, B's centre against the batches of runs of A's code for that arm, as "
        "backends' times are; every (arm, metric) adjusted together (Holm)"
    )
    comparison = Comparison(
        a,
        b,
        threshold,
        not same_evaluator,
        differing,
        machines,
        term,
        machine_unknowns=unknown_facts(a.environment, b.environment),
    )
    earlier = [r.results for r in history(root, a, leave_out=b) if r.folder != a.folder]
    comparison.metrics = metric_shifts(
        a.results, b.results, earlier=earlier, threshold=threshold, same_machine=not machines
    )
    return comparison


@dataclass
class HistoryRow:
    """One cell of one run in an evaluator's history, and how its median stands to the same
    cell's in the first run on the same machine: an orientation, not a test (``compare`` is)."""

    run: FoundRun
    config: str
    backend: str
    seconds: float  # median over whole repeats, per step's worth of work (instructions, when counted)
    low: float | None  # the 95% interval of the typical value over repeats
    high: float | None
    repeats: int
    versus_first: float | None = None  # this median over the first run's
    unit: str = "seconds"

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run.label,
            "started_at": self.run.results.started_at,
            "evaluator": self.run.results.evaluator,
            "config": self.config,
            "backend": self.backend,
            "seconds": self.seconds,
            "unit": self.unit,
            "ci": None if self.low is None else [self.low, self.high],
            "ci_of": "typical value (true and median)",
            "repeats": self.repeats,
            "versus_first": self.versus_first,
        }


def _evaluators(complete: list[FoundRun], evaluator: str) -> set[str]:
    """The frozen evaluators ``evaluator`` names: one ``name@hash``, or every hash of a name."""
    refs = {r.results.evaluator for r in complete if r.results.evaluator is not None}
    wanted = {e for e in refs if e == evaluator or e.split("@")[0] == evaluator}
    if len(wanted) > 1:
        raise UnusableInput(f"evaluator name {evaluator!r} is ambiguous: give one of {', '.join(sorted(wanted))}")
    if not wanted:
        close = difflib.get_close_matches(evaluator, sorted(refs), n=3, cutoff=0.4)
        hint = f" (did you mean: {', '.join(close)}?)" if close else ""
        raise UnusableInput(f"no complete run under evaluator {evaluator!r}{hint}")
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
    found: list[FoundRun] = []
    for folder in _runs(root):
        try:
            found.append(_read(root, folder))
        except PtregError as exc:
            if unreadable is not None:
                unreadable(exc.message)
            continue  # a history reads what it can
    complete = [r for r in each_once(found) if r.results.status == "complete" and r.results.evaluator is not None]
    if attempt is not None:
        wanted = {r.results.evaluator for r in complete if r.results.attempt == attempt}
        if not wanted:
            _known_attempt(root, attempt)  # an id that names no attempt says so, with the closest
            raise UnusableInput(f"{attempt} has no complete run in {root / RUNS_DIR}")
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
    cell, each median over the same cell's in the first of those runs on the same machine."""
    chosen = [r for r in history_runs(root, evaluator, attempt, unreadable) if not is_arms_run(r.results)]
    rows: list[HistoryRow] = []
    first: dict[tuple[str, str, str], float] = {}
    for run in chosen:
        where = repr(sorted(machine(run.environment).items())) + repeat_unit(run.results.spec)
        for (config, backend), values in cell_values(run.results).items():
            ci = center_interval(values, getattr(run.results.spec, "target_ci", None) is not None)
            row = HistoryRow(
                run,
                config,
                backend,
                statistics.median(values),
                ci.low if ci else None,
                ci.high if ci else None,
                len(values),
                unit=repeat_unit(run.results.spec),
            )
            key = (where, config, backend)
            if key in first:
                row.versus_first = row.seconds / first[key]
            else:
                first[key] = row.seconds
            rows.append(row)
    return rows


def arms_history(root: Path, evaluator: str | None = None, attempt: str | None = None) -> list[MetricHistoryRow]:
    """The same runs when they compare arms: each arm's metrics, run by run."""
    chosen = [r for r in history_runs(root, evaluator, attempt) if is_arms_run(r.results)]
    return metric_history([(r.label, r.results) for r in chosen])
