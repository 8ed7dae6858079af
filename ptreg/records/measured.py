"""What one run measures, number by number: the kinds of number a run holds (each finite, a
timing positive), its samples, their summaries and intervals, and the comparisons of arms. The
run that holds them, with its spec and provenance, is ``run_results.py``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .evaluator import INPUT_PATTERN, MetricName, Slug, path_problem
from .intervals import VarianceOf
from .refs import INT_MAX

Kernel = Literal["forward", "backward_da", "backward_db"]
KERNELS: tuple[Kernel, ...] = ("forward", "backward_da", "backward_db")
# The training step's other ops, in the order the forward meets them (engine/backends.py
# OP_METHODS names each one's methods; a test holds the two equal).
StepOp = Literal[
    "encoder",
    "layernorm",
    "attention",
    "gelu",
    "residual",
    "residual_layernorm",
    "bias",
    "bias_gelu",
    "crossentropy",
    "adamw",
]
STEP_OPS: tuple[StepOp, ...] = (
    "encoder",
    "layernorm",
    "attention",
    "gelu",
    "residual",
    "residual_layernorm",
    "bias",
    "bias_gelu",
    "crossentropy",
    "adamw",
)
# Ops that stand for two others run back to back on the same data (a backend may provide one;
# the step calls it then, and the separate ops otherwise): docs/backends.md, fused ops.
FUSED_OPS: tuple[StepOp, ...] = ("residual_layernorm", "bias_gelu")
CellStatus = Literal["measured", "failed", "parity-failed", "budget-exhausted", "not-started", "interrupted"]

# What the readers of a run rely on, stated once for every number of it: a timing, a rate and a
# ratio of them are finite and positive (each is divided by, and a logarithm taken of), every
# other number is finite, and an integer fits the stores (INT_MAX). The engine only ever
# produces such values; a file that holds others was not written by it, and is refused whole.
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
# An Amdahl bound, 1 / (1 - share): at least 1.
Bound = Annotated[float, Field(ge=1, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1, le=INT_MAX)]
Index = Annotated[int, Field(ge=0, le=INT_MAX)]
# A sample's seconds, between a picosecond (no clock ptreg reads resolves less than a
# nanosecond) and about 30 years: so that the ratio of any two sums of samples, and its logarithm, stay far
# inside a double where compare and history take them (engine/stats.py shift).
SAMPLE_SECONDS_MIN = 1e-12
SAMPLE_SECONDS_MAX = 1e9
SampleSeconds = Annotated[float, Field(ge=SAMPLE_SECONDS_MIN, le=SAMPLE_SECONDS_MAX, allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Interval(_Strict):
    """A 95% confidence interval, and how it was taken."""

    low: Positive
    high: Positive
    level: float = Field(gt=0, lt=1)
    method: str

    @model_validator(mode="after")
    def _ordered(self) -> Interval:
        if self.low > self.high:
            raise ValueError(f"the interval's low {self.low!r} is above its high {self.high!r}")
        return self


class SignedInterval(_Strict):
    """A 95% confidence interval of a quantity that may be zero or negative: a mean score, a
    difference between arms."""

    low: Finite
    high: Finite
    level: float = Field(gt=0, lt=1)
    method: str

    @model_validator(mode="after")
    def _ordered(self) -> SignedInterval:
        if self.low > self.high:
            raise ValueError(f"the interval's low {self.low!r} is above its high {self.high!r}")
        return self


class Ratio(_Strict):
    """A ratio between two cells of one run, taken round by round from their paired repeats."""

    median: Positive = Field(description="The median of the per-round ratios.")
    n: Count = Field(description="Rounds in which both cells finished a repeat.")
    ci: Interval | None = Field(description="95% interval of the ratio; unknown with fewer than 2 rounds.")


class Summary(_Strict):
    """Median and spread of a non-empty list of values."""

    n: Count
    median: Positive
    min: Positive
    max: Positive
    q1: Positive = Field(description="First quartile (inclusive method).")
    q3: Positive = Field(description="Third quartile (inclusive method).")
    relative_spread: NonNegative | None = Field(description="(max - min) / median; unknown when there is one value.")
    ci: Interval | None = Field(
        default=None, description="Version 3: 95% interval of the center; unknown with one value."
    )


class Roles(_Strict):
    """Which backends the ratios of a run are taken over, as their metadata declared them."""

    reference: str | None = Field(
        description="The backend whose accumulation order order-preserving backends reproduce bit for bit; "
        "speedups are quoted over it (vs_naive). Unknown when no single backend declares the role."
    )
    peer: str | None = Field(
        description="The library a user would pick instead; every kernel is also compared with it (vs_peer)."
    )


# What version 1 files compared with, by name, before roles were recorded.
VERSION_1_ROLES = Roles(reference="naive", peer="numpy-blas")


class ParityCheck(_Strict):
    kernel: Kernel
    shape: list[Count] = Field(min_length=3, max_length=3, description="M, K, N of the product.")
    mode: Literal["bit-identical", "tolerance"]
    passed: bool
    max_abs_error: NonNegative | None
    max_scaled_error: NonNegative | None
    detail: str


class OpParityCheck(_Strict):
    """One op of the step, as a backend provides it, against the NumPy reference at one shape."""

    op: StepOp
    shape: str = Field(max_length=200, description="The configuration whose shapes the inputs had, e.g. 'xl'.")
    mode: Literal["bit-identical", "tolerance"]
    tolerance: NonNegative = Field(description="As the backend declares it: max |out - ref| <= tolerance · max |ref|.")
    passed: bool
    max_relative_error: NonNegative | None = Field(description="max |out - ref| / max |ref| over the op's outputs.")
    detail: str


class ParityOutcome(_Strict):
    backend: str
    passed: bool
    summary: str = Field(description="One line; names the worst mismatch when it failed.")
    checks: list[ParityCheck]
    op_checks: list[OpParityCheck] | None = Field(
        default=None, description="Version 6: each op the backend provides, checked before timing."
    )


class StepSample(_Strict):
    """One timed training step."""

    repeat: Index
    step: Index
    seconds: SampleSeconds
    kernel_seconds: dict[Kernel, Annotated[float, Field(ge=0, le=SAMPLE_SECONDS_MAX, allow_inf_nan=False)]]
    op_seconds: dict[StepOp, Annotated[float, Field(ge=0, le=SAMPLE_SECONDS_MAX, allow_inf_nan=False)]] | None = Field(
        default=None, description="Version 6: seconds in each op of the step, whoever provided it."
    )
    loss: Finite
    instructions: Count | None = Field(
        default=None,
        description="Under the instructions timer: the step's instructions executed (seconds is then "
        "wall time under valgrind).",
    )


class KernelSample(_Strict):
    """One repeat of ``calls`` back-to-back calls of one kernel at one layer's shape."""

    repeat: Index
    layer: str
    kernel: Kernel
    calls: Count
    seconds_per_call: SampleSeconds
    instructions_per_call: Positive | None = Field(
        default=None, description="Under the instructions timer: instructions executed per call."
    )


