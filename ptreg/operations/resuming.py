"""What ``ptreg run ID --resume`` continues, and what it carries.

The run to continue is the newest of the attempt's runs that stopped before the end and that no
other run continues yet: a run written ``interrupted`` or ``budget-exhausted``, or a run whose
ptreg was killed before writing it, found by its in-progress folder (``store/rounds_journal.py``),
whose process is gone. Its rounds measured whole are kept, each (arm, round) once; everything
else about it must still hold for the continuation: the evaluator (so the spec and its plan),
the order seed of its rounds, and the code it measured. Any doubt refuses the resume in one
line, before anything runs or is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PtregError, UnusableInput
from ..records.attempt import Attempt
from ..records.evaluator import AnySpec, ArmsSpec, FrozenEvaluator
from ..records.measured import MetricSample
from ..records.run_journal import AnySample, JournalRound
from ..records.run_results import CodeIdentity, RunResults
from ..store.progress import alive
from ..store.rounds_journal import (
    JournalRead,
    has_journal,
    in_progress_runs,
    read_journal,
    remove_folder,
    written,
)
from ..store.runs import read_results, run_folder

RESUMABLE = ("interrupted", "budget-exhausted")
Kept = dict[tuple[str, str], dict[int, list[AnySample]]]


@dataclass
class ResumePoint:
    """The run a resumed run continues, and what it carries of it."""

    run_id: str
    partial: bool  # lost before it was written: its journal was read
    evaluator: str | None
    order_seed: int | None  # None: it measured no round, so the continuation draws its own
    code: CodeIdentity | None
    continues: str | None  # what the continuation records
    continues_partial: str | None
    kept: Kept = field(default_factory=dict)
    consumed: list[str] = field(default_factory=list)  # lost runs whose folders go once it is written
    note: str | None = None  # a journal's last line left out

    @property
    def rounds(self) -> list[JournalRound]:
        """The kept rounds as journal lines, for the continuation's own journal."""
        return [
            JournalRound(config=config, arm=arm, round=r, samples=samples)
            for (config, arm), by_round in sorted(self.kept.items())
            for r, samples in sorted(by_round.items())
        ]

    @property
    def count(self) -> int:
        return sum(len(by_round) for by_round in self.kept.values())


def resume_point(root: Path, attempt: Attempt, frozen: FrozenEvaluator, own: str | None = None) -> ResumePoint:
    """The run ``attempt``'s resume continues, checked against ``frozen``; UnusableInput when
    there is none, or it cannot be continued under it. ``own`` is the id the resuming run
    reserved (``run --detach``), never one to continue. Lost runs already continued by a
    written run are cleared away on the way."""
    runs: list[RunResults] = []
    for ref in attempt.runs or ():
        try:
            runs.append(read_results(run_folder(root, attempt.id, ref.run_id), root))
        except PtregError as exc:
            raise UnusableInput(f"--resume: run {ref.run_id} of {attempt.id} cannot be read: {exc.message}") from None
    journals: list[tuple[str, JournalRead]] = []
    for run_id, folder in in_progress_runs(root, attempt.id):
        if run_id == own:
            continue
        if written(root, attempt.id, run_id) or not has_journal(folder):
            remove_folder(root, attempt.id, run_id)  # its run was written, or it was killed as it began
            continue
        journal = read_journal(folder)
        if alive(journal.head.pid, journal.head.process_started):
            raise UnusableInput(f"--resume: run {run_id} of {attempt.id} is still in progress (pid {journal.head.pid})")
        if not journal.rounds:
            remove_folder(root, attempt.id, run_id)  # it measured nothing: there is nothing of it to carry
            continue
        journals.append((run_id, journal))
    continued = {r.continues for r in runs} | {j.head.continues for _, j in journals}
    consumed = {r.continues_partial for r in runs} | {j.head.continues_partial for _, j in journals}
    for run_id, _ in journals:
        if run_id in {r.continues_partial for r in runs}:
            remove_folder(root, attempt.id, run_id)  # a written run carries it already
    candidates: list[tuple[tuple[str, int, str], ResumePoint]] = []
    for results in runs:
        if results.status in RESUMABLE and results.run_id not in continued and results.run_id is not None:
            point = _of_written(results, frozen.spec)
            candidates.append(((results.started_at, len(results.run_id), results.run_id), point))
    for run_id, journal in journals:
        head = journal.head
        if run_id in consumed:
            continue
        if head.run_id != run_id or head.attempt != attempt.id:
            raise UnusableInput(
                f"--resume: the journal in the folder of run {run_id} of {attempt.id} names run {head.run_id} of "
                f"{head.attempt}; not believed"
            )
        point = ResumePoint(
            run_id,
            partial=True,
            evaluator=head.evaluator,
            order_seed=head.order_seed,
            code=head.code,
            continues=head.continues,
            continues_partial=run_id,
            kept=_of_journal(journal, frozen.spec, run_id),
            consumed=[run_id, *(c for c in [head.continues_partial] if c is not None)],
            note=journal.note,
        )
        candidates.append(((head.started_at, len(run_id), run_id), point))
    if not candidates:
        raise UnusableInput(
            f"--resume: {attempt.id} has nothing to resume: no run interrupted or stopped by its budget that no other "
            "run continues, and no run lost before it was written"
        )
    point = max(candidates, key=lambda c: c[0])[1]
    if point.evaluator != frozen.ref:
        raise UnusableInput(
            f"--resume: run {point.run_id} of {attempt.id} was measured under {point.evaluator}, and the attempt's "
            f"evaluator is now {frozen.ref}; a changed evaluator is a new run, without --resume"
        )
    return point


