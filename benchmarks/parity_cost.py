"""What naive's bits cost the numba backend's product: its kernel (per step a rounded multiply,
then a rounded add, as naive sums) against its fused twin (the same tile, loops and packing,
each multiply and add free to become one FMA instruction), at the xl layers' shapes.

    python benchmarks/parity_cost.py                          # this machine's tile, 1 thread
    python benchmarks/parity_cost.py --threads 2 --rounds 9 --json parity_cost.json
    python benchmarks/parity_cost.py --all-tiles               # every candidate this CPU runs
    python benchmarks/parity_cost.py --build fused --rounds 3  # one build: an arm of an evaluator

The numba backend keeps naive's order and rounding, so its results are naive's bit for bit
(``order_preserving``); a fused multiply-add rounds once, not twice, and would change them.
A CPU whose pipes do a multiply-add as one instruction does half the work per flop when it may
fuse: this measures how much of the kernel's time that is, here.

Before timing, every build is checked on the same shapes by the parity gate
(``ptreg.engine.parity``): the exact one bit for bit against naive, the fused one within the
evaluators' tolerance against float64. Then rounds: in each, both builds of every tile run the
three kernels (forward, dA, dB, laid out as the backend calls them) at every shape of
``numba_gemm.TUNING_SHAPES``, which build goes first alternating by round. GFLOP/s is a round's
work over its time; the speedup is the fused build's, per round, summarised as the center and
95% interval of its geometric mean (``ptreg.engine.stats.log_interval``, rounds in order).
``--build`` times one build alone and, under ``ptreg run`` (``PTREG_METRICS`` set), writes its
median GFLOP/s as the metric ``gflops``: each build an arm of a command evaluator, in processes of
their own, interleaved by ptreg (``attempts/numba-product-fused-multiply-add.json``).
With ceilings cached for this machine (``python benchmarks/step_floor.py --remember``) each rate
is also shown as a share of the FMA peak at that thread count. Errors are one line,
``parity_cost: error: ...``, exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import numba
import numpy as np

from ptreg.engine import ceilings
from ptreg.engine.environment import cpu_generation, cpu_model
from ptreg.engine.parity import check_parity
from ptreg.engine.stats import log_interval
from ptreg.store.jsonio import atomic_write_text
from ptreg_backends import numba_gemm
from ptreg_backends.naive import NaiveBackend
from ptreg_backends.numba_tiles import CANDIDATES, Tile, runnable

BUILDS = ("exact", "fused")
RTOL, ATOL = 1e-4, 1e-6  # the tolerance every evaluator in attempts/ declares
CHECK_SHAPES = ((64, 256, 96), (37, 300, 53))  # a whole tile's worth, and edges cut everywhere


def fail(message: str) -> NoReturn:
    print(f"parity_cost: error: {message}", file=sys.stderr)
    raise SystemExit(2)


class Product:
    """One build of one tile as a backend's three kernels, for the parity gate."""

    def __init__(self, gemm: Any, threads: int, order_preserving: bool):
        self.gemm, self.threads, self.order_preserving = gemm, threads, order_preserving

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self.gemm(a, b, out, self.threads)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self.gemm(dc, b.T, out, self.threads)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        self.gemm(a.T, dc, out, self.threads)


def checked(tile: Tile, threads: int, only: str | None = None) -> dict[str, Any]:
    """Both builds of ``tile`` (or ``only`` one), compiled and through the parity gate (exit 2 if
    one fails)."""
    builds = {}
    for build in BUILDS if only is None else (only,):
        gemm = numba_gemm.compile_gemm(tile, fused=build == "fused")
        product = Product(gemm, threads, order_preserving=build == "exact")
        result = check_parity(product, NaiveBackend(), CHECK_SHAPES, RTOL, ATOL, name=f"{tile.name} {build}")
        if not result.passed:
            fail(result.summary())
        builds[build] = gemm
    return builds


