"""`ptreg mcp`: the registry's reading, its gate and its engine as tools of the Model Context
Protocol, over stdio, for any MCP client (docs/agents.md).

A front end like the command line: every tool calls the library functions the matching
command calls (the same gate, locks, record and engine), returns the same data as that
command's `--json`, with an output schema from the models of ``agents/models.py``, and turns a
``PtregError`` into a tool error of one line; the server keeps serving.

A run measures in a thread of its own. When the client cancels the call or goes away (the
SDK cancels a call whose client has closed its end), the run is stopped as a SIGHUP would stop
`ptreg run` at a terminal: its workers killed, what finished written as an ``interrupted`` run
and linked. SIGTERM, SIGINT or SIGHUP to the server stops a run the same way, as that signal, answers
its call with an error naming the run, answers every other call in flight, and then ends the
server, even while its client keeps stdin open (``serve``).

Each call runs on a thread of the server and takes the locks its command takes; threads contend
for them as processes do (``store/locks.py``).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from contextlib import closing
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import Field

from .. import __version__
from ..engine.executor import TaskProgress
from ..engine.interruption import interrupt
from ..errors import PtregError, UnknownAttempt, UnusableInput
from ..gate.proposal import propose as propose_through_gate
from ..gate.proposal_input import ProposalInput
from ..operations.conclude import Verdict, conclude
from ..operations.listing_runs import list_runs as list_in_progress
from ..operations.running import run_attempt as run_through_engine
from ..records.arguments import Caller, speaking
from ..records.ledger import STATUSES, Filter
from ..records.refs import check_id
from ..store.directory import load_meta
from ..store.full_read import FullRead, indexed_attempt, read_summarized
from ..store.index import open_index, usable_directory
from ..store.lineage_read import read_lineage
from ..store.reader import RegistryReader
from ..views.dispositions import with_truth
from ..views.dossier import render_json, sections
from ..views.items import run_items, run_reference
from ..views.lineage import lineage_json
from ..views.precedents import Shape
from ..views.precedents import precedents as find_precedents
from ..views.queries import select
from ..views.streaks import streak_chains, streaks_of
from ..views.suggestions import Suggestions, suggestions_of
from . import models
from .calls import Server, one_line
from .stdio import Input
from .tool_runs import Runs, progress_text

T = TypeVar("T")
NAME = "ptreg"
# SIGHUP: the other end hung up, which is what a client that cancels or leaves has done.
HANGUP = signal.SIGHUP
INSTRUCTIONS = (
    "ptreg is a registry of experiment attempts with a rerun gate. Before proposing, call "
    "`precedents` with the proposal's objective, methods and bases, and read what failed; "
    "`next_attempts` says what the registry suggests. Propose only through `propose` (try "
    "dry_run first): a refusal names each failed check and how to satisfy it. Then "
    "`run_attempt`, and `conclude_attempt` with a lesson, a next action and, where the numbers "
    "can decide it, a continue_if condition. Every proposal registers an analysis plan (worked_if, "
    "and regressed_if and margins as needed) before any number exists; at conclusion the plan "
    "decides the status, and another status needs a deviation saying why."
)


def _help(name: str) -> str:
    """The help of a ProposalInput field, as `ptreg new` shows it for its option (the tool's
    argument is the field itself)."""
    spec = next(f for f in fields(ProposalInput) if f.name == name)
    return str(spec.metadata["help"])


def _tool_error(exc: Exception, message: str) -> Exception:
    return ToolError(message)


def _resource_error(exc: Exception, message: str) -> Exception:
    """A resource read's failure as the SDK passes it on: its reason, in one line, to the client,
    and no traceback on the server's stderr (anything but a ``ResourceError`` is a crash to it)."""
    return ResourceNotFoundError(message) if isinstance(exc, UnknownAttempt) else ResourceError(message)


def _answer(work: Callable[[], T], error: Callable[[Exception, str], Exception] = _tool_error) -> T:
    """``work``'s answer, or its PtregError (or a file that could not be used) as an ``error``
    (a tool error unless said otherwise) of one line, as the command line words it, naming each
    input by the tool's argument rather than by a flag (``records/arguments.py``)."""
    try:
        with speaking(Caller.MCP):
            return work()
    except PtregError as exc:
        raise error(exc, one_line(exc.message)) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise error(exc, one_line(f"{where}{exc.strerror or exc}")) from None


def _open(root: Path) -> RegistryReader:
    """The query index as every command opens it (``cli/common.py``'s ``load_index``)."""
    if os.environ.get("PTREG_INDEX") == "off":
        return FullRead(root)
    if not usable_directory(root):
        load_meta(root)  # says in one line why this is no registry, or finishes a cut-short import
    return open_index(root)


