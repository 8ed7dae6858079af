"""Running an admitted attempt under its frozen evaluator, and linking the run to the record.

``run_attempt`` re-checks the gate, measures, writes the run folder whole, then links it from
the attempt record with an evidence line, in that order (a kill between the last two leaves
an orphaned run that ``ptreg repair`` links, see ``repair.py``).

What was measured is never thrown away for want of the registry lock: when the lock stays
busy past its wait at the end, the run folder is still written whole (the attempt's run lock,
held throughout, keeps every other run of it and ``ptreg repair`` off the folder) and the run
fails in one line naming the folder. ``ptreg repair`` links it once the lock is free; so do
``ptreg conclude`` of the attempt and the end of its next run, which link every run of their
attempt left unlinked, oldest first, before their own change. A concluded attempt never gains a
run (``with_run``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import utc_now
from ..engine.environment import backend_configuration, collect, command_variables
from ..engine.executor import Executor, TaskProgress
from ..engine.identity import code_identity, revision_code
from ..engine.interruption import deferred, interruptible, pending
from ..engine.measurement import SpreadExecutor, measure
from ..engine.plan import EVALUATOR_VERSION, order_seed
from ..engine.revisions import changed_under, checked_out
from ..errors import CheckFailed, LockBusy, PtregError, UnusableInput
from ..gate.checks import check_gate
from ..gate.consent import frozen_files_change, refuse_unconsented
from ..gate.gate_inputs import read_gate_inputs
from ..gate.readmission import judged_before, read_readmissions, unresolved
from ..records.arguments import invoked
from ..records.attempt import Attempt, Budget, RunRef
from ..records.evaluator import ArmsSpec, EvaluatorSpec, FrozenEvaluator
from ..records.run_journal import JOURNAL_VERSION, JournalHead
from ..records.run_results import ArmRevision, CodeIdentity, Provenance, RunResults, new_results
from ..store.directory import load_meta, read_attempt, write_attempt
from ..store.full_read import indexed_attempt
from ..store.index import open_index
from ..store.input_digests import project_root
from ..store.jsonio import refuse_outside
from ..store.leftovers import orphaned_runs
from ..store.locks import TIMEOUT_ENV, registry_lock, run_lock
from ..store.progress import ProgressWriter, claim_run_id, finish_in_progress, make_in_progress_folder
from ..store.rounds_journal import Journal, has_journal, read_journal, remove_folder, this_process_started, written
from ..store.runs import RESULTS_FILE, new_run_id, read_results, run_folder, runs_dir, write_run
from ..store.vocabulary_files import refuse_old_layout
from ..views.run_report import evidence_line
from .resuming import ResumePoint, code_changed, resume_point


@dataclass
class RunDone:
    results: RunResults
    folder: Path
    attempt: Attempt
    interrupted_by: int | None = None  # SIGINT or SIGTERM, when one stopped or ended the run
    resumed: str | None = None  # with --resume: what it continued and carried, in words

    @property
    def exit_code(self) -> int | None:
        return None if self.interrupted_by is None else 128 + self.interrupted_by


def run_attempt(
    root: Path,
    attempt_id: str,
    command: list[str],
    progress: Callable[[TaskProgress], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    make_executor: Callable[..., Executor | SpreadExecutor] = Executor,
    run_id: str | None = None,
    resume: bool = False,
) -> RunDone:
    """Measure, then write the run folder whole and link it.

    The attempt's run lock keeps a second run of it out for the whole measurement; the
    registry lock is held only while the folder and the link are written. ``clock`` is what
    the budget's wall clock reads; ``make_executor`` builds the executor from the budget (the
    local one, or one that spreads the cells over a cluster). The run's id is chosen before
    it measures (``run_id`` when the caller chose it: `ptreg run --detach` did, and it must be
    fresh), and its progress is kept in its in-progress folder until its run folder is written.
    With ``resume``, the run continues the attempt's newest run that stopped before its end
    (``resuming.py``), refused before anything is made when it cannot.
    """
    with interruptible():  # from the start, so that SIGTERM never kills a run without a word
        read_attempt(root, attempt_id)  # no lock file for an attempt or registry that is not there
        refuse_old_layout(root)  # before measuring, not after: the run could not be linked
        with run_lock(root, attempt_id):
            frozen, budget = _admitted(root, attempt_id, resume)  # as it is now that no other run can start
            point = _resume_point(root, attempt_id, frozen, run_id) if resume else None
            detached = run_id is not None
            if run_id is None:
                run_id = new_run_id(root, attempt_id, utc_now())
                folder = make_in_progress_folder(root, attempt_id, run_id)
            else:
                folder = claim_run_id(root, attempt_id, run_id)
            try:
                writer = ProgressWriter(folder, attempt_id, run_id, clock=clock)
                writer.write()
                executor = make_executor(
                    wall_clock_seconds=budget.wall_clock_seconds,
                    max_memory_mb=budget.max_memory_mb,
                    progress=progress_kept(writer, progress),
                    clock=clock,
                    registry=root,
                )
                return _measure_and_record(root, attempt_id, frozen, budget, command, executor, run_id, point)
            except BaseException:
                # refused before it measured (a revision that names no commit, a worker that
                # cannot start): nothing to resume, so nothing is left behind; a detached run
                # keeps its folder, whose log.txt is where its user reads why
                if not detached and not written(root, attempt_id, run_id) and _measured_nothing(folder):
                    remove_folder(root, attempt_id, run_id)
                raise


def _measured_nothing(folder: Path) -> bool:
    """Whether an in-progress folder holds no round a resume could carry (a journal unreadable
    is not known to be empty, and is kept)."""
    if not has_journal(folder):
        return True
    try:
        return not read_journal(folder).rounds
    except PtregError:
        return False


def _resume_point(root: Path, attempt_id: str, frozen: FrozenEvaluator, own: str | None) -> ResumePoint:
    """What ``--resume`` continues, refused when the code it measured changed since; ``own`` is
    the id a detached run reserved for itself, which is not a run to continue."""
    point = resume_point(root, read_attempt(root, attempt_id), frozen, own)
    changed_code = code_changed(point.code, code_identity(frozen.spec, root))
    if changed_code is not None:
        raise UnusableInput(f"--resume: run {point.run_id} of {attempt_id} is not continued: {changed_code}")
    return point


def reserve_run(root: Path, attempt_id: str, resume: bool = False) -> tuple[str, Path]:
    """Every refusal ``run_attempt`` makes before measuring (the registry, the gate, the consent,
    the run lock, and with ``resume`` what it would continue) made now, nothing measured; then,
    under the same hold of the run lock, the run's id chosen and its in-progress folder made, so
    that the id is this run's. What `ptreg run --detach` does in the foreground before the run
    goes to the background."""
    read_attempt(root, attempt_id)
    refuse_old_layout(root)
    with run_lock(root, attempt_id):
        frozen, _ = _admitted(root, attempt_id, resume)
        if resume:
            _resume_point(root, attempt_id, frozen, None)
        run_id = new_run_id(root, attempt_id, utc_now())
        return run_id, make_in_progress_folder(root, attempt_id, run_id)


def progress_kept(
    writer: ProgressWriter, progress: Callable[[TaskProgress], None] | None
) -> Callable[[TaskProgress], None]:
    """``progress`` that also keeps each event in the run's progress.json, whoever runs it (the
    command line, a detached process, the MCP server)."""

    def on(event: TaskProgress) -> None:
        if event.phase == "round":
            writer.update(phase=event.task, round_=event.done + 1, total=event.total, budget_left=event.budget_left)
        elif event.phase == "finished":
            writer.update(phase=f"{event.task} finished: {event.outcome}", budget_left=event.budget_left)
        else:
            writer.update(phase=f"{event.task} {event.phase}", budget_left=event.budget_left, line=event.line)
        if progress is not None:
            progress(event)

    return on


def _admitted(root: Path, attempt_id: str, resume: bool = False) -> tuple[FrozenEvaluator, Budget]:
    """The attempt's evaluator and budget, once it is known to be runnable and still admitted."""
    load_meta(root)  # finishes an import cut short after its commit before the index looks
    index = open_index(root)  # the gate's freshness, streak and precedents checks read it
    try:
        attempt = indexed_attempt(index, attempt_id)
        inputs = read_gate_inputs(index, attempt, root)
    finally:
        index.close()
    if attempt.status != "not-tried":
        raise CheckFailed(
            f"{attempt_id} is concluded (status {attempt.status}); a new run needs a new attempt: "
            f"{invoked('new', varied_from=attempt_id)}",
        )
    readmissions = read_readmissions(root, only=attempt_id)  # a clone merged in may have admitted a clash
    blocked = unresolved(readmissions, attempt)
    if blocked is not None:
        raise CheckFailed(blocked)
    if attempt.evaluator is None or attempt.budget is None:
        raise CheckFailed(f"{attempt_id} has no frozen evaluator or no budget; propose it with {invoked('new')}")
    file = inputs.evaluator
    if resume and file is not None and (file.changed_inputs or file.changed_code):
        # the kept rounds measured other files than a continuation would: nothing is run
        raise UnusableInput(
            f"--resume: {file.changed_inputs or file.changed_code}; the run it would continue measured the files as "
            "frozen, so it is not continued"
        )
    if file is not None and file.frozen is not None and file.consent is not None:
        # a command nobody consented to, or whose code is not what was consented to, is
        # unusable input, whatever else the gate finds: nothing of it is run
        refuse_unconsented(file.frozen, file.changed_code)
    report = check_gate(attempt, judged_before(inputs, readmissions, attempt_id))
    if not report.admitted or report.evaluator is None:
        failed = "; ".join(f"{c.check}: {c.detail}" for c in report.failures)
        raise CheckFailed(f"{attempt_id}: the gate no longer admits it ({failed}); see `ptreg gate {attempt_id}`")
    # found now, not after the measurement
    refuse_outside(root, runs_dir(root, attempt_id), "a run is written only inside the registry")
    return report.evaluator, attempt.budget


