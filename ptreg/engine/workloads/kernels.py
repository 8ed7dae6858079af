"""The ``kernels`` workload: each kernel timed alone at every layer shape of one training step.

GFLOP/s per kernel and layer (2·M·K·N per call), with ratios to the reference and to the peer
from the same run, and the GFLOP/s of a whole step's linear layers. This is the
microbenchmark the seed warns about when it is read without the training step beside it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from ...records.configs import CONFIGS, linear_shapes
from ...records.evaluator import EvaluatorSpec
from ...records.run import KERNELS, Cell, Kernel, KernelSample, KernelTiming, Roles, RunResults
from ..backends import METHOD_OF_KERNEL, Backend, kernel_shapes
from ..protocol import CellTask
from ..stats import inverted, ratio, summarize, too_wide
from .base import (
    KERNEL_LABEL,
    AnySample,
    Record,
    ReportProgress,
    Table,
    Workload,
    note,
    number,
    times,
    versus,
    without_twin,
)


class KernelsWorkload(Workload):
    name = "kernels"
    unit = "GFLOP/s over a step's linear layers"

    def run_cell(self, task: CellTask, backend: Backend, record: Record, progress: ReportProgress) -> None:
        import numpy as np  # only in the worker, never on the CLI's start-up path

        rng = np.random.default_rng(task.seed)
        calls: list[tuple[str, Kernel, Callable[[], None]]] = []
        for layer in linear_shapes(CONFIGS[task.config]):
            for kernel in KERNELS:
                first, second, result = kernel_shapes(kernel, layer.m, layer.k, layer.n)
                a = rng.standard_normal(first, dtype=np.float32)
                b = rng.standard_normal(second, dtype=np.float32)
                out = np.empty(result, dtype=np.float32)
                calls.append((layer.name, kernel, partial(getattr(backend, METHOD_OF_KERNEL[kernel]), a, b, out)))
        warmup, timed, repeats = task.warmup_steps, task.timed_steps, task.repeats
        total = len(calls) * (warmup + timed * repeats)
        done = 0
        for _, _, call in calls:
            for _ in range(warmup):
                call()
            done += warmup
            progress("warm-up", done, total)
        # Repeats outermost: every layer and kernel is measured once per repeat, so slow drift of
        # the machine spreads over all of them instead of landing on one.
        for repeat in range(repeats):
            for layer_name, kernel, call in calls:
                start = time.perf_counter()
                for _ in range(timed):
                    call()
                seconds = time.perf_counter() - start
                record(
                    KernelSample(
                        repeat=repeat, layer=layer_name, kernel=kernel, calls=timed, seconds_per_call=seconds / timed
                    )
                )
                done += timed
                progress("timed", done, total)

    def summarize(self, spec: EvaluatorSpec, cell: Cell, samples: list[AnySample]) -> None:
        measured = [s for s in samples if isinstance(s, KernelSample)]
        cell.kernel_samples = measured
        layers = {s.name: s for s in linear_shapes(CONFIGS[cell.config])}
        timings: list[KernelTiming] = []
        for name, layer in layers.items():
            for kernel in KERNELS:
                values = [s.seconds_per_call for s in measured if s.layer == name and s.kernel == kernel]
                if len(values) < spec.repeats:
                    continue  # an unfinished measurement is kept as samples, not summarised
                seconds = summarize(values)
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
                    )
                )
        if not timings:
            return
        cell.kernels = timings
        if len(timings) == len(layers) * len(KERNELS):
            work = sum(t.per_step * layers[t.layer].flops for t in timings)
            cell.step_gflops = work / sum(t.per_step * t.seconds.median for t in timings) / 1e9
        spreads = [too_wide(t.seconds, spec.max_relative_spread) for t in timings]
        cell.spread_too_wide = None if None in spreads else any(spreads)

    def compare(self, spec: EvaluatorSpec, cells: list[Cell], roles: Roles) -> None:
        by_key = {(c.backend, c.config): c for c in cells}

        def other(backend: str | None, config: str) -> Cell | None:
            return by_key.get((backend, config)) if backend is not None else None

        def gflops_of(cell: Cell | None, layer: str, kernel: str) -> float | None:
            for t in (cell.kernels or []) if cell is not None else []:
                if t.layer == layer and t.kernel == kernel:
                    return t.gflops.median
            return None

        for cell in cells:
            reference = other(roles.reference, cell.config)
            peer = other(roles.peer, cell.config)
            baseline = other(spec.baseline, cell.config)
            for t in cell.kernels or []:
                t.vs_naive = ratio(t.gflops.median, gflops_of(reference, t.layer, t.kernel))
                t.vs_peer = ratio(t.gflops.median, gflops_of(peer, t.layer, t.kernel))
                t.vs_baseline = ratio(t.gflops.median, gflops_of(baseline, t.layer, t.kernel))
            cell.vs_naive = ratio(cell.step_gflops, reference.step_gflops if reference else None)
            cell.vs_baseline = ratio(cell.step_gflops, baseline.step_gflops if baseline else None)

    def headline(self, cell: Cell) -> float | None:
        return cell.step_gflops

    def tables(self, results: RunResults) -> list[Table]:
        roles = results.ratio_roles
        rows = [
            [c.config, c.backend, number(c.step_gflops, 2), times(c.vs_naive), times(c.vs_baseline), note(c)]
            for c in results.cells
        ]
        headers = ["config", "backend", "step GFLOP/s", versus(roles.reference), f"vs {results.spec.baseline}", "note"]
        per_cell = without_twin(results, Table("Linear layers of one training step", rows, headers, text=("note",)))
        return [per_cell, self._kernel_table(results, roles)]

    @staticmethod
    def _kernel_table(results: RunResults, roles: Roles) -> Table:
        """GFLOP/s of each kernel at each layer shape, with ratios to the reference and the peer."""
        rows = []
        for c in results.cells:
            for t in c.kernels or []:
                m, k, n = t.shape
                rows.append(
                    [
                        c.config,
                        t.layer,
                        f"{m}x{k}x{n}",
                        KERNEL_LABEL[t.kernel],
                        c.backend,
                        number(t.gflops.median, 2),
                        f"{number(t.gflops.min, 2)}-{number(t.gflops.max, 2)}",
                        times(t.vs_naive),
                        times(t.vs_peer),
                    ]
                )
        headers = [
            "config",
            "layer",
            "MxKxN",
            "kernel",
            "backend",
            "GFLOP/s",
            "min-max",
            versus(roles.reference),
            f"vs {roles.peer or 'peer'}",
        ]
        return Table("Kernels at each layer shape", rows, headers)
