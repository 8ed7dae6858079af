"""The attempt record: one attempt, and the registry's schema version and vocabularies.

Field names and meanings follow the single-file ``attempts.json`` format, schema_version 2.
The model requires only ``id``, ``name`` and ``status``: every earlier format carries them.
Any other field may be unknown (absent or null), and stays so: completeness is a rule
(``rules.py``, and the published JSON Schema where it can say it), so that a record of an older
format can be imported and reported as incomplete instead of having values invented for it.
An imported record keeps its ``origin``: the file, its schema_version, its place in the file,
its key order, and the fields its format did not have.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from .analysis_plan import Plan, PlanDecision
from .budgets import describe_budget
from .condition import MAX_DEPTH, MAX_TEXT, Condition, depth
from .ledger import COVERED_FIELDS as COVERED_FIELDS
from .ledger import INFRASTRUCTURE_KIND as INFRASTRUCTURE_KIND
from .ledger import NEGATIVE_STATUSES as NEGATIVE_STATUSES
from .ledger import SHAPE_FIELDS as SHAPE_FIELDS
from .ledger import STATUSES as STATUSES
from .ledger import LedgerKey, Summary, lacks, ledger_key
from .ledger import in_ledger_order as in_ledger_order
from .refs import (
    EVALUATOR_REF_PATTERN,
    ID_MAX_LENGTH,
    ID_PATTERN,
    INT_MAX,
    RESERVED_IDS,
    RUN_ID_PATTERN,
    TRACKING_ISSUE_PATTERN,
)

SCHEMA_VERSION: Final = 2
SUPPORTED_IMPORT_VERSIONS = (1, 2)


Status = Literal["worked", "worked-with-caveat", "failed", "regressed", "inconclusive", "not-tried"]
assert Status.__args__ == STATUSES  # type: ignore[attr-defined]  # one list, kept where pydantic is not needed
Confidence = Literal["exact", "inferred", "missing-evidence", "not-applicable"]
CONFIDENCES: tuple[str, ...] = Confidence.__args__  # type: ignore[attr-defined]

# Statuses whose record must say why it fell short (the ledger rule of the source project).
STATUSES_NEEDING_REASON = ("failed", "regressed", "worked-with-caveat", "inconclusive")

# The fields of the source project's formats, as its history shows them. schema_version 1 had
# only these; schema_version 2 first came without kinds and shapes (and without the vocabularies
# that name their terms), which came later, together with those vocabularies.
V1_FIELDS = ("id", "name", "status", "evidence", "source")
V2_FIELDS = (
    "id",
    "name",
    "family",
    "status",
    "evidence",
    "failure_reason",
    "failure_reason_confidence",
    "lesson",
    "next_action",
    "evidence_sources",
    "source",
    "kind",
    *COVERED_FIELDS,
    "varied",
)
FIELDS_OF_VOCABULARIES = ("kind", *COVERED_FIELDS, "varied")

# Fields every record needs to be complete, whatever its status.
ALWAYS_KNOWN = ("family", "kind", "failure_reason_confidence")
# Fields a record needs once it has an outcome: a not-tried proposal has no evidence yet.
KNOWN_ONCE_TRIED = ("evidence", "lesson", "next_action", "evidence_sources", "source")

# Free text (evidence, lesson, failure_reason, vocabulary definitions...) holds at most this
# many characters: the longest field of the shared 66-attempt registry has about 220, and a
# run's evidence line adds a few hundred, so this bounds only what no person wrote. A record
# file is also capped in size when read (store.directory.RECORD_FILE_MAX_BYTES).
TEXT_MAX_LENGTH = 100_000

AttemptId = Annotated[str, StringConstraints(pattern=ID_PATTERN, max_length=ID_MAX_LENGTH)]
Text = Annotated[str, StringConstraints(min_length=1, max_length=TEXT_MAX_LENGTH)]
TERM_MAX_LENGTH = 200
Term = Annotated[str, StringConstraints(min_length=1, max_length=TERM_MAX_LENGTH)]


# Upper bounds past which a budget is taken for a typo rather than a plan (a week of wall
# clock, a million steps); the schema carries them too, so a hand edit cannot slip past.
BUDGET_LIMITS = {
    "wall_clock_seconds": 7 * 24 * 3600,
    "max_timed_steps": 1_000_000,
    "max_repeats": 1000,
    "max_threads": 1024,
    "max_memory_mb": 1024 * 1024,
}


class Budget(BaseModel):
    """An explicit resource budget for running an attempt, fixed before any number is seen."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    wall_clock_seconds: float = Field(
        gt=0,
        le=BUDGET_LIMITS["wall_clock_seconds"],
        allow_inf_nan=False,
        description="Wall-clock seconds the run may take at most.",
    )
    max_timed_steps: int | None = Field(default=None, gt=0, le=BUDGET_LIMITS["max_timed_steps"])
    max_repeats: int | None = Field(default=None, gt=0, le=BUDGET_LIMITS["max_repeats"])
    max_threads: int | None = Field(default=None, gt=0, le=BUDGET_LIMITS["max_threads"])
    max_memory_mb: float | None = Field(default=None, gt=0, le=BUDGET_LIMITS["max_memory_mb"], allow_inf_nan=False)

    def describe(self) -> str:
        return describe_budget(self)


