"""A run that continues another: the lines of the journal a run keeps while it measures, and
the one rule by which a continued run is counted once.

A run that was interrupted, stopped by its budget, or lost with its ptreg (killed, the machine
gone) can be continued by ``ptreg run ID --resume``: a new run, which carries the rounds the
earlier one measured whole and measures the rest. It records the run it continues, so every
reader that pools or counts runs leaves the continued one out where its continuation is there
(``counted_once``): its samples are in the continuation, and counting both would count them twice.

The journal (``store/in_progress.py``) is JSON lines: a head naming the run, then one line per
arm and round measured whole, with that round's samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated, Literal, Protocol, TypeVar

from pydantic import Field, StringConstraints, model_validator

from .attempt import AttemptId
from .measured import Index, KernelSample, MetricSample, StepSample, _Strict
from .refs import INT_MAX, RUN_ID_PATTERN
from .run_results import CodeIdentity

JOURNAL_VERSION = 1
RunId = Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]
AnySample = StepSample | KernelSample | MetricSample


class JournalHead(_Strict):
    """The journal's first line: the run it belongs to, and what its continuation must match."""

    journal: Literal[1]
    run_id: RunId
    attempt: AttemptId
    evaluator: str = Field(min_length=1, max_length=400, description="name@hash12 of the frozen evaluator.")
    order_seed: int = Field(ge=0, le=INT_MAX)
    pid: int = Field(ge=1, le=INT_MAX, description="The ptreg process that measures.")
    process_started: float = Field(ge=0, allow_inf_nan=False, description="Its creation time, as psutil gives it.")
    started_at: str = Field(max_length=40)
    code: CodeIdentity | None
    continues: RunId | None = None
    continues_partial: RunId | None = None


class JournalRound(_Strict):
    """One arm's round, measured whole: its samples, each of that round."""

    config: str = Field(min_length=1, max_length=200)
    arm: str = Field(min_length=1, max_length=200)
    round: Index
    samples: list[AnySample] = Field(max_length=1_000_000)

    @model_validator(mode="after")
    def _of_its_round(self) -> JournalRound:
        if any(s.repeat != self.round for s in self.samples):
            raise ValueError(f"a sample of another round than {self.round}")
        return self


class Continuing(Protocol):
    """A run as the counting rule reads it: a run link or a run's results alike."""

    @property
    def run_id(self) -> str | None: ...

    @property
    def continues(self) -> str | None: ...


C = TypeVar("C", bound=Continuing)


def continued(runs: Iterable[Continuing]) -> set[str]:
    """The ids of the runs of one attempt that another run among ``runs`` continues."""
    runs = list(runs)
    present = {r.run_id for r in runs}
    return {r.continues for r in runs if r.continues is not None and r.continues in present}


def counted_once(runs: Sequence[C]) -> list[C]:
    """The runs of one attempt to count or pool: each continued run is left out where its
    continuation is present, since the continuation carries its samples."""
    gone = continued(runs)
    return [r for r in runs if r.run_id not in gone]


def continued_twice(runs: Iterable[Continuing]) -> dict[str, list[str]]:
    """Each run of one attempt that two or more runs continue (two clones resumed it, then
    were merged), with the ids of those runs: its samples would be counted in both."""
    by: dict[str, list[str]] = {}
    for r in runs:
        if r.continues is not None and r.run_id is not None:
            by.setdefault(r.continues, []).append(r.run_id)
    return {k: sorted(v) for k, v in by.items() if len(v) > 1}
