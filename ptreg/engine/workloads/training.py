"""The ``tinygpt-train`` workload: whole training steps of the tiny GPT, with per-kernel attribution.

Every linear layer's three matmuls go through the backend; everything else in the step
(attention's own products, layer norms, GELU, cross-entropy, AdamW) is NumPy. Each timed step
also records the seconds spent in each kernel, so a cell says where the step's time goes and
how much a faster kernel could still give (its Amdahl bound), as the seed's lesson asks.
"""

from __future__ import annotations

import time
from typing import Any

from ...records.configs import CONFIGS
from ...records.evaluator import AnySpec, EvaluatorSpec
from ...records.run_results import KERNELS, Attribution, Cell, Kernel, Roles, RunResults, Share, StepSample
from ..backends import Backend
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
    complete_repeats,
    instructions,
    interval,
    note,
    number,
    percent,
    ratio_text,
    speedup,
    times,
    versus,
    without_twin,
)

CLOSE = 0.9  # a kernel within 10% of the bounding one's share is named beside it


class TimedKernels:
    """Wraps a backend and adds up the seconds spent in each of its three kernels.

    The model sees the same three methods; the wrapper costs two clock reads per call,
    a few hundred nanoseconds against kernels of tens of microseconds or more.
    """

    def __init__(self, backend: Backend):
        self.backend = backend
        self.seconds: dict[Kernel, float] = dict.fromkeys(KERNELS, 0.0)

    def reset(self) -> None:
        self.seconds = dict.fromkeys(KERNELS, 0.0)

    def matmul_forward(self, a: Any, b: Any, out: Any) -> None:
        start = time.perf_counter()
        self.backend.matmul_forward(a, b, out)
        self.seconds["forward"] += time.perf_counter() - start

    def matmul_backward_da(self, dc: Any, b: Any, out: Any) -> None:
        start = time.perf_counter()
        self.backend.matmul_backward_da(dc, b, out)
        self.seconds["backward_da"] += time.perf_counter() - start

    def matmul_backward_db(self, a: Any, dc: Any, out: Any) -> None:
        start = time.perf_counter()
        self.backend.matmul_backward_db(a, dc, out)
        self.seconds["backward_db"] += time.perf_counter() - start


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
        step_ms=step_ms,
        forward=parts["forward"],
        backward_da=parts["backward_da"],
        backward_db=parts["backward_db"],
        other=Share(ms=other_share * step_ms, share=other_share, amdahl_bound=None),
        bounding_kernel=bounding,
        headroom=parts[bounding].amdahl_bound,
        all_matmuls_bound=1 / other_share if other_share > 0 else None,
    )


class _TrainingRun(CellRun):
    def __init__(self, task: CellTask, backend: Backend):
        from .tinygpt import Trainer  # NumPy: only in the worker, never on the CLI's start-up path

        self.task = task
        self.kernels = TimedKernels(backend)
        self.trainer = Trainer(CONFIGS[task.config], self.kernels, seed=task.seed)

    def warm_up(self, progress: ReportProgress) -> None:
        for i in range(self.task.warmup_steps):
            self.trainer.step()
            progress("warm-up", i + 1, self.task.warmup_steps)

    def run_repeat(self, repeat: int, record: Record, progress: ReportProgress) -> None:
        timed = self.task.timed_steps
        for step in range(timed):
            self.kernels.reset()
            started = self.stopwatch.start()
            loss = self.trainer.step()
            took = self.stopwatch.stop(started)
            record(
                StepSample(
                    repeat=repeat,
                    step=step,
                    seconds=took.seconds,
                    kernel_seconds=dict(self.kernels.seconds),
                    loss=float(loss),
                    instructions=took.instructions,
                )
            )
            progress("timed", step + 1, timed)


