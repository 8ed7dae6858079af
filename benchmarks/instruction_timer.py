"""How much an instruction count moves from run to run, beside wall time, and what counting costs.

Run: python benchmarks/instruction_timer.py [--runs 5] [--config tiny] [--workload kernels]

Measures one evaluator (numpy-blas, one thread) ``--runs`` times with the wall timer and
``--runs`` times with the instructions timer, each run a fresh worker, through ptreg's own
engine. For each timer it prints the median per step's worth of work of every run and the
spread of those medians ((max - min) / median), the count's unit beside the seconds'. Then
valgrind's slowdown: the wall seconds of the same timed regions, under callgrind over bare,
and the seconds a counted worker spent from its start to warm beside a bare one's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptreg.engine.executor import Executor
from ptreg.engine.measurement import measure
from ptreg.engine.workloads import workload_named
from ptreg.engine.workloads.base import BackendsWorkload
from ptreg.records.evaluator import EvaluatorSpec, parse_spec


def spec(workload: str, config: str, timer: str) -> EvaluatorSpec:
    raw: dict[str, Any] = {
        "name": "instruction-timer",
        "workload": workload,
        "metric": "gflops" if workload == "kernels" else "ms-per-step",
        "configs": [config],
        "backends": ["numpy-blas"],
        "baseline": "numpy-blas",
        "warmup_steps": 2,
        "timed_steps": 10,
        "repeats": 3,
        "seed": 0,
        "threads": 1,
        "tolerance": {"rtol": 1e-4, "atol": 1e-6},
        "max_relative_spread": 5.0,
        "timer": timer,
    }
    made = parse_spec(raw, "benchmark")
    assert isinstance(made, EvaluatorSpec)
    return made


def one_run(made: EvaluatorSpec) -> tuple[float, float, float]:
    """(median per step's worth of work in its unit, median wall seconds of the same, the cell's busy seconds)."""
    workload = workload_named(made.workload)
    assert isinstance(workload, BackendsWorkload)
    found = measure(made, Executor())
    (cell,) = found.cells
    assert cell.status == "measured", cell.reason
    values = workload.repeat_seconds(made, cell)
    wall = spec(made.workload, made.config_names[0], "wall")
    seconds = workload.repeat_seconds(wall, cell)  # the samples' seconds, under valgrind or not
    return statistics.median(values.values()), statistics.median(seconds.values()), cell.wall_seconds or 0.0


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--workload", default="kernels")
    args = parser.parse_args()
    found: dict[str, list[tuple[float, float, float]]] = {}
    for timer in ("wall", "instructions"):
        made = spec(args.workload, args.config, timer)
        found[timer] = []
        for n in range(args.runs):
            begun = time.monotonic()
            found[timer].append(one_run(made))
            value, seconds, busy = found[timer][-1]
            print(
                f"{timer:12} run {n + 1}: {value:.6g} per step ({seconds * 1000:.3f} ms wall), "
                f"cell busy {busy:.1f} s, run {time.monotonic() - begun:.1f} s",
                flush=True,
            )
    wall_values = [v for v, _, _ in found["wall"]]
    counts = [v for v, _, _ in found["instructions"]]
    print(f"wall time over {args.runs} runs: spread {100 * spread(wall_values):.2f}% of the median")
    print(f"instructions over {args.runs} runs: spread {100 * spread(counts):.4f}% of the median")
    bare = statistics.median(s for _, s, _ in found["wall"])
    counted = statistics.median(s for _, s, _ in found["instructions"])
    print(f"callgrind's slowdown of the timed regions: {counted / bare:.0f}x")
    busy_bare = statistics.median(b for _, _, b in found["wall"])
    busy_counted = statistics.median(b for _, _, b in found["instructions"])
    print(f"a cell's busy seconds (start, warm-up, repeats): {busy_bare:.1f} s bare, {busy_counted:.1f} s counted")


if __name__ == "__main__":
    main()
