"""The registry's rules beyond the JSON Schema, over records already read: all checked and
all reported in one pass. Nothing here reads a file; the checks that do (sources, frozen
evaluators, run folders, leftovers) are in ``operations/validate.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from ..text import shorten
from .analysis_plan import CONSISTENT, plan_digest
from .attempt import (
    ALWAYS_KNOWN,
    INFRASTRUCTURE_KIND,
    KNOWN_ONCE_TRIED,
    RESERVED_IDS,
    SHAPE_FIELDS,
    STATUSES_NEEDING_REASON,
    Attempt,
    RegistryMeta,
)
from .continuation import continued_twice, counted_once
from .graph import find_cycles, lineage_root
from .problems import Problem, pointer_join, shown_id
from .registry import Record, Registry

# problem(rule, field, message, *more pointer parts) for one record
ProblemAt = Callable[..., Problem]


def check_records(
    registry: Registry, more: Callable[[Record], Iterable[Problem]] | None = None, *, strict: bool = False
) -> list[Problem]:
    """Every problem of the registry's records: those found while reading them, then the rules;
    ``more`` adds a caller's own checks of each valid record, reported beside its rules.
    ``strict`` holds records of older formats to the whole record (see ``check_attempt``)."""
    problems = list(registry.problems)
    problems.extend(duplicate_ids(registry.records))
    valid = [r for r in registry.records if r.attempt is not None]
    known_ids = {r.raw_id for r in registry.records if r.raw_id is not None}
    for record in valid:
        problems.extend(check_attempt(record, registry.meta, known_ids, strict=strict))
        if more is not None:
            problems.extend(more(record))
    problems.extend(_cycles(valid))
    problems.extend(_tracking_scope(valid))
    return problems


def duplicate_ids(records: list[Record]) -> Iterator[Problem]:
    """One problem for each record whose id an earlier record already has."""
    first_seen: dict[str, Record] = {}
    for record in records:
        rid = record.raw_id
        if rid is None:
            continue
        if rid in first_seen:
            other = first_seen[rid]
            yield Problem(
                "unique-id",
                f"duplicate id {shorten(rid)} (first at {_where(other)})",
                shown_id(rid),
                pointer_join(record.pointer, "id"),
                record.file,
            )
        else:
            first_seen[rid] = record


def _where(record: Record) -> str:
    if record.file and record.pointer:
        return f"{record.file}#{record.pointer}"
    return record.file or record.pointer


def problem_at(record: Record) -> ProblemAt:
    """A maker of problems that point into ``record``'s valid attempt."""
    attempt = record.attempt
    assert attempt is not None

    def problem(rule: str, field: str, message: str, *more: object) -> Problem:
        return Problem(rule, message, attempt.id, pointer_join(record.pointer, field, *more), record.file)

    return problem


def check_attempt(
    record: Record, meta: RegistryMeta, known_ids: set[str], *, strict: bool = False
) -> Iterator[Problem]:
    """The rules one valid record must keep; ``conclude`` holds a verdict to the same ones.

    A field that the format a record was imported in did not have is unknown for that reason:
    a warning naming the origin, unless ``strict`` (``validate --strict``, and any record ptreg
    is about to rewrite) makes it the error a missing field otherwise is."""
    attempt = record.attempt
    assert attempt is not None
    problem = problem_at(record)
    if attempt.id in RESERVED_IDS:
        yield problem("id-reserved", "id", f"id {attempt.id!r} is reserved for the registry's own file")
    for name in ALWAYS_KNOWN + (KNOWN_ONCE_TRIED if attempt.status != "not-tried" else ()):
        if getattr(attempt, name) is None:
            yield _unknown(
                attempt, problem, "unknown-field", name, f"{name} is unknown; a complete record states it", strict
            )
    yield from _reason(attempt, problem, strict)
    yield from _vocabulary(attempt, meta, problem)
    yield from _varied(attempt, known_ids, problem)
    yield from _continue_if(attempt, problem)
    yield from _plan(attempt, problem)
    yield from _continuations(attempt, problem)
    if attempt.kind == INFRASTRUCTURE_KIND:
        for name in SHAPE_FIELDS:
            if getattr(attempt, name) is not None:
                yield problem("infrastructure-shape", name, f"infrastructure attempts carry no {name}")
    if attempt.evidence_sources is not None and not attempt.evidence_sources:
        yield problem("evidence-sources", "evidence_sources", "evidence_sources is empty; name at least one source")