GATE_CHECKS = (
    "fresh-question",
    "frozen-evaluator",
    "analysis-plan",
    "explicit-budget",
    "scoped-tracking-issue",
    "disposition-respected",
    "streak",
)
GateCheckName = Literal[GATE_CHECKS]  # type: ignore[valid-type]


class GateCheck(BaseModel):
    """One gate check as it stood at admission: a refused check admits nothing, so only
    passing outcomes are stored."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    check: GateCheckName
    outcome: Literal["passed", "caution", "overridden"]
    detail: Text


class RegistryState(BaseModel):
    """Which registry the gate read: how many attempts, and a digest of its files."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    attempts: int = Field(ge=0, le=INT_MAX)
    evaluators: int = Field(ge=0, le=INT_MAX)
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class Admission(BaseModel):
    """The gate's verdict on a proposal: which checks passed, when, against which registry."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    admitted_at: Text = Field(description="UTC time, ISO 8601.")
    ptreg_version: Text
    registry_state: RegistryState
    checks: list[GateCheck]
    precedents: list[AttemptId] = Field(
        description="Ids of the prior attempts shown to the proposer, most alike first."
    )
    plan_sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] | None = Field(
        default=None,
        description="The sha256 of the analysis plan admitted with the proposal (its canonical JSON); absent for an "
        "attempt admitted before plans existed.",
    )


# The conflicts ``gate/readmission.py`` finds when it decides every admission again, in
# admission order, after clones of a registry merge (docs/gate.md#admissions-after-a-merge).
READMISSION_RULES = (
    "readmission-question",
    "readmission-tracking-issue",
    "readmission-streak",
    "readmission-evaluator",
)
ReadmissionRule = Literal[READMISSION_RULES]  # type: ignore[valid-type]
# What `ptreg readmit` may change to re-pass the gate; the new values are the record's own.
READMITTED_FIELDS = ("question", "varied_from", "varied", "tracking_issue", "evaluator", "streak_override")
ReadmittedField = Literal[READMITTED_FIELDS]  # type: ignore[valid-type]


class FieldChange(BaseModel):
    """One field a readmission changed, with the value it had before (absent: it had none)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    field: ReadmittedField
    before: Text | None = None


def _said_how(schema: dict[str, Any]) -> None:
    """The schema says what ``Readmission._said_how`` checks, for tools without pydantic."""
    schema["allOf"] = [
        {
            "if": {"properties": {"resolution": {"const": "withdrawn"}}, "required": ["resolution"]},
            "then": {"required": ["reason"], "properties": {"reason": {"type": "string"}}},
        },
        {
            "if": {"properties": {"resolution": {"const": "readmitted"}}, "required": ["resolution"]},
            "then": {"required": ["changes"], "properties": {"changes": {"minItems": 1}}},
        },
    ]


class Readmission(BaseModel):
    """How a conflict found after a merge was resolved: the attempt re-passed the gate with
    the changes listed, or was withdrawn for the reason given."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True, json_schema_extra=_said_how)

    readmitted_at: Text = Field(description="UTC time, ISO 8601.")
    conflicts: list[ReadmissionRule] = Field(min_length=1, description="The conflicts it resolved.")
    earlier: list[AttemptId] = Field(
        min_length=1, description="The attempts admitted before it that it conflicted with."
    )
    resolution: Literal["readmitted", "withdrawn"]
    changes: list[FieldChange] = Field(default_factory=list, description="What changed to re-pass the gate.")
    reason: Text | None = Field(default=None, description="Why it was withdrawn.")

    @model_validator(mode="after")
    def _said_how(self) -> Readmission:
        if self.resolution == "withdrawn" and self.reason is None:
            raise ValueError("a withdrawal says why (reason)")
        if self.resolution == "readmitted" and not self.changes:
            raise ValueError("a readmission names what changed (changes)")
        return self


class Amendment(BaseModel):
    """An evaluator changed before any outcome: every run of the attempt so far measured nothing
    (a harness that failed), so the fix is registered as an amendment, with the evaluator it
    replaces, when and why (``gate/readmission.py``, ``measured_something``)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    amended_at: Text = Field(description="UTC time, ISO 8601.")
    field: Literal["evaluator"]
    before: Annotated[str, StringConstraints(pattern=EVALUATOR_REF_PATTERN)] = Field(
        description="The evaluator it replaces, as name@hash12."
    )
    after: Annotated[str, StringConstraints(pattern=EVALUATOR_REF_PATTERN)] = Field(
        description="The evaluator it takes, as name@hash12."
    )
    reason: Text = Field(description="Why, in the words of who amended it.")
    runs: list[Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]] | None = Field(
        default=None, description="The runs before it, each of which measured nothing."
    )


