"""Dispositions the numbers decide: an attempt's continue-if condition, decided on the run its
plan decides on (``plans.py``; without a plan, its latest complete run) as the registry holds
it now (for the gate, `show`, `list` and `ptreg disposition check`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..records.attempt import Attempt, ContinueIf
from ..records.decision import Decision, decide
from .plans import deciding


@dataclass(frozen=True)
class Disposition:
    """An attempt's condition and what it is now: decided on a run, or why it could not be."""

    attempt: Attempt
    condition: ContinueIf
    decision: Decision | None  # None when no run could be read
    why: str | None = None  # why there is no decision
    unreadable: bool = False  # the run exists and its files cannot be read: a broken file, not an unknown

    @property
    def truth(self) -> bool | None:
        return self.decision.truth if self.decision is not None else None

    @property
    def turned_false(self) -> bool:
        """It held when the attempt was concluded and does not now: what CI fails on."""
        return self.condition.held_at_conclusion is True and self.truth is False

    def summary(self) -> str:
        if self.decision is not None:
            return self.decision.summary()
        return f"cannot be decided: {self.why}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.attempt.id,
            "condition": self.condition.text,
            "tree": self.condition.tree.model_dump(mode="json"),
            "held_at_conclusion": self.condition.held_at_conclusion,
            "truth": self.truth,
            "turned_false": self.turned_false,
            "summary": self.summary(),
            "run": self.decision.run_id if self.decision else None,
            "readings": [r.to_json() for r in self.decision.readings] if self.decision else [],
        }


def decide_disposition(root: Path, attempt: Attempt) -> Disposition | None:
    """The attempt's condition decided on the run its plan decides on (without a plan, its latest
    complete run), with its plan's margins; None without a condition."""
    condition = attempt.continue_if
    if condition is None:
        return None
    on = deciding(root, attempt)
    if on.results is None:
        return Disposition(attempt, condition, None, on.why, unreadable=on.unreadable)
    margins = attempt.plan.margins if attempt.plan is not None else None
    decision = decide(condition.tree, on.results, margins)
    if len(on.refs) > 1:  # a pool has no run id of its own: it is named by its runs
        decision.run_id = on.label
    return Disposition(attempt, condition, decision)


def decide_all(root: Path, attempts: Iterable[Attempt]) -> list[Disposition]:
    """Every condition among ``attempts``, decided; attempts without one are left out."""
    return [d for a in attempts if (d := decide_disposition(root, a)) is not None]


def with_truth(
    root: Path, attempts: Iterable[Attempt], truth: bool, unreadable: Callable[[str], None] | None = None
) -> list[Attempt]:
    """The attempts whose condition is now ``truth`` (`list --continuable` / `--blocked`); each
    condition whose run cannot be read is told to ``unreadable`` (why, naming the file)."""
    decided = decide_all(root, attempts)
    for d in decided:
        if d.unreadable and unreadable is not None and d.why is not None:
            unreadable(d.why)
    return [d.attempt for d in decided if d.truth is truth]