def _unknown(attempt: Attempt, problem: ProblemAt, rule: str, name: str, message: str, strict: bool) -> Problem:
    """The problem of an unknown field: an error, or a warning naming the origin when the
    record's own format had no such field."""
    origin = attempt.origin
    if origin is None or not attempt.lacks(name):
        return problem(rule, name, message)
    # a schema_version 2 file that lacks fields is one from before its kinds and vocabularies
    version = f"{origin.schema_version}" + ("" if origin.schema_version == 1 else " (before kinds and vocabularies)")
    said = f"imported from schema_version {version}: no {name}, a field that format did not have"
    if strict:
        return problem(rule, name, f"{said}; a complete record states it")
    return replace(problem(rule, name, f"{said}; `validate --strict` makes this an error"), severity="warning")


def _reason(attempt: Attempt, problem: ProblemAt, strict: bool = False) -> Iterator[Problem]:
    """A status short of worked says why, and how sure that is; `exact` rests on a complete run."""
    confidence = attempt.failure_reason_confidence
    if attempt.status in STATUSES_NEEDING_REASON:
        # lesson and next_action are required of every tried attempt (unknown-field).
        if attempt.failure_reason is None:
            yield _unknown(
                attempt,
                problem,
                "needs-reason",
                "failure_reason",
                f"status {attempt.status!r} requires failure_reason",
                strict,
            )
        if confidence == "not-applicable":
            yield problem(
                "confidence",
                "failure_reason_confidence",
                f"status {attempt.status!r} needs a confidence other than 'not-applicable'",
            )
    elif attempt.failure_reason is None and confidence not in (None, "not-applicable"):
        yield problem(
            "confidence",
            "failure_reason_confidence",
            f"status {attempt.status!r} without a failure_reason uses 'not-applicable', not {confidence!r}",
        )
    if attempt.runs and confidence == "exact" and not any(r.status == "complete" for r in attempt.runs):
        runs = ", ".join(f"{r.run_id} {r.status}" for r in attempt.runs)
        yield problem(
            "run",
            "failure_reason_confidence",
            f"confidence 'exact' needs a complete run, and none of the linked runs is ({runs})",
        )


def _varied(attempt: Attempt, known_ids: set[str], problem: ProblemAt) -> Iterator[Problem]:
    if attempt.varied_from is not None:
        if attempt.varied_from not in known_ids:
            yield problem("varied-from", "varied_from", f"varied_from {attempt.varied_from!r} names no attempt")
        if attempt.varied is None:
            yield problem("varied-from", "varied", "varied_from needs `varied`: say what was varied")
    elif attempt.varied is not None:
        yield problem("varied-from", "varied", "`varied` without varied_from: name the attempt it varies")


def _continue_if(attempt: Attempt, problem: ProblemAt) -> Iterator[Problem]:
    """A condition decides a disposition, on a complete run of the attempt it belongs to."""
    condition = attempt.continue_if
    if condition is None:
        return
    if attempt.next_action is None:
        yield problem("continue-if", "continue_if", "continue_if needs the next_action it decides")
    complete = [r.run_id for r in attempt.runs or () if r.status == "complete"]
    if condition.run not in complete:
        yield problem(
            "continue-if",
            "continue_if",
            f"continue_if was checked against run {condition.run!r}, which is not a complete run of this attempt",
            "run",
        )


def _continuations(attempt: Attempt, problem: ProblemAt) -> Iterator[Problem]:
    """A run is continued once (``continuation.py``): two runs that continue the same one would
    both carry its samples (two clones resumed it, then were merged); and a run continues
    another run of this attempt, never itself."""
    runs = attempt.runs or []
    linked = {r.run_id for r in runs}
    for continued, by in continued_twice(runs).items():
        yield problem(
            "continued-twice",
            "runs",
            f"runs {' and '.join(by)} both continue run {continued}, so its samples would count twice; keep one "
            "(move the other's folder away and unlink it)",
        )
    for index, run in enumerate(runs):
        if run.continues is not None and run.continues not in linked:
            yield problem(
                "continues",
                "runs",
                f"run {run.run_id} continues run {run.continues}, which is not a run of this attempt",
                index,
                "continues",
            )