# complete: every planned cell measured; budget-exhausted: the budget stopped a cell;
# failed: a cell or parity failed, or the engine did (the reason says which); interrupted:
# stopped by a signal. Finished samples are kept in every case.
RunStatus = Literal["complete", "budget-exhausted", "failed", "interrupted"]


class RunRef(BaseModel):
    """The attempt's link to one run folder under ``runs/<attempt id>/<run id>/``."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    run_id: Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]
    status: RunStatus
    evaluator: Text | None = None
    started_at: Text | None = None
    finished_at: Text | None = None
    # the run it continues (`run --resume`), which is counted no more where this one is linked
    continues: Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)] | None = None


class ContinueIf(BaseModel):
    """The condition a disposition carries: when the numbers say to continue the line of work.

    Kept as its canonical text and as its parsed tree (which another tool can evaluate without
    ptreg), which must be one condition (``records/registry.py``), with the run it was decided
    on when it was set, and what it was then."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    text: Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT)] = Field(
        description="The condition's text, which parses to `tree`; `ptreg conclude --continue-if` stores its "
        "canonical text (docs/conditions.md)."
    )
    tree: Condition = Field(description=f"The parsed condition; at most {MAX_DEPTH} levels deep.")
    set_at: Text = Field(description="UTC time, ISO 8601, when the condition was set.")
    run: Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)] = Field(
        description="The attempt's latest complete run when the condition was set, which it was checked against."
    )
    held_at_conclusion: bool | None = Field(
        default=None, description="Whether it held on that run: true or false; absent when it could not be decided."
    )

    @model_validator(mode="after")
    def _shallow(self) -> ContinueIf:
        if depth(self.tree) > MAX_DEPTH:
            raise ValueError(f"the condition nests deeper than {MAX_DEPTH} levels")
        return self


class Origin(BaseModel):
    """Where an imported record comes from, so that it can be named, put back in its place, and
    held to the fields its own format had."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    file: Text = Field(description="The file it was imported from, as the import named it.")
    schema_version: Literal[1, 2] = Field(description="The schema_version of that file.")
    position: int = Field(ge=0, le=INT_MAX, description="Its index in the file's attempts array (0 is the first).")
    keys: list[Annotated[str, StringConstraints(min_length=1, max_length=100)]] = Field(
        description="Its keys in the file's order, which export gives back."
    )
    lacks: list[Annotated[str, StringConstraints(min_length=1, max_length=100)]] = Field(
        default_factory=list,
        description="Fields its format did not have: unknown for that reason, reported as warnings, not errors.",
    )
    imported_at: Text | None = Field(default=None, description="UTC time, ISO 8601, of the import.")
    import_number: int | None = Field(
        default=None,
        ge=1,
        le=INT_MAX,
        description="Which import of the registry brought it: orders imports of the same second.",
    )

    def describe(self) -> str:
        """``file#/attempts/N (schema_version V)``: the record's place, as a JSON Pointer."""
        return f"{self.file}#/attempts/{self.position} (schema_version {self.schema_version})"


def _is_lacking(field: str) -> dict[str, Any]:
    """JSON Schema of a record whose origin says its format had no ``field``."""
    return {
        "required": ["origin"],
        "properties": {"origin": {"required": ["lacks"], "properties": {"lacks": {"contains": {"const": field}}}}},
    }


