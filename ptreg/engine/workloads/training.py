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
from ...records.run_results import (
    KERNELS,
    STEP_OPS,
    Attribution,
    Cell,
    Kernel,
    Roles,
    RunResults,
    Share,
    StepOp,
    StepSample,
)
from ...records.step_work import above_floor
from ..backends import FUSED, METHOD_OF_KERNEL, OP_METHODS, Backend
from ..ceilings import missing_note
from ..protocol import CellTask
from ..stats import inverted, paired_ratio, summarize, too_wide
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
    note,
    number,
    percent,
    ratio_text,
    recorded_interval,
    speedup,
    times,
    versus,
    without_intervals,
    without_twin,
)

PART_LABEL: dict[str, str] = {str(k): label for k, label in KERNEL_LABEL.items()}
CLOSE = 0.9  # a kernel within 10% of the bounding one's share is named beside it


class TimedStep:
    """Every method the step calls (``StepOps`` over a backend), each adding up its seconds: the
    three kernels under their names, and each op's methods under the op's name.

    The model sees the same methods; the proxy costs two clock reads per call, a few hundred
    nanoseconds against kernels and ops of tens of microseconds or more.
    """

    def __init__(self, backend: Backend):
        from .tinygpt import StepOps  # NumPy: only in the worker

        step = StepOps(backend)
        self.provided = step.provided  # the ops the backend itself computes
        self.seconds: dict[Kernel, float] = dict.fromkeys(KERNELS, 0.0)
        self.op_seconds: dict[StepOp, float] = dict.fromkeys(STEP_OPS, 0.0)
        for kernel, method in METHOD_OF_KERNEL.items():
            setattr(self, method, self._timed(getattr(step, method), self.seconds, kernel))
        for op, methods in OP_METHODS.items():
            if op in FUSED and op not in self.provided:
                continue  # absent, so the step over this proxy runs the separate ops, as the backend does
            for method in methods:
                setattr(self, method, self._timed(getattr(step, method), self.op_seconds, op))

    @staticmethod
    def _timed(method: Any, totals: dict[Any, float], part: str) -> Any:
        clock = time.perf_counter

        def timed(*args: Any) -> Any:
            start = clock()
            try:
                return method(*args)
            finally:
                totals[part] += clock() - start

        return timed

    def reset(self) -> None:
        # in place: each timed method holds the dict it adds to
        for kernel in KERNELS:
            self.seconds[kernel] = 0.0
        for op in STEP_OPS:
            self.op_seconds[op] = 0.0


def attribution(samples: list[StepSample], step_ms: float) -> Attribution:
    """Each kernel's and op's share of the step, from totals over every timed step (so shares
    add to 1); without op times (a run before version 6), ``other`` holds every op."""
    total = sum(s.seconds for s in samples)
    kernel_total: dict[Kernel, float] = {k: sum(s.kernel_seconds.get(k, 0.0) for s in samples) for k in KERNELS}
    timed_ops = all(s.op_seconds is not None for s in samples)
    op_total: dict[StepOp, float] = (
        {op: sum((s.op_seconds or {}).get(op, 0.0) for s in samples) for op in STEP_OPS} if timed_ops else {}
    )
    other = max(total - sum(kernel_total.values()) - sum(op_total.values()), 0.0)

    def share(seconds: float) -> Share:
        fraction = min(seconds / total, 1.0)
        bound = 1 / (1 - fraction) if fraction < 1 else None
        return Share(ms=fraction * step_ms, share=fraction, amdahl_bound=bound)

    parts = {k: share(v) for k, v in kernel_total.items()}
    bounding = max(KERNELS, key=lambda k: kernel_total[k])
    every: list[tuple[Kernel | StepOp, float]] = [*kernel_total.items(), *op_total.items()]
    all_matmuls = sum(kernel_total.values()) / total
    return Attribution(
        step_ms=step_ms,
        forward=parts["forward"],
        backward_da=parts["backward_da"],
        backward_db=parts["backward_db"],
        other=Share(ms=other / total * step_ms, share=other / total, amdahl_bound=None),
        bounding_kernel=bounding,
        headroom=parts[bounding].amdahl_bound,
        all_matmuls_bound=1 / (1 - all_matmuls) if all_matmuls < 1 else None,
        ops={op: share(v) for op, v in op_total.items()} if timed_ops else None,
        bounding_part=max(every, key=lambda part: part[1])[0] if timed_ops else None,
    )


def _part_share(a: Attribution | None, part: str) -> Share | None:
    if a is None:
        return None
    if part in KERNELS or part == "other":
        found: Share = getattr(a, part)
        return found
    return next((share for op, share in (a.ops or {}).items() if op == part), None)


def part_seconds(cell: Cell, timed_steps: int) -> dict[str, dict[int, float]]:
    """Mean seconds per step of each kernel, op and the rest, in each whole repeat, by round."""
    repeats = complete_repeats(cell.step_samples or [], timed_steps)
    found: dict[str, dict[int, float]] = {}
    for r, group in repeats.items():
        if any(s.op_seconds is None for s in group):
            continue
        n = len(group)
        for kernel in KERNELS:
            found.setdefault(kernel, {})[r] = sum(s.kernel_seconds.get(kernel, 0.0) for s in group) / n
        for op in STEP_OPS:
            seconds = sum((s.op_seconds or {}).get(op, 0.0) for s in group) / n
            if seconds > 0:  # an op the step never called (a fusion the backend lacks) has no time to compare
                found.setdefault(op, {})[r] = seconds
        rest = sum(s.seconds - sum(s.kernel_seconds.values()) - sum((s.op_seconds or {}).values()) for s in group)
        found.setdefault("other", {})[r] = max(rest / n, 1e-12)  # a ratio needs a positive time
    return found


