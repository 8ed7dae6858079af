"""Resolving a conflict found after a merge (``gate/readmission.py``): the attempt re-passes
the gate with what it changes, or is withdrawn, and the resolution is recorded on it
(``Attempt.readmissions``).

What was measured stays as it was: an attempt with a run keeps the question and evaluator it
was measured under (changing them after the numbers would rewrite its pre-registration), so it
may only take a new tracking issue, vary the earlier attempt, give a reason to go on past its
streak, or be withdrawn.

An attempt with no conflict may take a new evaluator while every run of it measured nothing
(a harness that failed before its first number): an amendment, stored with the evaluator it
replaces, when and why (``Attempt.amendments``). After a run that measured something, the
evaluator is fixed for good.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..clock import utc_now
from ..errors import CheckFailed, PtregError, UnusableInput
from ..gate.checks import check_gate
from ..gate.gate_inputs import read_gate_inputs
from ..gate.readmission import Conflict, judged_before, measured_something, readmit_all
from ..records import tracking
from ..records.attempt import Attempt, FieldChange
from ..records.problems import flag_message
from ..store.directory import load_directory, load_meta, write_attempt
from ..store.evaluator_files import resolve
from ..store.index import open_index
from ..store.leftovers import orphaned_runs
from ..store.locks import registry_lock, run_lock
from ..store.runs import read_results, run_folder
from ..store.vocabulary_files import refuse_old_layout

# the model's field each option sets (``varies``: the attempt it now varies)
_FIELDS = {
    "question": "question",
    "varies": "varied_from",
    "varied": "varied",
    "tracking_issue": "tracking_issue",
    "evaluator": "evaluator",
    "override_streak": "streak_override",
}
_MEASURED = ("question", "evaluator")  # fixed once a run measured them


@dataclass(frozen=True)
class Resolution:
    """What the person resolving says: the changes that re-pass the gate, or a withdrawal."""

    question: str | None = None
    varies: str | None = None
    varied: str | None = None
    tracking_issue: str | None = None
    evaluator: str | None = None
    override_streak: str | None = None
    withdraw: str | None = None  # the reason, when it is withdrawn
    reason: str | None = None  # why the evaluator is amended, when no conflict is resolved

    def given(self) -> dict[str, str]:
        """The changes given, by option name (the withdrawal and the amendment's reason left out)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("withdraw", "reason")}
        return {k: v for k, v in values.items() if v is not None}


@dataclass(frozen=True)
class Readmitted:
    attempt: Attempt  # as written
    resolved: list[Conflict]


def readmit(root: Path, attempt_id: str, resolution: Resolution) -> Readmitted:
    """Resolve ``attempt_id``'s conflicts with the attempts admitted before it; refused, with
    nothing written, unless every one of them is resolved."""
    load_meta(root)  # a missing registry is refused before any lock file is made
    refuse_old_layout(root)
    _check_words(resolution)
    with registry_lock(root):
        registry = load_directory(root)
        attempt = registry.get(attempt_id)
        with run_lock(root, attempt.id, "readmit"):
            every = registry.attempts
            conflicts = readmit_all(every, only=attempt.id).of(attempt.id)
            gone = attempt.withdrawn
            if gone is not None:
                raise CheckFailed(f"{attempt.id} was withdrawn at {gone.readmitted_at}; a withdrawal is final")
            if attempt.admission is None:
                raise CheckFailed(
                    f"{attempt.id} has no admission (not proposed through `ptreg new`): it has no place in the "
                    "admission order, and nothing to readmit"
                )
            if not conflicts and resolution.evaluator is not None:
                updated = _amended(root, attempt, every, resolution)
                write_attempt(root, updated)
                return Readmitted(updated, [])
            if resolution.reason is not None:
                raise UnusableInput(
                    f"--reason goes with --evaluator alone, on an attempt with no conflict; {attempt.id} has one to "
                    f"resolve first (`ptreg gate {attempt.id}`)"
                )
            if not conflicts:
                raise CheckFailed(
                    f"{attempt.id}: its admission holds against every attempt admitted before it; nothing to readmit"
                )
            updated = _resolved(root, attempt, every, conflicts, resolution)
            write_attempt(root, updated)
    return Readmitted(updated, conflicts)


def _amended(root: Path, attempt: Attempt, every: list[Attempt], resolution: Resolution) -> Attempt:
    """The record with its evaluator amended, once every run of it is shown to have measured
    nothing and it passes the gate under the new evaluator; else refused, nothing written."""
    assert resolution.evaluator is not None
    if set(resolution.given()) != {"evaluator"} or resolution.reason is None:
        raise UnusableInput(
            f"{attempt.id} has no conflict to resolve: its evaluator alone may be amended, with "
            "`--evaluator NAME@HASH --reason TEXT` (the reason is stored)"
        )
    if attempt.status != "not-tried":
        raise CheckFailed(f"{attempt.id} is concluded (status {attempt.status}); its evaluator stays as it decided")
    if attempt.evaluator is None:
        raise CheckFailed(f"{attempt.id} has no evaluator to amend; propose it with `ptreg new`")
    new = resolve(root, resolution.evaluator).name.removesuffix(".json")  # name@hash12 as the gate names it
    if new == attempt.evaluator:
        raise UnusableInput(f"{attempt.id} is already measured by {new}; nothing to amend")
    runs = _runs_that_measured_nothing(root, attempt)
    raw: dict[str, Any] = attempt.model_dump(exclude_none=True)
    amendment: dict[str, Any] = {"amended_at": utc_now(), "field": "evaluator", "before": attempt.evaluator}
    amendment.update(after=new, reason=resolution.reason, **({"runs": runs} if runs else {}))
    raw["evaluator"] = new
    raw["amendments"] = [*raw.get("amendments", []), amendment]
    try:
        updated = Attempt.model_validate(raw)
    except ValidationError as exc:
        raise UnusableInput(f"{attempt.id}: {flag_message(exc, attempt.id)}; nothing written") from None
    _re_pass(root, updated, [updated if a.id == attempt.id else a for a in every])
    return updated


def _runs_that_measured_nothing(root: Path, attempt: Attempt) -> list[str]:
    """Every run of ``attempt``, linked or left unlinked, oldest first, once each is read and
    found to have measured nothing; refused, naming the run, when one measured something or
    cannot be read (what it holds is then unknown, and unknown is not nothing)."""
    linked = [r.run_id for r in attempt.runs or ()]
    left = [x.run_id or x.path.name for x in orphaned_runs(root, attempt)]
    ids = sorted(set(linked) | set(left))
    for run_id in ids:
        try:
            results = read_results(run_folder(root, attempt.id, run_id), root)
        except PtregError as exc:
            raise CheckFailed(
                f"{attempt.id}: run {run_id} cannot be read ({exc.message}), so it is not known to have measured "
                "nothing; its evaluator stays"
            ) from None
        found = measured_something(results)
        if found is not None:
            raise CheckFailed(
                f"{attempt.id}: run {run_id} measured something ({found}), so its evaluator is fixed for good: a "
                f"new evaluator after an outcome is a new attempt (`ptreg new --varied-from {attempt.id}`)"
            )
    return ids


def _check_words(resolution: Resolution) -> None:
    given = resolution.given()
    for name, value in [*given.items(), ("withdraw", resolution.withdraw), ("reason", resolution.reason)]:
        if value is not None and not value.strip():
            raise UnusableInput(f"--{name.replace('_', '-')} is empty; say it in words")
    if resolution.withdraw is not None and given:
        raise UnusableInput("--withdraw stands alone: a withdrawn attempt changes nothing else")
    if resolution.withdraw is None and not given:
        if resolution.reason is not None:
            raise UnusableInput("--reason says why an evaluator is amended; give the new one with --evaluator")
        raise UnusableInput(
            "say how the conflict is resolved: --question, --varies with --varied, --tracking-issue, --evaluator, "
            "--override-streak, or --withdraw REASON"
        )
    if (resolution.varies is None) != (resolution.varied is None):
        raise UnusableInput("--varies and --varied go together: which attempt it varies, and what it varies")
    if resolution.tracking_issue is not None:
        why = tracking.problem(resolution.tracking_issue)
        if why is not None:
            raise UnusableInput(f"--tracking-issue: {why}")


def _resolved(
    root: Path, attempt: Attempt, every: list[Attempt], conflicts: list[Conflict], resolution: Resolution
) -> Attempt:
    """The record with the resolution applied and recorded, once it re-passes the gate."""
    raw: dict[str, Any] = attempt.model_dump(exclude_none=True)
    earlier = list(dict.fromkeys(i for c in conflicts for i in c.earlier)) or [attempt.id]
    record: dict[str, Any] = {
        "readmitted_at": utc_now(),
        "conflicts": list(dict.fromkeys(c.rule for c in conflicts if c.earlier)),
        "earlier": earlier,
    }
    if resolution.withdraw is not None:
        record.update(resolution="withdrawn", reason=resolution.withdraw)
    else:
        measured = [n for n in _MEASURED if n in resolution.given()]
        if measured and (attempt.runs or attempt.status != "not-tried"):
            raise CheckFailed(
                f"{attempt.id} was measured under its {measured[0].replace('_', ' ')}: it stays as measured; "
                "take a new tracking issue, vary the earlier attempt, or withdraw it"
            )
        changes = []
        for option, value in resolution.given().items():
            name = _FIELDS[option]
            if option == "evaluator":
                value = resolve(root, value).name.removesuffix(".json")  # name@hash12 as the gate names it
            changes.append(FieldChange(field=name, before=raw.get(name)).model_dump(exclude_none=True))
            raw[name] = value
        record.update(resolution="readmitted", changes=changes)
    if not record["conflicts"]:  # only an unplaceable admission: nothing a readmission can change
        raise CheckFailed(f"{attempt.id}: {conflicts[0].message()}")
    raw["readmissions"] = [*raw.get("readmissions", []), record]
    try:
        updated = Attempt.model_validate(raw)
    except ValidationError as exc:
        raise UnusableInput(f"{attempt.id}: {flag_message(exc, attempt.id)}; nothing written") from None
    if updated.withdrawn is None:
        _re_pass(root, updated, [updated if a.id == attempt.id else a for a in every])
    return updated


def _re_pass(root: Path, updated: Attempt, every: list[Attempt]) -> None:
    """The changed attempt holds against every attempt admitted before it and, while it is
    still to be run, passes the whole gate against them; else nothing is written."""
    if updated.varied_from is not None and all(a.id != updated.varied_from for a in every):
        raise UnusableInput(f"--varies {updated.varied_from}: no attempt of the registry has that id")
    readmissions = readmit_all(every, only=updated.id)
    left = readmissions.of(updated.id)
    if left:
        raise CheckFailed(f"{updated.id} still conflicts; nothing written: [{left[0].rule}] {left[0].message()}")
    if updated.varied_from is not None and updated.varied_from in readmissions.admitted_after(updated.id):
        raise UnusableInput(
            f"--varies {updated.varied_from}: it was admitted after {updated.id}; vary an attempt admitted before it"
        )
    if updated.status != "not-tried":
        return
    index = open_index(root)
    try:
        inputs = judged_before(read_gate_inputs(index, updated, root), readmissions, updated.id)
    finally:
        index.close()
    report = check_gate(updated, inputs)
    if not report.admitted:
        failed = report.failures[0]
        raise CheckFailed(
            f"{updated.id}: the gate refuses it as changed ({failed.check}: {failed.detail}); "
            f"how to satisfy: {failed.remedy}; nothing written"
        )
