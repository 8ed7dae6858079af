"""Concluding an attempt: the verdict after its runs, held to the same rules ``validate`` applies.

An attempt with an analysis plan takes its status from the plan, decided on its deciding runs
(``views/plans.py``): a person writes the lesson and the next action, and a status other than
the plan's only with a deviation that says why, which is recorded. An attempt admitted before
plans existed is concluded with the status the person gives, as it always was.

The verdict states the disposition whole: its prose (``next_action``) and, when given, the
condition that decides it (``continue_if``), checked against the run the plan decides on (the
latest complete run, without a plan) before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..clock import utc_now
from ..errors import CheckFailed, UnusableInput
from ..gate.readmission import readmit_all, unresolved
from ..records.analysis_plan import CONSISTENT, PlanDecision
from ..records.arguments import invoked, named
from ..records.attempt import CONFIDENCES, STATUSES, Attempt, ContinueIf
from ..records.condition import render
from ..records.condition_grammar import parse
from ..records.decision import Decision, decide
from ..records.problems import flag_message
from ..records.registry import Record, Registry, ids_in
from ..records.rules import check_attempt
from ..store.directory import load_directory, load_meta, record_path, write_attempt
from ..store.locks import registry_lock, run_lock
from ..store.runs import check_folder
from ..store.vocabulary_files import refuse_old_layout
from ..views.plans import PlanOutcome, decide_plan, deciding
from .running import results_source, unlinked_runs, with_run


@dataclass(frozen=True)
class Verdict:
    """What the person concluding says: the outcome and, if they have more to say than the run
    does, evidence of their own."""

    status: str | None  # None: the plan's, for an attempt that has one
    lesson: str
    next_action: str
    failure_reason: str | None = None
    confidence: str | None = None
    evidence: str | None = None  # added after the evidence lines the runs wrote
    evidence_sources: tuple[str, ...] = ()
    continue_if: str | None = None  # the condition over the run results that decides next_action
    deviation: str | None = None  # why the status is not the plan's

    def check(self) -> None:
        """The verdict's own words, before any file is read: a known status and confidence, and
        no text given empty; each field named as the caller names it (``records/arguments.py``)."""
        if self.status is not None and self.status not in STATUSES:
            raise UnusableInput(f"{named('status')} {self.status!r} is not one of {', '.join(STATUSES)}")
        if self.confidence is not None and self.confidence not in CONFIDENCES:
            raise UnusableInput(f"{named('confidence')} {self.confidence!r} is not one of {', '.join(CONFIDENCES)}")
        for field_name in ("lesson", "next_action", "failure_reason", "evidence", "deviation"):
            value = getattr(self, field_name)
            if value is not None and not value.strip():
                raise UnusableInput(f"{named(field_name)} is empty; say it in words")


@dataclass(frozen=True)
class Concluded:
    attempt: Attempt  # as written
    decision: Decision | None  # the condition decided on its deciding run, when one is given
    dropped: str | None = None  # the condition an earlier conclusion set, which this one does not restate
    plan: PlanOutcome | None = None  # the plan decided, for an attempt with one
    linked: tuple[str, ...] = ()  # runs measured but not linked yet, linked first (``running.py``)


def conclude(root: Path, attempt_id: str, verdict: Verdict) -> Concluded:
    """Record the verdict; refused (nothing written) if the registry's rules would not hold, or
    the condition does not parse or names what the latest complete run does not record."""
    load_meta(root)  # a missing registry is refused before any lock file is made
    refuse_old_layout(root)
    with registry_lock(root):
        registry = load_directory(root)
        attempt = registry.get(attempt_id)
        # A run of the attempt in progress would link its run to the concluded record and add
        # to its evidence: refused at once, as a second run is. (A run holds its run lock and
        # waits for the registry lock; this never waits for the run lock, so neither blocks.)
        with run_lock(root, attempt.id, "conclude"):
            # Runs measured but never linked are evidence of this attempt: linked first, in the
            # same write, since once concluded the record takes no run.
            earlier = unlinked_runs(root, attempt)
            for results in earlier:
                attempt = with_run(root, attempt, results)
            done = _conclude(root, registry, attempt, verdict)
            return replace(done, linked=tuple(r.run_id for r in earlier if r.run_id is not None))


def _condition(root: Path, attempt: Attempt, text: str) -> tuple[ContinueIf, Decision]:
    """The condition as it will be stored, decided on the run the attempt's plan decides on
    (without a plan, its latest complete run)."""
    parse(text)  # what is wrong with the text itself comes first, whatever the runs
    on = deciding(root, attempt)
    if on.results is None:
        runs = ", ".join(f"{r.run_id} {r.status}" for r in attempt.runs or ())
        raise CheckFailed(
            f"no run to check {named('continue_if')} against: {on.why} (its runs: {runs}); nothing written"
        )
    tree = parse(text, against=on.results)
    margins = attempt.plan.margins if attempt.plan is not None else None
    decision = decide(tree, on.results, margins)
    if len(on.refs) > 1:
        decision.run_id = on.label
    # stored in its canonical text: one spelling per condition, which agrees with its tree unparsed
    condition = ContinueIf(
        text=render(tree), tree=tree, set_at=utc_now(), run=on.refs[-1].run_id, held_at_conclusion=decision.truth
    )
    return condition, decision


def _status(attempt: Attempt, verdict: Verdict, outcome: PlanOutcome | None) -> str:
    """The status to write: the plan's, or the one given where it agrees with the plan, or one
    that departs from it with a deviation saying why. Without a plan, the one given."""
    if outcome is None:
        if verdict.status is None:
            raise UnusableInput(
                f"{attempt.id} was admitted without an analysis plan, so its status is given by hand: {named('status')} "
                f"({', '.join(s for s in STATUSES if s != 'not-tried')})"
            )
        if verdict.deviation is not None:
            raise UnusableInput(
                f"{attempt.id} has no analysis plan, so there is nothing to deviate from: drop {named('deviation')}"
            )
        return verdict.status
    decided = f"its plan decides {outcome.status} ({outcome.because})"
    status = verdict.status or outcome.status
    agrees = status in CONSISTENT[outcome.status]
    if agrees and verdict.deviation is not None:
        raise UnusableInput(
            f"{attempt.id}: {decided}, and {named('status')} {status} agrees with it: drop {named('deviation')}"
        )
    if not agrees and verdict.deviation is None:
        raise CheckFailed(
            f"{attempt.id}: {named('status')} {status} is not what {decided}; the numbers decide, so either conclude "
            f"without {named('status')}, or record why you depart from the plan with {named('deviation')} "
            '"..."; nothing written'
        )
    return status


def _conclude(root: Path, registry: Registry, attempt: Attempt, verdict: Verdict) -> Concluded:
    attempt_id = attempt.id
    if verdict.status == "not-tried":
        raise UnusableInput(f"{named('status')} not-tried is not a verdict; conclude with what the run showed")
    blocked = unresolved(readmit_all(registry.attempts, only=attempt_id), attempt)  # its runs stay; the verdict waits
    if blocked is not None:
        raise CheckFailed(blocked)
    runs = attempt.runs or []
    if not runs:
        raise CheckFailed(
            f"{attempt_id} has no run to conclude from; run it first: {invoked('run', attempt_id=attempt_id)}"
        )
    for ref in runs:
        broken = check_folder(root, attempt_id, ref.run_id)
        if broken is not None:
            raise CheckFailed(f"{attempt_id}: run {ref.run_id}: {broken}")
    outcome = decide_plan(root, attempt)
    status = _status(attempt, verdict, outcome)
    condition, decision = (
        _condition(root, attempt, verdict.continue_if) if verdict.continue_if is not None else (None, None)
    )
    confidence = verdict.confidence
    if confidence is None:
        if verdict.failure_reason is not None:
            raise UnusableInput(
                f"{named('failure_reason')} needs {named('confidence')} (exact, inferred or missing-evidence)"
            )
        confidence = "not-applicable"
    raw: dict[str, Any] = attempt.model_dump(exclude_none=True)
    raw.update(
        status=status,
        lesson=verdict.lesson,
        next_action=verdict.next_action,
        failure_reason_confidence=confidence,
    )
    # the disposition is stated whole: a conclusion without a condition leaves none behind
    dropped = attempt.continue_if.text if attempt.continue_if is not None and condition is None else None
    raw.pop("continue_if", None)
    if condition is not None:
        raw["continue_if"] = condition.model_dump()
    raw.pop("plan_decision", None)
    raw.pop("deviation", None)
    if outcome is not None:
        raw["plan_decision"] = PlanDecision(
            status=outcome.status,
            because=outcome.because,
            runs=outcome.runs,
            readout=outcome.readout,
        ).model_dump()
        if verdict.deviation is not None:
            raw["deviation"] = verdict.deviation
    if verdict.failure_reason is not None:
        raw["failure_reason"] = verdict.failure_reason
    if verdict.evidence is not None:
        raw["evidence"] = "\n".join(filter(None, [raw.get("evidence"), verdict.evidence]))
    if verdict.evidence_sources:
        raw["evidence_sources"] = [*raw.get("evidence_sources", []), *verdict.evidence_sources]
    if "source" not in raw:
        raw["source"] = results_source(root, attempt_id, runs[-1].run_id)
    try:
        updated = Attempt.model_validate(raw)
    except ValidationError as exc:
        given_as = {
            **{name: named(name) for name in ("status", "lesson", "next_action", "failure_reason", "evidence")},
            "failure_reason_confidence": named("confidence"),
            "evidence_sources": named("evidence_sources"),
        }
        raise UnusableInput(f"{attempt_id}: {flag_message(exc, attempt_id, given_as)}; nothing written") from None
    record = Record(raw=raw, attempt=updated, file=str(record_path(root, attempt_id)))
    # strict: a record ptreg rewrites is whole, whatever format it was first imported in
    problems = [
        p
        for p in check_attempt(record, registry.meta, set(ids_in(registry.records)), strict=True)
        if p.severity == "error"
    ]
    if problems:
        first = problems[0]
        more = (
            f" (and {len(problems) - 1} more: {', '.join(p.pointer.lstrip('/') for p in problems[1:])})"
            if len(problems) > 1
            else ""
        )
        raise CheckFailed(f"{attempt_id}: {first.message} (rule {first.rule}){more}; nothing written")
    write_attempt(root, updated)
    return Concluded(updated, decision, dropped, outcome)
