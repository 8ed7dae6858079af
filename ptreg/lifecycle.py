"""After admission: running an attempt under its frozen evaluator, and concluding it.

``run_attempt`` re-checks the gate, measures, writes the run folder whole, then links it
from the attempt record with an evidence line. ``conclude`` records the verdict with the
registry's rules applied. Together with ``ptreg new`` this is the whole lifecycle, with no
hand edit of JSON anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from .errors import EXIT_CHECK_FAILED, EXIT_UNUSABLE, PtregError
from .evaluator import EVALUATOR_VERSION, FrozenEvaluator, check_file, resolve
from .interrupt import deferred, interruptible, pending
from .model import Attempt, Budget, RunRef
from .jsonio import refuse_outside
from .run import RESULTS_FILE, RunResults, check_folder, new_run_id, run_folder, runs_dir, write_run
from .runner import RunEvent, Runner


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class RunDone:
    results: RunResults
    folder: Path
    attempt: Attempt
    interrupted_by: Optional[int] = None  # SIGINT or SIGTERM, when one stopped or ended the run

    @property
    def exit_code(self) -> Optional[int]:
        return None if self.interrupted_by is None else 128 + self.interrupted_by


def load_evaluator(root: Path, ref: str) -> FrozenEvaluator:
    path = resolve(root, ref)
    frozen, problem = check_file(path)
    if frozen is None:
        raise PtregError(f"evaluator {ref}: {problem}", EXIT_CHECK_FAILED)
    return frozen


def run_attempt(
    root: Path,
    attempt_id: str,
    command: list[str],
    progress: Optional[Callable[[RunEvent], None]] = None,
    runner_options: Optional[dict] = None,
) -> RunDone:
    """Measure, then write the run folder whole and link it, in that order (see ``repair``).

    The attempt's run lock keeps a second run of it out for the whole measurement; the
    registry lock is held only while the folder and the link are written.
    """
    from .lock import run_lock
    from .registry import read_attempt

    with interruptible():  # from the start, so that SIGTERM never kills a run without a word
        read_attempt(root, attempt_id)  # no lock file for an attempt or registry that is not there
        with run_lock(root, attempt_id):
            frozen, budget = _admitted(root, attempt_id)  # as it is now that no other run can start
            return _measure_and_record(root, attempt_id, frozen, budget, command, progress, runner_options)


def _admitted(root: Path, attempt_id: str) -> tuple[FrozenEvaluator, Budget]:
    """The attempt's evaluator and budget, once it is known to be runnable and still admitted."""
    from .gate import check_gate
    from .registry import load_directory

    registry = load_directory(root)
    attempt = registry.get(attempt_id)
    if attempt.status != "not-tried":
        raise PtregError(
            f"{attempt_id} is concluded (status {attempt.status}); a new run needs a new attempt: "
            f"`ptreg new --varied-from {attempt_id}`", EXIT_CHECK_FAILED)
    if attempt.evaluator is None or attempt.budget is None:
        raise PtregError(f"{attempt_id} has no frozen evaluator or no budget; propose it with `ptreg new`", EXIT_CHECK_FAILED)
    report = check_gate(attempt, registry.attempts, root)
    if not report.admitted:
        failed = "; ".join(f"{c.check}: {c.detail}" for c in report.failures)
        raise PtregError(f"{attempt_id}: the gate no longer admits it ({failed}); see `ptreg gate {attempt_id}`", EXIT_CHECK_FAILED)
    # found now, not after the measurement
    refuse_outside(root, runs_dir(root, attempt_id), "a run is written only inside the registry")
    frozen = load_evaluator(root, attempt.evaluator)
    if frozen.evaluator_version != EVALUATOR_VERSION:
        raise PtregError(f"evaluator {frozen.ref} was frozen for engine version {frozen.evaluator_version}, "
                         f"this ptreg interprets version {EVALUATOR_VERSION}", EXIT_CHECK_FAILED)
    return frozen, attempt.budget


def _measure_and_record(root, attempt_id, frozen, budget, command, progress, runner_options) -> RunDone:
    from . import __version__
    from .environment import collect
    from .lock import registry_lock
    from .measure import measure
    from .registry import write_attempt

    started = now_utc()
    environment = collect(root)
    runner = Runner(frozen.spec, wall_clock_seconds=budget.wall_clock_seconds,
                    max_memory_mb=budget.max_memory_mb, progress=progress, **(runner_options or {}))
    found = measure(frozen.spec, runner)
    # From here signals wait: the run is written whole and linked, then the process exits.
    with deferred():
        finished = now_utc()
        with registry_lock(root):
            results = RunResults(
                results_version=1, run_id=new_run_id(root, attempt_id, started), attempt=attempt_id,
                evaluator=frozen.ref, evaluator_sha256=frozen.sha256, evaluator_version=frozen.evaluator_version,
                spec=frozen.spec, budget=budget, command=command, started_at=started, finished_at=finished,
                status=found.status, reason=found.reason, ptreg_version=__version__, parity=found.parity, cells=found.cells,
            )
            folder = write_run(root, results, environment)
            attempt = link_run(root, attempt_id, results, write_attempt)
    late = pending()
    return RunDone(results, folder, attempt, found.interrupted_by or late)


