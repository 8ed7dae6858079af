"""Measuring backends ad hoc, as an attempt's run would measure them, with nothing written: no
attempt, no frozen evaluator, no budget but a wall clock (`ptreg bench`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..clock import utc_now
from ..engine.backends import require_registered
from ..engine.executor import Executor, TaskProgress
from ..engine.interruption import interruptible
from ..engine.measurement import SpreadExecutor, measure
from ..engine.plan import EVALUATOR_VERSION
from ..records.evaluator import EvaluatorSpec
from ..records.run_results import Provenance, RunResults, new_results


@dataclass(frozen=True)
class Benched:
    results: RunResults
    interrupted_by: int | None = None  # SIGINT or SIGTERM, when one stopped the measurement


def bench_backends(
    spec: EvaluatorSpec,
    command: list[str],
    *,
    wall_clock_seconds: float | None = None,
    progress: Callable[[TaskProgress], None] | None = None,
    make_executor: Callable[..., Executor | SpreadExecutor] = Executor,
) -> Benched:
    """Parity, then every cell of ``spec``, each in its own worker, until ``wall_clock_seconds``
    (None: no limit); the results, which are written nowhere."""
    require_registered(spec.backends)  # an unavailable one is measured as failed cells
    started = utc_now()
    with interruptible():
        found = measure(spec, make_executor(wall_clock_seconds=wall_clock_seconds, progress=progress))
    made = Provenance(command, started, utc_now(), EVALUATOR_VERSION)
    return Benched(new_results(spec, found, made), found.interrupted_by)
