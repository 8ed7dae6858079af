"""The ``kernels`` workload: each kernel timed alone at every layer shape of one training step.

GFLOP/s per kernel and layer (2·M·K·N per call), with ratios to the reference and to the peer
from the same run, and the GFLOP/s of a whole step's linear layers. This is the
microbenchmark the seed warns about when it is read without the training step beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ...records.configs import CONFIGS, linear_shapes
from ...records.evaluator import AnySpec, EvaluatorSpec
from ...records.run_results import KERNELS, Cell, Kernel, KernelSample, KernelTiming, Roles, RunResults
from ..backends import METHOD_OF_KERNEL, Backend, kernel_shapes
from ..protocol import CellTask
from ..stats import inverted, summarize, too_wide
from .base import (
    KERNEL_LABEL,
    AnySample,
    BackendsWorkload,
    CellRun,
    Record,
    ReportProgress,
    Table,
    backend_of,
    backends_spec,
    instructions,
    note,
    number,
    ratio_text,
    recorded_interval,
    speedup,
    versus,
    without_intervals,
    without_twin,
)


def whole_rounds(samples: list[KernelSample], per_round: int) -> set[int]:
    """The rounds in which every layer and kernel was timed."""
    counts: dict[int, int] = {}
    for sample in samples:
        counts[sample.repeat] = counts.get(sample.repeat, 0) + 1
    return {r for r, n in counts.items() if n == per_round}


def per_call(sample: KernelSample, counted: bool) -> float | None:
    """A sample's cost of one call: seconds, or under the instructions timer instructions
    (unknown when the sample has no count)."""
    return sample.instructions_per_call if counted else sample.seconds_per_call


def _seconds_per_call(cell: Cell, counted: bool) -> dict[tuple[str, str], dict[int, float]]:
    """Each (layer, kernel)'s seconds (or instructions) per call, by round, over the cell's whole rounds."""
    samples = cell.kernel_samples or []
    rounds = whole_rounds(samples, len(linear_shapes(CONFIGS[cell.config])) * len(KERNELS))
    found: dict[tuple[str, str], dict[int, float]] = {}
    for s in samples:
        value = per_call(s, counted)
        if s.repeat in rounds and value is not None:
            found.setdefault((s.layer, s.kernel), {})[s.repeat] = value
    return found


class _KernelsRun(CellRun):
    def __init__(self, task: CellTask, backend: Backend):
        import numpy as np  # only in the worker, never on the CLI's start-up path

        self.task = task
        rng = np.random.default_rng(task.seed)
        self.calls: list[tuple[str, Kernel, Callable[[], None]]] = []
        for layer in linear_shapes(CONFIGS[task.config]):
            for kernel in KERNELS:
                first, second, result = kernel_shapes(kernel, layer.m, layer.k, layer.n)
                a = rng.standard_normal(first, dtype=np.float32)
                b = rng.standard_normal(second, dtype=np.float32)
                out = np.empty(result, dtype=np.float32)
                method = getattr(backend, METHOD_OF_KERNEL[kernel])
                self.calls.append((layer.name, kernel, partial(method, a, b, out)))

    def warm_up(self, progress: ReportProgress) -> None:
        for done, (_, _, call) in enumerate(self.calls, start=1):
            for _ in range(self.task.warmup_steps):
                call()
            progress("warm-up", done, len(self.calls))

    def run_repeat(self, repeat: int, record: Record, progress: ReportProgress) -> None:
        """Every layer and kernel once, each ``timed_steps`` calls back to back."""
        timed = self.task.timed_steps
        for done, (layer_name, kernel, call) in enumerate(self.calls, start=1):
            started = self.stopwatch.start()
            for _ in range(timed):
                call()
            took = self.stopwatch.stop(started)
            record(
                KernelSample(
                    repeat=repeat,
                    layer=layer_name,
                    kernel=kernel,
                    calls=timed,
                    seconds_per_call=took.seconds / timed,
                    instructions_per_call=None if took.instructions is None else took.instructions / timed,
                )
            )
            progress("timed", done, len(self.calls))


class KernelsWorkload(BackendsWorkload):
    name = "kernels"
    unit = "GFLOP/s over a step's linear layers"
    metric = "gflops"
    counts_instructions = True
    seconds_of = "step's linear layers"
    description = "Each matmul kernel alone at every layer shape of one training step: GFLOP/s per backend."

    def prepare(self, task: CellTask, backend: Backend | None) -> CellRun:
        return _KernelsRun(task, backend_of(backend))

    def summarize(self, spec: AnySpec, cell: Cell, samples: list[AnySample]) -> None:
        spec = backends_spec(spec)
        measured = [s for s in samples if isinstance(s, KernelSample)]
        cell.kernel_samples = measured
        layers = {s.name: s for s in linear_shapes(CONFIGS[cell.config])}
        rounds = whole_rounds(measured, len(layers) * len(KERNELS))
        timings: list[KernelTiming] = []
        for name, layer in layers.items():
            for kernel in KERNELS:
                # an unfinished round is kept as samples, not summarised
                values = [
                    s.seconds_per_call
                    for s in measured
                    if s.layer == name and s.kernel == kernel and s.repeat in rounds
                ]
                if not values:
                    continue
                seconds = summarize(values, spec.target_ci is not None)
                counts = [
                    s.instructions_per_call
                    for s in measured
                    if s.layer == name and s.kernel == kernel and s.repeat in rounds
                ]
                known = [c for c in counts if c is not None]
                timings.append(
                    KernelTiming(
                        layer=name,
                        kernel=kernel,
                        shape=[layer.m, layer.k, layer.n],
                        per_step=layer.per_step,
                        seconds=seconds,
                        gflops=inverted(seconds, layer.flops / 1e9),
                        vs_naive=None,
                        vs_peer=None,
                        vs_baseline=None,
                        instructions_per_call=summarize(known)
                        if spec.counts_instructions and len(known) == len(counts)
                        else None,
                    )
                )
        if not timings:
            return
        cell.kernels = timings
        work = sum(t.per_step * layers[t.layer].flops for t in timings)
        # under the instructions timer a rate of wall time under valgrind: recorded, not shown
        cell.step_gflops = work / sum(t.per_step * t.seconds.median for t in timings) / 1e9
        if spec.counts_instructions:
            per_step = list(self.repeat_seconds(spec, cell).values())
            cell.instructions_per_step = summarize(per_step) if per_step else None
            spreads = [
                too_wide(t.instructions_per_call, spec.max_relative_spread) if t.instructions_per_call else None
                for t in timings
            ]
        else:
            spreads = [too_wide(t.seconds, spec.max_relative_spread) for t in timings]
        cell.spread_too_wide = None if None in spreads else any(spreads)

    def repeat_seconds(self, spec: EvaluatorSpec, cell: Cell) -> dict[int, float]:
        """Seconds (or instructions) of one training step's calls of the three kernels at every
        layer, by round; a round with a sample not counted is left out."""
        per_step = {s.name: s.per_step for s in linear_shapes(CONFIGS[cell.config])}
        samples = cell.kernel_samples or []
        rounds = whole_rounds(samples, len(per_step) * len(KERNELS))
        found = {}
        for r in rounds:
            values = [(per_step[s.layer], per_call(s, spec.counts_instructions)) for s in samples if s.repeat == r]
            if all(v is not None for _, v in values):
                found[r] = sum(n * v for n, v in values if v is not None)
        return found

    def compare(self, spec: AnySpec, cells: list[Cell], roles: Roles) -> None:
        """Speedups round by round: of one step's linear layers per cell, and of each kernel at
        each layer (the other cell's seconds per call over this one's)."""
        spec = backends_spec(spec)
        adaptive = spec.target_ci is not None
        step = {(c.backend, c.config): self.repeat_seconds(spec, c) for c in cells}
        calls = {(c.backend, c.config): _seconds_per_call(c, spec.counts_instructions) for c in cells}
        for cell in cells:
            key = (cell.backend, cell.config)
            cell.vs_naive_ratio = speedup(step, roles.reference, cell.config, step[key], adaptive)
            cell.vs_baseline_ratio = speedup(step, spec.baseline, cell.config, step[key], adaptive)
            cell.vs_naive = cell.vs_naive_ratio.median if cell.vs_naive_ratio else None
            cell.vs_baseline = cell.vs_baseline_ratio.median if cell.vs_baseline_ratio else None
            for t in cell.kernels or []:
                # each backend's seconds per call of this layer and kernel, by round
                one = {k: v.get((t.layer, t.kernel), {}) for k, v in calls.items()}
                t.vs_naive_ratio = speedup(one, roles.reference, cell.config, one[key], adaptive)
                t.vs_peer_ratio = speedup(one, roles.peer, cell.config, one[key], adaptive)
                t.vs_baseline_ratio = speedup(one, spec.baseline, cell.config, one[key], adaptive)
                t.vs_naive = t.vs_naive_ratio.median if t.vs_naive_ratio else None
                t.vs_peer = t.vs_peer_ratio.median if t.vs_peer_ratio else None
                t.vs_baseline = t.vs_baseline_ratio.median if t.vs_baseline_ratio else None

    def headline(self, cell: Cell) -> float | None:
        return cell.step_gflops

    def tables(self, results: RunResults) -> list[Table]:
        roles = results.ratio_roles
        counted = results.counted is not None
        rows = [
            [
                c.config,
                c.backend,
                instructions(c.instructions_per_step) if counted else number(c.step_gflops, 2),
                ratio_text(c.vs_naive, c.vs_naive_ratio),
                ratio_text(c.vs_baseline, c.vs_baseline_ratio),
                note(c),
            ]
            for c in results.cells
        ]
        rate = "instructions/step" if counted else "step GFLOP/s"
        headers = ["config", "backend", rate, versus(roles.reference), f"vs {results.spec.baseline}", "note"]
        per_cell = without_twin(results, Table("Linear layers of one training step", rows, headers, notes=("note",)))
        return [per_cell, self._kernel_table(results, roles)]

    @staticmethod
    def _kernel_table(results: RunResults, roles: Roles) -> Table:
        """GFLOP/s of each kernel at each layer shape, with ratios to the reference and to the
        run's baseline, as the step table has them; and to the peer when it was measured too
        and is neither (a column of a backend the run did not measure would read unknown)."""
        measured = {c.backend for c in results.cells} | set(getattr(results.spec, "backends", None) or ())
        timings = [(c, t) for c in results.cells for t in c.kernels or []]
        # runs from before kernels had a ratio to the baseline have none: then the peer's
        by_baseline = results.spec.baseline != roles.reference and any(t.vs_baseline_ratio for _, t in timings)
        peer = (
            roles.peer
            if roles.peer in measured and roles.peer not in (roles.reference, results.spec.baseline)
            else None
        )
        if not by_baseline and peer is None and roles.peer in measured and roles.peer != roles.reference:
            peer = roles.peer
        rows = []
        counted = results.counted is not None
        for c, t in timings:
            m, k, n = t.shape
            cost = t.instructions_per_call if counted else t.gflops
            row = [
                c.config,
                t.layer,
                f"{m}x{k}x{n}",
                KERNEL_LABEL[t.kernel],
                c.backend,
                instructions(cost) if counted else number(t.gflops.median, 2),
                recorded_interval(results, cost, 0 if counted else 2),
                ratio_text(t.vs_naive, t.vs_naive_ratio),
            ]
            if by_baseline:
                row.append(ratio_text(t.vs_baseline, t.vs_baseline_ratio))
            if peer is not None:
                row.append(ratio_text(t.vs_peer, t.vs_peer_ratio))
            rows.append(row)
        rate = "instructions/call" if counted else "GFLOP/s"
        headers = ["config", "layer", "MxKxN", "kernel", "backend", rate, "95% CI", versus(roles.reference)]
        if by_baseline:
            headers.append(f"vs {results.spec.baseline}")
        if peer is not None:
            headers.append(f"vs {peer}")
        return Table(
            without_intervals(
                results, "Kernels at each layer shape: medians; each 95% CI is of the typical value (true and median)"
            ),
            rows,
            headers,
        )