class _TrainingRun(CellRun):
    def __init__(self, task: CellTask, backend: Backend):
        from .tinygpt import Trainer  # NumPy: only in the worker, never on the CLI's start-up path

        self.task = task
        self.kernels = TimedStep(backend)
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
                    op_seconds=dict(self.kernels.op_seconds),
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
        found += [t for config in results.spec.config_names if (t := self._op_table(results, config)) is not None]
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
                    recorded_interval(results, ms),
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
                without_intervals(
                    results,
                    "Training step: medians over repeats; each 95% CI is of the typical value (true and median)",
                ),
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
                recorded_interval(results, c.instructions_per_step, 0),
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

    @staticmethod
    def _op_table(results: RunResults, config: str) -> Table | None:
        """Every part of the step at one config: ms (share) per backend, and each backend's
        speedup on that part over the baseline's, round by round; None without op times."""
        cells = [c for c in results.cells if c.config == config and c.attribution and c.attribution.ops]
        if not cells:
            return None
        spec = backends_spec(results.spec)
        own = {p.backend: {check.op for check in p.op_checks or []} for p in results.parity}
        # a fused op no backend here called (none provides it, or a run before it) is left out
        called = {p for c in cells for p in FUSED if (taken := _part_share(c.attribution, p)) and taken.ms > 0}
        parts: list[str] = [p for p in (*KERNELS, *STEP_OPS, "other") if p not in FUSED or p in called]
        per_repeat = {c.backend: part_seconds(c, spec.timed_steps) for c in cells}
        baseline = per_repeat.get(spec.baseline)
        others = [c for c in cells if c.backend != spec.baseline]
        floors = (results.floors or {}).get(config)
        rows = []
        for part in parts:
            row = [PART_LABEL.get(part, part)]
            if floors is not None:
                found_floor = floors.floor_ms(part)
                # three significant digits: a small config's floors are microseconds
                row.append(f"{found_floor:.3g}" if found_floor is not None else "-")
            for c in cells:
                share = _part_share(c.attribution, part)
                mark = "*" if part in own.get(c.backend, set()) else ""
                if share is not None and share.ms == 0 and part in STEP_OPS:
                    row.append("not called")  # a fused op the backend lacks, or an op its fusions took whole
                    continue
                distance = above_floor(share.ms if share else None, floors, part)
                above = f", {distance:.1f}x floor" if distance is not None else ""
                row.append(f"{number(share.ms)}{mark} ({percent(share.share)}{above})" if share else "unknown")
            for c in others:
                mine, theirs = (baseline or {}).get(part), per_repeat[c.backend].get(part)
                found = paired_ratio(mine, theirs) if mine and theirs else None
                row.append(ratio_text(found.median if found else None, found))
            rows.append(row)
        headers = [
            "part",
            *(["floor ms"] if floors is not None else []),
            *(f"{c.backend} ms" for c in cells),
            *(f"{c.backend} vs {spec.baseline}" for c in others),
        ]
        title = f"Per-op attribution at {config}: ms per step (share"
        title += (
            ", times its floor); * the backend's own op, else NumPy's"
            if floors
            else "); * the backend's own op, else NumPy's"
        )
        if floors is not None:
            title += (
                f"; floors at {number(floors.peak_gflops)} GFLOP/s and {number(floors.bandwidth_gbs)} GB/s, "
                f"ceilings measured {floors.measured_at}"
            )
        return Table(title, rows, headers)

    def verdict(self, results: RunResults) -> list[str]:
        """Which kernel or op bounds the step, and how much a faster one could still give."""
        lines = []
        reference = results.ratio_roles.reference
        for c in results.cells:
            a = c.attribution
            if a is None or (c.backend == reference and len(results.spec.arm_names) > 1):
                continue
            # Before version 6 only the kernels had times, so only they can bound the step.
            names = [*KERNELS, *STEP_OPS] if a.ops else list(KERNELS)
            shares = {part: found for part in names if (found := _part_share(a, part)) is not None}
            bounding = max(shares, key=lambda part: shares[part].share)
            top = shares[bounding]
            # A lead of a few points is within a noisy machine's reach: name the runners-up.
            close = [
                f"{PART_LABEL.get(p, p)} {percent(found.share)}"
                for p, found in shares.items()
                if p != bounding and found.share >= CLOSE * top.share
            ]
            floors = (results.floors or {}).get(c.config)
            if floors is not None:
                lines.append(
                    f"{c.backend}/{c.config}: the step took {times(a.step_ms / floors.step_floor_ms)} its floor "
                    f"({number(floors.step_floor_ms)} ms at {floors.threads} thread(s))"
                )
            lines.append(
                f"{c.backend}/{c.config}: {PART_LABEL.get(bounding, bounding)} bounds the step ({percent(top.share)} of "
                f"{number(a.step_ms)} ms" + (f"; close behind: {', '.join(close)}" if close else "") + "); "
                f"removing it entirely would give at most {times(top.amdahl_bound)}, and all three matmuls at most "
                f"{times(a.all_matmuls_bound)}"
                + (f"; what no kernel or op took: {percent(a.other.share)}" if a.ops else "")
            )
        if lines and results.floors is None and isinstance(results.spec, EvaluatorSpec):
            lines.append(missing_note(results.spec.threads))
        return lines
