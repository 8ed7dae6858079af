"""The plan of a measurement: what is checked, which cells are timed in which order, how long a
cell is expected to take, and what status a run ends with. Nothing here runs anything.

Parity comes first, one task per backend; then, config by config in the evaluator's order,
the repeats of all its backends in interleaved rounds: round r takes repeat r of every
backend, in an order balanced over the rounds (each backend in each place equally often) and
drawn from a seed of the run's own, recorded, so that a slow drift of the machine lands on every
backend alike and each ratio pairs repeats taken seconds apart.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..errors import UnusableInput
from ..records.configs import CONFIGS, linear_shapes, step_flops
from ..records.evaluator import AnySpec, EvaluatorSpec
from ..records.problems import flag_message
from ..records.refs import INT_MAX
from ..records.run_results import Cell, ParityOutcome, RunStatus
from .workloads.discovery import workload_named

# Bump when the engine would measure an unchanged spec differently (new defaults, another
# timer, other shapes): every evaluator frozen under the old version then stops passing the
# gate until it is frozen again, so no old admission silently changes meaning.
# 2: repeats are taken in interleaved rounds, not all of one cell before the next.
EVALUATOR_VERSION = 2

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
    config: str
    backend: str  # or the arm

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


def cells(spec: AnySpec) -> list[PlannedCell]:
    """Every (config, backend) cell, in the order they are reported; an arms spec's arms stand
    where backends do, in its one config."""
    return [PlannedCell(config, arm) for config in spec.config_names for arm in spec.arm_names]


def round_order(seed: int, config: str, round_number: int, backends: list[str]) -> list[str]:
    """The order the backends take their repeat in one round, balanced over the rounds: rounds
    come in blocks of as many rounds as there are backends, each block the rotations of one
    permutation drawn for it, so within every whole block each backend takes each place once
    (for two, AB BA or BA AB). Drawn from the run's order seed, the config and the block alone,
    so that a run's orders can be drawn again from what it recorded."""
    size = len(backends)
    if size == 0:
        return []
    block, turn = divmod(round_number, size)
    drawn = random.Random(f"{seed}/{config}/{block}").sample(backends, size)
    return drawn[turn:] + drawn[:turn]


def order_seed() -> int:
    """A run's own order seed, drawn afresh for each run (so two runs of one evaluator do not
    repeat one order sequence) and recorded with its rounds."""
    return secrets.randbelow(INT_MAX + 1)  # the record's integer field holds it


def estimate_round(round_seconds: dict[str, float], config: str, spec: AnySpec) -> float | None:
    """Seconds one round of ``config`` should take: its own last round, else the latest earlier
    config's, scaled by the configs' work. Unknown before any round was timed."""
    if config in round_seconds:
        return round_seconds[config]
    if not isinstance(spec, EvaluatorSpec):
        return None  # an arms spec has one config: before its first round, nothing to go by
    earlier = [c for c in spec.config_names[: spec.config_names.index(config)] if c in round_seconds]
    if not earlier:
        return None
    last = earlier[-1]
    return round_seconds[last] * step_flops(CONFIGS[config]) / step_flops(CONFIGS[last])


def narrow_enough(cells: list[Cell], target: float) -> bool:
    """Whether every ratio of these cells has a 95% interval whose half-width is at most
    ``target`` of the ratio (a cell's ratio to itself is exact and passes)."""
    for cell in cells:
        for found in (cell.vs_naive_ratio, cell.vs_baseline_ratio):
            if found is None:
                continue
            if found.ci is None or (found.ci.high - found.ci.low) / 2 > target * found.median:
                return False
    return True


def run_status(
    spec: AnySpec, parity: list[ParityOutcome], measured: list[Cell], budget_hit: bool
) -> tuple[RunStatus, str | None]:
    """How a run that was not interrupted ended: the budget first (it explains the cells it
    stopped), then any cell that was not measured, else complete."""
    planned = len(cells(spec))
    stopped = [c for c in measured if c.status in ("budget-exhausted", "not-started")]
    unchecked = [p for p in parity if not p.passed and p.summary.startswith(NOT_CHECKED)]
    if budget_hit or stopped or unchecked:
        done = sum(c.status == "measured" for c in measured)
        # the cell the budget killed, and why (its wall clock, or the MB its tree reached)
        killed = next((c for c in measured if c.status == "budget-exhausted" and c.reason), None)
        why = f"; {killed.backend}/{killed.config}: {killed.reason}" if killed is not None else ""
        return "budget-exhausted", f"{done} of {planned} cells measured within the budget{why}"
    bad = [c for c in measured if c.status != "measured"]
    if bad:
        named = "; ".join(f"{c.backend}/{c.config}: {c.reason}" for c in bad[:3])
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        return "failed", f"{len(bad)} cell(s) not measured: {named}{more}"
    return "complete", None


def interrupted_reason(spec: AnySpec, measured: list[Cell], signal_name: str) -> str:
    done = sum(c.status == "measured" for c in measured)
    return f"interrupted by {signal_name}; {done} of {len(cells(spec))} cells measured"


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

    Refused in one line (exit 2), naming the option, when the options make no valid spec, or
    the workload is not one that compares backends (a workload of arms is run under a frozen
    evaluator, never ad hoc).
    """
    measured = workload_named(workload)
    if measured.kind != "backends" or measured.metric is None:
        raise UnusableInput(
            f"--workload {workload}: bench compares backends; a workload of arms is measured by `ptreg run` under "
            "a frozen evaluator",
        )
    metric = measured.metric
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
        "metric": metric,
    }
    try:
        return EvaluatorSpec.model_validate(fields)
    except ValidationError as exc:
        raise UnusableInput(flag_message(exc, None, BENCH_FLAGS)) from None