def _known_unless_lacking(fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """Each field required, unless the record's origin says its format did not have it."""
    return [{"anyOf": [{"required": [field]}, _is_lacking(field)]} for field in fields]


def _conditional_rules(schema: dict[str, Any]) -> None:
    """Add the rules JSON Schema can express to the generated schema, so that a tool holding
    only the schema files enforces them too (docs/registry.md lists those it cannot)."""
    schema["properties"]["id"]["not"] = {"enum": sorted(RESERVED_IDS)}
    schema["allOf"] = [
        # a complete record states these; a field its origin's format lacked may stay unknown
        {"allOf": _known_unless_lacking(ALWAYS_KNOWN)},
        {
            "if": {"properties": {"status": {"not": {"const": "not-tried"}}}, "required": ["status"]},
            "then": {"allOf": _known_unless_lacking(KNOWN_ONCE_TRIED)},
        },
        {
            "if": {"properties": {"status": {"enum": list(STATUSES_NEEDING_REASON)}}, "required": ["status"]},
            "then": {
                "allOf": _known_unless_lacking(("failure_reason",)),
                "properties": {
                    "failure_reason": {"type": "string"},
                    "lesson": {"type": "string"},
                    "next_action": {"type": "string"},
                    "failure_reason_confidence": {"enum": [c for c in CONFIDENCES if c != "not-applicable"]},
                },
            },
        },
        {
            # worked and not-tried without a reason have no reason to be sure of
            "if": {
                "properties": {"status": {"enum": [s for s in STATUSES if s not in STATUSES_NEEDING_REASON]}},
                "required": ["status"],
                "not": {"properties": {"failure_reason": {"type": "string"}}, "required": ["failure_reason"]},
            },
            "then": {"properties": {"failure_reason_confidence": {"enum": ["not-applicable", None]}}},
        },
        {
            # confidence 'exact' rests on a complete run, when the record links runs
            "if": {
                "properties": {"failure_reason_confidence": {"const": "exact"}, "runs": {"type": "array"}},
                "required": ["failure_reason_confidence", "runs"],
            },
            "then": {"properties": {"runs": {"contains": {"properties": {"status": {"const": "complete"}}}}}},
        },
        {
            # null means unknown, which is allowed; a value is not.
            "if": {"properties": {"kind": {"const": INFRASTRUCTURE_KIND}}, "required": ["kind"]},
            "then": {"properties": {f: {"type": "null"} for f in SHAPE_FIELDS}},
        },
        {
            # a condition decides a disposition, so it never stands without one
            "if": {"properties": {"continue_if": {"type": "object"}}, "required": ["continue_if"]},
            "then": {"required": ["next_action"], "properties": {"next_action": {"type": "string"}}},
        },
        {
            "if": {"properties": {"varied_from": {"type": "string"}}, "required": ["varied_from"]},
            "then": {"required": ["varied"], "properties": {"varied": {"type": "string"}}},
        },
    ]


class Attempt(BaseModel):
    """One attempt: what was tried, what happened, what it taught, and what to do next."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True, json_schema_extra=_conditional_rules)

    id: AttemptId = Field(description="Lowercase slug; also the record's file name.")
    name: Text
    family: Text | None = Field(default=None, description="Experiment family, e.g. runtime-perf.")
    status: Status
    evidence: Text | None = Field(default=None, description="The measured result, as a readout.")
    failure_reason: Text | None = Field(default=None, description="Why it stopped or stayed bounded.")
    failure_reason_confidence: Confidence | None = None
    lesson: Text | None = Field(default=None, description="What the attempt taught.")
    next_action: Text | None = Field(default=None, description="The retained disposition.")
    continue_if: ContinueIf | None = Field(
        default=None, description="The disposition's condition over the attempt's run results, beside next_action."
    )
    evidence_sources: list[Text] | None = Field(default=None, json_schema_extra={"minItems": 1})
    source: Text | None = None
    kind: Term | None = None
    methods: list[Term] | None = None
    bases: list[Term] | None = None
    objective: Term | None = None
    data_rows: int | None = Field(default=None, ge=0, le=INT_MAX)
    varied_from: AttemptId | None = Field(default=None, description="Id of the attempt this one varies.")
    varied: Text | None = Field(default=None, description="What was varied from varied_from.")
    # Pre-registration (gated proposals and runs); a record imported without them stays valid.
    question: Text | None = Field(default=None, description="The fresh question a rerun asks.")
    hypothesis: Text | None = None
    evaluator: Annotated[str, StringConstraints(pattern=EVALUATOR_REF_PATTERN)] | None = Field(
        default=None, description="Frozen evaluator, as name@hash12 (a file under evaluators/)."
    )
    budget: Budget | None = None
    tracking_issue: Annotated[str, StringConstraints(pattern=TRACKING_ISSUE_PATTERN, max_length=500)] | None = Field(
        default=None, description="The issue that scopes this attempt: URL, #123, owner/repo#123 or PROJ-123."
    )
    answers_disposition: Text | None = Field(
        default=None, description="How this attempt answers the next_action of the attempt it varies."
    )
    streak_override: Text | None = Field(
        default=None, description="Why the proposal goes on although its objective's chain says STOP AND RETHINK."
    )
    plan: Plan | None = Field(
        default=None, description="The analysis plan registered with the proposal: which numbers decide its status."
    )
    plan_decision: PlanDecision | None = Field(default=None, description="What the plan decided at conclusion.")
    deviation: Text | None = Field(
        default=None, description="Why the status differs from the plan's decision, in the words of who concluded it."
    )
    admission: Admission | None = None
    readmissions: list[Readmission] | None = Field(
        default=None, description="Conflicts found after a merge and how each was resolved, oldest first."
    )
    amendments: list[Amendment] | None = Field(
        default=None, description="Evaluators changed before any outcome, oldest first."
    )
    runs: list[RunRef] | None = None
    origin: Origin | None = Field(
        default=None, description="Where an imported record comes from; written by `ptreg import`."
    )

    def to_json_dict(self) -> dict[str, Any]:
        """Known fields in the model's order; unknown fields are left out, never zeroed."""
        return self.model_dump(mode="json", exclude_none=True)

    def is_dumped_as(self, raw: Any) -> bool:
        """Whether ``raw``, the JSON its file holds, is exactly ``to_json_dict()``: the same fields
        in the same order, each of the same JSON type (``records/dumped.py`` reads such a file
        without the models)."""
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":")) == self.model_dump_json(exclude_none=True)

    def to_ledger_dict(self) -> dict[str, Any]:
        """The record as a single-file ledger holds it: without its origin, and for an imported
        record in the key order of the file it came from (fields added since come after)."""
        body = self.to_json_dict()
        body.pop("origin", None)
        if self.origin is None:
            return body
        first = {key: body[key] for key in self.origin.keys if key in body}
        return {**first, **{k: v for k, v in body.items() if k not in first}}

    def summary(self) -> Summary:
        """What the query index keeps of this record (``records/ledger.py``)."""
        return Summary(
            self.id, self.status, self.family, self.kind, self.objective,
            None if self.methods is None else list(self.methods),
            None if self.bases is None else list(self.bases),
            self.data_rows, self.varied_from, self.varied, self.question, self.lesson, self.next_action,
            self.tracking_issue, self.ledger, self.continue_if is not None,
            name=self.name, hypothesis=self.hypothesis, deviates=self.deviation is not None,
        )  # fmt: skip

    @property
    def deviates(self) -> bool:
        """Whether its status departs from its analysis plan's decision (a deviation says why)."""
        return self.deviation is not None

    @property
    def ledger(self) -> LedgerKey:
        """Where the record stands in the ledger (``ledger_key``)."""
        return ledger_key(self)

    def lacks(self, field: str) -> bool:
        return lacks(self, field)

    @property
    def withdrawn(self) -> Readmission | None:
        """The withdrawal that ended it after a conflict, if one did: it is not run or
        concluded again."""
        last = self.readmissions[-1] if self.readmissions else None
        return last if last is not None and last.resolution == "withdrawn" else None


