"""`ptreg new`, `ptreg gate` and `ptreg precedents`: proposing an attempt through the rerun gate.

`new`'s options are made from ``gate.proposal_input.ProposalInput``, whose fields say their
help: the proposal's fields are listed there and nowhere else, and their flags here (``OPTIONS``).
"""

from __future__ import annotations

import os
import sys
from contextlib import closing
from dataclasses import Field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, get_args, get_origin, get_type_hints

import typer
from typer.core import TyperOption

from ..errors import EXIT_CHECK_FAILED, PtregError, UnusableInput
from ..gate.proposal_input import ProposalInput
from ..records import arguments
from ..text import counted
from .common import JsonFlag, RegistryCommand, load_index, print_json, progress_bar, registry_dir, say

if TYPE_CHECKING:
    from ..gate.checks import GateReport
    from ..gate.proposal import Proposal
    from ..records.registry import Registry
    from ..views.precedents import Precedent

# The word each ProposalInput field's value is shown as (a test holds the keys to the fields);
# its flag is the vocabulary's (``records/arguments.py``).
METAVARS = {
    "id": "ID",
    "name": "TEXT",
    "family": "FAMILY",
    "kind": "KIND",
    "question": "TEXT",
    "hypothesis": "TEXT",
    "varied_from": "ID",
    "varied": "TEXT",
    "methods": "METHOD",
    "bases": "BASE",
    "objective": "OBJECTIVE",
    "data_rows": "N",
    "evaluator": "NAME[@HASH]",
    "budget_seconds": "SECONDS",
    "budget_steps": "N",
    "budget_repeats": "N",
    "budget_threads": "N",
    "budget_memory_mb": "MB",
    "tracking_issue": "ISSUE",
    "answers_disposition": "TEXT",
    "override_streak": "REASON",
    "source": "PATH",
    "worked_if": "COND",
    "regressed_if": "COND",
    "margins": "METRIC=VALUE",
    "decide_on_runs": "N",
}


def flag_of(field_name: str) -> str:
    return arguments.flag_of(arguments.argument_of(field_name))


OUTCOME_LABEL = {"passed": "ok", "caution": "CAUTION", "overridden": "OVERRIDDEN", "failed": "FAILED"}
T = TypeVar("T")


def _interactive(no_input: bool) -> bool:
    """Prompt only for a person at a terminal: never in a pipe, in CI or when told not to."""
    return not no_input and sys.stdin.isatty() and sys.stdout.isatty() and not os.environ.get("CI")


def _print_precedents(found: list[Precedent]) -> None:
    from ..views.tables import plain

    if not found:
        say("precedents: no prior attempt shares its objective, methods, bases, lineage or family")
        return
    say("precedents, most alike first (read them before spending budget):")
    rows = [[p.attempt.id, p.attempt.status, p.shares(), p.attempt.lesson] for p in found]
    headers = ["id", "status", "shares", "lesson"]
    say(plain(rows, headers, shrink=(2, 3)))


def _print_report(report: GateReport) -> None:
    say(f"gate for {report.attempt_id}:")
    for check in report.checks:
        say(f"  {OUTCOME_LABEL[check.outcome]:<10} {check.check:<22} {check.detail}")
        if check.remedy:
            say(f"  {'':<10} {'':<22} how to satisfy: {check.remedy}")


def _option(spec: Field[Any], annotation: Any) -> TyperOption:
    """The option of one ProposalInput field: every option may be missing on the command line."""
    flag, metavar = flag_of(spec.name), METAVARS[spec.name]
    repeatable = get_origin(annotation) is list
    given = get_args(annotation)
    kind = int if int in given else float if float in given else str
    return TyperOption(
        param_decls=[flag, spec.name],
        type=kind,
        multiple=repeatable,
        default=[] if repeatable else None,
        metavar=metavar,
        help=spec.metadata["help"],
        expose_value=False,  # kept by the callback: `new` takes the proposal as one whole
        callback=_keep_value,
    )


PROPOSAL_VALUES = "ptreg.proposal"  # the key of the proposal's values in the context's meta