class TrainingWorkload(BackendsWorkload):
    name = "tinygpt-train"
    unit = "ms/step"
    metric = "ms-per-step"
    counts_instructions = True
    description = "Whole training steps of the tiny NumPy GPT on each backend, with each kernel's share of the step."

    def prepare(self, task: CellTask, backend: Backend | None) -> CellRun:
        return _TrainingRun(task, backend_of(backend))

    def summarize(self, spec: AnySpec, cell: Cell, samples: list[AnySample]) -> None:
        spec = backends_spec(spec)
        steps = [s for s in samples if isinstance(s, StepSample)]
        cell.step_samples = steps
        if steps:
            cell.loss_first, cell.loss_last = steps[0].loss, steps[-1].loss
        repeats = complete_repeats(steps, spec.timed_steps)
        if not repeats:
            return
        # A repeat's value is its mean step time (as pyperf takes a run's mean); the cell's
        # median and spread are taken over repeats.
        means = [sum(s.seconds for s in group) / len(group) for group in repeats.values()]
        adaptive = spec.target_ci is not None
        cell.ms_per_step = summarize([m * 1000 for m in means], adaptive)
        cell.tokens_per_second = inverted(summarize(means, adaptive), CONFIGS[cell.config].tokens_per_step)
        if spec.counts_instructions:
            # Wall time under valgrind is kept above as what it was; the cell is judged by its
            # counts, and has no attribution: a kernel's share of the instructions is not its
            # share of the time.
            counts = list(self.repeat_seconds(spec, cell).values())
            cell.instructions_per_step = summarize(counts) if counts else None
            cell.spread_too_wide = (
                too_wide(cell.instructions_per_step, spec.max_relative_spread) if cell.instructions_per_step else None
            )
            return
        cell.spread_too_wide = too_wide(cell.ms_per_step, spec.max_relative_spread)
        cell.attribution = attribution([s for group in repeats.values() for s in group], cell.ms_per_step.median)

    def repeat_seconds(self, spec: EvaluatorSpec, cell: Cell) -> dict[int, float]:
        """Mean seconds of a step in each whole repeat, by round; under the instructions timer,
        its mean instructions (a repeat with a step not counted is left out)."""
        repeats = complete_repeats(cell.step_samples or [], spec.timed_steps)
        if spec.counts_instructions:
            return {
                r: sum(s.instructions for s in group if s.instructions is not None) / len(group)
                for r, group in repeats.items()
                if all(s.instructions is not None for s in group)
            }
        return {r: sum(s.seconds for s in group) / len(group) for r, group in repeats.items()}

    def compare(self, spec: AnySpec, cells: list[Cell], roles: Roles) -> None:
        """Speedups (the other cell's step time over this one's), round by round."""
        spec = backends_spec(spec)
        seconds = {(c.backend, c.config): self.repeat_seconds(spec, c) for c in cells}
        for cell in cells:
            mine = seconds[(cell.backend, cell.config)]
            cell.vs_naive_ratio = speedup(seconds, roles.reference, cell.config, mine, spec.target_ci is not None)
            cell.vs_baseline_ratio = speedup(seconds, spec.baseline, cell.config, mine, spec.target_ci is not None)
            cell.vs_naive = cell.vs_naive_ratio.median if cell.vs_naive_ratio else None
            cell.vs_baseline = cell.vs_baseline_ratio.median if cell.vs_baseline_ratio else None

    def headline(self, cell: Cell) -> float | None:
        return cell.ms_per_step.median if cell.ms_per_step else None

    def tables(self, results: RunResults) -> list[Table]:
        found = [self._step_table(results)]
        attributed = self._attribution_table(results)
        if attributed.rows:
            found.append(attributed)
        return found

    @staticmethod
    def _step_table(results: RunResults) -> Table:
        """ms/step and tokens/s per (config, backend), with speedups measured in this run."""
        if results.counted is not None:
            return TrainingWorkload._count_table(results)
        rows = []
        for c in results.cells:
            ms, tok = c.ms_per_step, c.tokens_per_second
            rows.append(
                [
                    c.config,
                    c.backend,
                    number(ms.median) if ms else "unknown",
                    interval(ms),
                    number(tok.median, 0) if tok else "unknown",
                    ratio_text(c.vs_naive, c.vs_naive_ratio),
                    ratio_text(c.vs_baseline, c.vs_baseline_ratio),
                    note(c),
                ]
            )
        headers = [
            "config",
            "backend",
            "ms/step",
            "95% CI",
            "tokens/s",
            versus(results.ratio_roles.reference),
            f"vs {results.spec.baseline}",
            "note",
        ]
        return without_twin(
            results,
            Table(
                "Training step: medians over repeats; each 95% CI is of the geometric mean",
                rows,
                headers,
                notes=("note",),
            ),
        )

    @staticmethod
    def _count_table(results: RunResults) -> Table:
        """Under the instructions timer: instructions per step, with the ratios of the counts."""
        rows = [
            [
                c.config,
                c.backend,
                instructions(c.instructions_per_step),
                interval(c.instructions_per_step, 0),
                ratio_text(c.vs_naive, c.vs_naive_ratio),
                ratio_text(c.vs_baseline, c.vs_baseline_ratio),
                note(c),
            ]
            for c in results.cells
        ]
        headers = [
            "config",
            "backend",
            "instructions/step",
            "95% CI",
            versus(results.ratio_roles.reference),
            f"vs {results.spec.baseline}",
            "note",
        ]
        title = "Training step: instructions under valgrind, median and 95% interval over repeats"
        return without_twin(results, Table(title, rows, headers, notes=("note",)))

    @staticmethod
    def _attribution_table(results: RunResults) -> Table:
        """Each kernel's share of the step and its Amdahl bound (speedup if it took no time)."""
        rows = []
        for c in results.cells:
            a = c.attribution
            if a is None:
                continue
            parts = [f"{percent(p.share)} ({times(p.amdahl_bound)})" for p in (a.forward, a.backward_da, a.backward_db)]
            rows.append(
                [
                    c.config,
                    c.backend,
                    number(a.step_ms),
                    *parts,
                    percent(a.other.share),
                    KERNEL_LABEL[a.bounding_kernel],
                    times(a.all_matmuls_bound),
                ]
            )
        headers = [
            "config",
            "backend",
            "step ms",
            "forward",
            "backward_dA",
            "backward_dB",
            "other",
            "bounds the step",
            "if all matmuls were free",
        ]
        return Table("Per-kernel attribution: share of the step (Amdahl bound)", rows, headers)

    def verdict(self, results: RunResults) -> list[str]:
        """Which kernel bounds the step, and how much a faster one could still give."""
        lines = []
        reference = results.ratio_roles.reference
        for c in results.cells:
            a = c.attribution
            if a is None or (c.backend == reference and len(results.spec.arm_names) > 1):
                continue
            share = getattr(a, a.bounding_kernel).share
            # A lead of a few points is within a noisy machine's reach: name the runners-up.
            close = [
                f"{KERNEL_LABEL[k]} {percent(getattr(a, k).share)}"
                for k in KERNELS
                if k != a.bounding_kernel and getattr(a, k).share >= CLOSE * share
            ]
            lines.append(
                f"{c.backend}/{c.config}: {KERNEL_LABEL[a.bounding_kernel]} bounds the step ({percent(share)} of "
                f"{number(a.step_ms)} ms" + (f"; close behind: {', '.join(close)}" if close else "") + "); "
                f"removing it entirely would give at most {times(a.headroom)}, and all three matmuls at most "
                f"{times(a.all_matmuls_bound)}"
            )
        return lines