def _measure_and_record(
    root: Path,
    attempt_id: str,
    frozen: FrozenEvaluator,
    budget: Budget,
    command: list[str],
    executor: Executor | SpreadExecutor,
    run_id: str,
    point: ResumePoint | None = None,
) -> RunDone:
    started = utc_now()
    environment = collect(root)
    code = code_identity(frozen.spec, root)  # before measuring: the code as it was when measured
    seed = point.order_seed if point is not None and point.order_seed is not None else order_seed()
    journal = _journal(root, attempt_id, run_id, frozen, started, code, seed, point)
    try:
        return _measured(
            root,
            attempt_id,
            frozen,
            budget,
            command,
            executor,
            point,
            started,
            environment,
            code,
            run_id,
            seed,
            journal,
        )
    finally:
        journal.close()
        if point is not None and written(root, attempt_id, run_id):  # what it carried is in its run folder
            for lost in point.consumed:
                remove_folder(root, attempt_id, lost)


def _journal(
    root: Path,
    attempt_id: str,
    run_id: str,
    frozen: FrozenEvaluator,
    started: str,
    code: CodeIdentity,
    seed: int,
    point: ResumePoint | None,
) -> Journal:
    """The journal in the run's in-progress folder, holding from the start the rounds it carries."""
    head = JournalHead(
        journal=JOURNAL_VERSION,
        run_id=run_id,
        attempt=attempt_id,
        evaluator=frozen.ref,
        order_seed=seed,
        pid=os.getpid(),
        process_started=this_process_started(),
        started_at=started,
        code=code,
        continues=point.continues if point is not None else None,
        continues_partial=point.continues_partial if point is not None else None,
    )
    journal = Journal(make_in_progress_folder(root, attempt_id, run_id), head)
    try:
        for line in point.rounds if point is not None else ():
            journal.append(line)
    except BaseException:
        journal.close()
        raise
    return journal


