"""The analysis plan decided on the registry as it holds it: the one evaluator of a plan, which
`conclude`, the gate, `show`, `list`, `next`, the site and MCP all ask.

The plan names its deciding runs: the first complete run, or the first N complete runs pooled.
Runs after those are counted and shown, and never read. A pool is decided as one longer run:
each run's rounds stay paired within it (renumbered after the runs before it), and its
workload summarises and compares the pooled samples as it does a run's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.workloads.arms import ArmsWorkload
from ..engine.workloads.discovery import spec_problem, workload_named
from ..errors import PtregError
from ..records.analysis_plan import Plan, PlanStatus, status_of
from ..records.attempt import Attempt, RunRef
from ..records.continuation import counted_once
from ..records.decision import Decision, decide
from ..records.evaluator import ArmsSpec
from ..records.run_results import RunResults, run_is_decisive, undecisive
from ..store.runs import read_results, run_folder


def complete_runs(attempt: Attempt) -> list[RunRef]:
    """The attempt's complete runs, in the order they were linked, each counted once (a run
    continued by another is counted in its continuation)."""
    return [r for r in counted_once(attempt.runs or []) if r.status == "complete"]


def deciding_refs(attempt: Attempt) -> tuple[list[RunRef], list[RunRef]]:
    """The runs that decide (none until there are as many complete runs as the plan pools), and
    the complete runs after them, which are counted and never read. Without a plan, the latest
    complete run decides a condition, as it always has."""
    complete = complete_runs(attempt)
    if attempt.plan is None:
        return complete[-1:], []
    wanted = attempt.plan.runs
    if len(complete) < wanted:
        return [], complete
    return complete[:wanted], complete[wanted:]


def pooled(runs: list[RunResults]) -> RunResults:
    """Several runs of one evaluator as one: the samples of each cell, each run's rounds
    renumbered after the runs before it, summarised and compared by the run's workload."""
    first = runs[0]
    workload = workload_named(first.spec.workload)
    cells = []
    offset = 0
    keyed: dict[tuple[str, str], list[Any]] = {}
    for results in runs:
        width = 0
        for cell in results.cells:
            samples = [*(cell.step_samples or ()), *(cell.kernel_samples or ()), *(cell.metric_samples or ())]
            width = max([width, *(s.repeat + 1 for s in samples)])
            keyed.setdefault((cell.backend, cell.config), []).extend(
                s.model_copy(update={"repeat": s.repeat + offset}) for s in samples
            )
        offset += width
    for cell in first.cells:
        status = "measured" if all(_status(r, cell.backend, cell.config) == "measured" for r in runs) else "failed"
        blank = cell.model_copy(
            update={
                name: None
                for name in type(cell).model_fields
                if name not in ("backend", "config", "status", "reason", "worker")
            }
            | {"status": status}
        )
        samples = keyed.get((cell.backend, cell.config), [])
        if isinstance(workload, ArmsWorkload):  # a pool of older runs is decided as they were recorded
            workload.summarize(first.spec, blank, samples, results_version=first.results_version)
        else:
            workload.summarize(first.spec, blank, samples)
        cells.append(blank)
    if isinstance(workload, ArmsWorkload):
        workload.compare(first.spec, cells, first.ratio_roles, results_version=first.results_version)
    else:
        workload.compare(first.spec, cells, first.ratio_roles)
    return first.model_copy(update={"cells": cells})


def with_workload_metrics(results: RunResults) -> RunResults:
    """The results with their workload's own metrics declared beside the evaluator's, so that a
    verdict knows which way is better for a metric a plugin declares (``ms`` of a workload, not
    of its spec); in memory only. A workload that cannot be loaded here adds nothing."""
    spec = results.spec
    if not isinstance(spec, ArmsSpec) or spec_problem(spec) is not None:
        return results
    own = {k: v for k, v in workload_named(spec.workload).metrics.items() if k not in spec.metrics}
    if not own:
        return results
    return results.model_copy(update={"spec": spec.model_copy(update={"metrics": {**own, **spec.metrics}})})


def _status(results: RunResults, backend: str, config: str) -> str | None:
    return next((c.status for c in results.cells if c.backend == backend and c.config == config), None)


