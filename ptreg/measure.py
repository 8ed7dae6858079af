"""Measuring an evaluator: the plan of tasks, and the samples turned into cell summaries.

``measure`` runs parity, then every (config, backend) cell through a ``Runner``, and returns
what was found with the run's status. Speedups are taken only between cells of the same
run, because a ratio of numbers measured hours apart on a shared machine says little.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any, Optional

from .backend import KERNELS, flops
from .evaluator import EvaluatorSpec
from .interrupt import Interrupted, signal_of
from .run import Attribution, Cell, KernelSample, KernelTiming, ParityOutcome, Share, StepSample
from .runner import Runner, TaskOutcome
from .stats import inverted, ratio, summarize, too_wide

PEER = "numpy-blas"
REFERENCE = "naive"


@dataclass
class Measurement:
    parity: list[ParityOutcome]
    cells: list[Cell]
    status: str
    reason: Optional[str]
    interrupted_by: Optional[int] = None  # the signal that stopped it



def parity_shapes(spec: EvaluatorSpec) -> list[list[int]]:
    """The fixed odd and remainder shapes, then the benchmark's own."""
    from .parity import PARITY_SHAPES
    from .tinygpt import CONFIGS, linear_shapes

    shapes = [list(s) for s in PARITY_SHAPES]
    for config in spec.configs:
        for layer in linear_shapes(CONFIGS[config]):
            if [layer.m, layer.k, layer.n] not in shapes:
                shapes.append([layer.m, layer.k, layer.n])
    return shapes


def worker_task(spec: EvaluatorSpec, **extra: Any) -> dict[str, Any]:
    return {
        "workload": spec.workload, "warmup_steps": spec.warmup_steps, "timed_steps": spec.timed_steps,
        "repeats": spec.repeats, "seed": spec.seed, "threads": spec.threads, **extra,
    }


def _parity_outcome(backend: str, outcome: TaskOutcome) -> ParityOutcome:
    found = outcome.of("parity")
    if outcome.ended == "done" and found:
        return ParityOutcome.model_validate(found[-1]["result"])
    reason = outcome.reason or "the parity worker stopped without a result"
    return ParityOutcome(backend=backend, passed=False, summary=f"parity not established: {reason}", checks=[])


def measure(spec: EvaluatorSpec, runner: Runner) -> Measurement:
    runner.start()
    parity: list[ParityOutcome] = []
    cells: list[Cell] = []
    try:
        _measure_into(spec, runner, parity, cells)
    except (Interrupted, KeyboardInterrupt) as exc:  # between two workers
        runner.interrupted = signal_of(exc)
    compare(spec, cells)
    if runner.interrupted is not None:
        name = signal.Signals(runner.interrupted).name
        measured = sum(c.status == "measured" for c in cells)
        reason = f"interrupted by {name}; {measured} of {len(spec.configs) * len(spec.backends)} cells measured"
        return Measurement(parity, cells, "interrupted", reason, runner.interrupted)
    status, reason = run_status(spec, parity, cells, runner.budget_hit)
    return Measurement(parity, cells, status, reason)


def _measure_into(spec: EvaluatorSpec, runner: Runner, parity: list[ParityOutcome], cells: list[Cell]) -> None:
    """Parity, then the cells; returns early once a signal has stopped the runner."""
    shapes = parity_shapes(spec)
    for backend in spec.backends:
        allowed, why = runner.fits(None)
        if not allowed:
            parity.append(ParityOutcome(backend=backend, passed=False, summary=f"not checked: {why}", checks=[]))
            continue
        task = worker_task(spec, task="parity", backend=backend, shapes=shapes,
                           rtol=spec.tolerance.rtol, atol=spec.tolerance.atol)
        outcome = runner.execute(f"parity {backend}", task)
        if runner.interrupted is not None:
            return  # a parity check cut short establishes nothing
        parity.append(_parity_outcome(backend, outcome))
    passed = {p.backend for p in parity if p.passed}
    durations: dict[tuple[str, str], float] = {}
    for config in spec.configs:
        for backend in spec.backends:
            if backend not in passed:
                summary = next(p.summary for p in parity if p.backend == backend)
                cells.append(Cell(backend=backend, config=config, status="parity-failed", reason=summary))
                continue
            allowed, why = runner.fits(_estimate(durations, backend, config, spec))
            if not allowed:
                cells.append(Cell(backend=backend, config=config, status="not-started", reason=why))
                continue
            outcome = runner.execute(f"{backend}/{config}", worker_task(spec, task="cell", backend=backend, config=config))
            cells.append(build_cell(spec, backend, config, outcome))  # an interrupted cell keeps its whole repeats
            if runner.interrupted is not None:
                return
            if outcome.ended == "done" and outcome.wall_seconds is not None:
                durations[(backend, config)] = outcome.wall_seconds


