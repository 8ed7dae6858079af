"""A registry as read: its vocabularies, its records (usable or not) and what was wrong with them.

Reading never stops at the first bad record: each record that cannot be used keeps its place
as a ``Record`` without an attempt, and a ``Problem`` says why, so the rest stay usable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import CheckFailed, UnknownAttempt
from ..text import json_type
from .analysis_plan import PlanRule
from .attempt import SCHEMA_VERSION, Attempt, ContinueIf, RegistryMeta
from .condition_grammar import disagreement
from .problems import Problem, pointer_join, schema_problems, shown_id


@dataclass
class Record:
    """One attempt as read: the raw JSON, the parsed Attempt (None when it did not parse)."""

    raw: Any
    attempt: Attempt | None
    file: str | None
    pointer: str = ""

    @property
    def raw_id(self) -> str | None:
        if isinstance(self.raw, dict) and isinstance(self.raw.get("id"), str):
            return str(self.raw["id"])
        return None


@dataclass
class Registry:
    """A registry as read from a directory or a single attempts.json file."""

    source: str
    meta: RegistryMeta
    records: list[Record]
    problems: list[Problem] = field(default_factory=list)
    root: Path | None = None  # the directory, when the registry is one
    schema_version: int = SCHEMA_VERSION
    # vocabularies a single file lacked, taken from the terms its records use (without definitions)
    inferred_vocabularies: list[str] = field(default_factory=list)

    @property
    def attempts(self) -> list[Attempt]:
        return [r.attempt for r in self.records if r.attempt is not None]

    def by_id(self) -> dict[str, Attempt]:
        return {a.id: a for a in self.attempts}

    def unusable(self) -> int:
        """How many records could not be read or parsed."""
        return sum(1 for r in self.records if r.attempt is None)

    def get(self, attempt_id: str) -> Attempt:
        found = self.by_id().get(attempt_id)
        if found is None:
            if any(r.raw_id == attempt_id or (r.file and Path(r.file).stem == attempt_id) for r in self.records):
                raise CheckFailed(
                    f"attempt {attempt_id!r} in {self.source} is not a valid record; run `ptreg validate` to see why",
                )
            raise UnknownAttempt(attempt_id, self.source, ids_in(self.records))
        return found

    def record_of(self, attempt_id: str) -> Record:
        """The record holding the valid attempt ``attempt_id``."""
        attempt = self.get(attempt_id)
        return next(r for r in self.records if r.attempt is attempt)


def parse_record(raw: Any, *, file: str | None, pointer: str = "") -> tuple[Record, list[Problem]]:
    """Validate one raw record against the model; problems carry its file and pointer."""
    if not isinstance(raw, dict):
        problem = Problem("schema", f"an attempt must be a JSON object, got {json_type(raw)}", None, pointer, file)
        return Record(raw, None, file, pointer), [problem]
    attempt_id = shown_id(raw["id"]) if isinstance(raw.get("id"), str) else None
    try:
        attempt = Attempt.model_validate(raw)
    except ValidationError as exc:
        problems = list(schema_problems(exc, attempt_id=attempt_id, pointer=pointer, file=file))
        return Record(raw, None, file, pointer), problems
    # what would be decided is not what is shown: no command may use such a record
    conditions: list[tuple[str, tuple[str, ...], ContinueIf | PlanRule | None]] = [
        ("continue-if", ("continue_if",), attempt.continue_if)
    ]
    if attempt.plan is not None:
        conditions += [(f"plan-{name}", ("plan", name.replace("-", "_")), rule) for name, rule in attempt.plan.rules()]
    for rule, where, condition in conditions:
        wrong = None if condition is None else disagreement(condition.text, condition.tree)
        if wrong is not None:
            field, why = wrong
            problem = Problem(rule, why, attempt_id, pointer_join(pointer, *where, field), file)
            return Record(raw, None, file, pointer), [problem]
    return Record(raw, attempt, file, pointer), []


def ids_in(records: Iterable[Record]) -> list[str]:
    """Every id the records give, valid record or not."""
    return [r.raw_id for r in records if r.raw_id is not None]
