"""The plan of a measurement: what is checked, which cells are timed in which order, how long a
cell is expected to take, and what status a run ends with. Nothing here runs anything.

Parity comes first, one task per backend; then one cell per (config, backend), configs in the
evaluator's order and the backends side by side within each, so the ratios of a config are
measured minutes apart, not hours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..errors import EXIT_UNUSABLE, PtregError
from ..records.configs import CONFIGS, ConfigName, linear_shapes, step_flops
from ..records.evaluator import WORKLOAD_METRICS, EvaluatorSpec
from ..records.problems import flag_message
from ..records.run import Cell, ParityOutcome, RunStatus

# Bump when the engine would measure an unchanged spec differently (new defaults, another
# timer, other shapes): every evaluator frozen under the old version then stops passing the
# gate until it is frozen again, so no old admission silently changes meaning.
EVALUATOR_VERSION = 1

# Sizes 1 (degenerate), 3 and 17 (odd, below any vector width or tile), 63 / 65 / 129 (just
# under and over powers of two, so tiles and vector loops leave remainders), each in every
# position of (M, K, N).
PARITY_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1),
    (3, 17, 63),
    (17, 63, 3),
    (63, 3, 17),
    (65, 129, 1),
    (129, 1, 65),
    (1, 65, 129),
    (63, 65, 129),
    (129, 63, 17),
    (129, 129, 129),
)

# An ad hoc `ptreg bench` has no frozen evaluator; these stand in for what one would fix.
BENCH_TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}
BENCH_MAX_RELATIVE_SPREAD = 0.1
# The option of `ptreg bench` that gives each field of its spec, where the names differ.
BENCH_FLAGS = {"configs": "--config", "backends": "--backend"}
# How a parity outcome that no worker produced begins (the budget left no time for it).
NOT_CHECKED = "not checked"


@dataclass(frozen=True)
class PlannedCell:
    config: ConfigName
    backend: str

    @property
    def label(self) -> str:
        return f"{self.backend}/{self.config}"


def parity_shapes(spec: EvaluatorSpec) -> list[tuple[int, int, int]]:
    """The fixed odd and remainder shapes, then the benchmark's own layer shapes."""
    shapes = list(PARITY_SHAPES)
    for config in spec.configs:
        for layer in linear_shapes(CONFIGS[config]):
            if (layer.m, layer.k, layer.n) not in shapes:
                shapes.append((layer.m, layer.k, layer.n))
    return shapes


def cells(spec: EvaluatorSpec) -> list[PlannedCell]:
    """Every (config, backend) cell, in the order they are measured."""
    return [PlannedCell(config, backend) for config in spec.configs for backend in spec.backends]


def estimate(durations: dict[PlannedCell, float], cell: PlannedCell, spec: EvaluatorSpec) -> float | None:
    """Seconds ``cell`` should take: its backend's time on the latest earlier config that was
    measured, scaled by the configs' work. Unknown for a backend's first config."""
    earlier = [c for c in spec.configs[: spec.configs.index(cell.config)] if PlannedCell(c, cell.backend) in durations]
    if not earlier:
        return None
    last = earlier[-1]
    work = step_flops(CONFIGS[cell.config]) / step_flops(CONFIGS[last])
    return durations[PlannedCell(last, cell.backend)] * work


def run_status(
    spec: EvaluatorSpec, parity: list[ParityOutcome], measured: list[Cell], budget_hit: bool
) -> tuple[RunStatus, str | None]:
    """How a run that was not interrupted ended: the budget first (it explains the cells it
    stopped), then any cell that was not measured, else complete."""
    planned = len(spec.configs) * len(spec.backends)
    stopped = [c for c in measured if c.status in ("budget-exhausted", "not-started")]
    unchecked = [p for p in parity if not p.passed and p.summary.startswith(NOT_CHECKED)]
    if budget_hit or stopped or unchecked:
        done = sum(c.status == "measured" for c in measured)
        return "budget-exhausted", f"{done} of {planned} cells measured within the budget"
    bad = [c for c in measured if c.status != "measured"]
    if bad:
        named = "; ".join(f"{c.backend}/{c.config}: {c.reason}" for c in bad[:3])
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        return "failed", f"{len(bad)} cell(s) not measured: {named}{more}"
    return "complete", None


def interrupted_reason(spec: EvaluatorSpec, measured: list[Cell], signal_name: str) -> str:
    done = sum(c.status == "measured" for c in measured)
    return f"interrupted by {signal_name}; {done} of {len(spec.configs) * len(spec.backends)} cells measured"


def bench_spec(
    *,
    workload: str,
    configs: list[str],
    backends: list[str],
    baseline: str | None,
    warmup_steps: int,
    timed_steps: int,
    repeats: int,
    seed: int,
    threads: int,
) -> EvaluatorSpec:
    """The spec of an ad hoc bench: the options given, and the bench's own tolerance and spread.

    Refused in one line (exit 2), naming the option, when the options make no valid spec.
    """
    fields: dict[str, Any] = {
        "name": "bench",
        "workload": workload,
        "configs": configs,
        "backends": backends,
        "baseline": baseline or (backends[0] if backends else ""),
        "warmup_steps": warmup_steps,
        "timed_steps": timed_steps,
        "repeats": repeats,
        "seed": seed,
        "threads": threads,
        "tolerance": BENCH_TOLERANCE,
        "max_relative_spread": BENCH_MAX_RELATIVE_SPREAD,
        "metric": WORKLOAD_METRICS.get(workload, "gflops"),
    }
    try:
        return EvaluatorSpec.model_validate(fields)
    except ValidationError as exc:
        raise PtregError(flag_message(exc, None, BENCH_FLAGS), EXIT_UNUSABLE) from None
