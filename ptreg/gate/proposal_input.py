"""What a proposer gives: the one list of a proposal's fields.

Each field carries its flag and help (``ptreg new``'s options are made from them) and the
record field, or budget limit, it fills. Nothing here imports more than the standard library,
so the command line builds its options without loading the rest of ptreg.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def given(
    flag: str, metavar: str, help: str, *, record: str | None = None, budget: str | None = None
) -> dict[str, Any]:
    """A field's metadata: its flag, the word its value is shown as, its help, and the record
    field (or budget limit) it fills."""
    return {"flag": flag, "metavar": metavar, "help": help, "record": record, "budget": budget}


def _field(flag: str, metavar: str, help: str, **fills: Any) -> Any:
    return field(default=None, metadata=given(flag, metavar, help, **fills))


@dataclass
class ProposalInput:
    """What the proposer gave, as given (flags or prompts); nothing is filled in for them."""

    id: str = field(
        metadata=given("--id", "ID", "The new attempt's id (a lowercase slug; its file name).", record="id")
    )
    name: str = field(metadata=given("--name", "TEXT", "A short human name.", record="name"))
    family: str | None = _field("--family", "FAMILY", "Experiment family, e.g. runtime-perf.", record="family")
    kind: str | None = _field("--kind", "KIND", "A term of the registry's kind_vocabulary.", record="kind")
    question: str | None = _field("--question", "TEXT", "The fresh question this attempt answers.", record="question")
    hypothesis: str | None = _field(
        "--hypothesis", "TEXT", "The expected answer, stated before any number is seen.", record="hypothesis"
    )
    varied_from: str | None = _field("--varied-from", "ID", "The prior attempt this one varies.", record="varied_from")
    varied: str | None = _field("--varied", "TEXT", "What is varied from --varied-from.", record="varied")
    methods: list[str] = field(
        default_factory=list,
        metadata=given("--method", "METHOD", "A method of the method_vocabulary (repeatable).", record="methods"),
    )
    bases: list[str] = field(
        default_factory=list,
        metadata=given("--base", "BASE", "A base the attempt builds on (repeatable).", record="bases"),
    )
    objective: str | None = _field(
        "--objective", "OBJECTIVE", "A term of the objective_vocabulary.", record="objective"
    )
    data_rows: int | None = _field("--data-rows", "N", "Data rows involved, when that applies.", record="data_rows")
    evaluator: str | None = _field(
        "--evaluator", "NAME[@HASH]", "A frozen evaluator (`ptreg evaluator list`).", record="evaluator"
    )
    budget_seconds: float | None = _field(
        "--budget-seconds", "SECONDS", "Wall-clock seconds the run may take at most.", budget="wall_clock_seconds"
    )
    budget_steps: int | None = _field(
        "--budget-steps", "N", "At most this many timed steps per repeat.", budget="max_timed_steps"
    )
    budget_repeats: int | None = _field("--budget-repeats", "N", "At most this many repeats.", budget="max_repeats")
    budget_threads: int | None = _field("--budget-threads", "N", "At most this many threads.", budget="max_threads")
    budget_memory_mb: float | None = _field(
        "--budget-memory-mb", "MB", "At most this much peak memory, MB.", budget="max_memory_mb"
    )
    tracking_issue: str | None = _field(
        "--tracking-issue", "ISSUE", "URL, #123, owner/repo#123 or PROJ-123.", record="tracking_issue"
    )
    answers_disposition: str | None = _field(
        "--answers-disposition",
        "TEXT",
        "How this answers the next_action of the attempt it varies.",
        record="answers_disposition",
    )
    override_streak: str | None = _field(
        "--override-streak",
        "REASON",
        "Go on despite STOP AND RETHINK on the objective; the reason is stored.",
        record="streak_override",
    )
    source: str | None = _field("--source", "PATH", "Where the proposal is written up, if anywhere.", record="source")
