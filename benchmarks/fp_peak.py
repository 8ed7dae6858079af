"""What bounds an order-keeping kernel against BLAS: the peaks of a vector multiply then add, and
of a fused multiply-add (FMA), beside OpenBLAS and the numba backend at xl, on one thread.

The numba backend keeps naive's bits, so each step of a sum is a float32 multiply, rounded, then
a float32 add, rounded; BLAS issues one fused multiply-add instead. This measures the ceiling
each can reach on this CPU: a loop that keeps many independent vectors of float32 accumulators
in registers and updates each as ``acc = acc·x + y`` for N steps, written once as a multiply
then an add (compiled without fast-math flags: never fused) and once with LLVM's ``contract``
flag on both (the flag of numba's ``fastmath={'contract'}``, so that LLVM fuses them), in
vectors of 16 lanes (zmm) and of 8 (ymm). GFLOP/s counts 2 flops per lane per step. The
machine code of every loop is counted before timing (``numba_gemm.loop_counts``): the kernel
must be what its name says, its accumulators never on the stack.

In the same interleaved rounds (every variant once per round, in an order shuffled per round),
numpy-blas and the numba backend run the forward product of tiny-GPT xl's linear layers, as
``benchmarks/kernels_vs_blas.py`` measures them (GFLOP/s of one training step's forward calls),
in this process, with every thread pool limited to one thread. Printed: each variant's median
GFLOP/s with its range, the ratios that matter (medians of per-round ratios), the machine, the
load average before and after.

    python benchmarks/fp_peak.py                          # 7 rounds
    python benchmarks/fp_peak.py --rounds 9 --json fp_peak.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from ptreg_backends.numba_gemm import loop_counts
from ptreg_backends.numba_vectors import _literals, _slot, _sum_move, _sums, _vector

# The four throughput loops: (lanes, fused).
PEAKS = {
    "mul+add 16 lanes": (16, False),
    "FMA 16 lanes": (16, True),
    "mul+add 8 lanes": (8, False),
    "FMA 8 lanes": (8, True),
}
BLAS, NUMBA = "numpy-blas xl forward", "numba xl forward"
SIGNATURE = "void(int64, float32, float32, float32[:, ::1], float32[:, ::1])"
OPS = ("vmulps", "vaddps", "vfmadd")
# acc·x + y with |x| < 1 stays near y / (1 - x): no overflow, no subnormals, however many steps
X, Y = np.float32(0.75), np.float32(0.25)


@intrinsic
def _scale_shift(  # pragma: no cover
    typingctx: Any, sums: Any, k: Any, vector_bits: Any, x: Any, y: Any, fused: Any
) -> tuple[Any, Callable[..., Any]] | None:
    """sums[k] = sums[k] · x + y in every lane: a multiply then an add, each rounded (fused 0),
    or the two with LLVM's ``contract`` flag, which lets it emit one FMA (fused 1)."""
    if not _literals(vector_bits, fused):
        return None
    bits, contract = vector_bits.literal_value, bool(fused.literal_value)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        vector = _vector(bits)
        spread = ir.Constant(ir.VectorType(ir.IntType(32), vector.count), [0] * vector.count)

        def broadcast(value: Any) -> Any:
            one = builder.insert_element(ir.Constant(vector, None), value, ir.Constant(ir.IntType(32), 0))
            return builder.shuffle_vector(one, ir.Constant(vector, None), spread)

        flags = ("contract",) if contract else ()
        slot = _slot(builder, args[0], args[1], bits)
        product = builder.fmul(builder.load(slot), broadcast(args[3]), flags=flags)
        builder.store(builder.fadd(product, broadcast(args[4]), flags=flags), slot)
        return context.get_dummy_value()

    return types.void(sums, k, vector_bits, x, y, fused), codegen