# A term's definition; null when the term came from a ledger that used it without defining it.
Vocabulary = dict[Term, Text | None]
DefinedVocabulary = dict[Term, Text]


class RegistryMeta(BaseModel):
    """``registry.json``: the schema version and the registry-level vocabularies. A term whose
    definition is null was imported without one (its ledger used it, but defined nothing)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    schema_version: Literal[2]
    confidence_vocabulary: dict[Confidence, Text | None]
    method_vocabulary: Vocabulary
    objective_vocabulary: Vocabulary
    kind_vocabulary: Vocabulary


class AttemptsFile(BaseModel):
    """The single-file interchange format (``attempts.json``, schema_version 2, as ptreg writes
    it): the vocabularies define every term they hold. Older files that lack parts of it are
    read too (``store/attempts_file.py``)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    schema_version: Literal[2]
    confidence_vocabulary: dict[Confidence, Text]
    attempts: list[Attempt]
    method_vocabulary: DefinedVocabulary
    objective_vocabulary: DefinedVocabulary
    kind_vocabulary: DefinedVocabulary


# Key order of an exported attempts.json, as in the source project's file.
ATTEMPTS_FILE_KEYS = (
    "schema_version",
    "confidence_vocabulary",
    "attempts",
    "method_vocabulary",
    "objective_vocabulary",
    "kind_vocabulary",
)
VOCABULARY_KEYS = ("method_vocabulary", "objective_vocabulary", "kind_vocabulary")
