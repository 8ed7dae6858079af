"""`ptreg readmit` and `ptreg gate --all`: admissions decided again after a merge, and the
resolution of a conflict (docs/gate.md, "Admissions after a merge")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from ..errors import EXIT_CHECK_FAILED
from ..text import counted
from .common import JsonFlag, print_json, registry_dir, say

if TYPE_CHECKING:
    from ..gate.readmission import Readmissions


def print_readmissions(readmissions: Readmissions, as_json: bool) -> None:
    """Every admission in admission order, with its conflicts; exit 1 when there is one."""
    conflicts = readmissions.conflicts
    if as_json:
        print_json({**readmissions.to_json(), "holds": not conflicts})
    else:
        by_attempt = {c.attempt_id for c in conflicts}
        say(f"admission order ({counted(len(readmissions.order), 'admitted attempt')}, first admitted first):")
        for attempt_id in readmissions.order:
            state = (
                "withdrawn"
                if attempt_id in readmissions.withdrawn
                else "CONFLICT"
                if attempt_id in by_attempt
                else "holds"
            )
            say(f"  {state:<10} {attempt_id}")
        for c in conflicts:
            say(f"{c.attempt_id}: conflict [{c.rule}]: {c.message()}", one_line=True)
        say(
            "every admission holds against those before it"
            if not conflicts
            else f"{counted(len(conflicts), 'conflict')}: each attempt named takes no next step (run, conclude) "
            "until its conflict is resolved by the remedy given"
        )
    if conflicts:
        raise typer.Exit(EXIT_CHECK_FAILED)


def readmit(
    attempt_id: str = typer.Argument(..., metavar="ID", help="The attempt whose conflict is resolved."),
    question: str | None = typer.Option(None, "--question", metavar="TEXT", help="A new question (before any run)."),
    varies: str | None = typer.Option(
        None, "--varies", metavar="EARLIER", help="Vary this attempt, admitted before it (with --varied)."
    ),
    varied: str | None = typer.Option(None, "--varied", metavar="TEXT", help="What it varies of EARLIER."),
    tracking_issue: str | None = typer.Option(
        None, "--tracking-issue", metavar="ISSUE", help="A tracking issue of its own."
    ),
    evaluator: str | None = typer.Option(
        None,
        "--evaluator",
        metavar="NAME@HASH",
        help="An evaluator frozen under a name of its own (before any run); with no conflict, with --reason, "
        "an amendment while every run measured nothing.",
    ),
    reason: str | None = typer.Option(
        None, "--reason", metavar="TEXT", help="Why the evaluator is amended (stored; with --evaluator)."
    ),
    override_streak: str | None = typer.Option(
        None, "--override-streak", metavar="TEXT", help="Why it goes on past its objective's streak (stored)."
    ),
    withdraw: str | None = typer.Option(
        None, "--withdraw", metavar="REASON", help="Withdraw it: it is not run or concluded again (stored)."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Resolve a conflict found after a merge: re-pass the gate with what changes, or withdraw; or amend the evaluator of an attempt whose runs measured nothing.

    The attempt is judged against those admitted before it (`ptreg gate --all` lists them); nothing is written unless every conflict is resolved. The resolution is recorded on the attempt (readmissions). An attempt already run keeps its question and evaluator.

    An attempt with no conflict whose every run measured nothing (a harness that failed) takes a new evaluator with `--evaluator NAME@HASH --reason TEXT`: recorded as an amendment (the evaluator it replaces, when, why), refused once any run measured something.
    """
    from ..operations.readmitting import Resolution
    from ..operations.readmitting import readmit as resolve
    from ..records.refs import check_id

    resolution = Resolution(question, varies, varied, tracking_issue, evaluator, override_streak, withdraw, reason)
    done = resolve(registry_dir(), check_id(attempt_id), resolution)
    if not done.resolved:  # no conflict: the evaluator was amended
        amendment = (done.attempt.amendments or [])[-1]
        if as_json:
            print_json({"id": done.attempt.id, "amendment": amendment.model_dump(mode="json", exclude_none=True)})
            return
        say(
            f"{done.attempt.id} amended: evaluator {amendment.before} -> {amendment.after} "
            f"(every run so far measured nothing): {amendment.reason}",
            one_line=True,
        )
        return
    record = (done.attempt.readmissions or [])[-1]
    if as_json:
        print_json({"id": done.attempt.id, "readmission": record.model_dump(mode="json", exclude_none=True)})
        return
    rules = ", ".join(record.conflicts)
    earlier = ", ".join(record.earlier)
    if record.resolution == "withdrawn":
        say(f"{done.attempt.id} withdrawn ({rules} with {earlier}): {record.reason}", one_line=True)
    else:
        changed = ", ".join(c.field for c in record.changes)
        say(f"{done.attempt.id} readmitted: {rules} with {earlier} resolved by a new {changed}", one_line=True)
