"""What the MCP tools return: the records' own models (``Attempt``, ``RunResults``, the
suggestions of ``views/suggestions.py``) and, for the views that answer `--json` with plain
data, a model of exactly that data, validated from the same ``to_json`` the command line prints.
Each gives its tool an output schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..records.attempt import Attempt
from ..records.run_results import RunResults


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AttemptList(_Out):
    """`ptreg list`'s answer: the whole records that pass the filters, in the ledger's order."""

    attempts: list[Attempt]
    total: int = Field(description="Valid attempts in the registry, before the filters.")


class Section(_Out):
    title: str
    lines: list[str]


class Dossier(_Out):
    """`ptreg show`'s answer: the record and the dossier's sections, in the page's order."""

    attempt: Attempt
    sections: list[Section]


class SharedShape(_Out):
    objective: bool
    methods: list[str]
    bases: list[str]
    lineage: bool
    family: bool


class Precedent(_Out):
    """A prior attempt like the proposal, and what it shares with it."""

    id: str
    status: str
    lesson: str | None
    next_action: str | None
    shared: SharedShape


class Precedents(_Out):
    precedents: list[Precedent] = Field(description="Most alike first; failures first among equals.")


class LineageStep(_Out):
    id: str
    status: str
    varied_from: str | None
    varied: str | None


class Successor(LineageStep):
    depth: int = Field(description="1: varies the attempt directly.")


class Lineage(_Out):
    """`ptreg lineage`'s answer: the varied_from chain, oldest first, and what superseded it."""

    id: str
    chain: list[LineageStep]
    missing_ancestor: str | None = Field(description="The varied_from of the oldest, when it is not in the registry.")
    superseded_by: list[Successor]


class Streak(_Out):
    objective: str
    level: str = Field(description="ok, CAUTION (2 negatives at the tip) or STOP AND RETHINK (3 or more).")
    negatives: int
    depth: int
    chain: list[str] = Field(description="Oldest first; the last is the tip.")
    trailing: list[str] = Field(description="The negatives at the tip, oldest first.")
    tip: str
    tip_status: str
    tip_lesson: str | None


class Streaks(_Out):
    streaks: list[Streak]


class Check(_Out):
    check: str
    outcome: str = Field(description="passed, caution, overridden or failed.")
    detail: str
    remedy: str | None = Field(description="How to satisfy it, when it failed.")


class GateReport(_Out):
    id: str
    admitted: bool
    checks: list[Check]


class Proposal(_Out):
    """`ptreg new --json`'s answer for an admitted proposal (a refused one is a tool error)."""

    admitted: bool
    written: bool = Field(description="False on a dry run.")
    path: str | None
    gate: GateReport
    precedents: list[Precedent]
    attempt: Attempt


class RunDone(_Out):
    """A run as written and linked: its status, why, and its results."""

    run_id: str
    status: str
    reason: str | None
    folder: str
    interrupted_by: str | None = Field(
        description="The signal the run was stopped as: SIGHUP when the client cancelled or went away."
    )
    results: RunResults


class Concluded(_Out):
    """The concluded record, its plan decided, and its condition decided on the run its plan decides on."""

    attempt: Attempt
    condition: str | None = Field(description="What the condition is on the deciding run, when one is given.")
    dropped: str | None = Field(description="The condition an earlier conclusion set, which this one does not restate.")
    plan: dict[str, Any] | None = Field(
        default=None,
        description="The analysis plan decided: status, because (which rule), runs, later_runs (counted, never "
        "read) and readout (each rule with the values it read); absent for an attempt admitted before plans.",
    )
    linked: list[str] = Field(
        description="Runs of the attempt measured but not linked yet (their end found the registry locked), "
        "linked first, in the same write as the verdict."
    )


class RunInProgress(_Out):
    """A run begun and not yet written, as `ptreg runs --json` gives it."""

    attempt: str
    run_id: str
    state: str = Field(
        description="running; starting; process gone (killed or crashed: resumable with `ptreg run ID --resume`); "
        "unreadable (problem names the file); written (its in-progress folder outlived it)."
    )
    problem: str | None
    pid: int | None
    started: str | None
    phase: str | None
    round: int | None
    total: int | None
    elapsed: float | None = Field(description="Seconds since it started.")
    budget_left: float | None = Field(description="Seconds left in its budget's wall clock, when last written.")
    last_line: str | None = Field(description="The last output line of its command, shortened.")
    folder: str
    log: str | None = Field(description="A detached run's output.")
    job: dict[str, str] | None = Field(description="A run submitted as a Ray job: its job_id, address and state.")


class RunsInProgress(_Out):
    """`ptreg runs`'s answer: the registry's runs in progress."""

    runs: list[RunInProgress]


class ListedItem(_Out):
    """One item: each arm's value (its mean over the seeds), their difference and its verdict."""

    item: str
    over_value: float
    arm_value: float
    difference: float = Field(description="arm - over, seed by seed, averaged over the seeds.")
    verdict: str = Field(description="won, lost or tied: the difference's sign, in the metric's direction.")


class ItemsOfMetric(_Out):
    """One arm over another on one metric, item by item."""

    metric: str
    unit: str
    better: str
    arm: str
    over: str
    seeds: int
    items_left_out: int | None = Field(description="Items some seed of either arm lacks: left out, never filled in.")
    won: int
    lost: int
    tied: int
    recorded: dict[str, int] | None = Field(
        description="The counts the run's results record (what `show` prints); the same as the items' unless the "
        "file was edited."
    )
    summary: str
    items: list[ListedItem] = Field(description="Those of the verdicts asked for, the worst losses first.")
    not_shown: int = Field(description="Items of those verdicts left out by the limit.")


class RunItems(_Out):
    """`ptreg items --json`'s answer: the items behind a run's won/lost/tied counts."""

    attempt: str
    run_id: str
    status: str
    verdicts: list[str]
    metrics: list[ItemsOfMetric]