def _estimate(durations: dict[tuple[str, str], float], backend: str, config: str, spec: EvaluatorSpec) -> Optional[float]:
    """The backend's time on the previous config, scaled by the configs' work; unknown first."""
    from .tinygpt import CONFIGS, linear_shapes

    def work(name: str) -> int:
        return sum(s.per_step * flops(s.m, s.k, s.n) for s in linear_shapes(CONFIGS[name]))

    earlier = [c for c in spec.configs[: spec.configs.index(config)] if (backend, c) in durations]
    if not earlier:
        return None
    last = earlier[-1]
    return durations[(backend, last)] * work(config) / work(last)


def run_status(spec: EvaluatorSpec, parity: list[ParityOutcome], cells: list[Cell], budget_hit: bool) -> tuple[str, Optional[str]]:
    stopped = [c for c in cells if c.status in ("budget-exhausted", "not-started")]
    unchecked = [p for p in parity if not p.passed and p.summary.startswith("not checked")]
    if budget_hit or stopped or unchecked:
        measured = sum(c.status == "measured" for c in cells)
        return "budget-exhausted", f"{measured} of {len(spec.configs) * len(spec.backends)} cells measured within the budget"
    bad = [c for c in cells if c.status != "measured"]
    if bad:
        named = "; ".join(f"{c.backend}/{c.config}: {c.reason}" for c in bad[:3])
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        return "failed", f"{len(bad)} cell(s) not measured: {named}{more}"
    return "complete", None


def build_cell(spec: EvaluatorSpec, backend: str, config: str, outcome: TaskOutcome) -> Cell:
    ready = outcome.of("ready")
    worker: dict[str, Any] = dict(ready[-1]) if ready else {}
    worker.pop("event", None)
    done = outcome.of("done")
    if done:
        worker["numba_threading_layer"] = done[-1].get("numba_threading_layer")
        worker["omp_wait_policy"] = done[-1].get("omp_wait_policy")
    worker["peak_rss_mb"] = outcome.peak_rss_mb
    status = {"done": "measured", "budget": "budget-exhausted", "interrupted": "interrupted"}.get(outcome.ended, "failed")
    cell = Cell(backend=backend, config=config, status=status, reason=outcome.reason,
                wall_seconds=outcome.wall_seconds, worker=worker)
    if spec.workload == "tinygpt-train":
        _train_summary(spec, cell, outcome)
    else:
        _kernel_summary(spec, cell, outcome)
    return cell


def _complete_repeats(samples: list[Any], per_repeat: int) -> dict[int, list[Any]]:
    by_repeat: dict[int, list[Any]] = {}
    for sample in samples:
        by_repeat.setdefault(sample.repeat, []).append(sample)
    return {r: s for r, s in by_repeat.items() if len(s) == per_repeat}


def _train_summary(spec: EvaluatorSpec, cell: Cell, outcome: TaskOutcome) -> None:
    from .tinygpt import CONFIGS

    samples = [StepSample.model_validate({k: v for k, v in e.items() if k != "event"}) for e in outcome.of("step")]
    cell.step_samples = samples
    if samples:
        cell.loss_first, cell.loss_last = samples[0].loss, samples[-1].loss
    repeats = _complete_repeats(samples, spec.timed_steps)
    if not repeats:
        return
    # A repeat's value is its mean step time (as pyperf takes a run's mean); the cell's
    # median and spread are taken over repeats.
    means = [sum(s.seconds for s in steps) / len(steps) for steps in repeats.values()]
    cell.ms_per_step = summarize([m * 1000 for m in means])
    config = CONFIGS[cell.config]
    cell.tokens_per_second = inverted(summarize(means), config.batch * config.context)
    cell.spread_too_wide = too_wide(cell.ms_per_step, spec.max_relative_spread)
    cell.attribution = attribution([s for steps in repeats.values() for s in steps], cell.ms_per_step.median)


