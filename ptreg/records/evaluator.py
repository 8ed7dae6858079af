"""Evaluators: the hash-pinned spec of how an attempt is measured, and its frozen file.

An evaluator's identity is the sha256 of its canonical JSON (sorted keys, no insignificant
whitespace) taken together with the version of the engine code that interprets the spec
(``engine.plan.EVALUATOR_VERSION``). It is stored once as ``evaluators/<name>@<hash12>.json``
and never rewritten: a changed spec, or a new interpretation of the same spec, is a new
evaluator.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from ..errors import UnusableInput
from .condition import BACKEND_PATTERN
from .configs import ConfigName
from .metrics import ACCELERATOR_MEMORY as ACCELERATOR_MEMORY
from .metrics import ACCELERATOR_METRICS as ACCELERATOR_METRICS
from .metrics import ACCELERATOR_UTILISATION as ACCELERATOR_UTILISATION
from .metrics import MEASURED_BY_PTREG as MEASURED_BY_PTREG
from .metrics import MEMORY_MARGIN as MEMORY_MARGIN
from .metrics import METRIC_PATTERN as METRIC_PATTERN
from .metrics import PEAK_MEMORY as PEAK_MEMORY
from .metrics import PTREG_METRICS as PTREG_METRICS
from .metrics import WALL_MARGIN as WALL_MARGIN
from .metrics import WALL_SECONDS as WALL_SECONDS
from .metrics import MetricDeclaration as MetricDeclaration
from .metrics import MetricName as MetricName
from .metrics import ParamName as ParamName
from .problems import UNION_TAG, every_schema_error
from .refs import ID_MAX_LENGTH, ID_PATTERN, INT_MAX
from .variables import VariableName, variable_problem

HASH_SHOWN = 12

Slug = Annotated[str, StringConstraints(pattern=ID_PATTERN, max_length=ID_MAX_LENGTH)]
# A workload is named by its entry point (engine/workloads/discovery.py); which names exist is
# known only once the plugins are read, so the record checks the form and the engine the name.
WorkloadName = Slug
Metric = Literal["gflops", "ms-per-step"]
# How a repeat's timed region is measured: seconds of wall time, or instructions executed
# under valgrind (engine/callgrind.py). Wall time is the default and is never written, so that
# every spec frozen before the key existed keeps its hash.
Timer = Literal["wall", "instructions"]
WALL: Timer = "wall"
INSTRUCTIONS: Timer = "instructions"
# A metric or parameter name, as conditions and commands write it: ASCII, a letter first.
ALL_CONFIG = "all"
# The parameter by which an arm names a git revision of the project: its command runs in a
# checkout of that revision (engine/revisions.py), not in the working tree.
REVISION = "revision"


# A backend at a git revision of the project: ``numba@before`` is the backend ``numba`` whose
# module is imported from the checkout of the revision the spec names ``before``
# (engine/revisions.py). The name before '@' is a registered backend's, the label after it a key
# of the spec's ``revisions``.
BACKEND_AT = "@"
BackendName = Annotated[str, StringConstraints(pattern=BACKEND_PATTERN, max_length=ID_MAX_LENGTH)]
RevisionText = Annotated[str, StringConstraints(max_length=1000)]


def backend_at(name: str) -> tuple[str, str | None]:
    """The registered backend a spec's backend name names, and the label of the revision it is
    taken at (None: as installed)."""
    backend, at, label = name.partition(BACKEND_AT)
    return backend, label if at else None


def revision_problem(revision: str) -> str | None:
    """Why ``revision`` is not a plain git revision that can be passed to git safely, or None.
    One starting with '-' could be read as an option, and control characters have no place in
    a revision's name; git itself says whether the rest resolves."""
    if not revision.strip():
        return "is empty"
    if revision.startswith("-"):
        return "starts with '-' (it would read as an option)"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in revision):
        return "holds a control character"
    return None