def build(count: int, lanes: int, fused: bool, prefer_bits: int | None = None, nogil: bool = False) -> Any:
    """The throughput loop: ``count`` accumulator vectors of ``lanes`` float32, read from row k of
    ``start``, updated ``steps`` times, written to row k of ``out`` (both count × lanes).

    ``prefer_bits`` is the prefer-vector-width the function is compiled with (default: the
    vectors' own width); the storage is the same bytes either way. With ``nogil`` it releases
    the GIL, so that several Python threads can run it at once (``step_ceilings.py``).
    """
    BITS, FUSED = lanes * 32, int(fused)
    PREFER = prefer_bits or BITS
    SLOTS = count * BITS // PREFER

    @numba.njit(fastmath=False, nogil=nogil)
    def peak(steps: int, x: float, y: float, start: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
        sums = _sums(SLOTS, PREFER)  # type: ignore[call-arg,var-annotated]  # numba passes typingctx itself
        for k in range(count):
            _sum_move(sums, k, BITS, start, k, 0, 0)
        for _ in range(steps):
            for k in range(count):
                _scale_shift(sums, k, BITS, x, y, FUSED)
        for k in range(count):
            _sum_move(sums, k, BITS, out, k, 0, 1)

    peak.compile(SIGNATURE)
    return peak


def starts(count: int, lanes: int, seed: int = 0) -> np.ndarray:
    """Distinct start values for every lane of every accumulator, in [-1, 1)."""
    return np.random.default_rng(seed).uniform(-1.0, 1.0, (count, lanes)).astype(np.float32)


def run(kernel: Any, steps: int, start: np.ndarray) -> np.ndarray:
    out = np.empty_like(start)
    kernel(steps, X, Y, start, out)
    return out


def reference(start: np.ndarray, steps: int) -> np.ndarray:
    """The multiply-then-add loop in NumPy: float32 arrays, each operation rounded on its own."""
    acc = start.copy()
    for _ in range(steps):
        acc = acc * X
        acc = acc + Y
    return acc


def counts(kernel: Any) -> dict[str, int]:
    return loop_counts(kernel.inspect_asm(kernel.signatures[0]), OPS)


def autovectorised_widths() -> dict[str, int]:
    """The registers LLVM's own vectoriser picks on this CPU for the same update, written as
    plain scalar code over an array (numba's default compilation)."""

    @numba.njit(fastmath=False)
    def update(acc: np.ndarray, x: float, y: float) -> None:  # pragma: no cover
        for i in range(acc.shape[0]):
            acc[i] = acc[i] * x + y

    update.compile("void(float32[::1], float32, float32)")
    found = loop_counts(update.inspect_asm(update.signatures[0]))
    return {width: found[f"vmulps {width}"] for width in ("xmm", "ymm", "zmm")}


def calibrate(kernel: Any, start: np.ndarray, seconds: float) -> int:
    """Steps for one call to take about ``seconds``."""
    steps = 100_000
    while True:
        begun = time.perf_counter()
        run(kernel, steps, start)
        took = time.perf_counter() - begun
        if took > 0.02:
            return max(1, round(steps * seconds / took))
        steps *= 4


def machine() -> dict[str, Any]:
    import llvmlite
    import llvmlite.binding as llvm
    from threadpoolctl import threadpool_info

    from ptreg.engine.environment import cpu_flags, cpu_model

    flags = cpu_flags() or set()
    keep = ("internal_api", "version", "architecture", "threading_layer", "num_threads", "filepath")
    return {
        "cpu_model": cpu_model(),
        "flags": {flag: flag in flags for flag in ("avx2", "fma", "avx512f", "avx512vl")},
        "llvm_host_cpu": llvm.get_host_cpu_name(),
        "numba": numba.__version__,
        "llvmlite": llvmlite.__version__,
        "llvm": ".".join(map(str, llvm.llvm_version_info)),
        "numpy": np.__version__,
        "blas": [{k: p.get(k) for k in keep} for p in threadpool_info() if p.get("user_api") == "blas"],
    }


def matmul_timer(backend: Any, calls: int) -> Callable[[], tuple[float, list[float]]]:
    """One sample of a backend's forward product over xl's linear layers: GFLOP/s of one
    training step's forward calls (layers weighted by calls per step), and every call's seconds."""
    from ptreg.records.configs import CONFIGS, flops, linear_shapes

    rng = np.random.default_rng(0)
    layers = []
    for layer in linear_shapes(CONFIGS["xl"]):
        a = rng.standard_normal((layer.m, layer.k), np.float32)
        b = rng.standard_normal((layer.k, layer.n), np.float32)
        layers.append(
            (layer.per_step, flops(layer.m, layer.k, layer.n), a, b, np.empty((layer.m, layer.n), np.float32))
        )
    for _, _, a, b, out in layers:  # warm-up: page faults, packing buffers, thread start-up
        backend.matmul_forward(a, b, out)

    def sample() -> tuple[float, list[float]]:
        work, seconds, every = 0.0, 0.0, []
        for per_step, f, a, b, out in layers:
            taken = []
            for _ in range(calls):
                begun = time.perf_counter()
                backend.matmul_forward(a, b, out)
                taken.append(time.perf_counter() - begun)
            every += taken
            work += per_step * f
            seconds += per_step * statistics.mean(taken)
        return work / seconds / 1e9, every

    return sample


def peak_timer(kernel: Any, steps: int, start: np.ndarray, calls: int) -> Callable[[], tuple[float, list[float]]]:
    work = 2.0 * start.size * steps

    def sample() -> tuple[float, list[float]]:
        every = []
        for _ in range(calls):
            begun = time.perf_counter()
            run(kernel, steps, start)
            every.append(time.perf_counter() - begun)
        return work * calls / sum(every) / 1e9, every

    return sample


def cell(values: list[float], digits: int = 1) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


BOUND = "mul+add 16-lane peak / OpenBLAS (the bound of a no-FMA kernel)"
EFFICIENCY = "numba kernel / mul+add 16-lane peak (its efficiency)"
TARGET = 0.6  # issue 20's target: numba at 0.6x of numpy-blas
RATIOS = {
    "OpenBLAS / FMA 16-lane peak (its efficiency)": (BLAS, "FMA 16 lanes"),
    EFFICIENCY: (NUMBA, "mul+add 16 lanes"),
    "mul+add peak / FMA peak, 16 lanes": ("mul+add 16 lanes", "FMA 16 lanes"),
    "mul+add peak / FMA peak, 8 lanes": ("mul+add 8 lanes", "FMA 8 lanes"),
    BOUND: ("mul+add 16 lanes", BLAS),
    "numba kernel / OpenBLAS (reached)": (NUMBA, BLAS),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (at least 5 for the figures)")
    parser.add_argument("--accumulators", type=int, default=24, help="independent accumulator vectors per loop")
    parser.add_argument("--seconds", type=float, default=0.1, help="target length of one throughput call")
    parser.add_argument("--calls", type=int, default=3, help="timed calls per sample (per layer for the products)")
    parser.add_argument("--json", type=Path, help="write every sample, the settings and the machine here")
    args = parser.parse_args()
    for option, value in (("--rounds", args.rounds), ("--calls", args.calls)):
        if value < 1:
            parser.error(f"{option} must be at least 1, got {value}")
    if not 1 <= args.accumulators <= 28:
        parser.error(f"--accumulators must be 1-28 (32 vector registers, x, y and room), got {args.accumulators}")
    if args.seconds <= 0:
        parser.error(f"--seconds must be positive, got {args.seconds}")

    from threadpoolctl import threadpool_limits

    from ptreg.engine.backends import create, set_backend_threads

    load_before = os.getloadavg()
    limiter = threadpool_limits(limits=1)  # as the engine's worker does, for every backend
    numba.set_num_threads(1)

    kernels, steps, asm = {}, {}, {}
    for name, (lanes, fused) in PEAKS.items():
        kernels[name] = build(args.accumulators, lanes, fused)
        asm[name] = counts(kernels[name])
    # Explicit vectors against LLVM's own preference on this CPU: the same 16-lane loop compiled
    # to prefer 256-bit vectors, and plain scalar code left to the vectoriser.
    asm["mul+add 16 lanes, prefer-vector-width=256"] = counts(build(args.accumulators, 16, False, 256))
    auto = autovectorised_widths()
    start = {name: starts(args.accumulators, lanes) for name, (lanes, _) in PEAKS.items()}
    for name, kernel in kernels.items():
        steps[name] = calibrate(kernel, start[name], args.seconds)

    backends = {BLAS: create("numpy-blas"), NUMBA: create("numba")}
    for backend in backends.values():
        set_backend_threads(backend, 1)
    samplers = {name: peak_timer(kernels[name], steps[name], start[name], args.calls) for name in PEAKS}
    samplers |= {name: matmul_timer(backend, args.calls) for name, backend in backends.items()}

    rates: dict[str, list[float]] = {name: [] for name in samplers}
    calls: dict[str, list[list[float]]] = {name: [] for name in samplers}
    orders = []
    order = list(samplers)
    shuffle = random.Random(0)
    for round_ in range(args.rounds):
        shuffle.shuffle(order)
        orders.append(list(order))
        for name in order:
            rate, every = samplers[name]()
            rates[name].append(rate)
            calls[name].append(every)
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    tile = backends[NUMBA].runtime_details()["numba_tile"]
    del limiter

    found = machine()
    flags = ", ".join(f"{flag} {'yes' if has else 'no'}" for flag, has in found["flags"].items())
    blas = "; ".join(
        f"{p['internal_api']} {p['version']} ({Path(p['filepath']).parent.name}, {p['architecture']}, {p['num_threads']} thread)"
        for p in found["blas"]
    )
    print(f"CPU: {found['cpu_model']} (LLVM sees {found['llvm_host_cpu']}); {flags}")
    print(f"numba {found['numba']}, llvmlite {found['llvmlite']}, LLVM {found['llvm']}; NumPy {found['numpy']}")
    print(f"BLAS: {blas}; numba's tile: {tile['tile']} ({tile['source']})")
    print(f"load average (1 min) before: {load_before[0]:.2f}, after: {load_after[0]:.2f}")
    print(f"\nThe loops' machine code ({args.accumulators} accumulators; the loop with most arithmetic):")
    for name, found_counts in asm.items():
        shown = ", ".join(f"{k} {v}" for k, v in found_counts.items() if v or k == "stack accesses")
        print(f"  {name}: {shown}")
    print(
        "  plain scalar code, LLVM's vectoriser: "
        + ", ".join(f"{width} {n}" for width, n in auto.items())
        + " (vector multiplies by register)"
    )
    print(f"\n{args.rounds} interleaved rounds, 1 thread: GFLOP/s, median (min-max)\n")
    print("| variant | steps per call | GFLOP/s |")
    print("| --- | --- | --- |")
    for name, values in rates.items():
        print(f"| {name} | {steps[name]:,} | {cell(values)} |" if name in steps else f"| {name} | | {cell(values)} |")
    print("\nRatios, median (min-max) of the per-round ratios\n")
    print("| ratio | value |")
    print("| --- | --- |")
    ratios = {}
    for label, (top, bottom) in RATIOS.items():
        ratios[label] = [t / b for t, b in zip(rates[top], rates[bottom], strict=True)]
        print(f"| {label} | {cell(ratios[label], 2)} |")
    bound = statistics.median(ratios[BOUND])
    print(
        f"\n{TARGET}x of OpenBLAS needs a no-FMA kernel at {TARGET / bound:.0%} of the mul+add peak; "
        f"numba's reached {statistics.median(ratios[EFFICIENCY]):.0%}"
    )
    if args.json:
        from ptreg.store.jsonio import atomic_write_text

        document = {
            "settings": {k: v for k, v in vars(args).items() if k != "json"},
            "machine": found,
            "numba_tile": tile,
            "load_average": {"before": load_before, "after": load_after},
            "asm": asm,
            "autovectorised": auto,
            "steps_per_call": steps,
            "orders": orders,
            "gflops": rates,
            "call_seconds": calls,
            "ratios": ratios,
        }
        atomic_write_text(args.json, json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