def attribution(samples: list[StepSample], step_ms: float) -> Attribution:
    """Each kernel's share of the step, from totals over every timed step (so shares add to 1)."""
    total = sum(s.seconds for s in samples)
    kernel_total = {k: sum(s.kernel_seconds.get(k, 0.0) for s in samples) for k in KERNELS}
    other = max(total - sum(kernel_total.values()), 0.0)

    def share(seconds: float) -> Share:
        fraction = seconds / total
        bound = 1 / (1 - fraction) if fraction < 1 else None
        return Share(ms=fraction * step_ms, share=fraction, amdahl_bound=bound)

    parts = {k: share(v) for k, v in kernel_total.items()}
    bounding = max(KERNELS, key=lambda k: kernel_total[k])
    other_share = other / total
    return Attribution(
        step_ms=step_ms, forward=parts["forward"], backward_da=parts["backward_da"], backward_db=parts["backward_db"],
        other=Share(ms=other_share * step_ms, share=other_share, amdahl_bound=None), bounding_kernel=bounding,
        headroom=parts[bounding].amdahl_bound, all_matmuls_bound=1 / other_share if other_share > 0 else None,
    )


def _kernel_summary(spec: EvaluatorSpec, cell: Cell, outcome: TaskOutcome) -> None:
    from .tinygpt import CONFIGS, linear_shapes

    samples = [KernelSample.model_validate({k: v for k, v in e.items() if k != "event"}) for e in outcome.of("kernel")]
    cell.kernel_samples = samples
    layers = {s.name: s for s in linear_shapes(CONFIGS[cell.config])}
    timings: list[KernelTiming] = []
    for name, layer in layers.items():
        for kernel in KERNELS:
            values = [s.seconds_per_call for s in samples if s.layer == name and s.kernel == kernel]
            if len(values) < spec.repeats:
                continue  # an unfinished measurement is kept as samples, not summarised
            seconds = summarize(values)
            timings.append(KernelTiming(
                layer=name, kernel=kernel, shape=[layer.m, layer.k, layer.n], per_step=layer.per_step,
                seconds=seconds, gflops=inverted(seconds, flops(layer.m, layer.k, layer.n) / 1e9),
                vs_naive=None, vs_peer=None, vs_baseline=None,
            ))
    if not timings:
        return
    cell.kernels = timings
    if len(timings) == len(layers) * len(KERNELS):
        work = sum(t.per_step * flops(*t.shape) for t in timings)
        cell.step_gflops = work / sum(t.per_step * t.seconds.median for t in timings) / 1e9
    spreads = [too_wide(t.seconds, spec.max_relative_spread) for t in timings]
    cell.spread_too_wide = None if None in spreads else any(spreads)


def compare(spec: EvaluatorSpec, cells: list[Cell]) -> None:
    """Fill in every ratio between cells of the same config in this run."""
    by_key = {(c.backend, c.config): c for c in cells}
    for cell in cells:
        naive = by_key.get((REFERENCE, cell.config))
        baseline = by_key.get((spec.baseline, cell.config))
        peer = by_key.get((PEER, cell.config))
        if spec.workload == "tinygpt-train":
            mine = cell.ms_per_step.median if cell.ms_per_step else None

            def speedup(other: Optional[Cell]) -> Optional[float]:
                theirs = other.ms_per_step.median if other is not None and other.ms_per_step else None
                return ratio(theirs, mine)

            cell.vs_naive, cell.vs_baseline = speedup(naive), speedup(baseline)
            continue

        def gflops_of(other: Optional[Cell], layer: str, kernel: str) -> Optional[float]:
            for t in (other.kernels or []) if other is not None else []:
                if t.layer == layer and t.kernel == kernel:
                    return t.gflops.median
            return None

        for t in cell.kernels or []:
            t.vs_naive = ratio(t.gflops.median, gflops_of(naive, t.layer, t.kernel))
            t.vs_peer = ratio(t.gflops.median, gflops_of(peer, t.layer, t.kernel))
            t.vs_baseline = ratio(t.gflops.median, gflops_of(baseline, t.layer, t.kernel))
        cell.vs_naive = ratio(cell.step_gflops, naive.step_gflops if naive else None)
        cell.vs_baseline = ratio(cell.step_gflops, baseline.step_gflops if baseline else None)
