"""Interleaved rounds: which worker strategy, and what interleaving costs.

Two ways to take repeat r of every backend in round r:

- warm: one worker per backend, set up and warmed up once, fed one repeat at a time (what the
  engine does);
- fresh: a new worker for every repeat, each with its own set-up and warm-up.

``--strategies`` measures both on one plan, alternating them trial by trial: the wall time of
the plan, and the median half-width of the 95% intervals of its ratios (vs the reference).
``--before EXE --after EXE`` times the same ``ptreg bench`` under two installs, interleaved
(e.g. the engine before interleaving and after it).

    python benchmarks/interleaving.py --strategies --trials 3
    python benchmarks/interleaving.py --before OLD/bin/ptreg --after NEW/bin/ptreg --trials 3
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from functools import partial
from typing import Any

from timing import interleaved, table

from ptreg.engine.backends import describe_all, roles
from ptreg.engine.environment import BEHAVIOUR_VARIABLES, cpu_model, usable_cores
from ptreg.engine.executor import Executor
from ptreg.engine.measurement import Places, build_cell, cell_task, measure
from ptreg.engine.plan import PlannedCell, bench_spec, order_seed, round_order
from ptreg.engine.workloads import workload_named
from ptreg.records.evaluator import EvaluatorSpec


def spec_of(args: argparse.Namespace) -> EvaluatorSpec:
    return bench_spec(
        workload=args.workload,
        configs=[args.config],
        backends=args.backends,
        baseline=None,
        warmup_steps=args.warmup,
        timed_steps=args.steps,
        repeats=args.repeats,
        seed=0,
        threads=args.threads,
    )


def half_widths(spec: EvaluatorSpec, cells: list[Any]) -> list[float]:
    """Relative half-widths of the ratios to the reference, the reference's own left out."""
    found = []
    for cell in cells:
        ratio = cell.vs_naive_ratio
        if ratio is not None and ratio.ci is not None and ratio.ci.low != ratio.ci.high:
            found.append((ratio.ci.high - ratio.ci.low) / 2 / ratio.median)
    return found


def warm(spec: EvaluatorSpec) -> list[Any]:
    return measure(spec, Executor()).cells


def fresh(spec: EvaluatorSpec) -> list[Any]:
    """Every repeat in a worker of its own, warmed up anew; rounds in the engine's order."""
    workload = workload_named(spec.workload)
    executor = Executor()
    executor.start()
    config = spec.configs[0]
    outcomes: dict[str, Any] = {}
    places = Places(None, order_seed())  # a seed of the run's own, as measure draws one
    for number in range(spec.most_repeats):
        for backend in round_order(places.order_seed, config, number, spec.backends):
            worker = executor.open(f"{backend}/{config}", cell_task(spec, config, backend, places))
            executor.run_repeat(worker, number, spec.most_repeats)
            outcome = executor.close(worker)
            kept = outcomes.setdefault(backend, outcome)
            if kept is not outcome:
                kept.samples += outcome.samples
    cells = [build_cell(spec, workload, PlannedCell(config, b), o) for b, o in outcomes.items()]
    workload.compare(spec, cells, roles(describe_all()))
    return cells


def machine() -> str:
    found = ", ".join(f"{k}={v}" for k, v in os.environ.items() if k in BEHAVIOUR_VARIABLES) or "none set"
    return f"machine: {cpu_model() or 'unknown CPU'}, {usable_cores()} usable cores; variables: {found}"


def strategies(args: argparse.Namespace) -> None:
    spec = spec_of(args)
    walls: dict[str, list[float]] = {"warm": [], "fresh": []}
    widths: dict[str, list[float]] = {"warm": [], "fresh": []}
    for trial in range(args.trials):
        for name, strategy in (
            (("warm", warm), ("fresh", fresh)) if trial % 2 == 0 else (("fresh", fresh), ("warm", warm))
        ):
            begun = time.monotonic()
            cells = strategy(spec)
            walls[name].append(time.monotonic() - begun)
            widths[name] += half_widths(spec, cells)
            print(f"trial {trial + 1} {name}: {walls[name][-1]:.1f} s", file=sys.stderr, flush=True)
    print(machine())
    print(
        f"plan: {spec.workload} {spec.configs[0]}, {', '.join(spec.backends)}, {spec.warmup_steps} warm-up, "
        f"{spec.timed_steps} timed steps, {spec.repeats} rounds, {spec.threads} threads; {args.trials} trials"
    )
    print(table(walls, "strategy (wall seconds)", reference="warm"))
    for name, values in widths.items():
        shown = f"{100 * statistics.median(values):.1f}%" if values else "unknown"
        print(f"{name}: median half-width of the 95% intervals of the ratios to the reference: {shown}")


def before_after(args: argparse.Namespace) -> None:
    options = [
        "bench", "-w", args.workload, "-c", args.config, *[x for b in args.backends for x in ("-b", b)],
        "--warmup-steps", str(args.warmup), "--timed-steps", str(args.steps), "--repeats", str(args.repeats),
        "--threads", str(args.threads), "--json",
    ]  # fmt: skip
    runs = {
        f"{label} ({exe})": partial(subprocess.run, [exe, *options], stdout=subprocess.DEVNULL, check=False)
        for label, exe in (("before", args.before), ("after", args.after))
    }
    samples = interleaved(runs, args.trials)
    print(machine())
    print(f"ptreg {shlex.join(options)}; {args.trials} interleaved trials, wall seconds")
    print(table(samples, "install", reference=next(iter(runs))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategies", action="store_true", help="warm workers against a fresh worker per repeat")
    parser.add_argument("--before", help="a ptreg executable: the install to time first")
    parser.add_argument("--after", help="a ptreg executable: the install to time against it")
    parser.add_argument("--workload", default="tinygpt-train")
    parser.add_argument("--config", default="small")
    parser.add_argument("--backends", nargs="+", default=["naive", "blocked-numpy", "numba", "numpy-blas"])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    if args.strategies:
        strategies(args)
    elif args.before and args.after:
        before_after(args)
    else:
        parser.error("give --strategies, or --before EXE and --after EXE")


if __name__ == "__main__":
    main()
