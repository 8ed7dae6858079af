"""Concluding an attempt: the verdict after its runs, held to the same rules ``validate`` applies.

The verdict states the disposition whole: its prose (``next_action``) and, when given, the
condition that decides it (``continue_if``), checked against the attempt's latest complete run
before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..clock import utc_now
from ..errors import CheckFailed, UnusableInput
from ..gate.readmission import readmit_all, unresolved
from ..records.attempt import CONFIDENCES, STATUSES, Attempt, ContinueIf
from ..records.condition import render
from ..records.condition_grammar import parse
from ..records.decision import Decision, decide
from ..records.problems import flag_message
from ..records.registry import Record, Registry, ids_in
from ..records.rules import check_attempt
from ..records.run_results import run_is_decisive, undecisive
from ..store.directory import load_directory, load_meta, record_path, write_attempt
from ..store.locks import registry_lock, run_lock
from ..store.runs import check_folder, read_results, run_folder
from ..store.vocabulary_files import refuse_old_layout
from ..views.dispositions import latest_complete
from .running import results_source


@dataclass(frozen=True)
class Verdict:
    """What the person concluding says: the outcome and, if they have more to say than the run
    does, evidence of their own."""

    status: str
    lesson: str
    next_action: str
    failure_reason: str | None = None
    confidence: str | None = None
    evidence: str | None = None  # added after the evidence lines the runs wrote
    evidence_sources: tuple[str, ...] = ()
    continue_if: str | None = None  # the condition over the run results that decides next_action

    def check(self, named: Callable[[str], str] = str) -> None:
        """The verdict's own words, before any file is read: a known status and confidence, and
        no text given empty. ``named`` words a field as the caller's user knows it (a command
        line's flag, a tool's argument)."""
        if self.status not in STATUSES:
            raise UnusableInput(f"{named('status')} {self.status!r} is not one of {', '.join(STATUSES)}")
        if self.confidence is not None and self.confidence not in CONFIDENCES:
            raise UnusableInput(f"{named('confidence')} {self.confidence!r} is not one of {', '.join(CONFIDENCES)}")
        for field_name in ("lesson", "next_action", "failure_reason", "evidence"):
            value = getattr(self, field_name)
            if value is not None and not value.strip():
                raise UnusableInput(f"{named(field_name)} is empty; say it in words")


@dataclass(frozen=True)
class Concluded:
    attempt: Attempt  # as written
    decision: Decision | None  # the condition decided on the latest complete run, when one is given
    dropped: str | None = None  # the condition an earlier conclusion set, which this one does not restate


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
            return _conclude(root, registry, attempt, verdict)


def _condition(root: Path, attempt: Attempt, text: str) -> tuple[ContinueIf, Decision]:
    """The condition as it will be stored, decided on the attempt's latest complete run."""
    parse(text)  # what is wrong with the text itself comes first, whatever the runs
    ref = latest_complete(attempt)
    if ref is None:
        runs = ", ".join(f"{r.run_id} {r.status}" for r in attempt.runs or ())
        raise CheckFailed(
            f"{attempt.id} has no complete run to check --continue-if against (its runs: {runs}); nothing written",
        )
    results = read_results(run_folder(root, attempt.id, ref.run_id), root)
    if not run_is_decisive(results):
        raise CheckFailed(f"--continue-if cannot be checked: {undecisive(results)}; nothing written")
    tree = parse(text, against=results)
    decision = decide(tree, results)
    # stored in its canonical text: one spelling per condition, which agrees with its tree unparsed
    condition = ContinueIf(
        text=render(tree), tree=tree, set_at=utc_now(), run=ref.run_id, held_at_conclusion=decision.truth
    )
    return condition, decision


def _conclude(root: Path, registry: Registry, attempt: Attempt, verdict: Verdict) -> Concluded:
    attempt_id = attempt.id
    if verdict.status == "not-tried":
        raise UnusableInput("--status not-tried is not a verdict; conclude with what the run showed")
    blocked = unresolved(readmit_all(registry.attempts, only=attempt_id), attempt)  # its runs stay; the verdict waits
    if blocked is not None:
        raise CheckFailed(blocked)
    runs = attempt.runs or []
    if not runs:
        raise CheckFailed(f"{attempt_id} has no run to conclude from; run it first: `ptreg run {attempt_id}`")
    for ref in runs:
        broken = check_folder(root, attempt_id, ref.run_id)
        if broken is not None:
            raise CheckFailed(f"{attempt_id}: run {ref.run_id}: {broken}")
    condition, decision = (
        _condition(root, attempt, verdict.continue_if) if verdict.continue_if is not None else (None, None)
    )
    confidence = verdict.confidence
    if confidence is None:
        if verdict.failure_reason is not None:
            raise UnusableInput("--failure-reason needs --confidence (exact, inferred or missing-evidence)")
        confidence = "not-applicable"
    raw: dict[str, Any] = attempt.model_dump(exclude_none=True)
    raw.update(
        status=verdict.status,
        lesson=verdict.lesson,
        next_action=verdict.next_action,
        failure_reason_confidence=confidence,
    )
    # the disposition is stated whole: a conclusion without a condition leaves none behind
    dropped = attempt.continue_if.text if attempt.continue_if is not None and condition is None else None
    raw.pop("continue_if", None)
    if condition is not None:
        raw["continue_if"] = condition.model_dump()
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
        raise UnusableInput(f"{attempt_id}: {flag_message(exc, attempt_id)}; nothing written") from None
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
    return Concluded(updated, decision, dropped)