Digest = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
StagePath = Annotated[str, Field(pattern=INPUT_PATTERN)]


class StageRecord(_Strict):
    """One stage of a staged command as a repeat met it: run (its time, its tree's peak memory,
    how it ended), or for a ``once`` stage reused from an earlier record of the same key whose
    artifacts still matched on disk."""

    name: Slug
    repeat: Literal["once", "each"]
    wall_seconds: Positive | None = None
    peak_memory_mb: Positive | None = None
    exit_code: int | None = Field(
        default=None, ge=0, le=255, description="How it exited; null when it was killed, never started, or reused."
    )
    problem: str | None = Field(default=None, max_length=2000, description="Why it gave nothing; null when it ran.")
    key: Digest | None = Field(
        default=None,
        description="once: sha256 of its command line, arm, seed, outputs, the inputs' digests and the artifacts of "
        "the once stages before it; a record of the same key whose artifacts match on disk is not rerun.",
    )
    artifacts: dict[StagePath, Digest] | None = Field(
        default=None, description="once: each of its outputs, by path, with the sha256 of its content after it ran."
    )
    values: dict[MetricName, Finite] | None = Field(
        default=None, description="once: the metrics it wrote, which count for every repeat of its seed."
    )
    items: dict[MetricName, dict[str, Finite]] | None = Field(
        default=None, description="once: the per-item results it wrote, which count for every repeat of its seed."
    )
    reused: Literal[True] | None = Field(
        default=None, description="A once stage not rerun: the record of the same key it stands on."
    )

    @model_validator(mode="after")
    def _once_fields(self) -> StageRecord:
        if self.repeat == "each" and (
            self.key is not None or self.artifacts is not None or self.reused or self.values or self.items
        ):
            raise ValueError(f"stage {self.name}: key, artifacts, values, items and reused belong to once stages")
        if self.reused and self.key is None:
            raise ValueError(f"stage {self.name}: a reused stage names the key it was reused by")
        for path in self.artifacts or {}:
            problem = path_problem(path, f"stage {self.name}: artifact")
            if problem is not None:
                raise ValueError(problem)
        return self


