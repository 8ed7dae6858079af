"""The attempt record: one attempt, and the registry's schema version and vocabularies.

Field names and meanings follow the single-file ``attempts.json`` format, schema_version 2.
Only ``id``, ``name`` and ``status`` are required by the schema: every earlier format carries
them. Any other field may be unknown (absent or null), and stays so: completeness is a
semantic rule (see ``rules.py``) so that a legacy record can be imported and reported as
incomplete instead of having values invented for it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from ..errors import PtregError
from ..text import shorten
from .condition import MAX_DEPTH, MAX_TEXT, Condition, depth

SCHEMA_VERSION: Final = 2
SUPPORTED_IMPORT_VERSIONS = (1, 2)

# A slug: lowercase letters, digits and '-', in segments joined by single dots. Ids become
# file names, so no '/', no '..', no leading '.' or '-', no spaces.
ID_PATTERN = r"^[a-z0-9][a-z0-9-]*(\.[a-z0-9-]+)*$"
ID_MAX_LENGTH = 128
# registry.json sits beside the attempt files, so an attempt may not be called "registry".
RESERVED_IDS = frozenset({"registry"})
ID_RE = re.compile(ID_PATTERN)

Status = Literal["worked", "worked-with-caveat", "failed", "regressed", "inconclusive", "not-tried"]
STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]
Confidence = Literal["exact", "inferred", "missing-evidence", "not-applicable"]
CONFIDENCES: tuple[str, ...] = Confidence.__args__  # type: ignore[attr-defined]

# Statuses whose record must say why it fell short (the ledger rule of the source project).
STATUSES_NEEDING_REASON = ("failed", "regressed", "worked-with-caveat", "inconclusive")
# What `list --failures-only` and the streak count treat as a negative outcome.
NEGATIVE_STATUSES = ("failed", "regressed", "inconclusive")
# Fields that describe the shape of a training or evaluation attempt; infrastructure has none.
SHAPE_FIELDS = ("methods", "bases", "objective", "data_rows", "varied_from")
INFRASTRUCTURE_KIND = "infrastructure"

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
        parts = [f"{self.wall_clock_seconds:g} s wall clock"]
        for name, unit in (
            ("max_timed_steps", "timed steps per repeat"),
            ("max_repeats", "repeats"),
            ("max_threads", "threads"),
            ("max_memory_mb", "MB peak memory"),
        ):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"at most {value:g} {unit}")
        return ", ".join(parts)


# A tracking issue: an http(s) URL, `#123`, `owner/repo#123` or a tracker key such as `PROJ-123`.
TRACKING_ISSUE_PATTERN = (
    r"^(https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[^\s]*)?"
    r"|#[1-9][0-9]*"
    r"|[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}#[1-9][0-9]*"
    r"|[A-Z][A-Z0-9_]{0,31}-[1-9][0-9]*)$"
)
# A frozen evaluator's reference: its name, '@', the first 12 hex digits of its sha256.
EVALUATOR_REF_PATTERN = r"^[a-z0-9][a-z0-9-]*(\.[a-z0-9-]+)*@[0-9a-f]{12}$"
GATE_CHECKS = (
    "fresh-question",
    "frozen-evaluator",
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

    attempts: int = Field(ge=0)
    evaluators: int = Field(ge=0)
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


# complete: every planned cell measured; budget-exhausted: the budget stopped a cell;
# failed: a cell or parity failed, or the engine did (the reason says which); interrupted:
# stopped by a signal. Finished samples are kept in every case.
RunStatus = Literal["complete", "budget-exhausted", "failed", "interrupted"]
RUN_ID_PATTERN = r"^[0-9]{8}T[0-9]{6}Z(-[0-9]+)?$"


class RunRef(BaseModel):
    """The attempt's link to one run folder under ``runs/<attempt id>/<run id>/``."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    run_id: Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]
    status: RunStatus
    evaluator: Text | None = None
    started_at: Text | None = None
    finished_at: Text | None = None


class ContinueIf(BaseModel):
    """The condition a disposition carries: when the numbers say to continue the line of work.

    Kept as written and as its parsed tree (which another tool can evaluate without ptreg), with
    the run it was decided on when it was set, and what it was then."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    text: Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT)] = Field(
        description="The condition as written to `ptreg conclude --continue-if` (docs/conditions.md)."
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


def _conditional_rules(schema: dict[str, Any]) -> None:
    """Add the status and infrastructure rules to the generated JSON Schema, so that a tool
    holding only the schema files enforces them too."""
    schema["allOf"] = [
        {
            "if": {"properties": {"status": {"enum": list(STATUSES_NEEDING_REASON)}}, "required": ["status"]},
            "then": {
                "required": ["failure_reason", "lesson", "next_action", "failure_reason_confidence"],
                "properties": {
                    "failure_reason": {"type": "string"},
                    "lesson": {"type": "string"},
                    "next_action": {"type": "string"},
                    "failure_reason_confidence": {"enum": [c for c in CONFIDENCES if c != "not-applicable"]},
                },
            },
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
    evidence_sources: list[Text] | None = None
    source: Text | None = None
    kind: Term | None = None
    methods: list[Term] | None = None
    bases: list[Term] | None = None
    objective: Term | None = None
    data_rows: int | None = Field(default=None, ge=0)
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
    admission: Admission | None = None
    runs: list[RunRef] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        """Known fields in the model's order; unknown fields are left out, never zeroed."""
        return self.model_dump(mode="json", exclude_none=True)


Vocabulary = dict[Term, Text]


class RegistryMeta(BaseModel):
    """``registry.json``: the schema version and the registry-level vocabularies."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    schema_version: Literal[2]
    confidence_vocabulary: dict[Confidence, Text]
    method_vocabulary: Vocabulary
    objective_vocabulary: Vocabulary
    kind_vocabulary: Vocabulary


class AttemptsFile(RegistryMeta):
    """The single-file interchange format (``attempts.json``, schema_version 2)."""

    attempts: list[Attempt]


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


def check_id(attempt_id: str) -> str:
    """Refuse an id that is not a slug, so it can never name a file outside the registry."""
    if not isinstance(attempt_id, str) or len(attempt_id) > ID_MAX_LENGTH or not ID_RE.fullmatch(attempt_id):
        raise PtregError(
            f"invalid attempt id {shorten(attempt_id)}: use lowercase letters, digits, '-' and single '.' "
            f"(at most {ID_MAX_LENGTH} characters; no '/', '..' or spaces)"
        )
    if attempt_id in RESERVED_IDS:
        raise PtregError(f"invalid attempt id {attempt_id!r}: reserved for the registry's own file")
    return attempt_id