def build(root: Path, runs: Runs | None = None) -> Server:
    """The server of the registry at ``root``, with every tool and the attempt resources."""
    runs = runs if runs is not None else Runs()
    server = Server(runs, NAME, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    def list_attempts(
        statuses: Annotated[list[str], Field(description="Only these statuses.")] = [],  # noqa: B006 - never mutated
        families: Annotated[list[str], Field(description="Only these families.")] = [],  # noqa: B006
        kinds: Annotated[list[str], Field(description="Only these kinds.")] = [],  # noqa: B006
        methods: Annotated[list[str], Field(description="Uses any of these methods.")] = [],  # noqa: B006
        bases: Annotated[list[str], Field(description="Uses any of these bases.")] = [],  # noqa: B006
        objectives: Annotated[list[str], Field(description="Only these objectives.")] = [],  # noqa: B006
        failures_only: Annotated[bool, Field(description="Only failed, regressed and inconclusive.")] = False,
        continuable: Annotated[bool, Field(description="Only attempts whose condition holds now.")] = False,
        blocked: Annotated[bool, Field(description="Only attempts whose condition does not hold now.")] = False,
    ) -> models.AttemptList:
        """The attempts that pass the filters (those of `ptreg list`), whole, in the ledger's order: has anything like this been tried?"""

        def work() -> models.AttemptList:

            unknown = [s for s in statuses if s not in STATUSES]
            if unknown:
                raise UnusableInput(f"statuses: unknown status {unknown[0]!r} (one of: {', '.join(STATUSES)})")
            if continuable and blocked:
                raise UnusableInput(
                    "continuable and blocked exclude each other: a condition is true or false, not both"
                )
            query = Filter(statuses, families, kinds, methods, bases, objectives, failures_only)
            with closing(_open(root)) as index:
                total = index.valid()
                found = select(index.candidates(query), query)
                whole = [read_summarized(root, a) for a in found]
            if continuable or blocked:
                kept = {id(a) for a in with_truth(root, [a for a in whole if a.continue_if], continuable)}
                whole = [a for a in whole if id(a) in kept]
            return models.AttemptList(attempts=whole, total=total)

        return _answer(work)

    @server.tool()
    def show_attempt(attempt_id: Annotated[str, Field(description="The attempt's id.")]) -> models.Dossier:
        """The dossier of one attempt (`ptreg show --json`): the record, then its sections: evidence, lesson, why it stopped, scope, disposition, lineage, sources, runs."""
        return _answer(lambda: _dossier(root, attempt_id))

    @server.tool()
    def precedents(
        objective: Annotated[str | None, Field(description="The proposal's objective.")] = None,
        methods: Annotated[list[str], Field(description="The proposal's methods.")] = [],  # noqa: B006
        bases: Annotated[list[str], Field(description="The proposal's bases.")] = [],  # noqa: B006
        family: Annotated[str | None, Field(description="The proposal's family.")] = None,
        limit: Annotated[int, Field(ge=1, description="At most this many.")] = 10,
    ) -> models.Precedents:
        """The prior attempts most like a proposal (`ptreg precedents`): shared objective first, then methods and bases; failures first among equals. Read them before proposing."""

        def work() -> models.Precedents:

            shape = Shape(objective=objective, methods=tuple(methods), bases=tuple(bases), family=family).given()
            with closing(_open(root)) as index:
                found = find_precedents(shape, index.summaries(), limit)
            return models.Precedents.model_validate({"precedents": [p.to_json() for p in found]})

        return _answer(work)

    @server.tool()
    def lineage(attempt_id: Annotated[str, Field(description="The attempt's id.")]) -> models.Lineage:
        """The varied_from chain of an attempt, oldest first, and what superseded it (`ptreg lineage --json`)."""

        def work() -> models.Lineage:

            with closing(_open(root)) as index:
                indexed_attempt(index, attempt_id)  # the error a direct read gives: not valid, or the closest ids
                by_id = {a.id: a for a in index.summaries_of(index.lineage_ids(attempt_id))}
            return models.Lineage.model_validate(lineage_json(attempt_id, by_id))

        return _answer(work)

    @server.tool()
    def streaks() -> models.Streaks:
        """Per objective, the negatives at the tip of its deepest chain (`ptreg streaks --json`): CAUTION at 2, STOP AND RETHINK at 3 or more, where the gate refuses a proposal that does not change axis."""

        def work() -> models.Streaks:

            with closing(_open(root)) as index:
                chains = streak_chains(index.links())
                found = streaks_of(
                    chains, {a.id: a for a in index.summaries_of(sorted({i for _, c in chains for i in c}))}
                )
            return models.Streaks.model_validate({"streaks": [s.to_json() for s in found]})

        return _answer(work)

    @server.tool()
    def propose(
        attempt_id: Annotated[str, Field(description=_help("id"))],
        name: Annotated[str, Field(description=_help("name"))],
        family: Annotated[str, Field(description=_help("family"))],
        kind: Annotated[str, Field(description=_help("kind"))],
        question: Annotated[str | None, Field(description=_help("question"))] = None,
        hypothesis: Annotated[str | None, Field(description=_help("hypothesis"))] = None,
        varied_from: Annotated[str | None, Field(description=_help("varied_from"))] = None,
        varied: Annotated[str | None, Field(description=_help("varied"))] = None,
        methods: Annotated[list[str], Field(description=_help("methods"))] = [],  # noqa: B006
        bases: Annotated[list[str], Field(description=_help("bases"))] = [],  # noqa: B006
        objective: Annotated[str | None, Field(description=_help("objective"))] = None,
        data_rows: Annotated[int | None, Field(description=_help("data_rows"))] = None,
        evaluator: Annotated[str | None, Field(description=_help("evaluator"))] = None,
        budget_seconds: Annotated[float | None, Field(description=_help("budget_seconds"))] = None,
        budget_steps: Annotated[int | None, Field(description=_help("budget_steps"))] = None,
        budget_repeats: Annotated[int | None, Field(description=_help("budget_repeats"))] = None,
        budget_threads: Annotated[int | None, Field(description=_help("budget_threads"))] = None,
        budget_memory_mb: Annotated[float | None, Field(description=_help("budget_memory_mb"))] = None,
        tracking_issue: Annotated[str | None, Field(description=_help("tracking_issue"))] = None,
        answers_disposition: Annotated[str | None, Field(description=_help("answers_disposition"))] = None,
        override_streak: Annotated[str | None, Field(description=_help("override_streak"))] = None,
        source: Annotated[str | None, Field(description=_help("source"))] = None,
        worked_if: Annotated[str | None, Field(description=_help("worked_if"))] = None,
        regressed_if: Annotated[str | None, Field(description=_help("regressed_if"))] = None,
        margins: Annotated[list[str], Field(description=_help("margins"))] = [],  # noqa: B006
        decide_on_runs: Annotated[int | None, Field(description=_help("decide_on_runs"))] = None,
        dry_run: Annotated[bool, Field(description="Check the gate and find precedents; write nothing.")] = False,
    ) -> models.Proposal:
        """Propose an attempt through the rerun gate (`ptreg new`), under the registry lock: written (status not-tried, with its admission) only when every check holds. A refusal is a tool error naming each failed check and how to satisfy it; nothing is written."""
        given = ProposalInput(
            id=attempt_id,
            name=name,
            family=family,
            kind=kind,
            question=question,
            hypothesis=hypothesis,
            varied_from=varied_from,
            varied=varied,
            methods=list(methods),
            bases=list(bases),
            objective=objective,
            data_rows=data_rows,
            evaluator=evaluator,
            budget_seconds=budget_seconds,
            budget_steps=budget_steps,
            budget_repeats=budget_repeats,
            budget_threads=budget_threads,
            budget_memory_mb=budget_memory_mb,
            tracking_issue=tracking_issue,
            answers_disposition=answers_disposition,
            override_streak=override_streak,
            source=source,
            worked_if=worked_if,
            regressed_if=regressed_if,
            margins=list(margins),
            decide_on_runs=decide_on_runs,
        )
        return _answer(lambda: _propose(root, given, dry_run))

    @server.tool()
    def next_attempts(
        limit: Annotated[int, Field(ge=0, description="At most this many (0: all).")] = 10,
    ) -> Suggestions:
        """What to try next (`ptreg next --json`): runs to conclude, attempts to run, conditions that hold or stopped holding, streaks to leave by a new axis, measured headroom, next actions nobody took up; each citing its attempts and runs."""

        def work() -> Suggestions:
            with closing(_open(root)) as index:
                return suggestions_of(index).limited(limit)

        return _answer(work)

    @server.tool()
    async def run_attempt(
        attempt_id: Annotated[str, Field(description="The admitted attempt to measure.")], ctx: Context
    ) -> models.RunDone:
        """Measure an admitted attempt under its frozen evaluator and budget (`ptreg run`), after re-checking its gate; progress is notified while it measures. Cancelling the call, or leaving, stops the run: what finished is written as an `interrupted` run."""
        return await _run(root, attempt_id, ctx, runs)

    @server.tool()
    def list_items(
        attempt_id: Annotated[str, Field(description="The attempt whose run to read.")],
        run_id: Annotated[str | None, Field(description="The run; default: its latest complete run.")] = None,
        metric: Annotated[str | None, Field(description="One metric; default: each with per-item results.")] = None,
        arm: Annotated[str | None, Field(description="The arm; default: each arm but over.")] = None,
        over: Annotated[str | None, Field(description="The arm it is compared with; default: the baseline.")] = None,
        verdict: Annotated[Literal["won", "lost", "tied"] | None, Field(description="Only these items.")] = None,
        limit: Annotated[int | None, Field(ge=1, description="At most this many items per metric.")] = None,
    ) -> models.RunItems:
        """The items behind a run's won/lost/tied counts (`ptreg items --json`): each item's value in both arms, their difference (averaged over the seeds) and its verdict, the worst losses first. Read the lost ones: they are the regressions."""
        found = _answer(lambda: run_items(root, run_reference(attempt_id, run_id), metric=metric, arm=arm, over=over))
        return models.RunItems.model_validate(found.to_json([verdict] if verdict else [], limit))

    @server.tool()
    def list_runs() -> models.RunsInProgress:
        """The runs in progress of the registry (`ptreg runs --json`): each one's state (running, or process gone: resumable with `ptreg run ID --resume`), round, elapsed time, budget left and last output line; a run submitted as a Ray job, its job's state."""

        def work() -> models.RunsInProgress:
            if not usable_directory(root):
                load_meta(root)  # says in one line why this is no registry, or finishes a cut-short import
            return models.RunsInProgress.model_validate({"runs": [r.to_json() for r in list_in_progress(root)]})

        return _answer(work)

    @server.tool()
    def conclude_attempt(
        attempt_id: Annotated[str, Field(description="The attempt to conclude.")],
        lesson: Annotated[str, Field(description="What the attempt taught.")],
        next_action: Annotated[str, Field(description="The retained disposition, in words.")],
        status: Annotated[
            str | None,
            Field(
                description="worked, worked-with-caveat, failed, regressed or inconclusive. Leave it out for an attempt "
                "with an analysis plan: the plan decides; another status needs a deviation."
            ),
        ] = None,
        deviation: Annotated[
            str | None, Field(description="Why the status departs from the analysis plan's decision (recorded).")
        ] = None,
        continue_if: Annotated[
            str | None,
            Field(
                description="A condition over the latest complete run that decides the disposition, e.g. "
                "'amdahl(backward_db, backend=numba, config=xl) >= 1.25' (docs/conditions.md)."
            ),
        ] = None,
        failure_reason: Annotated[
            str | None, Field(description="Why it fell short (needed unless it worked outright).")
        ] = None,
        confidence: Annotated[
            str | None, Field(description="How sure the failure reason is: exact, inferred, missing-evidence.")
        ] = None,
        evidence: Annotated[str | None, Field(description="What was measured or seen beyond the run's line.")] = None,
        evidence_sources: Annotated[
            list[str], Field(description="Sources of that evidence, relative to the registry.")
        ] = [],  # noqa: B006
    ) -> models.Concluded:
        """Record the verdict after a run (`ptreg conclude`), with the registry's rules applied; nothing is written if they fail. A continue_if condition is checked against the latest complete run."""

        def work() -> models.Concluded:

            verdict = Verdict(
                status,
                lesson,
                next_action,
                failure_reason,
                confidence,
                evidence,
                tuple(evidence_sources),
                continue_if,
                deviation,
            )
            verdict.check()
            done = conclude(root, check_id(attempt_id), verdict)
            return models.Concluded(
                attempt=done.attempt,
                condition=done.decision.summary() if done.decision is not None else None,
                dropped=done.dropped,
                plan=done.plan.to_json() if done.plan is not None else None,
                linked=list(done.linked),
            )

        return _answer(work)

    @server.resource(
        "ptreg://attempt/{attempt_id}",
        name="attempt",
        description="An attempt's dossier as JSON, as the show_attempt tool gives it.",
        mime_type="application/json",
    )
    def attempt_resource(attempt_id: str) -> str:
        return _answer(lambda: _dossier(root, attempt_id).model_dump_json(indent=2), _resource_error)

    return server


def _dossier(root: Path, attempt_id: str) -> models.Dossier:

    check_id(attempt_id)
    with closing(_open(root)) as index:
        # the whole record through the model, for the schema (show may read it off its JSON);
        # or the error a direct read gives: not valid, or the closest ids
        attempt = indexed_attempt(index, attempt_id)
        found = read_lineage(index, attempt_id)
        vocabularies = index.vocabularies()
    parts = sections(found.attempt, found.by_id, vocabularies, found.record_file, index.root)
    return models.Dossier(attempt=attempt, sections=render_json(found.attempt, parts)["sections"])


def _propose(root: Path, given: ProposalInput, dry_run: bool) -> models.Proposal:

    done = propose_through_gate(root, given, dry_run=dry_run)
    report = done.report
    if not report.admitted:
        failed = "; ".join(
            f"{c.check}: {c.detail}" + (f" (how to satisfy: {c.remedy})" if c.remedy else "") for c in report.failures
        )
        raise UnusableInput(f"refused by the gate, nothing written: {len(report.failures)} check(s) failed: {failed}")
    return models.Proposal.model_validate(
        {
            "admitted": report.admitted,
            "written": done.written,
            "path": str(done.path) if done.path else None,
            "gate": report.to_json(),
            "precedents": [p.to_json() for p in done.precedents],
            "attempt": done.attempt,
        }
    )


async def _run(root: Path, attempt_id: str, ctx: Context, runs: Runs) -> models.RunDone:

    check = _answer(lambda: check_id(attempt_id))
    count = 0

    async def notify(number: int, message: str) -> None:
        with anyio.move_on_after(2):  # a client gone must not hold the run up
            try:
                await ctx.report_progress(number, None, message)
            except Exception:  # a notification that cannot be sent is dropped; the run goes on
                return

    def progress(event: TaskProgress) -> None:
        nonlocal count
        count += 1
        try:
            anyio.from_thread.run(notify, count, progress_text(event))
        except Exception:  # the event loop is gone: nothing to tell
            return

    started, finished = threading.Event(), threading.Event()
    worker: list[threading.Thread] = []

    def work() -> Any:
        worker.append(threading.current_thread())
        started.set()
        try:
            with runs.measuring():
                command = ["ptreg", "mcp", "run_attempt", check]
                return run_through_engine(root, check, command, progress=progress)
        finally:
            finished.set()

    try:
        done = await anyio.to_thread.run_sync(lambda: _answer(work), abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        # the client cancelled the call or went away: stop the run as a hang-up would, and
        # wait until what finished is written and linked
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(started.wait)
            interrupt(worker[0], runs.stopping or HANGUP)
            await anyio.to_thread.run_sync(finished.wait)
        raise
    results = done.results
    assert results.run_id is not None
    if runs.stopping is not None and done.interrupted_by is not None:
        # the server was told to stop: the call is answered, as an error, before the server goes
        raise ToolError(
            one_line(
                f"run {results.run_id} of {check} was interrupted by {signal.Signals(done.interrupted_by).name}: "
                f"ptreg mcp is stopping. What finished is written as an interrupted run in {done.folder}"
            )
        )
    return models.RunDone(
        run_id=results.run_id,
        status=results.status,
        reason=results.reason,
        folder=str(done.folder),
        interrupted_by=signal.Signals(done.interrupted_by).name if done.interrupted_by else None,
        results=results,
    )


def serve(root: Path) -> int | None:
    """Serve the registry at ``root`` over stdio until the client leaves, or until SIGTERM,
    SIGINT or SIGHUP: then each run in progress stops as that signal would stop `ptreg run` (what finished
    is written as an interrupted run), every call taken is answered, and the input is ended as
    if the client had closed it, so that the server ends even while the client keeps stdin open.
    Returns the signal that stopped the server, if one did."""
    runs = Runs()
    server = build(root, runs)
    stdin = Input()

    async def main() -> None:
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                # SIGHUP too: whoever started the server went away, as `ptreg run` takes it
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as received:
                    async for signum in received:
                        if runs.stopping is None:  # a second signal changes nothing: the stop is under way
                            runs.stop_all(signum)
                            await server.all_answered()
                            stdin.end()

            group.start_soon(watch)
            await server.serve_stdio(stdin)
            group.cancel_scope.cancel()

    stdin.claim()
    try:
        anyio.run(main)
    except BaseExceptionGroup as group:
        # a client that left while an answer was written: nothing to do but end
        _, rest = group.split((BrokenPipeError, anyio.BrokenResourceError, anyio.ClosedResourceError))
        if rest is not None:
            raise rest from None
    finally:
        stdin.release()
    return runs.stopping
