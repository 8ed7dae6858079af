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

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from ..errors import PtregError
from .configs import ConfigName
from .problems import every_schema_error
from .refs import ID_MAX_LENGTH, ID_PATTERN, INT_MAX

HASH_SHOWN = 12

Slug = Annotated[str, StringConstraints(pattern=ID_PATTERN, max_length=ID_MAX_LENGTH)]
WorkloadName = Literal["kernels", "tinygpt-train"]
Metric = Literal["gflops", "ms-per-step"]
# What each workload reports: the evaluator names a workload and must name its metric too.
WORKLOAD_METRICS: dict[str, Metric] = {"kernels": "gflops", "tinygpt-train": "ms-per-step"}


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
    backends: list[Slug] = Field(min_length=1)
    baseline: Slug = Field(description="The backend every other is compared with, besides the reference.")
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
        expected = WORKLOAD_METRICS[self.workload]
        if self.metric != expected:
            raise ValueError(f"workload {self.workload!r} is measured in {expected!r}, not {self.metric!r}")
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


class FrozenEvaluator(BaseModel):
    """The file ``evaluators/<name>@<hash12>.json``."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    name: Slug
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    evaluator_version: int = Field(ge=1, le=INT_MAX)
    spec: EvaluatorSpec

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.sha256[:HASH_SHOWN]}"


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8: the bytes the identity is taken of."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def identity(spec: Any, evaluator_version: int) -> str:
    """sha256 of the spec's canonical JSON together with the interpreting code's version."""
    return hashlib.sha256(canonical_json({"evaluator_version": evaluator_version, "spec": spec})).hexdigest()


def parse_spec(raw: Any, where: str) -> EvaluatorSpec:
    if not isinstance(raw, dict):
        raise PtregError(f"{where}: an evaluator spec must be a JSON object")
    try:
        return EvaluatorSpec.model_validate(raw)
    except ValidationError as exc:
        raise PtregError(every_schema_error(exc, where)) from None


def frozen_from_spec(spec: EvaluatorSpec, evaluator_version: int) -> FrozenEvaluator:
    body = spec.model_dump(mode="json", exclude_none=True)
    return FrozenEvaluator(
        name=spec.name, sha256=identity(body, evaluator_version), evaluator_version=evaluator_version, spec=spec
    )


def mismatch(raw: dict[str, Any], frozen: FrozenEvaluator, file_name: str) -> str | None:
    """What no longer matches between a frozen evaluator's file and its identity, or None."""
    # The stored text of the spec, not its re-validation, so that any edit shows.
    actual = identity(raw["spec"], frozen.evaluator_version)
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