class Tolerance(BaseModel):
    """How far a backend that does not keep the reference order may stray from float64."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    rtol: float = Field(ge=0, le=1, allow_inf_nan=False)
    atol: float = Field(ge=0, le=1, allow_inf_nan=False)


class EvaluatorSpec(BaseModel):
    """Exactly how an attempt is measured; every field is explicit, nothing defaults."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    name: Slug
    description: Annotated[str, StringConstraints(min_length=1)] | None = None
    workload: WorkloadName
    configs: list[ConfigName] = Field(min_length=1)
    backends: list[BackendName] = Field(min_length=1)
    baseline: BackendName = Field(description="The backend every other is compared with, besides the reference.")
    revisions: dict[Slug, RevisionText] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="Git revisions of the project by label: a backend named NAME@LABEL is NAME's module imported from "
        "the checkout of that revision.",
    )
    warmup_steps: int = Field(ge=0, le=10_000)
    timed_steps: int = Field(ge=1, le=1_000_000)
    repeats: int | None = Field(
        default=None, ge=1, le=1000, description="A fixed plan: this many rounds. Or give the adaptive plan instead."
    )
    min_repeats: int | None = Field(
        default=None, ge=2, le=1000, description="Adaptive plan: at least this many rounds."
    )
    max_repeats: int | None = Field(default=None, ge=2, le=1000, description="Adaptive plan: at most this many rounds.")
    target_ci: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        allow_inf_nan=False,
        description="Adaptive plan: stop adding rounds to a config once every ratio's 95% interval has at most "
        "this relative half-width.",
    )
    seed: int = Field(ge=0, le=2**32 - 1)
    threads: int = Field(ge=1, le=1024)
    tolerance: Tolerance
    max_relative_spread: float = Field(
        gt=0,
        le=10,
        allow_inf_nan=False,
        description="(max - min) / median above which a cell is flagged untrustworthy.",
    )
    metric: Metric
    timer: Timer | None = Field(
        default=None,
        description="wall (the default, never written) or instructions: each repeat's timed region counted in "
        "instructions executed under valgrind, with one thread and a fixed hash seed.",
    )

    @property
    def arm_names(self) -> list[str]:
        """What the cells of one config compare: here, the backends."""
        return list(self.backends)

    @property
    def counts_instructions(self) -> bool:
        """Whether its repeats are counted in instructions rather than timed in seconds."""
        return self.timer == INSTRUCTIONS

    def measures(self) -> str:
        """What it measures, in a few words."""
        return f"workload {self.workload}, configs {', '.join(self.configs)}, backends {', '.join(self.backends)}"

    def procedure(self) -> str:
        """How each cell is measured, in words."""
        timed = "counted steps (instructions, under valgrind)" if self.counts_instructions else "timed steps"
        return f"{self.warmup_steps} warm-up and {self.timed_steps} {timed}, {self.plan()}, {self.threads} thread(s)"

    @property
    def needs_steps(self) -> int | None:
        """Timed steps per repeat, as a budget limits them."""
        return self.timed_steps

    @property
    def config_names(self) -> list[str]:
        return list(self.configs)

    @model_validator(mode="after")
    def _consistent(self) -> EvaluatorSpec:
        adaptive = [self.min_repeats, self.max_repeats, self.target_ci]
        if self.repeats is None and None in adaptive:
            raise ValueError("give repeats (a fixed plan), or min_repeats, max_repeats and target_ci (an adaptive one)")
        if self.repeats is not None and any(v is not None for v in adaptive):
            raise ValueError(
                "repeats is a fixed plan; min_repeats, max_repeats and target_ci an adaptive one: give one"
            )
        if self.min_repeats is not None and self.max_repeats is not None and self.min_repeats > self.max_repeats:
            raise ValueError("min_repeats is more than max_repeats")
        for field in ("configs", "backends"):
            values = getattr(self, field)
            if len(set(values)) != len(values):
                raise ValueError(f"{field} names an entry twice")
        if self.baseline not in self.backends:
            raise ValueError(f"baseline {self.baseline!r} is not one of the backends")
        labels = {label for _, label in map(backend_at, self.backends) if label is not None}
        for label, revision in (self.revisions or {}).items():
            problem = revision_problem(revision)
            if problem is not None:
                raise ValueError(f"revision {label!r}: {revision!r} is not a plain git revision: {problem}")
            if label not in labels:
                raise ValueError(f"revision {label!r} is taken by no backend (name one NAME@{label})")
        unknown = sorted(labels - set(self.revisions or {}))
        if unknown:
            raise ValueError(f"a backend is taken at revision {unknown[0]!r}, which revisions does not name")
        if self.counts_instructions and self.threads != 1:
            # another thread's instructions would land in the count whenever the scheduler let it run
            raise ValueError(f"timer 'instructions' counts one thread: threads must be 1, not {self.threads}")
        if self.timer == WALL:
            self.timer = None  # the default is not written: the spec hashes as if the key were absent
        return self

    @property
    def most_repeats(self) -> int:
        """The rounds a config may take at most: the fixed plan's, or the adaptive plan's ceiling."""
        most = self.repeats if self.repeats is not None else self.max_repeats
        assert most is not None  # one of the two plans is always given
        return most

    def plan(self) -> str:
        """The repeats plan in words."""
        if self.repeats is not None:
            return f"{self.repeats} repeats"
        return (
            f"{self.min_repeats} to {self.max_repeats} repeats, until every ratio is known within "
            f"±{100 * (self.target_ci or 0):g}%"
        )

    @property
    def least_repeats(self) -> int:
        """The rounds a config takes at least."""
        least = self.repeats if self.repeats is not None else self.min_repeats
        assert least is not None
        return least


