"""Reading a run's results: the tables people look at, and the evidence line for the record."""

from __future__ import annotations

from typing import Optional

from .run import Cell, RunResults

CLOSE = 0.9  # a kernel within 10% of the bounding one's share is named beside it
KERNEL_LABEL = {"forward": "forward", "backward_da": "backward_dA", "backward_db": "backward_dB"}


def _num(value: Optional[float], digits: int = 1) -> str:
    return "unknown" if value is None else f"{value:,.{digits}f}"


def _x(value: Optional[float]) -> str:
    return "unknown" if value is None else f"{value:.2f}x"


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _note(cell: Cell) -> str:
    if cell.status != "measured":
        return f"{cell.status}: {cell.reason}" if cell.reason else cell.status
    return "spread too wide to trust" if cell.spread_too_wide else ""


def parity_table(results: RunResults) -> tuple[list[list[str]], list[str]]:
    rows = [[p.backend, "passed" if p.passed else "FAILED", p.summary] for p in results.parity]
    return rows, ["backend", "parity", "finding"]


def step_table(results: RunResults) -> tuple[list[list[str]], list[str]]:
    """ms/step and tokens/s per (config, backend), with speedups measured in this run."""
    rows = []
    for c in results.cells:
        ms, tok = c.ms_per_step, c.tokens_per_second
        rows.append([
            c.config, c.backend,
            _num(ms.median) if ms else "unknown",
            f"{_num(ms.min)}-{_num(ms.max)}" if ms else "unknown",
            _num(tok.median, 0) if tok else "unknown",
            _x(c.vs_naive), _x(c.vs_baseline), _note(c),
        ])
    return _without_twin(results, rows, ["config", "backend", "ms/step", "min-max", "tokens/s", "vs naive",
                                         f"vs {results.spec.baseline}", "note"])


def _without_twin(results: RunResults, rows: list[list[str]], headers: list[str]) -> tuple[list[list[str]], list[str]]:
    """Drop the baseline column when the baseline is naive: it would repeat the naive one."""
    if results.spec.baseline != "naive":
        return rows, headers
    drop = headers.index("vs naive") + 1
    return [r[:drop] + r[drop + 1:] for r in rows], headers[:drop] + headers[drop + 1:]


def attribution_table(results: RunResults) -> tuple[list[list[str]], list[str]]:
    """Each kernel's share of the step and its Amdahl bound (speedup if it took no time)."""
    rows = []
    for c in results.cells:
        a = c.attribution
        if a is None:
            continue
        parts = [f"{_pct(p.share)} ({_x(p.amdahl_bound)})" for p in (a.forward, a.backward_da, a.backward_db)]
        rows.append([c.config, c.backend, _num(a.step_ms), *parts, _pct(a.other.share),
                     KERNEL_LABEL[a.bounding_kernel], _x(a.all_matmuls_bound)])
    headers = ["config", "backend", "step ms", "forward", "backward_dA", "backward_dB", "other",
               "bounds the step", "if all matmuls were free"]
    return rows, headers


def kernel_table(results: RunResults) -> tuple[list[list[str]], list[str]]:
    """GFLOP/s of each kernel at each layer shape, with ratios to naive and to numpy-blas."""
    rows = []
    for c in results.cells:
        for t in c.kernels or []:
            m, k, n = t.shape
            rows.append([c.config, t.layer, f"{m}x{k}x{n}", KERNEL_LABEL[t.kernel], c.backend,
                         _num(t.gflops.median, 2), f"{_num(t.gflops.min, 2)}-{_num(t.gflops.max, 2)}",
                         _x(t.vs_naive), _x(t.vs_peer)])
    return rows, ["config", "layer", "MxKxN", "kernel", "backend", "GFLOP/s", "min-max", "vs naive", "vs numpy-blas"]


def cell_table(results: RunResults) -> tuple[list[list[str]], list[str]]:
    """kernels workload: one line per cell, GFLOP/s over a training step's linear layers."""
    rows = [[c.config, c.backend, _num(c.step_gflops, 2), _x(c.vs_naive), _x(c.vs_baseline), _note(c)] for c in results.cells]
    return _without_twin(results, rows, ["config", "backend", "step GFLOP/s", "vs naive", f"vs {results.spec.baseline}", "note"])


def tables(results: RunResults) -> list[tuple[str, list[list[str]], list[str]]]:
    """(title, rows, headers) of every table that applies to this run."""
    found = [("Parity (before timing)", *parity_table(results))]
    if results.spec.workload == "tinygpt-train":
        found.append(("Training step: median and spread over repeats", *step_table(results)))
        attr = attribution_table(results)
        if attr[0]:
            found.append(("Per-kernel attribution: share of the step (Amdahl bound)", *attr))
    else:
        found.append(("Linear layers of one training step", *cell_table(results)))
        found.append(("Kernels at each layer shape", *kernel_table(results)))
    return found


def verdict(results: RunResults) -> list[str]:
    """Which kernel bounds the step, and how much a faster one could still give."""
    lines = []
    for c in results.cells:
        a = c.attribution
        if a is None or c.backend == "naive" and len(results.spec.backends) > 1:
            continue
        share = getattr(a, a.bounding_kernel).share
        # A lead of a few points is within a noisy machine's reach: name the runners-up.
        close = [f"{KERNEL_LABEL[k]} {_pct(getattr(a, k).share)}" for k in ("forward", "backward_da", "backward_db")
                 if k != a.bounding_kernel and getattr(a, k).share >= CLOSE * share]
        lines.append(
            f"{c.backend}/{c.config}: {KERNEL_LABEL[a.bounding_kernel]} bounds the step ({_pct(share)} of "
            f"{_num(a.step_ms)} ms" + (f"; close behind: {', '.join(close)}" if close else "") + "); "
            f"removing it entirely would give at most {_x(a.headroom)}, and all three matmuls at most "
            f"{_x(a.all_matmuls_bound)}"
        )
    return lines


def evidence_line(results: RunResults) -> Optional[str]:
    """One sentence per non-reference backend in the seed's style, or None if nothing measured."""
    parts = []
    workload = results.spec.workload
    for backend in results.spec.backends:
        mine = [c for c in results.cells if c.backend == backend and c.status == "measured"]
        if workload == "tinygpt-train":
            values = [(c.config, c.ms_per_step.median) for c in mine if c.ms_per_step]
            unit = "ms/step"
        else:
            values = [(c.config, c.step_gflops) for c in mine if c.step_gflops is not None]
            unit = "GFLOP/s over a step's linear layers"
        if not values:
            continue
        reached = ", ".join(f"{config} {value:,.1f}" for config, value in values)
        sentence = f"{backend} reached {reached} {unit}"
        speedups = [c.vs_naive for c in mine if c.vs_naive is not None]
        if backend != "naive" and speedups:
            low, high = min(speedups), max(speedups)
            span = f"{low:.2f}x" if abs(high - low) < 0.005 else f"{low:.2f}-{high:.2f}x"
            sentence += f", or about {span} over naive"
        parts.append(sentence)
    if not parts:
        return None
    run = f"Run {results.run_id}" if results.run_id else "Bench"
    return f"{run} ({results.evaluator or 'ad hoc'}, {results.status}): " + "; ".join(parts) + "."
