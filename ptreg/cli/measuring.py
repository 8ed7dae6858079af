"""`ptreg backends|bench|run|conclude`: measuring. Logic lives in the library."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import EXIT_CHECK_FAILED, EXIT_UNUSABLE, PtregError, UnusableInput
from ..text import printable
from .common import JsonFlag, command_line, print_json, registry_dir, say, say_wrapped

if TYPE_CHECKING:
    from ..engine.executor import Executor, TaskProgress
    from ..engine.measurement import SpreadExecutor
    from ..records.run_results import RunResults

EXECUTORS = ("local", "ray")
ExecutorOption = typer.Option(
    "local",
    "--executor",
    metavar="KIND",
    help="local (worker processes on this machine) or ray (the nodes of a Ray cluster offering ptreg_bench; docs/ray.md).",
)
AddressOption = typer.Option(
    None,
    "--address",
    metavar="HOST:PORT",
    help="With --executor ray: the cluster to join (default: $RAY_ADDRESS, else the cluster started on this machine).",
)


def executor_maker(kind: str, address: str | None) -> Callable[..., Executor | SpreadExecutor]:
    """What builds the executor from the budget: the local one, or the Ray one (Ray is imported
    only here, and only when asked for)."""
    if kind not in EXECUTORS:
        raise PtregError(f"--executor {kind!r} is not one of {', '.join(EXECUTORS)}", EXIT_UNUSABLE)
    if kind == "local":
        if address is not None:
            raise PtregError("--address is for --executor ray; the local executor runs on this machine", EXIT_UNUSABLE)
        from ..engine.executor import Executor

        return Executor
    try:
        from ..engine.ray_executor import RayExecutor
    except ImportError as exc:
        raise PtregError(
            f"--executor ray needs Ray, which is not installed here ({exc}): pip install 'ptreg[ray]'", EXIT_UNUSABLE
        ) from None

    def make(**budget: object) -> SpreadExecutor:
        return RayExecutor(address=address, **budget)  # type: ignore[arg-type]

    return make


def backends(as_json: bool = JsonFlag) -> None:
    """The kernel backends registered through the `ptreg.backends` entry points, and whether each can run here.

    Listing reads each backend's metadata without starting it, so an optional dependency (numba) is not imported. An unavailable backend is listed with the reason; it is never an error.
    """
    from ..engine.backends import describe_all, roles
    from ..views.tables import plain

    found = describe_all()
    if as_json:
        print_json([b.to_json() for b in found])
        return
    reference = roles(found).reference or "the reference"
    parity = {True: f"bits of {reference}", False: "tolerance", None: "unknown"}
    rows = [
        [
            b.name,
            "yes" if b.available else "no (see below)",
            parity[b.order_preserving],
            b.default_threads,
            b.thread_control,
            f"{b.distribution} {b.distribution_version}",
            b.description,
        ]
        for b in found
    ]
    headers = ["backend", "available", "parity against", "threads", "thread control", "from", "description"]
    say(plain(rows, headers, shrink=(4, 5, 6), drop=(5, 4, 6)))
    for b in found:
        if b.available and b.configuration:
            say_wrapped(f"{b.name} runs with: {b.configuration}")
    for b in found:
        if not b.available:
            say_wrapped(f"{b.name} is unavailable: {b.reason}")


def workloads(as_json: bool = JsonFlag) -> None:
    """The workloads registered through the `ptreg.workloads` entry points: what each measures, its metrics and the spec fields it needs.

    A workload of backends compares kernel backends on model configs (its spec: configs, backends, steps); a workload of arms compares named arms on declared metrics (its spec: arms, baseline, metrics, inputs, repeats, seed, timeout_seconds, and the workload's own fields). Listing loads each plugin and checks its methods' signatures; a broken one is listed with the reason, never an error. Writing one: docs/workloads.md.
    """
    from ..engine.workloads.discovery import describe_all
    from ..views.tables import plain

    found = describe_all()
    if as_json:
        print_json([w.to_json() for w in found])
        return
    rows = []
    for w in found:
        metrics = ", ".join(f"{m} ({d['unit']}, {d['better']} is better)" for m, d in w.metrics.items())
        if w.kind == "backends":
            metrics = w.unit or "unknown"
        elif not metrics:
            metrics = "declared by each evaluator"
        # the fields a spec may leave out (the workload's own check says which it needs) read "a or b"
        given = [f for f in w.spec_fields if f not in w.optional_fields]
        optional = " or ".join(f for f in w.spec_fields if f in w.optional_fields)
        fields = ", ".join([*given, *([optional] if optional else [])])
        fields = fields or ("configs, backends" if w.kind == "backends" else "none")
        rows.append([w.name, "yes" if w.available else "no (see below)", w.kind, metrics, fields, w.description])
    headers = ["workload", "available", "compares", "metrics", "own spec fields", "description"]
    say(plain(rows, headers, shrink=(3, 4, 5), drop=(5,)))
    for w in found:
        if w.runs_code:
            say_wrapped(f"{w.name} runs code its evaluator names: only where you froze it, or trusted it")
    for w in found:
        if not w.available:
            say_wrapped(f"{w.name} is unavailable: {w.reason}")


@contextmanager
def run_progress() -> Iterator[Callable[[TaskProgress], None]]:
    """A rich bar (task, step, budget left) at a terminal, one line per task otherwise; each
    finished task leaves one line saying how it ended."""

    def finished(event: TaskProgress) -> str:
        return printable(f"{event.task}: {event.outcome} ({event.seconds:.1f} s)")

    if sys.stderr.isatty():
        # rich.progress costs 44 ms to import: only at a terminal
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

        columns = (
            TextColumn("{task.description}", markup=False),  # a task names configs and backends
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[left]}"),
        )
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            tasks: dict[str, TaskID] = {}

            def show(event: TaskProgress) -> None:
                if event.phase == "finished":
                    if event.task in tasks:
                        bar.remove_task(tasks.pop(event.task))
                    bar.console.print(finished(event), markup=False, highlight=False)
                    return
                left = "" if event.budget_left is None else f"{max(event.budget_left, 0):.0f} s left in budget"
                if event.task not in tasks:
                    tasks[event.task] = bar.add_task(printable(event.task), total=event.total, left=left)
                bar.update(
                    tasks[event.task],
                    completed=event.done,
                    total=event.total,
                    left=left,
                    description=printable(f"{event.task} {event.phase}"),
                )

            yield show
        return

    def log(event: TaskProgress) -> None:
        if event.phase == "finished":
            say(f"ptreg: {finished(event)}", err=True)
        else:
            left = "" if event.budget_left is None else f" ({max(event.budget_left, 0):.0f} s left in budget)"
            if event.phase == "starting":
                say(f"ptreg: {event.task}{left}", err=True)
            elif event.phase == "round":
                say(f"ptreg: {event.task}: round {event.done + 1} of at most {event.total}{left}", err=True)

    yield log


def print_results(results: RunResults, margins: Mapping[str, float] | None = None) -> None:
    from ..views.run_report import model_line, tables, verdict
    from ..views.tables import plain_tables

    sizes = model_line(results)
    if sizes is not None:
        say_wrapped(sizes)
    found = tables(results, margins)
    for table, laid in zip(found, plain_tables(found), strict=True):  # a run's metrics in one form
        say(f"\n{table.title}")
        say(laid)
    lines = verdict(results)
    if lines:
        say("\nWhere the step's time goes")
        for line in lines:
            say(f"  {line}")


def bench(
    backend: list[str] = typer.Option(
        ..., "--backend", "-b", metavar="NAME", help="A backend to measure (repeatable); see `ptreg backends`."
    ),
    workload: str = typer.Option(
        "tinygpt-train",
        "--workload",
        "-w",
        metavar="WORKLOAD",
        help="A workload that compares backends: tinygpt-train (ms/step) or kernels (GFLOP/s); see `ptreg workloads`.",
    ),
    config: list[str] = typer.Option(
        ["tiny"], "--config", "-c", metavar="CONFIG", help="tiny, small, medium, large or xl (repeatable)."
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        metavar="NAME",
        help="The backend to compare with besides the reference (default: the first).",
    ),
    warmup_steps: int = typer.Option(
        2, "--warmup-steps", metavar="N", help="Untimed steps (or calls) first, in each cell."
    ),
    timed_steps: int = typer.Option(5, "--timed-steps", metavar="N", help="Timed steps (or calls) in each repeat."),
    repeats: int = typer.Option(3, "--repeats", metavar="N", help="Repeats in each cell: its median and spread."),
    threads: int = typer.Option(1, "--threads", metavar="N", help="Threads for the backend and the BLAS."),
    seed: int = typer.Option(
        0, "--seed", metavar="N", help="Seed of the model's weights, its batches and the kernels' inputs."
    ),
    seconds: float | None = typer.Option(
        None, "--seconds", metavar="SECONDS", help="Stop after this wall clock, like a budget."
    ),
    executor: str = ExecutorOption,
    address: str | None = AddressOption,
    as_json: bool = JsonFlag,
) -> None:
    """Measure backends ad hoc, as `ptreg run` would, and print the tables. Writes nothing.

    For exploring before proposing an attempt: the numbers are not evidence of any attempt until they come from `ptreg run` under a frozen evaluator.
    """
    from ..engine.plan import bench_spec
    from ..engine.workloads.discovery import workload_named
    from ..operations.bench import bench_backends

    if seconds is not None and not (0 < seconds < float("inf")):
        raise PtregError(f"--seconds must be a positive number of seconds, not {seconds}", EXIT_UNUSABLE)
    measured = workload_named(workload)
    if measured.kind != "backends" or measured.metric is None:
        raise PtregError(
            f"--workload {workload}: bench compares backends; a workload of arms is measured by `ptreg run` "
            "under a frozen evaluator",
            EXIT_UNUSABLE,
        )
    spec = bench_spec(
        workload=workload,
        configs=config,
        backends=backend,
        baseline=baseline,
        warmup_steps=warmup_steps,
        timed_steps=timed_steps,
        repeats=repeats,
        seed=seed,
        threads=threads,
    )
    make_executor = executor_maker(executor, address)
    with run_progress() as show:
        done = bench_backends(
            spec, command_line(), wall_clock_seconds=seconds, progress=show, make_executor=make_executor
        )
    results = done.results
    if as_json:
        print_json(results.model_dump(mode="json"))
    else:
        print_results(results)
        say(f"\nstatus: {results.status}" + (f" ({results.reason})" if results.reason else ""))
    if done.interrupted_by is not None:
        raise typer.Exit(128 + done.interrupted_by)
    if results.status != "complete":
        raise typer.Exit(EXIT_CHECK_FAILED)


def run(
    attempt_id: str = typer.Argument(..., metavar="ID", help="The attempt to measure."),
    executor: str = ExecutorOption,
    address: str | None = AddressOption,
    fail_on_regression: bool = typer.Option(
        False,
        "--fail-on-regression",
        help="A CI gate: after the run, decide the attempt's analysis plan and exit 1 when it decides regressed, "
        "or cannot decide (inconclusive: a gate never passes on nothing); worked and failed exit 0. "
        "An attempt without a plan is refused before anything runs.",
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue the attempt's newest run that stopped before its end (interrupted, stopped by the budget, or "
        "lost with a killed ptreg): a new run that carries its rounds measured whole and measures only the rest, "
        "under the same evaluator, order seed and code; refused when any of them changed.",
    ),
    detach: bool = typer.Option(
        False,
        "--detach",
        help="Run in the background and return at once, printing the run id and its log "
        "(runs/ID/.running-RUN/log.txt); every refusal is made first, here. `ptreg runs` says where it stands. "
        "With --executor ray, the run is submitted as a job of the Ray cluster (--address: its dashboard, "
        "http://HOST:8265), which goes on when this client leaves.",
    ),
    run_id: str | None = typer.Option(None, "--run-id", hidden=True, help="The id --detach chose for the run."),
    as_json: bool = JsonFlag,
) -> None:
    """Measure an attempt under its frozen evaluator and budget, after re-checking its gate.

    What it measures depends on the evaluator's workload (`ptreg workloads`). A workload of backends (kernels, tinygpt-train) checks parity first (a backend that fails it is not timed), then times each (config, backend) cell in its own worker process, in interleaved rounds. A workload of arms (command, or a plugin's) checks no parity: each round runs every arm once, in a balanced order, each arm a cell of its own, and every metric is compared arm against arm. Writes `runs/<id>/<run-id>/results.json` and `environment.json`, links the run from the attempt and adds an evidence line. Another run of the same attempt is refused while one is in progress; runs of different attempts may go side by side.

    Ctrl-C, SIGTERM or SIGHUP stops the workers with everything they started, writes what finished as a run with status `interrupted` and exits 130, 143 or 129. Exit 0 when the run is complete, 1 when it failed or the budget ran out (what finished is kept), 2 on unusable input.
    """
    from ..operations.running import run_attempt
    from ..records.refs import check_id, check_run_id

    root = registry_dir()
    if detach and run_id is not None:
        raise UnusableInput("--run-id is given by --detach to the run it starts; give one or the other")
    if run_id is not None:
        check_run_id(run_id)
    # a run detached as a Ray job builds its executor itself, inside the job
    make_executor = None if detach and executor == "ray" else executor_maker(executor, address)
    if fail_on_regression:
        from ..store.directory import read_attempt

        if read_attempt(root, check_id(attempt_id)).plan is None:
            raise UnusableInput(
                f"--fail-on-regression: {attempt_id} has no analysis plan to decide; a gate needs one "
                "(`ptreg new ... --worked-if ... --regressed-if ...`)"
            )
    if detach:
        _detach(root, check_id(attempt_id), executor, address, fail_on_regression, as_json, resume)
        return
    assert make_executor is not None
    with run_progress() as show:
        done = run_attempt(
            root,
            check_id(attempt_id),
            command_line(),
            progress=show,
            make_executor=make_executor,
            run_id=run_id,
            resume=resume,
        )
    results = done.results
    outcome = None
    if fail_on_regression and done.attempt is not None and done.exit_code is None:
        from ..views.plans import decide_plan

        outcome = decide_plan(root, done.attempt)
    if as_json:
        found = {
            "run_id": results.run_id,
            "folder": str(done.folder),
            "status": results.status,
            "reason": results.reason,
            "results": results.model_dump(mode="json"),
        }
        found = found if done.resumed is None else {**found, "resumed": done.resumed}
        print_json(found if outcome is None else {**found, "plan": outcome.to_json()})
    else:
        plan = done.attempt.plan if done.attempt is not None else None
        print_results(results, plan.margins if plan is not None else None)
        say(f"\nrun {results.run_id}: {results.status}" + (f" ({results.reason})" if results.reason else ""))
        if done.resumed is not None:
            say(f"it {done.resumed}")
        say(f"written to {done.folder}; see `ptreg show {attempt_id}`")
        if outcome is not None:
            say(f"the plan decides {outcome.summary()} ({outcome.runs_text()})")
    if done.exit_code is not None:  # 130 for Ctrl-C, 143 for SIGTERM, as shells expect
        raise typer.Exit(done.exit_code)
    if results.status != "complete":
        raise typer.Exit(EXIT_CHECK_FAILED)
    if outcome is not None and outcome.status in ("regressed", "inconclusive"):
        raise typer.Exit(EXIT_CHECK_FAILED)


def _detach(
    root: Path,
    attempt_id: str,
    executor: str,
    address: str | None,
    fail_on_regression: bool,
    as_json: bool,
    resume: bool = False,
) -> None:
    """`run --detach`: the refusals here, then the run in the background (or as a Ray job)."""
    from ..operations.detaching import detach_run, submit_run

    flags = (["--fail-on-regression"] if fail_on_regression else []) + (["--resume"] if resume else [])
    if executor == "ray":  # inside the job, the run joins the cluster the job runs in
        done = submit_run(root, attempt_id, [*flags, "--executor", "ray"], address)
    else:
        done = detach_run(root, attempt_id, flags)
    if as_json:
        print_json(done.to_json())
        return
    say(f"run {done.run_id} of {attempt_id} started in the background")
    if done.job_id is not None:
        say(f"as Ray job {done.job_id}: its output is the job's (`ray job logs {done.job_id}`)")
    else:
        say(f"its log: {done.log}")
    say(f"`ptreg runs` says where it stands; `ptreg show {attempt_id}` lists it once written")


def conclude(
    attempt_id: str = typer.Argument(..., metavar="ID", help="The attempt to conclude."),
    status: str | None = typer.Option(
        None,
        "--status",
        metavar="STATUS",
        help="worked, worked-with-caveat, failed, regressed or inconclusive. With an analysis plan, leave it out: the "
        "plan decides (worked-with-caveat agrees with a plan's worked); another status needs --deviation.",
    ),
    lesson: str = typer.Option(..., "--lesson", metavar="TEXT", help="What the attempt taught."),
    next_action: str = typer.Option(..., "--next-action", metavar="TEXT", help="The retained disposition."),
    continue_if: str | None = typer.Option(
        None,
        "--continue-if",
        metavar="EXPR",
        help="A condition over the run results that decides the disposition, e.g. "
        "'amdahl(backward_db, backend=numba, config=xl) >= 1.25' (docs/conditions.md). It must parse and name only "
        "cells and kernels of the latest complete run; the gate then admits a proposal that varies this attempt "
        "only while it holds. Not restated, an earlier condition is dropped.",
    ),
    failure_reason: str | None = typer.Option(
        None,
        "--failure-reason",
        metavar="TEXT",
        help="Why it fell short (needed for failed, regressed, inconclusive, worked-with-caveat).",
    ),
    confidence: str | None = typer.Option(
        None,
        "--confidence",
        metavar="CONFIDENCE",
        help="How sure the failure reason is: exact (needs a complete run), inferred, missing-evidence, not-applicable.",
    ),
    evidence: str | None = typer.Option(
        None,
        "--evidence",
        metavar="TEXT",
        help="What you measured or saw beyond the run's own evidence line (a run that measured nothing says so).",
    ),
    evidence_source: list[str] = typer.Option(
        [],
        "--evidence-source",
        metavar="PATH",
        help="A source of that evidence, relative to the registry (repeatable).",
    ),
    deviation: str | None = typer.Option(
        None,
        "--deviation",
        metavar="REASON",
        help="Why the status departs from the analysis plan's decision; recorded and shown as a deviation.",
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Record the verdict after a run, with the registry's rules applied; nothing is written if they fail.

    An attempt with an analysis plan takes its status from the plan, decided on the runs it names (printed with the values it read); you write the lesson and the next action. A status other than the plan's needs --deviation "why" (exit 1 without one). Attempts admitted before plans existed take --status as given.

    The disposition is stated whole each time: --next-action in words and, optionally, --continue-if, the condition its numbers decide (it is checked against the latest complete run, and what it is there is stored beside it). Any run can be concluded: a run cut short by its budget or a signal is evidence too (its plan, with no complete run to decide on, says inconclusive).
    """
    from ..operations.conclude import Verdict
    from ..operations.conclude import conclude as record_verdict
    from ..records.refs import check_id

    verdict = Verdict(
        status,
        lesson,
        next_action,
        failure_reason,
        confidence,
        evidence,
        tuple(evidence_source),
        continue_if,
        deviation,
    )
    verdict.check()
    done = record_verdict(registry_dir(), check_id(attempt_id), verdict)
    updated = done.attempt
    if as_json:
        print_json(updated.model_dump(mode="json", exclude_none=True))
        return
    for run_id in done.linked:
        say(f"linked run {run_id} first: it was measured, and written, but not linked yet")
    if done.plan is not None:
        say(f"the plan decides {done.plan.status}: {done.plan.because} ({done.plan.runs_text()})")
        for line in done.plan.readout:
            say(f"  {line}")
    else:
        say(f"{updated.id} has no analysis plan (admitted before plans existed): its status is the one given")
    deviated = (
        f", departing from its plan ({done.plan.status}): {updated.deviation}"
        if done.plan is not None and updated.deviation
        else ""
    )
    say(f"{updated.id}: concluded as {updated.status}{deviated}; see `ptreg show {updated.id}`")
    if done.decision is not None:
        say(f"continue-if {done.decision.summary()}")
    if done.dropped is not None:
        say(f"the earlier condition {done.dropped!r} is dropped: this conclusion does not restate it")