def measure(compiled: dict[str, dict[str, Any]], threads: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """GFLOP/s of each tile's builds, one value per round, the builds' order alternating."""
    rng = np.random.default_rng(0)
    shapes = numba_gemm.TUNING_SHAPES
    work = [(ops, 2.0 * m * k * n) for m, k, n in shapes for ops in numba_gemm._operands((m, k, n), rng)]
    flops = sum(f for _, f in work)
    for builds in compiled.values():  # first calls: the thread pool, page faults
        for gemm in builds.values():
            gemm(*work[0][0], threads)
    rates: dict[str, dict[str, list[float]]] = {
        name: {build: [] for build in builds} for name, builds in compiled.items()
    }
    for round_ in range(rounds):
        for name, builds in compiled.items():
            for build in list(builds) if round_ % 2 == 0 else list(builds)[::-1]:
                gemm = builds[build]
                begun = time.perf_counter()
                for (lhs, rhs, out), _ in work:
                    gemm(lhs, rhs, out, threads)
                rates[name][build].append(flops / (time.perf_counter() - begun) / 1e9)
        print(f"parity_cost: round {round_ + 1}/{rounds} done", file=sys.stderr)
    return rates


def rows_of(rates: dict[str, dict[str, list[float]]], peak: float | None) -> list[dict[str, Any]]:
    rows = []
    for name, by_build in rates.items():
        speedups = [f / e for e, f in zip(by_build["exact"], by_build["fused"], strict=True)]
        interval = log_interval(speedups, in_order=True)
        row: dict[str, Any] = {
            "tile": name,
            "rounds": len(speedups),
            "exact_gflops": statistics.median(by_build["exact"]),
            "fused_gflops": statistics.median(by_build["fused"]),
            "fused_speedup": math.sqrt(interval[0] * interval[1]) if interval else None,
            "interval": list(interval) if interval else None,
        }
        for build in BUILDS:
            row[f"{build}_share_of_peak"] = row[f"{build}_gflops"] / peak if peak else None
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| tile | naive's bits, GFLOP/s | fused, GFLOP/s | fused's speedup (95% interval) | share of the FMA peak |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        share = (
            f"{r['exact_share_of_peak']:.0%} / {r['fused_share_of_peak']:.0%}"
            if r["exact_share_of_peak"] is not None
            else "? (no ceilings cached for this machine)"
        )
        speedup = (
            f"{r['fused_speedup']:.3f}x ({r['interval'][0]:.3f}-{r['interval'][1]:.3f}x)" if r["interval"] else "?"
        )
        lines.append(f"| {r['tile']} | {r['exact_gflops']:.1f} | {r['fused_gflops']:.1f} | {speedup} | {share} |")
    return "\n".join(lines)


def one_build(tile: Tile, build: str, threads: int, rounds: int) -> int:
    """Time one build of ``tile``; print its median GFLOP/s, and write it where ptreg reads an
    arm's metrics when run by ``ptreg run``."""
    rates = measure({tile.name: checked(tile, threads, only=build)}, threads, rounds)[tile.name][build]
    gflops = statistics.median(rates)
    print(f"{tile.name} {build}: {gflops:.2f} GFLOP/s, median of {rounds} rounds ({threads} thread(s))")
    metrics = os.environ.get("PTREG_METRICS")
    if metrics:
        with open(metrics, "a", encoding="utf-8") as out:  # ptreg's own file for this repeat
            out.write(json.dumps({"gflops": gflops}) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="parity_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="numba's threads (default 1)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7, at least 2)")
    parser.add_argument(
        "--all-tiles", action="store_true", help="every candidate this CPU runs, not only its chosen tile"
    )
    parser.add_argument("--build", choices=BUILDS, help="time this build alone (an evaluator's arm)")
    parser.add_argument("--json", type=Path, help="also write the rows and the setting here")
    args = parser.parse_args(argv)
    pool = numba.config.NUMBA_NUM_THREADS
    if not 1 <= args.threads <= pool:
        fail(f"--threads: from 1 to numba's pool of {pool}")
    if args.rounds < 2:
        fail("--rounds: at least 2, for an interval")
    numba.set_num_threads(args.threads)
    try:
        chosen = numba_gemm.choose(lambda message: print(f"parity_cost: {message}", file=sys.stderr))
    except ValueError as error:  # PTREG_NUMBA_TILE naming no candidate
        fail(str(error))
    tiles = [t for t in CANDIDATES if runnable(t)] if args.all_tiles else [chosen.tile]
    if args.build:
        if args.all_tiles or args.json:
            fail("--build: times the chosen tile's one build, with neither --all-tiles nor --json")
        return one_build(chosen.tile, args.build, args.threads, args.rounds)
    compiled = {tile.name: checked(tile, args.threads) for tile in tiles}
    entry = ceilings.remembered()
    at = entry.threads.get(args.threads) if entry else None
    peak = at.peak_gflops if at else None
    rows = rows_of(measure(compiled, args.threads, args.rounds), peak)
    machine = " ".join(
        filter(None, [cpu_model() or "an unnamed CPU", f"({cpu_generation()})" if cpu_generation() else None])
    )
    blas = {name: os.environ.get(name) for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    print(
        f"{machine}, {args.threads} thread(s), {args.rounds} interleaved rounds, tile chosen here: {chosen.tile.name}"
    )
    print(f"shapes (M, K, N), each as forward, dA and dB: {list(numba_gemm.TUNING_SHAPES)}")
    print(
        f"FMA peak: {f'{peak:.1f} GFLOP/s (cached ceilings)' if peak else 'unknown: no ceilings cached for this machine'}"
    )
    print(table(rows))
    if args.json:
        document = {
            "machine": machine,
            "threads": args.threads,
            "rounds": args.rounds,
            "chosen_tile": chosen.tile.name,
            "shapes": [list(s) for s in numba_gemm.TUNING_SHAPES],
            "peak_gflops": peak,
            "environment": blas,
            "rows": rows,
        }
        try:
            atomic_write_text(args.json, json.dumps(document, indent=2) + "\n")
        except OSError as error:
            fail(f"{args.json}: {error.strerror or error}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