def _measured(
    root: Path,
    attempt_id: str,
    frozen: FrozenEvaluator,
    budget: Budget,
    command: list[str],
    executor: Executor | SpreadExecutor,
    point: ResumePoint | None,
    started: str,
    environment: dict[str, Any],
    code: CodeIdentity,
    run_id: str,
    seed: int,
    journal: Journal,
) -> RunDone:
    with checked_out(project_root(root), frozen.spec, root.absolute().name, frozen.inputs) as checkouts:
        arm_roots = {arm: c.root for arm, c in checkouts.items() if not c.imports}
        imports = {backend: folder for c in checkouts.values() for backend, folder in c.imports.items()}
        code.arms.update(revision_code(frozen.spec, {label: c.code for label, c in checkouts.items()}))
        found = measure(
            frozen.spec,
            executor,
            round_cap=budget.max_repeats,
            root=project_root(root),
            arm_roots=arm_roots if isinstance(frozen.spec, ArmsSpec) else None,
            import_folders=imports,
            seed_of_orders=seed,
            kept=point.kept if point is not None else None,
            # only a run of arms is continued (resuming.py), so only its rounds are journaled
            journal=journal.append if isinstance(frozen.spec, ArmsSpec) else None,
        )
        # what the run measured is the frozen evaluator only while its files still are what was
        # frozen: a repeat that rewrote its own script, or data edited meanwhile, leaves it deciding nothing
        changed = frozen_files_change(frozen, root) or changed_under(
            frozen.spec, checkouts, root.absolute().name, frozen.inputs
        )
    revisions = {arm: ArmRevision(revision=c.revision, commit=c.commit, code=c.code) for arm, c in checkouts.items()}
    if isinstance(frozen.spec, EvaluatorSpec):
        # read after the workers ran: a backend may settle its configuration on first use (numba's tile)
        # a backend taken at a revision is not the installed one: its configuration stays unknown (null)
        environment["backend_configuration"] = backend_configuration(list(frozen.spec.backends))
    elif frozen.spec.env:  # what the command was given of the caller's environment, secrets redacted
        environment["command_variables"] = command_variables(frozen.spec.env)
    if not isinstance(executor, Executor):  # the machines the cells ran on, beside the driver's
        environment.update(executor.provenance())
    # From here signals wait: the run is written whole and linked, then the process exits.
    with deferred():
        finished = utc_now()

        def write() -> tuple[RunResults, Path]:
            made = Provenance(
                command,
                started,
                finished,
                EVALUATOR_VERSION,
                frozen=frozen,
                budget=budget,
                attempt=attempt_id,
                run_id=run_id,
                code=code,
                inputs_changed=changed,
                revisions=revisions or None,
                continues=point.continues if point is not None else None,
                continues_partial=point.continues_partial if point is not None else None,
            )
            results = new_results(frozen.spec, found, made)
            written = write_run(root, results, environment)
            finish_in_progress(root, attempt_id, run_id, written)
            return results, written

        with ExitStack() as held:
            try:
                held.enter_context(registry_lock(root))
            except LockBusy as busy:
                results, folder = write()  # under the run lock alone, which keeps repair off it
                raise CheckFailed(
                    f"{attempt_id} was measured, but {busy.lock} stayed locked by {busy.holder} for "
                    f"{busy.waited:.0f} s ({TIMEOUT_ENV} sets the wait), so its run is not linked yet. It is kept, "
                    f"written whole to {folder}: `ptreg repair` links it once the lock is free, as do "
                    f"`ptreg conclude {attempt_id}` and the end of its next run"
                ) from None
            earlier = unlinked_runs(root, read_attempt(root, attempt_id))  # before this run's folder is there
            results, folder = write()
            attempt = link_runs(root, attempt_id, [*earlier, results])
    late = pending()
    return RunDone(results, folder, attempt, found.interrupted_by or late, _resumed(point))


