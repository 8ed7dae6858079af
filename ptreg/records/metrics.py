"""What a metric of an arms evaluator means (unit, direction, how two arms are compared, the
smallest effect that matters), and the metrics ptreg measures of every arm itself."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

METRIC_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
MetricName = Annotated[str, StringConstraints(pattern=METRIC_PATTERN)]
ParamName = Annotated[str, StringConstraints(pattern=METRIC_PATTERN)]
# What ptreg itself measures of every arm's repeat, without the command doing anything.
WALL_SECONDS = "wall_seconds"
PEAK_MEMORY = "peak_memory_mb"
# Measured of an accelerator (engine/accelerators.py), on a machine where NVML sees one.
ACCELERATOR_MEMORY = "accelerator_memory_mb"
ACCELERATOR_UTILISATION = "accelerator_utilisation"
MEASURED_BY_PTREG = (WALL_SECONDS, PEAK_MEMORY, ACCELERATOR_MEMORY, ACCELERATOR_UTILISATION)
# The one config of a workload that compares arms: its cells are (arm, ALL_CONFIG).


class MetricDeclaration(BaseModel):
    """What one metric means: its unit, which way is better, and how two arms are compared."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    better: Literal["lower", "higher"]
    unit: Annotated[str, StringConstraints(min_length=1, max_length=40, pattern=r"^[ -~]+$")]
    compare: Literal["ratio", "difference"] = Field(
        default="difference",
        description="ratio for times, throughput and memory (positive, scale-free); difference, in the metric's own "
        "unit, for scores, losses and rates. A difference unless declared: a ratio of two accuracies misleads.",
    )
    description: Annotated[str, StringConstraints(min_length=1, max_length=400)] | None = None
    margin: float | None = Field(
        default=None,
        gt=0,
        le=1e12,
        allow_inf_nan=False,
        description="The smallest effect that matters: a fraction for a ratio (0.05: 5% either way), a value in the "
        "unit for a difference. An interval within it reads 'no practical difference'; an analysis plan's own margin "
        "takes its place.",
    )

    @model_validator(mode="after")
    def _margin_of_its_kind(self) -> MetricDeclaration:
        if self.compare == "ratio" and self.margin is not None and self.margin >= 1:
            raise ValueError(f"margin {self.margin}: a ratio's margin is a fraction below 1 (0.05 for 5%)")
        return self

    def smallest_effect(self) -> float | None:
        """The declared margin as an analysis plan gives one: a factor above 1 for a ratio (a
        fraction of 0.05 is 1.05x), the value itself for a difference; None when not declared."""
        if self.margin is None:
            return None
        return 1 + self.margin if self.compare == "ratio" else self.margin


# The smallest effects that matter of what ptreg measures itself (docs/comparing.md#within-one-run):
# identical arms' wall times differ by a few percent within one run on a shared machine, and
# their peak memory by a fraction of a percent, run after run.
WALL_MARGIN = 0.05
MEMORY_MARGIN = 0.01
# The metrics ptreg records of every arm itself (os.wait4 of the command's process tree).
PTREG_METRICS: dict[str, MetricDeclaration] = {
    WALL_SECONDS: MetricDeclaration(
        better="lower", unit="s", compare="ratio", description="wall time of a repeat", margin=WALL_MARGIN
    ),
    PEAK_MEMORY: MetricDeclaration(
        better="lower",
        unit="MB",
        compare="ratio",
        description="peak resident memory of the repeat's process tree",
        margin=MEMORY_MARGIN,
    ),
}
# Recorded only where an accelerator was measured: a run on a machine without one has none of
# them, so they are declared for a run only when one of its repeats has them.
ACCELERATOR_METRICS: dict[str, MetricDeclaration] = {
    ACCELERATOR_MEMORY: MetricDeclaration(
        better="lower",
        unit="MB",
        compare="ratio",
        description="peak accelerator memory of the repeat's process tree (NVML)",
        margin=MEMORY_MARGIN,
    ),
    ACCELERATOR_UTILISATION: MetricDeclaration(
        better="higher",
        unit="%",
        compare="difference",
        description="mean busy percent of the accelerators the repeat's process tree used (NVML)",
    ),
}