@dataclass
class Deciding:
    """What a plan or a condition is decided on: one run's results, or a pool of several."""

    refs: list[RunRef]
    later: list[RunRef]
    results: RunResults | None
    why: str | None = None  # why there are no results to decide on
    unreadable: bool = False  # a run exists whose files cannot be read

    @property
    def label(self) -> str:
        ids = [r.run_id for r in self.refs]
        return ids[0] if len(ids) == 1 else " + ".join(ids) + " (pooled)"


def deciding(root: Path, attempt: Attempt) -> Deciding:
    """The results the attempt's plan (or, without one, its condition) is decided on."""
    refs, later = deciding_refs(attempt)
    if not refs:
        if attempt.plan is not None and attempt.plan.runs > 1:
            have = len(complete_runs(attempt))
            why = f"{attempt.id} has {have} complete run(s) of the {attempt.plan.runs} its plan pools"
        else:
            why = f"{attempt.id} has no complete run"
        return Deciding(refs, later, None, why)
    found = []
    for ref in refs:
        try:
            results = read_results(run_folder(root, attempt.id, ref.run_id), root)
        except PtregError as exc:
            why = f"run {ref.run_id} of {attempt.id} cannot be read: {exc.message}"
            return Deciding(refs, later, None, why, unreadable=True)
        if not run_is_decisive(results):  # its inputs changed under it: it decides nothing
            return Deciding(refs, later, None, undecisive(results))
        found.append(with_workload_metrics(results))
    if len(found) == 1:
        return Deciding(refs, later, found[0])
    try:
        results = pooled(found)
    except PtregError as exc:
        return Deciding(refs, later, None, f"the runs of {attempt.id} cannot be pooled: {exc.message}")
    return Deciding(refs, later, results.model_copy(update={"run_id": None}))


@dataclass
class PlanOutcome:
    """A plan decided: the status its rules give, which rule decided it, on which runs."""

    plan: Plan
    status: PlanStatus
    because: str
    on: Deciding
    worked: Decision | None = None
    regressed: Decision | None = None
    readout: list[str] = field(default_factory=list)

    @property
    def runs(self) -> list[str]:
        return [r.run_id for r in self.on.refs] if self.on.results is not None else []

    def runs_text(self) -> str:
        """How many runs the attempt has and which decide, e.g. '3 runs; the plan decides on the first'."""
        total = len(self.on.refs) + len(self.on.later)
        decides = self.plan.deciding().replace("the first complete run", "the first")
        shown = f"{total} complete run{'s' if total != 1 else ''}; the plan decides on {decides}"
        if self.on.later and self.on.results is not None:
            shown += f" ({len(self.on.later)} later run(s) counted, not read)"
        return shown

    def summary(self) -> str:
        return f"{self.status}: {self.because}"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "because": self.because,
            "runs": self.runs,
            "later_runs": [r.run_id for r in self.on.later],
            "readout": self.readout,
            "worked_if": self.worked.to_json() if self.worked else None,
            "regressed_if": self.regressed.to_json() if self.regressed else None,
        }


def _readout(flag: str, decision: Decision, label: str) -> str:
    found = "; ".join(c.text for c in decision.comparisons)
    return f"{flag} {decision.verdict}: {found} on run {label}"


def decide_plan(root: Path, attempt: Attempt) -> PlanOutcome | None:
    """The attempt's plan decided on its deciding runs as the registry holds them; None when
    the attempt has no plan. Without deciding results the plan cannot decide: inconclusive."""
    plan = attempt.plan
    if plan is None:
        return None
    return plan_outcome(plan, deciding(root, attempt))


def plan_outcome(plan: Plan, on: Deciding) -> PlanOutcome:
    """The plan decided on the results it is given: its two rules, then the status they give
    in the plan's order. Without results the plan cannot decide: inconclusive."""
    if on.results is None:
        return PlanOutcome(plan, "inconclusive", f"nothing to decide on: {on.why}", on, readout=[])
    margins = plan.margins or {}
    worked = decide(plan.worked_if.tree, on.results, margins)
    regressed = decide(plan.regressed_if.tree, on.results, margins) if plan.regressed_if is not None else None
    status, because = status_of(worked.truth, regressed.truth if regressed else None, regressed is not None)
    readout = [_readout("worked-if", worked, on.label)]
    if regressed is not None:
        readout.append(_readout("regressed-if", regressed, on.label))
    return PlanOutcome(plan, status, because, on, worked, regressed, readout)
