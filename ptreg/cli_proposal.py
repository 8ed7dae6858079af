"""`ptreg new`, `ptreg gate` and `ptreg precedents`: proposing an attempt through the rerun gate."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, List, Optional

import typer

from .cli_common import JsonFlag, load, print_json, progress_bar, registry_dir, room_left, table
from .errors import EXIT_CHECK_FAILED, PtregError

if TYPE_CHECKING:
    from .gate import GateReport
    from .precedents import Precedent

OUTCOME_LABEL = {"passed": "ok", "caution": "CAUTION", "overridden": "OVERRIDDEN", "failed": "FAILED"}


def _interactive(no_input: bool) -> bool:
    """Prompt only for a person at a terminal: never in a pipe, in CI or when told not to."""
    return not no_input and sys.stdin.isatty() and sys.stdout.isatty() and not os.environ.get("CI")


def _print_precedents(found: "list[Precedent]") -> None:
    if not found:
        typer.echo("precedents: no prior attempt shares its objective, methods, bases, lineage or family")
        return
    typer.echo("precedents, most alike first (read them before spending budget):")
    rows = [[p.attempt.id, p.attempt.status, p.shares(), p.attempt.lesson] for p in found]
    headers = ["id", "status", "shares", "lesson"]
    typer.echo(table(rows, headers, {2: 48, 3: room_left(rows, headers, 3)}))


def _print_report(report: "GateReport") -> None:
    typer.echo(f"gate for {report.attempt_id}:")
    for check in report.checks:
        typer.echo(f"  {OUTCOME_LABEL[check.outcome]:<10} {check.check:<22} {check.detail}")
        if check.remedy:
            typer.echo(f"  {'':<10} {'':<22} how to satisfy: {check.remedy}")


def new(
    attempt_id: Optional[str] = typer.Option(None, "--id", help="The new attempt's id (a lowercase slug; its file name)."),
    name: Optional[str] = typer.Option(None, "--name", help="A short human name."),
    family: Optional[str] = typer.Option(None, "--family", help="Experiment family, e.g. runtime-perf."),
    kind: Optional[str] = typer.Option(None, "--kind", help="A term of the registry's kind_vocabulary."),
    question: Optional[str] = typer.Option(None, "--question", help="The fresh question this attempt answers."),
    hypothesis: Optional[str] = typer.Option(None, "--hypothesis", help="The expected answer, stated before any number is seen."),
    varied_from: Optional[str] = typer.Option(None, "--varied-from", metavar="ID", help="The prior attempt this one varies."),
    varied: Optional[str] = typer.Option(None, "--varied", help="What is varied from --varied-from."),
    method: List[str] = typer.Option([], "--method", help="A method of the method_vocabulary (repeatable)."),
    base: List[str] = typer.Option([], "--base", help="A base the attempt builds on (repeatable)."),
    objective: Optional[str] = typer.Option(None, "--objective", help="A term of the objective_vocabulary."),
    data_rows: Optional[int] = typer.Option(None, "--data-rows", min=0, help="Data rows involved, when that applies."),
    evaluator: Optional[str] = typer.Option(None, "--evaluator", metavar="NAME[@HASH]", help="A frozen evaluator (`ptreg evaluator list`)."),
    budget_seconds: Optional[float] = typer.Option(None, "--budget-seconds", help="Wall-clock seconds the run may take at most."),
    budget_steps: Optional[int] = typer.Option(None, "--budget-steps", help="At most this many timed steps per repeat."),
    budget_repeats: Optional[int] = typer.Option(None, "--budget-repeats", help="At most this many repeats."),
    budget_threads: Optional[int] = typer.Option(None, "--budget-threads", help="At most this many threads."),
    budget_memory_mb: Optional[float] = typer.Option(None, "--budget-memory-mb", help="At most this much peak memory, MB."),
    tracking_issue: Optional[str] = typer.Option(None, "--tracking-issue", help="URL, #123, owner/repo#123 or PROJ-123."),
    answers_disposition: Optional[str] = typer.Option(
        None, "--answers-disposition", help="How this answers the next_action of the attempt it varies."
    ),
    override_streak: Optional[str] = typer.Option(
        None, "--override-streak", metavar="REASON", help="Go on despite STOP AND RETHINK on the objective; the reason is stored."
    ),
    source: Optional[str] = typer.Option(None, "--source", help="Where the proposal is written up, if anywhere."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the gate and show precedents; write nothing."),
    no_input: bool = typer.Option(False, "--no-input", help="Never prompt, even at a terminal."),
    as_json: bool = JsonFlag,
) -> None:
    """Propose an attempt (status not-tried): precedents first, then the gate; written only if admitted.

    The gate needs a fresh question, a frozen evaluator, an explicit budget, a scoped tracking issue, an answer to the disposition of the attempt it varies, and no unheeded STOP AND RETHINK streak. A refused check exits 1 and writes nothing. At a terminal, missing values are asked for; in a pipe or in CI they never are.
    """
    from .proposal import ProposalInput, propose
    from .registry import load_directory

    root = registry_dir()
    given = ProposalInput(
        id=attempt_id or "", name=name or "", family=family, kind=kind, question=question, hypothesis=hypothesis,
        varied_from=varied_from, varied=varied, methods=list(method), bases=list(base), objective=objective,
        data_rows=data_rows, evaluator=evaluator, budget_seconds=budget_seconds, budget_steps=budget_steps,
        budget_repeats=budget_repeats, budget_threads=budget_threads, budget_memory_mb=budget_memory_mb,
        tracking_issue=tracking_issue, answers_disposition=answers_disposition, override_streak=override_streak,
        source=source,
    )
    if _interactive(no_input or as_json):  # prompts would corrupt the JSON on stdout
        _ask_for_missing(given, load_directory(root))
    elif varied_from and not as_json:
        _show_disposition(varied_from, root)
    for flag, value in (("--id", given.id), ("--name", given.name), ("--family", given.family), ("--kind", given.kind)):
        if not value:
            raise PtregError(f"missing {flag}: a proposal needs an id, a name, a family and a kind")
    if given.kind != "infrastructure" and not given.objective:
        raise PtregError("missing --objective: a proposal of this kind needs one (only infrastructure has none)")
    with progress_bar() as progress:
        proposal = propose(root, given, dry_run=dry_run, progress=progress)
    if proposal.skipped:
        typer.echo(f"ptreg: warning: {proposal.skipped} record file(s) could not be used and were left out of the checks; "
                   "run `ptreg validate`", err=True)
    if as_json:
        print_json({
            "admitted": proposal.report.admitted,
            "written": proposal.written,
            "path": str(proposal.path) if proposal.path else None,
            "gate": proposal.report.to_json(),
            "precedents": [p.to_json() for p in proposal.precedents],
            "attempt": proposal.attempt.to_json_dict(),
        })
    else:
        _print_precedents(proposal.precedents)
        typer.echo("")
        _print_report(proposal.report)
        failures = proposal.report.failures
        if failures:
            typer.echo(f"refused: {len(failures)} gate check(s) failed ({', '.join(c.check for c in failures)}); nothing written")
        elif dry_run:
            typer.echo("would be admitted (dry run: nothing written)")
        else:
            typer.echo(f"admitted: wrote {proposal.path}")
    if not proposal.report.admitted:
        raise typer.Exit(EXIT_CHECK_FAILED)


def _show_disposition(parent_id: str, root) -> Optional[str]:
    """Print the retained disposition of the attempt being varied; return it."""
    from .registry import check_id, read_attempt

    try:
        parent = read_attempt(root, check_id(parent_id))
    except PtregError:
        return None  # the gate names the problem with --varied-from
    if parent.next_action is None:
        return None
    typer.echo(f"{parent.id} retains this disposition (its next_action), which the proposal must answer:")
    typer.echo(f"  {parent.next_action}")
    typer.echo("")
    return parent.next_action


def _ask_for_missing(given, registry) -> None:
    """Prompt for each value the proposal still lacks; optional ones may be left empty."""
    from .evaluator import evaluator_files

    def ask(label: str, current, *, optional: bool = False, kind=str):
        if current not in (None, "", []):
            return current
        answer = typer.prompt(label + (" (empty to skip)" if optional else ""), default="" if optional else None,
                              show_default=False, type=kind if not optional else str)
        if optional and answer == "":
            return None
        return answer

    meta = registry.meta
    given.id = ask("id (lowercase slug)", given.id)
    given.name = ask("name", given.name)
    given.family = ask("family", given.family)
    given.kind = ask(f"kind ({', '.join(meta.kind_vocabulary)})", given.kind)
    if given.kind != "infrastructure":
        given.objective = ask(f"objective ({', '.join(meta.objective_vocabulary)})", given.objective)
    given.question = ask("question (what this run answers)", given.question)
    given.hypothesis = ask("hypothesis", given.hypothesis, optional=True)
    if given.varied_from:
        disposition = _show_disposition(given.varied_from, registry.root)
        given.varied = ask(f"what is varied from {given.varied_from}", given.varied)
        if disposition is not None:
            given.answers_disposition = ask("your answer to that disposition", given.answers_disposition)
    frozen = [p.name[: -len(".json")] for p in evaluator_files(registry.root)]
    given.evaluator = ask("evaluator" + (f" ({', '.join(frozen[:5])})" if frozen else " (none frozen yet)"), given.evaluator)
    if given.budget_seconds is None:
        given.budget_seconds = ask("budget: wall-clock seconds at most", None, kind=float)
    given.tracking_issue = ask("tracking issue (URL, #123, owner/repo#123 or PROJ-123)", given.tracking_issue)


def gate(
    attempt_id: str = typer.Argument(..., metavar="ID", help="The attempt to check."),
    as_json: bool = JsonFlag,
) -> None:
    """Re-check an attempt's admission against the registry as it is now. Exit 1 if a check fails.

    `ptreg run` does the same before it measures anything: an edited evaluator file, a removed budget or a tracking issue now scoping another lineage withdraw the admission.
    """
    from .gate import check_gate
    from .registry import check_id, registry_state

    registry = load()
    attempt = registry.get(check_id(attempt_id))
    root = registry_dir()
    report = check_gate(attempt, registry.attempts, root)
    admission = attempt.admission
    changed = None
    if admission is not None:
        now = registry_state(root, len(registry.records) - 1, exclude=attempt.id)
        changed = now.sha256 != admission.registry_state.sha256
    if as_json:
        print_json({**report.to_json(), "admitted_at": admission.admitted_at if admission else None,
                    "registry_changed_since_admission": changed})
    else:
        _print_report(report)
        if admission is None:
            typer.echo(f"{attempt_id} has no recorded admission (not proposed through `ptreg new`)")
        else:
            then = admission.registry_state
            typer.echo(f"admitted at {admission.admitted_at} against {then.attempts} attempts (sha256 {then.sha256[:12]}); "
                       + ("the registry has changed since" if changed else "the registry is unchanged since"))
        typer.echo("admission holds" if report.admitted else f"admission does not hold: {len(report.failures)} check(s) failed")
    if not report.admitted:
        raise typer.Exit(EXIT_CHECK_FAILED)


def precedents(
    method: List[str] = typer.Option([], "--method", help="A method of the proposal (repeatable)."),
    base: List[str] = typer.Option([], "--base", help="A base of the proposal (repeatable)."),
    objective: Optional[str] = typer.Option(None, "--objective", help="The proposal's objective."),
    family: Optional[str] = typer.Option(None, "--family", help="The proposal's family."),
    limit: int = typer.Option(10, "--limit", min=1, help="Show at most this many."),
    as_json: bool = JsonFlag,
) -> None:
    """The prior attempts most like a proposal: shared objective first, then methods and bases; failures first."""
    from .precedents import Shape, precedents as find

    shape = Shape(objective=objective, methods=tuple(method), bases=tuple(base), family=family)
    if shape.is_empty():
        raise PtregError("say what the proposal is: give --objective, --method, --base or --family")
    registry = load()
    found = find(shape, registry.attempts, limit)
    if as_json:
        print_json([p.to_json() for p in found])
        return
    _print_precedents(found)