def _of_written(results: RunResults, spec: AnySpec) -> ResumePoint:
    """A written run's rounds measured whole: an arm's metric sample is its whole round."""
    assert results.run_id is not None
    _resumable_spec(spec, results.run_id)
    kept: Kept = {}
    for cell in results.cells:
        for sample in cell.metric_samples or ():
            _keep(kept, spec, cell.config, cell.backend, sample.repeat, [sample], f"run {results.run_id}")
    seeds = {r.order_seed for r in results.rounds or ()}
    return ResumePoint(
        results.run_id,
        partial=False,
        evaluator=results.evaluator,
        order_seed=min(seeds) if seeds else None,
        code=results.code,
        continues=results.run_id,
        continues_partial=None,
        kept=kept,
    )


def _of_journal(journal: JournalRead, spec: AnySpec, run_id: str) -> Kept:
    _resumable_spec(spec, run_id)
    kept: Kept = {}
    for line in journal.rounds:
        if not line.samples or not all(isinstance(s, MetricSample) for s in line.samples):
            raise UnusableInput(
                f"--resume: the journal of run {run_id} holds a round of {line.arm} that is not one arm's metric "
                "sample; not believed"
            )
        _keep(kept, spec, line.config, line.arm, line.round, list(line.samples), f"the journal of run {run_id}")
    return kept


def _resumable_spec(spec: AnySpec, run_id: str) -> None:
    if not isinstance(spec, ArmsSpec):
        raise UnusableInput(
            f"--resume: run {run_id} measures backends; resume continues runs of arms (one sample per arm and "
            "round), and a run of backends is run anew"
        )


def _keep(kept: Kept, spec: AnySpec, config: str, arm: str, round_: int, samples: list[AnySample], where: str) -> None:
    """One arm's round kept, refused when the spec has no such arm, config or round, or when it
    is there twice (a sample counted twice)."""
    if config not in spec.config_names or arm not in spec.arm_names:
        raise UnusableInput(f"--resume: {where} holds arm {arm!r} of config {config!r}, which the evaluator lacks")
    if round_ >= spec.most_repeats:
        raise UnusableInput(
            f"--resume: {where} holds round {round_} of {arm}, and the evaluator plans {spec.most_repeats} rounds"
        )
    if any(s.repeat != round_ for s in samples):
        raise UnusableInput(f"--resume: {where} holds a sample of {arm} filed under another round than its own")
    seed = spec.round_seed(round_) if isinstance(spec, ArmsSpec) else None
    if any(isinstance(s, MetricSample) and s.seed != seed for s in samples):
        raise UnusableInput(
            f"--resume: {where} holds round {round_} of {arm} with another seed than the round's {seed}"
        )
    by_round = kept.setdefault((config, arm), {})
    if round_ in by_round:
        raise UnusableInput(f"--resume: {where} holds round {round_} of {arm} twice")
    by_round[round_] = samples


def code_changed(before: CodeIdentity | None, now: CodeIdentity) -> str | None:
    """What of the code a run measured differs now, in words; None when nothing known does.
    Whether the worktree was dirty is not compared: the run itself wrote the registry, and the
    files its command runs are compared by their digests (``gate/consent.py``)."""
    if before is None:
        return "the code the run measured is unknown"
    for what, a, b in (
        ("ptreg's version", before.ptreg_version, now.ptreg_version),
        ("the project's commit", before.commit, now.commit),
        ("the workload's code", before.workload, now.workload),
        ("the backends' code", before.arms, now.arms),
    ):
        if a != b:
            return f"{what} changed since the run ({_short(a)} -> {_short(b)})"
    return None


def _short(value: object) -> str:
    if hasattr(value, "digest") and hasattr(value, "target"):
        value = f"{value.target} {str(value.digest)[:12]}"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."
