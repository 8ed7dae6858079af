"""The lines of the journal a run keeps while it measures (``store/rounds_journal.py``): a head
naming the run and what its continuation must match, then one line per arm and round measured
whole, with that round's samples. Read back by ``ptreg run ID --resume``
(``records/continuation.py`` says how a continued run is counted).
"""

from __future__ import annotations

from typing import Annotated, Literal

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
