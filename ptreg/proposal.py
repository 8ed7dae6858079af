"""Proposing an attempt: build the not-tried record, show its precedents, pass it through the
gate, and write it (with its admission) only when every check holds.

Exit codes follow the rest of ptreg: a value that cannot be used at all (a malformed id, an
unknown evaluator or vocabulary term) is exit 2; a gate check that refuses is exit 1; in
both cases nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from . import __version__, tracking
from .errors import EXIT_CHECK_FAILED, PtregError
from .gate import GateReport, check_gate
from .jsonio import create_text_exclusive, dumps_pretty
from .lineage import ancestry
from .model import INFRASTRUCTURE_KIND, Admission, Attempt, Budget, GateCheck
from .precedents import Precedent, Shape, precedents
from .problems import flag_message
from .registry import Progress, Registry, check_id, load_directory, load_meta, record_path, registry_state


@dataclass
class ProposalInput:
    """What the proposer gave, as given (flags or prompts); nothing is filled in for them."""

    id: str
    name: str
    family: Optional[str] = None
    kind: Optional[str] = None
    question: Optional[str] = None
    hypothesis: Optional[str] = None
    varied_from: Optional[str] = None
    varied: Optional[str] = None
    methods: list[str] = field(default_factory=list)
    bases: list[str] = field(default_factory=list)
    objective: Optional[str] = None
    data_rows: Optional[int] = None
    evaluator: Optional[str] = None
    budget_seconds: Optional[float] = None
    budget_steps: Optional[int] = None
    budget_repeats: Optional[int] = None
    budget_threads: Optional[int] = None
    budget_memory_mb: Optional[float] = None
    tracking_issue: Optional[str] = None
    answers_disposition: Optional[str] = None
    override_streak: Optional[str] = None
    source: Optional[str] = None


@dataclass
class Proposal:
    attempt: Attempt  # as it would be (or was) written
    report: GateReport
    precedents: list[Precedent]
    path: Optional[Path] = None  # set once written
    skipped: int = 0  # record files that could not be read or parsed, so were not compared

    @property
    def written(self) -> bool:
        return self.path is not None


def _blank_to_none(value: Optional[str]) -> Optional[str]:
    return value if value is not None and value.strip() else None


def _budget(given: ProposalInput) -> tuple[Optional[Budget], Optional[str]]:
    """The budget, or why the given values are not one (missing, zero, negative, absurd)."""
    values = {
        "wall_clock_seconds": given.budget_seconds,
        "max_timed_steps": given.budget_steps,
        "max_repeats": given.budget_repeats,
        "max_threads": given.budget_threads,
        "max_memory_mb": given.budget_memory_mb,
    }
    if given.budget_seconds is None:
        if any(v is not None for v in values.values()):
            return None, "the budget gives limits but no wall-clock seconds (--budget-seconds), which every budget needs"
        return None, None
    try:
        return Budget.model_validate({k: v for k, v in values.items() if v is not None}), None
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        flag = {
            "wall_clock_seconds": "--budget-seconds",
            "max_timed_steps": "--budget-steps",
            "max_repeats": "--budget-repeats",
            "max_threads": "--budget-threads",
            "max_memory_mb": "--budget-memory-mb",
        }[str(error["loc"][0])]
        return None, f"{flag} {error['input']!r} is refused: {error['msg'].lower()}"


def _check_vocabulary(given: ProposalInput, registry: Registry) -> None:
    meta = registry.meta
    where = f"{registry.source}/registry.json"
    if given.kind is not None and given.kind not in meta.kind_vocabulary:
        raise PtregError(f"--kind {given.kind!r} is not in the kind_vocabulary of {where} (one of: {', '.join(meta.kind_vocabulary)})")
    for method in given.methods:
        if method not in meta.method_vocabulary:
            raise PtregError(f"--method {method!r} is not in the method_vocabulary of {where}; add it there first")
    if given.objective is not None and given.objective not in meta.objective_vocabulary:
        raise PtregError(
            f"--objective {given.objective!r} is not in the objective_vocabulary of {where} (one of: {', '.join(meta.objective_vocabulary)})"
        )
    if given.kind == INFRASTRUCTURE_KIND:
        shaped = [flag for flag, value in (("--method", given.methods), ("--base", given.bases), ("--objective", given.objective),
                                          ("--data-rows", given.data_rows), ("--varied-from", given.varied_from)) if value]
        if shaped:
            raise PtregError(f"an infrastructure attempt carries no shape fields; drop {', '.join(shaped)} or choose another --kind")


def build_attempt(given: ProposalInput, root: Path) -> tuple[Attempt, Optional[str], Optional[str]]:
    """The not-tried record; with why the budget and the tracking issue, if given, are refused."""
    from .evaluator import resolve

    budget, budget_error = _budget(given)
    tracking_issue = _blank_to_none(given.tracking_issue)
    tracking_error = tracking.problem(tracking_issue) if tracking_issue is not None else None
    evaluator = None
    if _blank_to_none(given.evaluator) is not None:
        evaluator = resolve(root, given.evaluator.strip()).name[: -len(".json")]  # unknown name: exit 2
    raw: dict[str, Any] = {
        "id": given.id,
        "name": given.name,
        "family": _blank_to_none(given.family),
        "status": "not-tried",
        "failure_reason_confidence": "not-applicable",  # a proposal has no failure reason to be sure of
        "source": _blank_to_none(given.source),
        "kind": given.kind,
        "methods": list(given.methods) or None,
        "bases": list(given.bases) or None,
        "objective": given.objective,
        "data_rows": given.data_rows,
        "varied_from": _blank_to_none(given.varied_from),
        "varied": _blank_to_none(given.varied),
        "question": _blank_to_none(given.question),
        "hypothesis": _blank_to_none(given.hypothesis),
        "evaluator": evaluator,
        "budget": budget.model_dump(exclude_none=True) if budget is not None else None,
        "tracking_issue": tracking_issue if tracking_error is None else None,
        "answers_disposition": _blank_to_none(given.answers_disposition),
        "streak_override": _blank_to_none(given.override_streak),
    }
    try:
        attempt = Attempt.model_validate({k: v for k, v in raw.items() if v is not None})
    except ValidationError as exc:
        raise PtregError(flag_message(exc, given.id)) from None
    return attempt, budget_error, tracking_error


def propose(
    root: Path,
    given: ProposalInput,
    *,
    dry_run: bool = False,
    now: Optional[datetime] = None,
    progress: Optional[Progress] = None,
) -> Proposal:
    """Check the proposal against the registry at ``root`` and, when admitted, write it.

    The gate and the write happen under the registry lock, so that what the gate checked
    (a fresh id, an unused tracking issue) still holds when the record lands.
    """
    check_id(given.id)
    if dry_run:
        return _propose(root, given, dry_run=True, now=now, progress=progress)
    from .lock import registry_lock

    load_meta(root)  # a missing registry is refused before any lock file is made
    with registry_lock(root):
        return _propose(root, given, dry_run=False, now=now, progress=progress)


def _propose(
    root: Path, given: ProposalInput, *, dry_run: bool, now: Optional[datetime], progress: Optional[Progress]
) -> Proposal:
    registry = load_directory(root, progress)
    if given.id in {r.raw_id for r in registry.records} or record_path(root, given.id).exists():
        raise PtregError(f"attempt {given.id!r} already exists in {root}; choose another --id", EXIT_CHECK_FAILED)
    _check_vocabulary(given, registry)
    attempt, budget_error, tracking_error = build_attempt(given, root)
    others = registry.attempts
    report = check_gate(attempt, others, root, budget_error=budget_error, tracking_error=tracking_error)
    by_id = {a.id: a for a in others}
    lineage = [a.id for a in ancestry(attempt.varied_from, by_id)] if attempt.varied_from else []
    found = precedents(Shape.of(attempt, lineage), others)
    proposal = Proposal(attempt, report, found, skipped=sum(1 for r in registry.records if r.attempt is None))
    if not report.admitted or dry_run:
        return proposal
    admitted_at = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    admission = Admission(
        admitted_at=admitted_at,
        ptreg_version=__version__,
        registry_state=registry_state(root, len(registry.records)),
        checks=[GateCheck(check=c.check, outcome=c.outcome, detail=c.detail) for c in report.checks],
        precedents=[p.attempt.id for p in found],
    )
    proposal.attempt = attempt.model_copy(update={"admission": admission})
    path = record_path(root, attempt.id)
    try:
        create_text_exclusive(path, dumps_pretty(proposal.attempt.to_json_dict()))
    except FileExistsError:
        raise PtregError(f"attempt {attempt.id!r} was created by another process meanwhile; nothing written", EXIT_CHECK_FAILED) from None
    proposal.path = path
    return proposal