class MetricSample(_Strict):
    """One repeat of one arm: the metrics it wrote, its items, and what ptreg measured of it."""

    repeat: Index
    seed: Index
    values: dict[MetricName, Finite] = Field(description="The last value written of each metric.")
    items: dict[MetricName, dict[str, Finite]] | None = Field(
        default=None, description="Per-item results, by metric, then by item id."
    )
    wall_seconds: Positive | None = None
    peak_memory_mb: Positive | None = None
    accelerator_memory_mb: Positive | None = Field(
        default=None, description="Peak accelerator memory of the repeat's process tree (NVML); absent when unmeasured."
    )
    accelerator_memory_by: Literal["processes", "device"] | None = Field(
        default=None, description="processes: NVML's listing of the tree's own; device: the device's used memory."
    )
    accelerator_utilisation: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] | None = Field(
        default=None, description="Mean busy percent of the devices the tree used, sampled while it ran (NVML)."
    )
    problem: str | None = Field(
        default=None, description="Why this repeat gave no values (exit status, timeout, malformed output)."
    )
    stages: list[StageRecord] | None = Field(
        default=None,
        max_length=256,
        description="Version 9, a staged command: the stages this repeat ran or reused, in order. Its own wall time "
        "and peak memory are its each stages' (their sum, their maximum).",
    )


class MetricSummary(_Strict):
    """One metric of one arm over its repeats: the mean with its 95% t-interval, and the spread.
    From version 8 a metric with per-item results is summarised over its items and seeds."""

    n: Count
    mean: Finite
    median: Finite
    min: Finite
    max: Finite
    ci: SignedInterval | None = Field(description="95% interval of the mean; unknown with one repeat.")
    variance: VarianceOf | None = Field(
        default=None, description="Version 8: what the interval's variance is over; unknown before."
    )
    df: Positive | None = Field(
        default=None, description="Version 8: the t quantile's degrees of freedom, where they are not n - 1."
    )
    scale: Literal["linear", "log"] | None = Field(
        default=None,
        description="Version 8: log for a positive metric's interval, of the typical value (a time, memory).",
    )
    items: Count | None = Field(
        default=None, description="Version 8: the items the mean is over, each present in every seed."
    )
    items_left_out: Index | None = Field(
        default=None, description="Version 8: items left out, for missing from a seed."
    )


class MetricComparison(_Strict):
    """One arm against another on one metric, paired (by item where both wrote items, else by
    round): this arm's value over the other's, as the metric is declared to be compared."""

    kind: Literal["ratio", "difference"]
    estimate: Finite = Field(description="ratio: median of per-round ratios; difference: mean of paired differences.")
    ci: SignedInterval | None = Field(description="95% interval; unknown with fewer than 2 pairs.")
    n: Count = Field(description="Pairs: items or rounds.")
    paired_by: Literal["item", "round"]
    seeds: Count = Field(
        description="Paired by item: the seeds the items were scored in (from version 8, those both arms scored "
        "items in, crossed with the items; before, averaged within each item); paired by round: the rounds."
    )
    won: Index | None = Field(default=None, description="Pairs where this arm was better.")
    lost: Index | None = Field(default=None, description="Pairs where the other arm was better.")
    tied: Index | None = None
    variance: VarianceOf | None = Field(
        default=None, description="Version 8: what the interval's variance is over; unknown before."
    )
    df: Positive | None = Field(
        default=None, description="Version 8: the t quantile's degrees of freedom, where they are not n - 1."
    )
    items_left_out: Index | None = Field(
        default=None, description="Version 8: items left out, for missing from a seed of either arm."
    )