def _keep_value(context: typer.Context, option: Any, value: Any) -> None:
    context.meta.setdefault(PROPOSAL_VALUES, {})[option.name] = list(value) if isinstance(value, tuple) else value


class ProposalCommand(RegistryCommand):
    """`ptreg new`: an option for every ProposalInput field, before the command's own options;
    their values reach the command as keyword arguments named after the fields."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hints = get_type_hints(ProposalInput)
        self.params[:0] = [_option(f, hints[f.name]) for f in fields(ProposalInput)]


def new(
    context: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the gate and show precedents; write nothing."),
    no_input: bool = typer.Option(False, "--no-input", help="Never prompt, even at a terminal."),
    as_json: bool = JsonFlag,
) -> None:
    """Propose an attempt (status not-tried): precedents first, then the gate; written only if admitted.

    The gate needs a fresh question, a frozen evaluator, an explicit budget, a scoped tracking issue, an answer to the disposition of the attempt it varies, and no unheeded STOP AND RETHINK streak. A refused check exits 1 and writes nothing. At a terminal, missing values are asked for; in a pipe or in CI they never are.
    """
    from ..gate.proposal import propose
    from ..store.directory import load_directory

    root = registry_dir()
    given_values = context.meta.get(PROPOSAL_VALUES, {})
    values = {f.name: given_values.get(f.name) for f in fields(ProposalInput)}
    given = ProposalInput(**{**values, "id": values["id"] or "", "name": values["name"] or ""})
    interactive = _interactive(no_input or as_json)  # prompts would corrupt the JSON on stdout
    if interactive and not _ask_for_missing(given, load_directory(root)):
        say("not proposed: nothing written; to start from these answers:")
        say(f"  {command_line(given)}")
        raise typer.Exit(EXIT_CHECK_FAILED)
    elif given.varied_from and not as_json:
        _show_disposition(given.varied_from, root)
    with progress_bar() as progress:  # a refused field is named by its flag (records/arguments.py)
        proposal = propose(root, given, dry_run=dry_run, progress=progress)
    if proposal.skipped:
        say(
            f"ptreg: warning: {proposal.skipped} record file(s) could not be used and were left out of the "
            "checks; run `ptreg validate`",
            err=True,
        )
    if as_json:
        print_json(
            {
                "admitted": proposal.report.admitted,
                "written": proposal.written,
                "path": str(proposal.path) if proposal.path else None,
                "gate": proposal.report.to_json(),
                "precedents": [p.to_json() for p in proposal.precedents],
                "attempt": proposal.attempt.to_json_dict(),
            }
        )
    else:
        _print_proposal(proposal, dry_run)
    if not proposal.report.admitted:
        if interactive:
            say(f"to try again with these answers: {command_line(given)}")
        raise typer.Exit(EXIT_CHECK_FAILED)


def _print_proposal(proposal: Proposal, dry_run: bool) -> None:
    _print_precedents(proposal.precedents)
    say("")
    _print_report(proposal.report)
    failures = proposal.report.failures
    if failures:
        say(f"refused: {len(failures)} gate check(s) failed ({', '.join(c.check for c in failures)}); nothing written")
    elif dry_run:
        say("would be admitted (dry run: nothing written)")
    else:
        say(f"admitted: wrote {proposal.path}")


def _show_disposition(parent_id: str, root: Path) -> str | None:
    """Print the retained disposition of the attempt being varied; return it."""
    from ..records.refs import check_id
    from ..store.directory import read_attempt

    try:
        parent = read_attempt(root, check_id(parent_id))
    except PtregError:
        return None  # the gate names the problem with --varied-from
    if parent.next_action is None:
        return None
    if parent.continue_if is not None:
        from ..views.dispositions import decide_disposition

        decided = decide_disposition(root, parent)
        say(f"{parent.id} retains this disposition (its next_action), which its numbers decide:")
        say(f"  {parent.next_action}")
        say(f"  continue if: {parent.continue_if.text}")
        if decided is not None and decided.truth is True:
            say(f"  it {decided.summary()}: the disposition is answered, nothing to add")
        elif decided is not None:
            say(f"  it {decided.summary()}")
    else:
        say(f"{parent.id} retains this disposition (its next_action), which the proposal must answer:")
        say(f"  {parent.next_action}")
    say("")
    return parent.next_action


def _ask_for_missing(given: ProposalInput, registry: Registry) -> bool:
    """Ask for each value the proposal still lacks, and again for a flag's value that cannot be
    used, checking every answer as it is given; then show the whole proposal and ask to go on.
    Whether the person said to go on."""
    from ..gate import answers

    for spec in fields(ProposalInput):
        value = getattr(given, spec.name)
        if value in (None, "", []):
            continue
        why = answers.problem(spec.name, value, registry)
        if why is not None:
            say(f"{flag_of(spec.name)} {value!r}: {why}")
            setattr(given, spec.name, [] if isinstance(value, list) else None)
            if spec.name == "varied_from":
                given.varied_from = _ask_one(
                    answers.Question("varied_from", "varied from (an attempt id)", True), given, registry
                )
    asked: set[str] = set()
    if given.worked_if:  # a plan given by flags is given whole: its optional parts are not asked for
        asked.update(("margins", "regressed_if"))
    shown_for = None  # the varied attempt whose disposition has been shown
    while True:
        pending = [q for q in answers.questions(given, registry) if q.name not in asked]
        if not pending:
            break
        question = pending[0]
        asked.add(question.name)
        near = question.name in ("varied", "answers_disposition")
        if near and registry.root is not None and given.varied_from and shown_for != given.varied_from:
            _show_disposition(given.varied_from, registry.root)
            shown_for = given.varied_from
        setattr(
            given,
            question.name,
            _ask_one(question, given, registry) or ([] if question.name in ("methods", "bases", "margins") else None),
        )
    if given.varied_from and shown_for != given.varied_from and registry.root is not None:
        _show_disposition(given.varied_from, registry.root)
    say("")
    say("the proposal:")
    for line in summary_lines(given):
        say(line)
    return typer.confirm("check it against the gate, and write it if admitted?", default=True)


def summary_lines(given: ProposalInput) -> list[str]:
    """The proposal as it is asked to be confirmed: each value given, a budget in its unit."""
    from ..records.budgets import amount

    lines = []
    for spec in fields(ProposalInput):
        value = getattr(given, spec.name)
        if value in (None, "", []):
            continue
        if spec.metadata["budget"]:
            shown = amount(spec.metadata["budget"], value)
        else:
            shown = ", ".join(value) if isinstance(value, list) else value
        lines.append(f"  {flag_of(spec.name)[2:]:<20} {shown}")
    return lines


def _ask_one(question: Any, given: ProposalInput, registry: Registry) -> Any:
    """The answer to one question, asked until it can be used (or skipped, when optional)."""
    from ..gate import answers

    offered = answers.choices(question.name, registry)
    if offered:
        say(f"{question.name.replace('_', ' ')}: one of")
        width = max(len(term) for term in offered)
        for term, description in offered.items():
            say(f"  {term:<{width}}  {description}".rstrip())
    default = answers.default(question.name, given, registry)
    # a default read off a record is shown through say(), never raw by the prompt
    raw_default = default is not None and not str(default).isprintable()
    while True:
        if raw_default:
            say(f"(Enter for: {default})")
        text = typer.prompt(
            question.label + (" (Enter to skip)" if question.optional and default is None else ""),
            default=str(default) if default is not None else "",  # Enter on nothing: said why below
            show_default=default is not None and not raw_default,
        ).strip()
        if not text and question.optional:
            return None
        if not text:
            say(
                f"  {question.name.replace('_', ' ')} is needed: the proposal cannot go to the gate without it; try again"
            )
            continue
        value, why = answers.parse(question.name, text)
        if why is None:
            why = answers.problem(question.name, value, registry, given)
        if why is None:
            return value
        say(f"  {why}; try again")


def command_line(given: ProposalInput) -> str:
    """The ``ptreg new`` command that gives the same values, to run again after an edit."""
    import shlex

    words = ["ptreg", "new"]
    for spec in fields(ProposalInput):
        value = getattr(given, spec.name)
        for item in value if isinstance(value, list) else [value]:
            if item not in (None, ""):
                words += [flag_of(spec.name), str(item)]
    return shlex.join(words)


def gate(
    attempt_id: str | None = typer.Argument(None, metavar="ID", help="The attempt to check."),
    every: bool = typer.Option(
        False, "--all", help="Decide every admission again, in admission order, against those before it."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Re-check an attempt's admission against the registry as it is now. Exit 1 if a check fails.

    `ptreg run` does the same before it measures anything: an edited evaluator file, a removed budget or a tracking issue now scoping another lineage withdraw the admission. An admission is judged against the attempts admitted before it; with --all, every admission is, as `ptreg validate` does after a merge (docs/gate.md).
    """
    from ..gate.admission import changed_since_admission
    from ..gate.checks import check_gate
    from ..gate.gate_inputs import read_gate_inputs
    from ..gate.readmission import judged_before, read_readmissions, readmissions_around
    from ..records.refs import check_id
    from ..store.full_read import indexed_attempt
    from .readmit_commands import print_readmissions

    root = registry_dir()
    if every == (attempt_id is not None):
        raise UnusableInput("name one attempt (ID) or --all")
    if attempt_id is None:
        print_readmissions(read_readmissions(root), as_json)
        return
    # The checks read the index; the admission's digest covers every file's bytes as it did.
    with closing(load_index()) as index:
        attempt = indexed_attempt(index, check_id(attempt_id))
        inputs = read_gate_inputs(index, attempt, root)
        readmissions = readmissions_around(index, root, attempt, inputs)
        report = check_gate(attempt, judged_before(inputs, readmissions, attempt.id))
        changed = changed_since_admission(root, attempt, index)
    conflicts = readmissions.of(attempt.id)
    admission = attempt.admission
    holds = report.admitted and not conflicts and attempt.withdrawn is None
    if as_json:
        print_json(
            {
                **report.to_json(),
                "admitted_at": admission.admitted_at if admission else None,
                "registry_changed_since_admission": changed,
                "conflicts": [c.to_json() for c in conflicts],
                "withdrawn": attempt.withdrawn is not None,
            }
        )
    else:
        _print_report(report)
        if admission is None:
            say(f"{attempt_id} has no recorded admission (not proposed through `ptreg new`)")
        else:
            then = admission.registry_state
            say(
                f"admitted at {admission.admitted_at} against {counted(then.attempts, 'attempt')} "
                f"(sha256 {then.sha256[:12]}); "
                + ("the registry has changed since" if changed else "the registry is unchanged since")
            )
        for c in conflicts:
            say(f"conflict [{c.rule}]: {c.message()}", one_line=True)
        if attempt.withdrawn is not None:
            say(f"withdrawn at {attempt.withdrawn.readmitted_at}: {attempt.withdrawn.reason}", one_line=True)
        verdict = f"admission does not hold: {len(report.failures)} check(s) failed"
        if conflicts:
            verdict += f", {counted(len(conflicts), 'conflict')} with attempts admitted before it"
        say("admission holds" if holds else verdict if attempt.withdrawn is None else "admission withdrawn")
    if not holds:
        raise typer.Exit(EXIT_CHECK_FAILED)


def precedents(
    method: list[str] = typer.Option([], "--method", metavar="METHOD", help="A method of the proposal (repeatable)."),
    base: list[str] = typer.Option([], "--base", metavar="BASE", help="A base of the proposal (repeatable)."),
    objective: str | None = typer.Option(None, "--objective", metavar="OBJECTIVE", help="The proposal's objective."),
    family: str | None = typer.Option(None, "--family", metavar="FAMILY", help="The proposal's family."),
    limit: int = typer.Option(10, "--limit", metavar="N", help="Show at most this many."),
    as_json: bool = JsonFlag,
) -> None:
    """The prior attempts most like a proposal: shared objective first, then methods and bases; failures first."""
    from ..views.precedents import Shape
    from ..views.precedents import precedents as find_precedents

    shape = Shape(objective=objective, methods=tuple(method), bases=tuple(base), family=family).given()
    with closing(load_index()) as index:
        found = find_precedents(shape, index.summaries(), limit)
    if as_json:
        print_json([p.to_json() for p in found])
        return
    _print_precedents(found)
