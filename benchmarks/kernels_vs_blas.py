"""Kernels against BLAS: forward, dA and dB of every backend, as GFLOP/s and as a ratio to
numpy-blas measured side by side.

    python benchmarks/kernels_vs_blas.py                      # xl and small, 1 thread and all cores
    python benchmarks/kernels_vs_blas.py --rounds 7 --json kernels.json
    python benchmarks/kernels_vs_blas.py --configs xl --backends numba numpy-blas --candidates

``--candidates`` measures the numba backend once per register tile this CPU can run (each in
workers of its own, the tile forced with PTREG_NUMBA_TILE), side by side with the tile this
machine chose (plain ``numba``) and the others, in the same interleaved rounds.
``--env-variant NAME=VALUE`` measures every backend a second time with that variable set in its
workers (``numba{GOMP_SPINCOUNT=0}``), in the same rounds: a setting's effect, side by side.

Each kernel runs on the linear-layer shapes of a tiny-GPT config (qkv, attention projection,
fc, MLP projection, head); its GFLOP/s is that of one training step's calls of it, weighted
by how often each layer runs. The measurement is ptreg's own engine (its executor, a
worker process per sample, so no backend's thread pool or compiled code touches another's),
run in rounds: every round measures every (threads, config, backend) once, in turn, so the
machine's drift lands on all of them alike. Each backend is first checked by the parity gate
on the same shapes. Reported: the median over rounds, the min-max range, and the ratio to
numpy-blas as the median of the per-round ratios (each pair measured seconds apart).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tabulate import tabulate

from ptreg.engine.backends import describe_all, require_registered, roles
from ptreg.engine.environment import backend_configuration, collect
from ptreg.engine.executor import Executor
from ptreg.engine.plan import parity_shapes
from ptreg.engine.protocol import CellTask, ParityTask
from ptreg.errors import PtregError
from ptreg.records.configs import CONFIGS, flops, linear_shapes
from ptreg.records.evaluator import EvaluatorSpec
from ptreg.records.run_results import KERNELS, KernelSample
from ptreg.store.jsonio import atomic_write_text

PEER = "numpy-blas"
NUMBA = "numba"


def variants(args: argparse.Namespace) -> list[str]:
    """What is measured: the backends, with --candidates one ``numba[tile]`` per candidate, and
    with --env-variant each backend again as ``backend{NAME=VALUE}``."""
    found = list(args.backends)
    if args.candidates and NUMBA in args.backends:
        from ptreg_backends.numba_tiles import CANDIDATES, runnable

        at = found.index(NUMBA) + 1
        found[at:at] = [f"{NUMBA}[{tile.name}]" for tile in CANDIDATES if runnable(tile)]
    return [*found, *(f"{b}{{{setting}}}" for setting in args.env_variant for b in args.backends)]


def backend_of(variant: str) -> str:
    return variant.split("[")[0].split("{")[0]


@contextlib.contextmanager
def as_variant(variant: str) -> Iterator[str]:
    """The backend's registered name, with PTREG_NUMBA_TILE set for a ``numba[tile]`` variant,
    or NAME set for a ``backend{NAME=VALUE}`` one, while its worker starts (a worker takes this
    process's environment)."""
    if variant.endswith("]"):
        name, tile = variant[:-1].split("[")
        setting = ("PTREG_NUMBA_TILE", tile)
    elif variant.endswith("}"):
        name, assignment = variant[:-1].split("{")
        variable, _, value = assignment.partition("=")
        setting = (variable, value)
    else:
        yield variant
        return
    saved = os.environ.get(setting[0])
    os.environ[setting[0]] = setting[1]
    try:
        yield name
    finally:
        if saved is None:
            os.environ.pop(setting[0], None)
        else:
            os.environ[setting[0]] = saved


def spec_for(args: argparse.Namespace, threads: int) -> EvaluatorSpec:
    return EvaluatorSpec.model_validate(
        {
            "name": "kernels-vs-blas",
            "workload": "kernels",
            "configs": args.configs,
            "backends": args.backends,
            "baseline": PEER,
            "warmup_steps": args.warmup,
            "timed_steps": args.calls,
            "repeats": 1,
            "seed": 0,
            "threads": threads,
            "tolerance": {"rtol": 1e-4, "atol": 1e-6},
            "max_relative_spread": 0.2,
            "metric": "gflops",
        }
    )


def step_gflops(config: str, kernel: str, seconds: dict[str, float]) -> float:
    """GFLOP/s of one training step's calls of ``kernel`` (layers weighted by calls per step)."""
    layers = linear_shapes(CONFIGS[config])
    work = sum(layer.per_step * flops(layer.m, layer.k, layer.n) for layer in layers)
    return work / sum(layer.per_step * seconds[layer.name] for layer in layers) / 1e9


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check_parity(args: argparse.Namespace) -> list[str]:
    """Backends whose three kernels pass the parity gate on every shape measured, on the most threads."""
    threads = max(args.threads)
    spec = spec_for(args, threads)
    executor = Executor()
    executor.start()
    reference = roles(describe_all()).reference
    passed = []
    for variant in variants(args):
        with as_variant(variant) as backend:
            outcome = executor.execute(f"parity {variant}", parity_task(spec, backend, reference, threads))
        result = outcome.parity
        log(f"parity {variant}: {result.summary if result else outcome.reason}")
        if outcome.ended == "done" and result is not None and result.passed:
            passed.append(variant)
    return passed


def parity_task(spec: EvaluatorSpec, backend: str, reference: str | None, threads: int) -> ParityTask:
    return ParityTask(
        backend=backend,
        reference=reference,
        shapes=parity_shapes(spec),
        rtol=spec.tolerance.rtol,
        atol=spec.tolerance.atol,
        seed=spec.seed,
        threads=threads,
    )


def measure(args: argparse.Namespace, backends: list[str]) -> dict[tuple[int, str, str, str], list[float]]:
    """GFLOP/s per (threads, config, backend, kernel), one value per round."""
    rates: dict[tuple[int, str, str, str], list[float]] = {}
    for round_ in range(args.rounds):
        for threads in args.threads:
            executor = Executor()
            executor.start()
            for config in args.configs:
                for variant in backends:
                    task = CellTask(
                        backend=backend_of(variant),
                        workload="kernels",
                        config=config,
                        warmup_steps=args.warmup,
                        timed_steps=args.calls,
                        seed=0,
                        threads=threads,
                    )
                    with as_variant(variant):
                        worker = executor.open(f"{variant}/{config}", task)
                    executor.run_repeat(worker, 0, 1)
                    outcome = executor.close(worker)
                    if outcome.ended != "done":
                        raise SystemExit(
                            f"kernels_vs_blas: {variant}/{config} on {threads} threads failed: {outcome.reason}"
                        )
                    samples = [s for s in outcome.samples if isinstance(s, KernelSample)]
                    for kernel in KERNELS:
                        seconds = {s.layer: s.seconds_per_call for s in samples if s.kernel == kernel}
                        rates.setdefault((threads, config, variant, kernel), []).append(
                            step_gflops(config, kernel, seconds)
                        )
                    log(
                        f"round {round_ + 1}/{args.rounds} · {threads} thread(s) · {config} · {variant}: "
                        f"{outcome.wall_seconds:.1f} s"
                    )
    return rates


def summarise(rates: dict[tuple[int, str, str, str], list[float]], backends: list[str]) -> list[dict[str, Any]]:
    rows = []
    for (threads, config, backend, kernel), values in rates.items():
        peer = rates.get((threads, config, PEER, kernel))
        ratios = [mine / theirs for mine, theirs in zip(values, peer, strict=False)] if peer else None
        rows.append(
            {
                "threads": threads,
                "config": config,
                "kernel": kernel,
                "backend": backend,
                "gflops": {
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                    "rounds": values,
                },
                "vs_numpy_blas": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
                if ratios
                else None,
            }
        )
    return rows


def print_tables(rows: list[dict[str, Any]], backends: list[str]) -> None:
    for threads in sorted({r["threads"] for r in rows}):
        table = []
        for config in dict.fromkeys(r["config"] for r in rows):
            for kernel in KERNELS:
                line = [config, kernel]
                for backend in backends:
                    row = next(
                        r
                        for r in rows
                        if (r["threads"], r["config"], r["kernel"], r["backend"]) == (threads, config, kernel, backend)
                    )
                    g, v = row["gflops"], row["vs_numpy_blas"]
                    text = f"{g['median']:.1f} ({g['min']:.1f}-{g['max']:.1f})"
                    line.append(text if backend == PEER or v is None else f"{text} {v['median']:.2f}x")
                table.append(line)
        print(
            f"\n{threads} thread(s): GFLOP/s median (min-max over rounds), ratio to {PEER} (median of per-round ratios)"
        )
        print(tabulate(table, headers=["config", "kernel", *backends]))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", nargs="+", default=["xl", "small"], choices=[c for c in CONFIGS if c != "tiny"])
    parser.add_argument("--backends", nargs="+", default=["naive", "blocked-numpy", "numba", PEER])
    parser.add_argument("--threads", nargs="+", type=int, default=sorted({1, os.cpu_count() or 1}))
    parser.add_argument("--rounds", type=int, default=5, help="samples per (threads, config, backend), interleaved")
    parser.add_argument("--calls", type=int, default=3, help="timed calls per layer and kernel in one sample")
    parser.add_argument("--warmup", type=int, default=1, help="untimed calls per layer and kernel first")
    parser.add_argument("--json", type=Path, help="write the results and the environment here")
    parser.add_argument(
        "--candidates", action="store_true", help="also measure numba once per register tile this CPU can run"
    )
    parser.add_argument(
        "--env-variant",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="also measure every backend with this variable set in its workers (repeatable)",
    )
    args = parser.parse_args()
    for setting in args.env_variant:
        if not setting.partition("=")[0].isidentifier() or "=" not in setting:
            parser.error(f"--env-variant: expected NAME=VALUE, got {setting!r}")
    if PEER not in args.backends:
        parser.error(f"--backends must include {PEER}, the peer every ratio is taken to")
    for option, value, least in (
        ("--rounds", args.rounds, 1),
        ("--calls", args.calls, 1),
        ("--warmup", args.warmup, 0),
    ):
        if value < least:
            parser.error(f"{option} must be at least {least}, got {value}")
    if min(args.threads) < 1:
        parser.error(f"--threads must be at least 1, got {min(args.threads)}")
    try:
        require_registered(args.backends)
    except PtregError as error:
        parser.error(error.message)
    backends = check_parity(args)
    if PEER not in backends:
        raise SystemExit(f"kernels_vs_blas: {PEER} failed parity; no ratio can be taken")
    rows = summarise(measure(args, backends), backends)
    print_tables(rows, backends)
    if args.json:
        document = {
            "settings": {k: v for k, v in vars(args).items() if k != "json"},
            "results": rows,
            "environment": {**collect(Path.cwd()), "backend_configuration": backend_configuration(args.backends)},
        }
        atomic_write_text(args.json, json.dumps(document, indent=2, default=str) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