def results_source(root: Path, attempt_id: str, run_id: str) -> str:
    """The run's results file as a source: relative to the repository holding the registry
    (as the sources of hand-written records are, and as `validate --check-sources` reads
    them), or to the registry itself outside git."""
    from .environment import git_state

    path = (run_folder(root, attempt_id, run_id) / RESULTS_FILE).resolve()
    top = git_state(root)["repository"]
    base = Path(top).resolve() if top else root.resolve()
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)


def link_run(root: Path, attempt_id: str, results: RunResults, write_attempt) -> Attempt:
    """The attempt gains the run's link, its evidence line and its results file as a source."""
    from .registry import read_attempt
    from .report import evidence_line

    attempt = read_attempt(root, attempt_id)  # fresh: the run took a while
    assert results.run_id is not None
    ref = RunRef(run_id=results.run_id, status=results.status, evaluator=results.evaluator,
                 started_at=results.started_at, finished_at=results.finished_at)
    line = evidence_line(results)
    evidence = attempt.evidence
    if line is not None:
        evidence = f"{evidence}\n{line}" if evidence else line
    source = results_source(root, attempt_id, results.run_id)
    updated = attempt.model_copy(update={
        "runs": [*(attempt.runs or []), ref],
        "evidence": evidence,
        "evidence_sources": [*(attempt.evidence_sources or []), source],
    })
    updated = Attempt.model_validate(updated.model_dump(exclude_none=True))
    write_attempt(root, updated)
    return updated


def conclude(
    root: Path,
    attempt_id: str,
    status: str,
    lesson: str,
    next_action: str,
    failure_reason: Optional[str] = None,
    confidence: Optional[str] = None,
) -> Attempt:
    """Record the verdict; refused (nothing written) if the registry's rules would not hold."""
    from .lock import registry_lock
    from .registry import load_meta

    load_meta(root)  # a missing registry is refused before any lock file is made
    with registry_lock(root):
        return _conclude(root, attempt_id, status, lesson, next_action, failure_reason, confidence)


def _conclude(root, attempt_id, status, lesson, next_action, failure_reason, confidence) -> Attempt:
    from pydantic import ValidationError

    from .problems import flag_message
    from .registry import Record, load_directory, record_path, write_attempt
    from .rules import check_attempt

    registry = load_directory(root)
    attempt = registry.get(attempt_id)
    if status == "not-tried":
        raise PtregError("--status not-tried is not a verdict; conclude with what the run showed", EXIT_UNUSABLE)
    runs = attempt.runs or []
    if not runs:
        raise PtregError(f"{attempt_id} has no run to conclude from; run it first: `ptreg run {attempt_id}`", EXIT_CHECK_FAILED)
    for ref in runs:
        broken = check_folder(root, attempt_id, ref.run_id)
        if broken is not None:
            raise PtregError(f"{attempt_id}: run {ref.run_id}: {broken}", EXIT_CHECK_FAILED)
    if confidence is None:
        confidence = "not-applicable" if failure_reason is None else None
        if confidence is None:
            raise PtregError("--failure-reason needs --confidence (exact, inferred or missing-evidence)", EXIT_UNUSABLE)
    if confidence == "exact" and not any(r.status == "complete" for r in runs):
        raise PtregError(f"confidence 'exact' needs a complete run; {attempt_id}'s runs are "
                         + ", ".join(f"{r.run_id} {r.status}" for r in runs), EXIT_CHECK_FAILED)
    raw = attempt.model_dump(exclude_none=True)
    raw.update(status=status, lesson=lesson, next_action=next_action, failure_reason_confidence=confidence)
    if failure_reason is not None:
        raw["failure_reason"] = failure_reason
    if "source" not in raw:
        raw["source"] = results_source(root, attempt_id, runs[-1].run_id)
    try:
        updated = Attempt.model_validate(raw)
    except ValidationError as exc:
        raise PtregError(f"{attempt_id}: {flag_message(exc, attempt_id)}; nothing written", EXIT_UNUSABLE) from None
    record = Record(raw=raw, attempt=updated, file=str(record_path(root, attempt_id)))
    known = {r.raw_id for r in registry.records if r.raw_id is not None}
    problems = [p for p in check_attempt(record, registry.meta, known) if p.severity == "error"]
    if problems:
        first = problems[0]
        raise PtregError(f"{attempt_id}: {first.message} (rule {first.rule}); nothing written", EXIT_CHECK_FAILED)
    write_attempt(root, updated)
    return updated