def _resumed(point: ResumePoint | None) -> str | None:
    if point is None:
        return None
    lost = " (lost before it was written; its journal was read)" if point.partial else ""
    note = f"; {point.note}" if point.note else ""
    return f"continues run {point.run_id}{lost}, carrying {point.count} round(s) of an arm measured whole{note}"


def results_source(root: Path, attempt_id: str, run_id: str) -> str:
    """The run's results file as a source, relative to the registry directory as every source
    a record stores is, whatever repository holds it."""
    return (run_folder(root, attempt_id, run_id) / RESULTS_FILE).relative_to(root).as_posix()


def with_run(root: Path, attempt: Attempt, results: RunResults) -> Attempt:
    """The attempt gaining the run's link, its evidence line and its results file as a source;
    refused for a concluded attempt, whose record is closed to new evidence."""
    assert results.run_id is not None
    if attempt.status != "not-tried":
        raise CheckFailed(
            f"{attempt.id} is concluded (status {attempt.status}), and a concluded record gains no run: run "
            f"{results.run_id} is kept apart, unlinked, in {run_folder(root, attempt.id, results.run_id)}",
        )
    ref = RunRef(
        run_id=results.run_id,
        status=results.status,
        evaluator=results.evaluator,
        started_at=results.started_at,
        finished_at=results.finished_at,
        continues=results.continues,
    )
    line = evidence_line(results)
    evidence = f"{attempt.evidence}\n{line}" if attempt.evidence else line
    source = results_source(root, attempt.id, results.run_id)
    updated = attempt.model_copy(
        update={
            "runs": [*(attempt.runs or []), ref],
            "evidence": evidence,
            "evidence_sources": [*(attempt.evidence_sources or []), source],
        }
    )
    return Attempt.model_validate(updated.model_dump(exclude_none=True))


def link_runs(root: Path, attempt_id: str, runs: Iterable[RunResults]) -> Attempt:
    """The attempt, read afresh (a run takes a while), gains each run in order, in one write."""
    attempt = read_attempt(root, attempt_id)
    for results in runs:
        attempt = with_run(root, attempt, results)
    write_attempt(root, attempt)
    return attempt


def unlinked_runs(root: Path, attempt: Attempt) -> list[RunResults]:
    """The whole runs of a not-concluded attempt that it does not link yet, oldest first: each
    was written by a run that was killed, or found the registry locked, before its link. Read
    under the registry lock, by a caller that holds the attempt's run lock too."""
    if attempt.status != "not-tried":
        return []  # kept apart: `ptreg validate` and `ptreg repair` report them
    return [read_results(x.path, root) for x in orphaned_runs(root, attempt) if x.fixable]
