"""Dispositions the numbers decide: an attempt's continue-if condition, decided on its latest
complete run as the registry holds it now (for the gate, `show`, `list` and
`ptreg disposition check`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PtregError
from ..records.attempt import Attempt, ContinueIf, RunRef
from ..records.decision import Decision, decide
from ..records.run_results import run_is_decisive, undecisive
from ..store.runs import read_results, run_folder


def latest_complete(attempt: Attempt) -> RunRef | None:
    """The attempt's last complete run, in the order its runs were linked."""
    return next((r for r in reversed(attempt.runs or ()) if r.status == "complete"), None)


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
    """The attempt's condition decided on its latest complete run; None without a condition."""
    condition = attempt.continue_if
    if condition is None:
        return None
    ref = latest_complete(attempt)
    if ref is None:
        return Disposition(attempt, condition, None, f"{attempt.id} has no complete run")
    try:
        results = read_results(run_folder(root, attempt.id, ref.run_id), root)
    except PtregError as exc:
        why = f"run {ref.run_id} of {attempt.id} cannot be read: {exc.message}"
        return Disposition(attempt, condition, None, why, unreadable=True)
    if not run_is_decisive(results):
        return Disposition(attempt, condition, None, undecisive(results))
    return Disposition(attempt, condition, decide(condition.tree, results))


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
