"""What a proposer gives: the one list of a proposal's fields.

Each field carries its help (what it holds) and the record field, or budget limit, it fills;
how a person gives it (``ptreg new``'s flags, its prompts) is the command line's business
(``cli/proposing.py``). An error about fields is ``FieldsRefused``, which names each as its
caller does (``records/arguments.py``: a flag on the command line, an MCP tool's argument).
Nothing here imports more than the standard library, ptreg's errors and that vocabulary, so the
command line builds its options without loading the rest of ptreg.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnusableInput
from ..records.arguments import named_field


def given(
    help: str, *, record: str | None = None, budget: str | None = None, plan: str | None = None
) -> dict[str, Any]:
    """A field's metadata: its help, and the record field, budget limit or part of the analysis
    plan it fills."""
    return {"help": help, "record": record, "budget": budget, "plan": plan}


def _field(help: str, **fills: Any) -> Any:
    return field(default=None, metadata=given(help, **fills))


class FieldsRefused(UnusableInput):
    """Fields of a proposal that cannot be used as given. The message names each as the caller
    does (``named_field``); ``worded`` names them otherwise (an interactive prompt's words)."""

    def __init__(self, names: list[str], wording: str):
        self.names = names
        self.wording = wording  # "{}" where the fields are named (the first; given text may follow)
        super().__init__(self.worded(named_field))

    def worded(self, name_of: Callable[[str], str]) -> str:
        return self.wording.replace("{}", ", ".join(name_of(n) for n in self.names), 1)


@dataclass
class ProposalInput:
    """What the proposer gave, as given (flags or prompts); nothing is filled in for them."""

    id: str = field(metadata=given("The new attempt's id (a lowercase slug; its file name).", record="id"))
    name: str = field(metadata=given("A short human name.", record="name"))
    family: str | None = _field("Experiment family, e.g. runtime-perf.", record="family")
    kind: str | None = _field("A term of the registry's kind_vocabulary.", record="kind")
    question: str | None = _field("The fresh question this attempt answers.", record="question")
    hypothesis: str | None = _field("The expected answer, stated before any number is seen.", record="hypothesis")
    varied_from: str | None = _field("The prior attempt this one varies.", record="varied_from")
    varied: str | None = _field("What is varied from the attempt it varies.", record="varied")
    methods: list[str] = field(
        default_factory=list,
        metadata=given("A method of the method_vocabulary (repeatable).", record="methods"),
    )
    bases: list[str] = field(
        default_factory=list,
        metadata=given("A base the attempt builds on (repeatable).", record="bases"),
    )
    objective: str | None = _field("A term of the objective_vocabulary.", record="objective")
    data_rows: int | None = _field("Data rows involved, when that applies.", record="data_rows")
    evaluator: str | None = _field("A frozen evaluator (`ptreg evaluator list`).", record="evaluator")
    budget_seconds: float | None = _field("Wall-clock seconds the run may take at most.", budget="wall_clock_seconds")
    budget_steps: int | None = _field("At most this many timed steps per repeat.", budget="max_timed_steps")
    budget_repeats: int | None = _field("At most this many repeats.", budget="max_repeats")
    budget_threads: int | None = _field("At most this many threads.", budget="max_threads")
    budget_memory_mb: float | None = _field("At most this much peak memory, MB.", budget="max_memory_mb")
    tracking_issue: str | None = _field("URL, #123, owner/repo#123 or PROJ-123.", record="tracking_issue")
    answers_disposition: str | None = _field(
        "How this answers the next_action of the attempt it varies.",
        record="answers_disposition",
    )
    override_streak: str | None = _field(
        "Go on despite STOP AND RETHINK on the objective; the reason is stored.",
        record="streak_override",
    )
    source: str | None = _field("Where the proposal is written up, if anywhere.", record="source")
    worked_if: str | None = _field(
        "Analysis plan: the condition on the run's numbers under which the attempt worked (docs/conditions.md).",
        plan="worked_if",
    )
    regressed_if: str | None = _field(
        "Analysis plan: the condition under which it made things worse (checked first).", plan="regressed_if"
    )
    margins: list[str] = field(
        default_factory=list,
        metadata=given(
            "Analysis plan: METRIC=VALUE, the smallest effect of METRIC that matters: in its unit for a difference, "
            "a factor above 1 for a ratio (repeatable).",
            plan="margins",
        ),
    )
    decide_on_runs: int | None = _field(
        "Analysis plan: how many complete runs decide, pooled; 1 (the default) is the first complete run.",
        plan="runs",
    )
