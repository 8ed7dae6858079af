"""How long numba's OpenMP pool spins after a parallel region, and what a region costs to start,
under the thread rule every worker starts with and without its GNU OpenMP spin.

    python benchmarks/pool_wakeup.py               # 2 threads, 7 interleaved rounds
    python benchmarks/pool_wakeup.py --rounds 11 --json pool.json

Each setting runs in a fresh process (GNU OpenMP reads its variables when it loads), in
interleaved rounds. A process runs an empty parallel region (a prange over two elements) on
the given threads and reports:

- the spin: the CPU time the process burns while its main thread sleeps for 0.2 s right after
  one region, which is the pool's threads spinning before they sleep (zero: they sleep at once);
- the start: the median wall time of 2,000 back-to-back calls of the region, which includes
  waking the pool when it sleeps between them.

Figures: median over rounds (min-max). Needs numba with its ``omp`` threading layer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from ptreg.engine.environment import collect, worker_variables
from ptreg.store.jsonio import atomic_write_text

CALLS = 2000


def settings() -> dict[str, dict[str, str | None]]:
    """Each setting as the variables it sets (None: removed from the environment)."""
    rule = worker_variables({})
    return {
        "the rule": dict(rule),
        "the rule without GOMP_SPINCOUNT (PASSIVE alone)": {**rule, "GOMP_SPINCOUNT": None},
        "no variable (libgomp's default)": dict.fromkeys(rule),
    }


def child(threads: int) -> dict[str, float | str]:
    import time

    import numba
    import numpy as np

    numba.set_num_threads(threads)

    @numba.njit(parallel=True)
    def touch(a: np.ndarray) -> None:
        for i in numba.prange(a.shape[0]):
            a[i] += 1.0

    a = np.zeros(threads)
    touch(a)
    before = time.process_time()
    time.sleep(0.2)
    spin = time.process_time() - before
    calls = []
    for _ in range(CALLS):
        start = time.perf_counter()
        touch(a)
        calls.append(time.perf_counter() - start)
    return {"layer": numba.threading_layer(), "spin_ms": spin * 1e3, "start_us": statistics.median(calls) * 1e6}


def run_child(setting: dict[str, str | None], threads: int) -> dict[str, float | str]:
    env = {**os.environ}
    for name, value in setting.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    printed = subprocess.run(
        [sys.executable, __file__, "--child", str(threads)], env=env, capture_output=True, text=True, check=True
    ).stdout
    return dict(json.loads(printed))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write every sample and the environment here")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return 0
    if args.rounds < 1 or args.threads < 2:
        parser.error("--rounds must be at least 1 and --threads at least 2 (one thread wakes no pool)")
    chosen = settings()
    samples: dict[str, list[dict[str, float | str]]] = {name: [] for name in chosen}
    for round_ in range(args.rounds):
        for name, setting in chosen.items():
            found = run_child(setting, args.threads)
            if found["layer"] != "omp":
                raise SystemExit(f"pool_wakeup: numba's threading layer here is {found['layer']}, not omp")
            samples[name].append(found)
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    print(f"\n{args.threads} threads, {args.rounds} rounds: median (min-max)")
    print(f"{'setting':<50} {'spin after a region, ms':<26} start of a region, µs")
    for name, taken in samples.items():
        spins = [float(s["spin_ms"]) for s in taken]
        starts = [float(s["start_us"]) for s in taken]
        print(f"{name:<50} {cell(spins):<26} {cell(starts)}")
    if args.json:
        document = {
            "settings": chosen,
            "samples": samples,
            "environment": collect(Path.cwd()),
        }
        atomic_write_text(args.json, json.dumps(document, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
