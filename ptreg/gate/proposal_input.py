"""What a proposer gives: the one list of a proposal's fields.

Each field carries its flag and help (``ptreg new``'s options are made from them) and the
record field, or budget limit, it fills. Nothing here imports more than the standard library,
so the command line builds its options without loading the rest of ptreg.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def given(
    flag: str,
    help: str,
    *,
    record: str | None = None,
    budget: str | None = None,
    metavar: str | None = None,
    minimum: int | None = None,
) -> dict[str, Any]:
    """A field's metadata: its flag and help, and the record field (or budget limit) it fills."""
    return {"flag": flag, "help": help, "record": record, "budget": budget, "metavar": metavar, "min": minimum}


@dataclass
class ProposalInput:
    """What the proposer gave, as given (flags or prompts); nothing is filled in for them."""

    id: str = field(metadata=given("--id", "The new attempt's id (a lowercase slug; its file name).", record="id"))
    name: str = field(metadata=given("--name", "A short human name.", record="name"))
    family: str | None = field(
        default=None, metadata=given("--family", "Experiment family, e.g. runtime-perf.", record="family")
    )
    kind: str | None = field(
        default=None, metadata=given("--kind", "A term of the registry's kind_vocabulary.", record="kind")
    )
    question: str | None = field(
        default=None, metadata=given("--question", "The fresh question this attempt answers.", record="question")
    )
    hypothesis: str | None = field(
        default=None,
        metadata=given("--hypothesis", "The expected answer, stated before any number is seen.", record="hypothesis"),
    )
    varied_from: str | None = field(
        default=None,
        metadata=given("--varied-from", "The prior attempt this one varies.", record="varied_from", metavar="ID"),
    )
    varied: str | None = field(
        default=None, metadata=given("--varied", "What is varied from --varied-from.", record="varied")
    )
    methods: list[str] = field(
        default_factory=list,
        metadata=given("--method", "A method of the method_vocabulary (repeatable).", record="methods"),
    )
    bases: list[str] = field(
        default_factory=list, metadata=given("--base", "A base the attempt builds on (repeatable).", record="bases")
    )
    objective: str | None = field(
        default=None, metadata=given("--objective", "A term of the objective_vocabulary.", record="objective")
    )
    data_rows: int | None = field(
        default=None,
        metadata=given("--data-rows", "Data rows involved, when that applies.", record="data_rows", minimum=0),
    )
    evaluator: str | None = field(
        default=None,
        metadata=given(
            "--evaluator", "A frozen evaluator (`ptreg evaluator list`).", record="evaluator", metavar="NAME[@HASH]"
        ),
    )
    budget_seconds: float | None = field(
        default=None,
        metadata=given("--budget-seconds", "Wall-clock seconds the run may take at most.", budget="wall_clock_seconds"),
    )
    budget_steps: int | None = field(
        default=None,
        metadata=given("--budget-steps", "At most this many timed steps per repeat.", budget="max_timed_steps"),
    )
    budget_repeats: int | None = field(
        default=None, metadata=given("--budget-repeats", "At most this many repeats.", budget="max_repeats")
    )
    budget_threads: int | None = field(
        default=None, metadata=given("--budget-threads", "At most this many threads.", budget="max_threads")
    )
    budget_memory_mb: float | None = field(
        default=None, metadata=given("--budget-memory-mb", "At most this much peak memory, MB.", budget="max_memory_mb")
    )
    tracking_issue: str | None = field(
        default=None,
        metadata=given("--tracking-issue", "URL, #123, owner/repo#123 or PROJ-123.", record="tracking_issue"),
    )
    answers_disposition: str | None = field(
        default=None,
        metadata=given(
            "--answers-disposition",
            "How this answers the next_action of the attempt it varies.",
            record="answers_disposition",
        ),
    )
    override_streak: str | None = field(
        default=None,
        metadata=given(
            "--override-streak",
            "Go on despite STOP AND RETHINK on the objective; the reason is stored.",
            record="streak_override",
            metavar="REASON",
        ),
    )
    source: str | None = field(
        default=None, metadata=given("--source", "Where the proposal is written up, if anywhere.", record="source")
    )