def _plan(attempt: Attempt, problem: ProblemAt) -> Iterator[Problem]:
    """The plan is the one admitted, and the status is its decision, or says why not."""
    plan, admission, decision = attempt.plan, attempt.admission, attempt.plan_decision
    kept = admission.plan_sha256 if admission is not None else None
    if plan is None:
        if kept is not None:
            yield problem(
                "plan-integrity",
                "plan",
                "the analysis plan admitted with this attempt is gone; restore it from version control",
            )
        for name in ("plan_decision", "deviation"):
            if getattr(attempt, name) is not None:
                yield problem("plan-decision", name, f"{name} without an analysis plan")
        return
    if admission is not None and kept is None:
        yield problem(
            "plan-integrity",
            "plan",
            "the analysis plan was added after admission (the admission keeps no digest of a plan); "
            "a plan is registered with the proposal, before any number",
        )
    elif kept is not None and plan_digest(plan) != kept:
        yield problem(
            "plan-integrity",
            "plan",
            f"the analysis plan was edited after admission (sha256 {plan_digest(plan)[:12]}, admitted "
            f"{kept[:12]}); restore it from version control, or propose a new attempt with the new plan",
        )
    if attempt.status == "not-tried":
        for name in ("plan_decision", "deviation"):
            if getattr(attempt, name) is not None:
                yield problem("plan-decision", name, f"a not-tried attempt has no {name}")
        return
    if decision is None:
        yield problem(
            "plan-decision",
            "plan_decision",
            f"status {attempt.status!r} without the plan's decision; conclude it with `ptreg conclude {attempt.id}`",
        )
        return
    complete = {r.run_id for r in counted_once(attempt.runs or []) if r.status == "complete"}
    for index, run in enumerate(decision.runs):
        if run not in complete:
            yield problem(
                "plan-decision",
                "plan_decision",
                f"decided on run {run!r}, not a complete run of this attempt",
                "runs",
                index,
            )
    agrees = attempt.status in CONSISTENT[decision.status]
    if not agrees and attempt.deviation is None:
        yield problem(
            "plan-decision",
            "status",
            f"status {attempt.status!r} is not the plan's decision ({decision.status}: {decision.because}), "
            "and no deviation says why",
        )
    elif agrees and attempt.deviation is not None:
        yield problem(
            "plan-decision",
            "deviation",
            f"a deviation is recorded, but status {attempt.status!r} is the plan's decision",
        )


def _vocabulary(attempt: Attempt, meta: RegistryMeta, problem: ProblemAt) -> Iterator[Problem]:
    if attempt.kind is not None and attempt.kind not in meta.kind_vocabulary:
        yield problem("vocabulary", "kind", f"kind {attempt.kind!r} is not in the registry's kind_vocabulary")
    for index, method in enumerate(attempt.methods or ()):
        if method not in meta.method_vocabulary:
            yield problem("vocabulary", "methods", f"method {method!r} is not in the method_vocabulary", index)
    if attempt.objective is not None and attempt.objective not in meta.objective_vocabulary:
        yield problem("vocabulary", "objective", f"objective {attempt.objective!r} is not in the objective_vocabulary")


def _cycles(records: list[Record]) -> Iterator[Problem]:
    by_id = {r.attempt.id: r for r in records if r.attempt is not None}
    for cycle in find_cycles({i: r.attempt.varied_from for i, r in by_id.items() if r.attempt is not None}):
        first = by_id[cycle[0]]
        yield Problem(
            "varied-from-cycle",
            "varied_from cycle: " + " -> ".join([*cycle, cycle[0]]),
            cycle[0],
            pointer_join(first.pointer, "varied_from"),
            first.file,
        )


def _tracking_scope(records: list[Record]) -> Iterator[Problem]:
    """One tracking issue scopes one lineage; a warning, since imported files may predate the rule."""
    attempts = [r.attempt for r in records if r.attempt is not None]
    by_id = {a.id: a for a in attempts}
    seen: dict[str, tuple[str, str]] = {}  # reference -> (lineage root, first attempt id)
    for record, attempt in zip(records, attempts, strict=True):
        reference = attempt.tracking_issue
        if reference is None:
            continue
        root = lineage_root(attempt.id, by_id)
        first = seen.setdefault(reference, (root, attempt.id))
        if first[0] != root:
            yield Problem(
                "tracking-issue-scope",
                f"tracking issue {reference} also scopes {first[1]}, of another lineage; one issue scopes one lineage",
                attempt.id,
                pointer_join(record.pointer, "tracking_issue"),
                record.file,
                severity="warning",
            )