# A relative path; that it names no '.' or '..' and does not start at / is checked below (the
# schema's regex language has no look-ahead).
INPUT_PATTERN = r"^[^/\x00-\x1f\\][^\x00-\x1f\\]{0,499}$"


def path_problem(path: str, what: str = "input") -> str | None:
    """Why a path of the project, as a record gives it, does not stay inside the root; or None."""
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return f"{what} {path!r} must be a relative path without '.', '..' or empty parts"
    return None


# The files of the project a command's evaluator freezes as the code it runs, at most: its
# script and what Python can import beside it (store/code_digests.py). More is not one script's
# folder, and would not fit a frozen evaluator's file.
MAX_CODE_FILES = 1000
ProjectPath = Annotated[str, StringConstraints(pattern=INPUT_PATTERN)]


Reason = Annotated[str, StringConstraints(min_length=1, max_length=400, pattern=r"^[^\x00-\x1f\x7f]+$")]


class ArmsSpec(BaseModel):
    """An evaluator that compares named arms on declared metrics: a command's alternatives, or
    any workload plugin's. Its workload's own settings (the command line of ``command``) are
    the further fields, which the workload checks (engine/workloads/discovery.py)."""

    model_config = ConfigDict(extra="allow", strict=True, defer_build=True)

    name: Slug
    description: Annotated[str, StringConstraints(min_length=1)] | None = None
    workload: WorkloadName
    arms: dict[Slug, dict[ParamName, Annotated[str, StringConstraints(max_length=1000)]]] = Field(
        min_length=1, max_length=64
    )
    baseline: Slug = Field(description="The arm every other is compared with first.")
    inputs: list[Annotated[str, StringConstraints(pattern=INPUT_PATTERN)]] = Field(
        default_factory=list,
        max_length=256,
        description="Files or folders, relative to the project root, whose content is frozen with the evaluator.",
    )
    metrics: dict[MetricName, MetricDeclaration] = Field(default_factory=dict, max_length=64)
    repeats: int = Field(
        ge=1,
        le=1000,
        description="Rounds: every arm once per round, each round its own seed; with seeds, the rounds of each seed.",
    )
    seed: int = Field(
        ge=0, le=2**32 - 1, description="Without seeds, round r runs with seed + r, the same for every arm."
    )
    seeds: list[Annotated[int, Field(ge=0, le=2**32 - 1)]] | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description="Seeds apart from repeats: each seed is taken repeats times in a row, so round r runs with "
        "seeds[r // repeats]; len(seeds) x repeats rounds.",
    )
    timeout_seconds: float = Field(gt=0, le=7 * 24 * 3600, allow_inf_nan=False)
    threads: int | None = Field(
        default=None, ge=1, le=1024, description="When given, the BLAS and OpenMP pools of the command get this many."
    )
    env: list[VariableName] | None = Field(
        default=None,
        max_length=64,
        description="Names of the caller's environment variables the command is given (their values are recorded "
        "with the run, secret-looking ones redacted); a variable not set is not given.",
    )
    not_frozen: dict[ProjectPath, Reason] | None = Field(
        default=None,
        max_length=64,
        description="Files or folders of the project that a command names, or that Python imports from beside its "
        "script, which are not frozen as the code it runs, each with why (a file the command writes, a virtualenv's "
        "interpreter). Everything else of the kind is frozen with the evaluator.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ArmsSpec:
        if self.baseline not in self.arms:
            raise ValueError(f"baseline {self.baseline!r} is not one of the arms")
        for path in self.not_frozen or {}:
            problem = path_problem(path, "not_frozen path")
            if problem is not None:
                raise ValueError(problem)
            if path in self.inputs:
                raise ValueError(f"{path!r} is both an input, frozen, and not_frozen")
        for arm, params in self.arms.items():
            if REVISION in params:
                problem = revision_problem(params[REVISION])
                if problem is not None:
                    raise ValueError(
                        f"arm {arm!r}: revision {params[REVISION]!r} is not a plain git revision: {problem}"
                    )
        taken = sorted(set(self.metrics) & set(MEASURED_BY_PTREG))
        if taken:
            raise ValueError(f"metric {taken[0]!r} is measured by ptreg itself; name yours otherwise")
        if self.env is not None:
            if len(set(self.env)) != len(self.env):
                raise ValueError("env names a variable twice")
            for name in self.env:
                problem = variable_problem(name)
                if problem is not None:
                    raise ValueError(problem)
        if len(set(self.inputs)) != len(self.inputs):
            raise ValueError("inputs names an entry twice")
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds names a seed twice")
        for path in self.inputs:
            problem = path_problem(path)
            if problem is not None:
                raise ValueError(problem)
        return self

    @property
    def arm_names(self) -> list[str]:
        return list(self.arms)

    @property
    def revisions(self) -> dict[str, str]:
        """The arms that name a git revision of the project, with the revision each names."""
        return {arm: params[REVISION] for arm, params in self.arms.items() if REVISION in params}

    def measures(self) -> str:
        return f"workload {self.workload}, arms {', '.join(self.arms)}, metrics {', '.join(self.metrics) or 'its own'}"

    needs_steps: None = None  # a repeat is one run of the arm, not a number of steps

    def procedure(self) -> str:
        threads = f"{self.threads} thread(s)" if self.threads is not None else "threads as the command sets them"
        # a staged command's timeout is each stage's, once or each (engine/workloads/command.py)
        killed = "each stage's run" if "stages" in self.settings else "each repeat"
        return f"{self.plan()}, {killed} killed at {self.timeout_seconds:g} s, {threads}"

    @property
    def config_names(self) -> list[str]:
        return [ALL_CONFIG]

    @property
    def settings(self) -> dict[str, Any]:
        """The workload's own fields, as given."""
        return dict(self.model_extra or {})

    @property
    def rounds(self) -> int:
        """How many rounds the plan takes: repeats of each seed when seeds are given."""
        return self.repeats * (len(self.seeds) if self.seeds is not None else 1)

    def round_seed(self, round_number: int) -> int:
        """The seed of a round, the same for every arm: the one home of that rule."""
        if self.seeds is not None:
            return self.seeds[round_number // self.repeats]
        return self.seed + round_number

    def seed_values(self) -> list[int]:
        """Every seed the plan's rounds take, in the order they come."""
        return list(self.seeds) if self.seeds is not None else list(range(self.seed, self.seed + self.repeats))

    @property
    def most_repeats(self) -> int:
        return self.rounds

    @property
    def least_repeats(self) -> int:
        return self.rounds

    target_ci: None = None  # no adaptive plan: a fixed number of rounds

    def plan(self) -> str:
        if self.seeds is not None:
            shown = ", ".join(str(s) for s in self.seeds[:8]) + (", ..." if len(self.seeds) > 8 else "")
            return f"{self.rounds} rounds ({self.repeats} repeat(s) of each of seeds {shown})"
        return f"{self.repeats} rounds (seeds {self.seed} to {self.seed + self.repeats - 1})"

    def declared(self) -> dict[str, MetricDeclaration]:
        """Every metric of a run under this spec: the evaluator's, then ptreg's own."""
        return {**self.metrics, **PTREG_METRICS}


AnySpec = EvaluatorSpec | ArmsSpec


ARMS_TAG, BACKENDS_TAG = f"{UNION_TAG}arms", f"{UNION_TAG}backends"


def _spec_kind(raw: Any) -> str:
    if isinstance(raw, dict):
        return ARMS_TAG if "arms" in raw else BACKENDS_TAG
    return ARMS_TAG if isinstance(raw, ArmsSpec) else BACKENDS_TAG


# Which model a spec is: one that compares arms names them; one that compares backends does not.
SpecField = Annotated[
    Annotated[EvaluatorSpec, Tag(BACKENDS_TAG)] | Annotated[ArmsSpec, Tag(ARMS_TAG)], Discriminator(_spec_kind)
]


class FrozenEvaluator(BaseModel):
    """The file ``evaluators/<name>@<hash12>.json``."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    name: Slug
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    evaluator_version: int = Field(ge=1, le=INT_MAX)
    spec: SpecField
    inputs: (
        dict[
            Annotated[str, StringConstraints(pattern=INPUT_PATTERN)],
            Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")],
        ]
        | None
    ) = Field(
        default=None, description="Each input of the spec, by its path, with the sha256 of its content when frozen."
    )
    code: dict[ProjectPath, Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]] | None = Field(
        default=None,
        max_length=MAX_CODE_FILES,
        description="For a workload that runs a command: each file of the project it runs, by its path, with the "
        "sha256 of its content when frozen (the files its command line names, and what Python imports from beside "
        "its script). Absent from evaluators frozen before ptreg froze a command's code.",
    )

    @model_validator(mode="after")
    def _a_digest_for_each_input(self) -> FrozenEvaluator:
        """The recorded digests are of exactly the spec's inputs: one left out would never be
        checked by the gate or by `ptreg run`, while the spec still says it is frozen."""
        expected = set(getattr(self.spec, "inputs", None) or [])
        recorded = set(self.inputs or {})
        if expected != recorded:
            odd = sorted(expected ^ recorded)[0]
            where = "has no recorded digest" if odd in expected else "is no input of the spec"
            raise ValueError(f"input {odd!r} {where}")
        for path in self.code or {}:
            problem = path_problem(path, "code path")
            if problem is not None:
                raise ValueError(problem)
        return self

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.sha256[:HASH_SHOWN]}"


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8: the bytes the identity is taken of."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def identity(
    spec: Any, evaluator_version: int, inputs: dict[str, str] | None = None, code: dict[str, str] | None = None
) -> str:
    """sha256 of the spec's canonical JSON together with the interpreting code's version, and
    the content digests of its inputs where it reads any (so a changed data split is a new
    evaluator) and of the project's files its command runs (so consent to it, which names this
    sha256, covers them)."""
    body: dict[str, Any] = {"evaluator_version": evaluator_version, "spec": spec}
    if inputs is not None:
        body["inputs"] = inputs
    if code is not None:
        body["code"] = code
    return hashlib.sha256(canonical_json(body)).hexdigest()


_SPEC: TypeAdapter[AnySpec] = TypeAdapter(SpecField, config=ConfigDict(defer_build=True))


def parse_spec(raw: Any, where: str) -> AnySpec:
    if not isinstance(raw, dict):
        raise UnusableInput(f"{where}: an evaluator spec must be a JSON object")
    try:
        return _SPEC.validate_python(raw)
    except ValidationError as exc:
        raise UnusableInput(every_schema_error(exc, where)) from None


def frozen_from_spec(
    spec: AnySpec, evaluator_version: int, inputs: dict[str, str] | None = None, code: dict[str, str] | None = None
) -> FrozenEvaluator:
    body = spec.model_dump(mode="json", exclude_none=True)
    return FrozenEvaluator(
        name=spec.name,
        sha256=identity(body, evaluator_version, inputs, code),
        evaluator_version=evaluator_version,
        spec=spec,
        inputs=inputs,
        code=code,
    )


def mismatch(raw: dict[str, Any], frozen: FrozenEvaluator, file_name: str) -> str | None:
    """What no longer matches between a frozen evaluator's file and its identity, or None."""
    # The stored text of the spec, not its re-validation, so that any edit shows.
    actual = identity(raw["spec"], frozen.evaluator_version, raw.get("inputs"), raw.get("code"))
    if actual != frozen.sha256:
        return (
            f"its spec hashes to {actual[:HASH_SHOWN]}, not the recorded {frozen.sha256[:HASH_SHOWN]} "
            "(edited after freezing?)"
        )
    if frozen.spec.name != frozen.name:
        return f"spec name {frozen.spec.name!r} differs from the evaluator's name {frozen.name!r}"
    if file_name != f"{frozen.ref}.json":
        return f"file name should be {frozen.ref}.json for this content"
    return None
