"""An attempt read straight off its file's JSON, for a file the query index vouches for.

When the index validates a record file with the models, it also notes whether the file holds
exactly the JSON ptreg writes for that record (``Attempt.to_json_dict()``: the same fields, in
the same order, each value of the same JSON type). In such a file a field that is left out is an
unknown one (None), and every value is the one the validated model holds, so attributes read off
the JSON answer as the model's do. `show` renders a dossier that way without importing pydantic
or building the models, which cost most of its time.

Only data is here, and what the views read besides it (``ledger``, ``lacks``): a model's other methods
are not, and reading one raises AttributeError rather than answering None. The views call the
pydantic-free functions the models themselves use (``budgets.describe_budget``).
"""

from __future__ import annotations

import copy
from typing import Any

from .attempt_view import AttemptView
from .ledger import LedgerKey, lacks, ledger_key

# The field names of Attempt and of every model inside it (origin, budget, admission, runs, the
# condition's tree...): only these read as None when left out. tests/records/test_dumped.py
# checks the list against the models.
FIELDS = frozenset(
    {
        "admission", "admitted_at", "answers_disposition", "arg", "args", "arm", "attempts", "backend", "bases",
        "budget", "check", "checks", "cmp", "config", "continue_if", "continues", "data_rows", "detail", "evaluator",
        "evaluators", "evidence", "evidence_sources", "failure_reason", "failure_reason_confidence",
        "family", "file", "finished_at", "held_at_conclusion", "hypothesis", "id", "import_number",
        "imported_at", "kernel", "keys", "kind", "lacks", "layer", "left", "lesson", "max_memory_mb",
        "max_repeats", "max_threads", "max_timed_steps", "methods", "metric", "name", "next_action", "objective",
        "of", "op", "origin", "outcome", "over", "position", "precedents", "ptreg_version", "question",
        "registry_state", "right", "run", "run_id", "runs", "schema_version", "set_at", "sha256", "source",
        "started_at", "status", "streak_override", "text", "tracking_issue", "tree", "value", "varied",
        "varied_from", "wall_clock_seconds",
        # readmissions after a merge (records/attempt.py Readmission)
        "before", "changes", "conflicts", "earlier", "field", "readmissions", "readmitted_at", "reason",
        "resolution",
        # evaluators amended before any outcome (records/attempt.py Amendment)
        "after", "amended_at", "amendments",
        # the analysis plan (records/analysis_plan.py)
        "because", "deviation", "margins", "multiplicity", "plan", "plan_decision", "plan_sha256", "readout",
        "regressed_if", "worked_if",
    }
)  # fmt: skip


# Fields whose value is a mapping of names to numbers (a plan's margins), read as a dict, as the
# model holds it, not as an object of fields.
MAPPINGS = frozenset({"margins"})


class Dumped:
    """A JSON object read as a model: ``x.field`` is its value, or None when it is left out;
    an object inside is read the same way."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        if name not in FIELDS:  # a method or property of a model, or a typo: never None
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")
        value = self._data.get(name)
        return dict(value) if name in MAPPINGS and isinstance(value, dict) else _read(value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"


class DumpedAttempt(Dumped):
    """An attempt off a vouched file: its fields, and what the views read of ``Attempt`` besides."""

    __slots__ = ()

    @property
    def ledger(self) -> LedgerKey:
        return ledger_key(self)

    def lacks(self, field: str) -> bool:  # a method of Attempt, though a field of Origin
        return lacks(self, field)

    def to_json_dict(self) -> dict[str, Any]:
        """As ``Attempt.to_json_dict``: the file holds exactly that."""
        return copy.deepcopy(self._data)


def _read(value: Any) -> Any:
    if isinstance(value, dict):
        return Dumped(value)
    if isinstance(value, list):
        return [_read(v) for v in value]
    return value


def dumped_attempt(data: dict[str, Any]) -> AttemptView:
    """The attempt a vouched file holds (``data``, its parsed JSON), as the dossier reads it
    (``AttemptView``: the data the model holds, not its methods)."""
    return DumpedAttempt(data)
