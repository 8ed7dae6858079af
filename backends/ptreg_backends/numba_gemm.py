"""The numba backend's compiled loops: a BLIS-style product in naive's accumulation order,
with the register tile and the blocking chosen for the CPU it runs on.

One routine serves all three kernels: ``out[i, j] = sum over r ascending of L[i, r] · R[r, j]``
(start at 0.0; per r a float32 multiply, rounded, then a float32 add, rounded). The blocking,
all of it parameters of a ``Tile`` (see ``CANDIDATES``):

- the reduction is cut into chunks of ``kc``; between chunks the running sums wait in ``out``
  (a float32 store and reload change no bits), so each output still sees r in ascending order;
- R is packed once per call, per chunk into ``nr``-wide strips (``kc × nr``: stays in L1), and
  per chunk each block of at most ``mc`` rows of L into ``mr``-tall strips (``mc × kc``: stays
  in L2), once for all columns; each read along the operand's contiguous index;
- the micro-kernel keeps an ``mr × nr`` tile of sums in vector registers (``mr·nr/lanes`` of
  them) for the whole chunk: per r it loads ``nr`` values of R and broadcasts each of ``mr``
  values of L, and does one vector multiply and one vector add per vector of sums;
- ``prange`` hands out row blocks of the output, all columns each, their number a multiple of
  the threads and their heights equal to a strip: every output element is written by one
  thread only, and no sum is ever split between threads.

Bits: the micro-kernel's ``fmul`` and ``fadd`` are emitted by hand (``_sum_update``) without
fast-math flags, and the rest is compiled with ``fastmath=False``, so LLVM never fuses them
into an FMA, whatever the tile; the parity tests run every candidate against naive bit for bit.
Importing this module imports numba.

    python -m ptreg_backends.numba_gemm --tune    # time the candidates here, remember the fastest
    python -m ptreg_backends.numba_gemm           # the candidates, and this machine's choice
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba import prange
from numba.core import config

from .numba_cache import install_cache_locator
from .numba_tiles import (
    CANDIDATES,
    TILE_VARIABLE,
    TILES,
    Tile,
    cache_path,
    describe_choice,
    forced,
    machine_key,
    remember,
    remembered,
    runnable,
)
from .numba_vectors import _copy, _sum_fma, _sum_move, _sum_update, _sum_zero, _sums

install_cache_locator()  # before any kernel is defined: its cache is filed by the package's digest

Gemm = Callable[[np.ndarray, np.ndarray, np.ndarray, int], None]


DEFAULT = TILES["avx2-6x16"]


@contextlib.contextmanager
def slp_vectorizer() -> Iterator[None]:
    """Compile with LLVM's SLP vectorizer, which numba leaves off by default.

    The micro-kernel's vectors are written by hand; the packing loops are what it still
    vectorises. The setting is read per compilation and changes no floating-point semantics.
    """
    # numba's config module sets its options as attributes at run time
    saved = getattr(config, "SLP_VECTORIZE")  # noqa: B009
    setattr(config, "SLP_VECTORIZE", 1)  # noqa: B010
    try:
        yield
    finally:
        setattr(config, "SLP_VECTORIZE", saved)  # noqa: B010


# --------------------------------------------------------------------------- vector sums
# The micro-kernel's sums are written as explicit vectors of the candidate's width: a tile of
# MR × NR sums is MR·NR/W vectors of W lanes, each updated per step as sums + broadcast(a) · b,
# a vector multiply then a vector add (IEEE, no fast-math flags: never fused). Left to LLVM's
# SLP vectorizer, scalar sums vectorised well for small tiles only: for 8×32 and up, the
# unrolled scalar loop is over LLVM's unrolling cost, unrolled too late for the sums to be
# moved into registers, and every sum went through the stack on every step.


def _build(MR: int, NR: int, KC: int, MC: int, BITS: int, FUSED: bool = False) -> Any:
    """The routine for one blocking, its sizes compile-time constants of the closure.

    One function, no helpers: numba's disk cache keys a closure by the values it closes over,
    and only plain values give the same key in every process (a helper dispatcher would not),
    so each candidate is compiled once per machine and loaded after that. ``FUSED`` builds the
    fused twin: the same loops with each multiply and add free to become one FMA, not naive's
    bits, which no backend uses; ``benchmarks/parity_cost.py`` times it to show what the bits cost.
    """
    VW = BITS // 32  # lanes of one vector
    NV = NR // VW  # vectors per row of the tile
    COUNT = MR * NV  # vectors of sums

    @numba.njit(parallel=True, fastmath=False, cache=True)
    def gemm(lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray, threads: int) -> None:  # pragma: no cover
        """out = lhs @ rhs with every output summed in ascending order of the reduction index.

        Two parallel regions per call, packing then computing: each tile runs all its chunks
        itself, so threads meet at no barrier between chunks (on a VM the two vCPUs may be
        siblings of one core, and a thread spinning at a barrier slows the other).
        ``threads`` is numba's thread count, passed in: calling numba.get_num_threads() here
        would make the function uncacheable (it reads a dynamic global).
        """
        rows, reduction = lhs.shape
        cols = rhs.shape[1]
        if reduction == 0:
            out[:, :] = 0.0
            return
        # Pack all of rhs, chunk by chunk: chunk c, strip s is a (chunk length × NR) block at
        # c·strips·NR·KC + s·NR·(chunk length), zero past the last column.
        strips = (cols + NR - 1) // NR
        chunks = (reduction + KC - 1) // KC
        packed_rhs = np.empty(chunks * strips * NR * KC, np.float32)
        if rhs.strides[1] == rhs.itemsize:
            # Rows contiguous: read each row of a chunk from start to end (strip by strip, the
            # prefetcher follows; strip-major reads jump a row's stride every 128 bytes and
            # made packing a fifth of dB's time). Each thread takes a run of strips per chunk.
            groups = max(1, min(threads, strips))  # at least one, even with no columns
            per_group = (strips + groups - 1) // groups
            for t in prange(chunks * groups):
                r0 = (t // groups) * KC
                chunk = min(KC, reduction - r0)
                first = (t % groups) * per_group
                for r in range(chunk):
                    for strip in range(first, min(first + per_group, strips)):
                        base = (r0 // KC) * strips * NR * KC + strip * NR * chunk + r * NR
                        width = min(NR, cols - strip * NR)
                        if width == NR:
                            _copy(packed_rhs, base, NR, rhs, r0 + r, strip * NR)  # type: ignore[call-arg]  # numba passes typingctx
                        else:
                            for jj in range(NR):
                                packed_rhs[base + jj] = rhs[r0 + r, strip * NR + jj] if jj < width else 0.0
        else:
            # A transposed view: read down its columns (contiguous), strip by strip.
            for strip in prange(strips):
                width = min(NR, cols - strip * NR)
                for r0 in range(0, reduction, KC):
                    chunk = min(KC, reduction - r0)
                    base = (r0 // KC) * strips * NR * KC + strip * NR * chunk
                    if width < NR:
                        packed_rhs[base : base + NR * chunk] = 0.0
                    for jj in range(width):
                        for r in range(chunk):
                            packed_rhs[base + r * NR + jj] = rhs[r0 + r, strip * NR + jj]
        # Row blocks of at most MC rows, as many as a multiple of the threads, each a run of
        # whole MR strips, the runs differing by one strip at most: a thread waits for nothing.
        # A block's task runs every column, so its rows of lhs are packed once per chunk.
        all_strips = (rows + MR - 1) // MR
        row_blocks = (rows + MC - 1) // MC
        row_blocks = min((row_blocks + threads - 1) // threads * threads, all_strips)
        lhs_along_rows = lhs.strides[0] == lhs.itemsize  # a transposed view: contiguous down i
        for t in prange(row_blocks):
            i0 = t * all_strips // row_blocks * MR
            i1 = min((t + 1) * all_strips // row_blocks * MR, rows)
            whole_strips = (i1 - i0) // MR
            packed_lhs = np.empty(((i1 - i0 + MR - 1) // MR) * MR * KC, np.float32)
            edge = np.empty((MR, NR), np.float32)  # sums of tiles cut by the matrix edge
            sums = _sums(COUNT, BITS)  # type: ignore[call-arg,var-annotated]  # numba passes typingctx itself
            for r0 in range(0, reduction, KC):
                chunk = min(KC, reduction - r0)
                # pack this block of lhs: strip s, step r, row ii at s·MR·chunk + r·MR + ii,
                # reading along whichever index is contiguous; zero past row i1
                if lhs_along_rows:
                    for r in range(chunk):
                        for s in range(whole_strips):
                            _copy(packed_lhs, s * MR * chunk + r * MR, MR, lhs, i0 + s * MR, r0 + r)
                else:
                    for s in range(whole_strips):
                        for r in range(chunk):
                            for ii in range(MR):
                                packed_lhs[s * MR * chunk + r * MR + ii] = lhs[i0 + s * MR + ii, r0 + r]
                if i0 + whole_strips * MR < i1:
                    s = whole_strips
                    for r in range(chunk):
                        for ii in range(MR):
                            i = i0 + s * MR + ii
                            packed_lhs[s * MR * chunk + r * MR + ii] = lhs[i, r0 + r] if i < i1 else 0.0
                for j in range(0, cols, NR):
                    r_base = (r0 // KC) * strips * NR * KC + (j // NR) * NR * chunk
                    width = min(NR, cols - j)
                    for i in range(i0, i1, MR):
                        l_base = (i - i0) * chunk  # strip (i - i0) / MR of MR·chunk values
                        height = min(MR, i1 - i)
                        whole = height == MR and width == NR
                        if not whole:  # a tile cut by the matrix edge: its sums wait in edge
                            edge[:, :] = 0.0
                            edge[:height, :width] = out[i : i + height, j : j + width]
                        target = out if whole else edge
                        ti = i if whole else 0
                        tj = j if whole else 0
                        # the micro-kernel: MR×NR sums in registers for the whole chunk
                        if r0 == 0:
                            for x in range(COUNT):
                                _sum_zero(sums, x, BITS)
                        else:
                            for ii in range(MR):
                                for v in range(NV):
                                    _sum_move(sums, ii * NV + v, BITS, target, ti + ii, tj + v * VW, 0)
                        for r in range(chunk):
                            for ii in range(MR):
                                for v in range(NV):
                                    if FUSED:  # a constant of the closure: one branch is compiled
                                        _sum_fma(
                                            sums,
                                            ii * NV + v,
                                            BITS,
                                            packed_lhs,
                                            l_base + r * MR + ii,
                                            packed_rhs,
                                            r_base + r * NR + v * VW,
                                        )
                                    else:
                                        _sum_update(
                                            sums,
                                            ii * NV + v,
                                            BITS,
                                            packed_lhs,
                                            l_base + r * MR + ii,
                                            packed_rhs,
                                            r_base + r * NR + v * VW,
                                        )
                        for ii in range(MR):
                            for v in range(NV):
                                _sum_move(sums, ii * NV + v, BITS, target, ti + ii, tj + v * VW, 1)
                        if not whole:
                            out[i : i + height, j : j + width] = edge[:height, :width]

    return gemm


# One compiled version: operands of any layout (transposed views included), C-contiguous out,
# and the thread count.
SIGNATURE = "void(float32[:, :], float32[:, :], float32[:, ::1], int64)"


def dispatcher(tile: Tile, fused: bool = False) -> Any:
    """The numba dispatcher of ``tile``'s routine (or its fused twin), not compiled yet (one per
    tile per process)."""
    return _dispatcher(tile, bool(fused))  # one cache key however it is called


@functools.cache
def _dispatcher(tile: Tile, fused: bool) -> Any:
    if tile.nr % (tile.vector_bits // 32):
        raise ValueError(f"tile {tile.name}: strips must be whole vectors")
    return _build(tile.mr, tile.nr, tile.kc, tile.mc, tile.vector_bits, fused)


def compile_gemm(tile: Tile = DEFAULT, fused: bool = False) -> Gemm:
    """Compile (or load from numba's disk cache) ``tile``'s routine, with the SLP vectorizer on
    (for the packing loops), once per process; ``fused``: its twin free to use FMA (``_build``)."""
    return _compiled(tile, bool(fused))


@functools.cache
def _compiled(tile: Tile, fused: bool) -> Gemm:
    gemm = dispatcher(tile, fused)
    with slp_vectorizer():
        gemm.compile(SIGNATURE)
    # Any other signature would compile without the vectorizer; arrays convert to this one.
    gemm.disable_compile()
    compiled: Gemm = gemm
    return compiled


# --------------------------------------------------------------------------- choosing a tile

# The workload's shapes: tiny-GPT xl's linear layers (M = batch·context, K, N), where the
# kernels spend their time; a choice that wins there is the one that matters.
TUNING_SHAPES = ((1024, 256, 768), (1024, 256, 256), (1024, 256, 1024), (1024, 1024, 256))
TUNING_ROUNDS = 3
# First use must stay under a minute: compiling a candidate takes 5-15 s (once per machine:
# numba caches it on disk). Candidates not compiled within this budget are left untimed.
COMPILE_BUDGET_SECONDS = 40.0


def _operands(shape: tuple[int, int, int], rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(L, R, out) of the three kernels at one (M, K, N), laid out as the backend calls them."""
    m, k, n = shape
    a, b, dc = (rng.standard_normal(s, np.float32) for s in ((m, k), (k, n), (m, n)))
    return [
        (a, b, np.empty((m, n), np.float32)),  # forward
        (dc, b.T, np.empty((m, k), np.float32)),  # dA
        (a.T, dc, np.empty((k, n), np.float32)),  # dB
    ]


def time_candidates(
    tiles: tuple[Tile, ...],
    shapes: tuple[tuple[int, int, int], ...] = TUNING_SHAPES,
    rounds: int = TUNING_ROUNDS,
    threads: int = 1,
    budget: float | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, list[float]]:
    """GFLOP/s of each tile over all three kernels at ``shapes``, one value per round.

    Rounds are interleaved (every tile once per round, in turn), so the machine's drift lands
    on all of them alike; each value is the round's work over its time. Tiles left uncompiled
    when ``budget`` seconds have gone are not timed (an empty list).
    """
    numba.set_num_threads(threads)
    started = time.perf_counter()
    compiled = {}
    for tile in tiles:
        if budget is not None and time.perf_counter() - started > budget:
            if log:
                log(f"{tile.name}: not compiled, the {budget:.0f} s budget is spent")
            continue
        compiled[tile.name] = compile_gemm(tile)
        if log:
            log(f"{tile.name}: ready at {time.perf_counter() - started:.1f} s")
    rng = np.random.default_rng(0)
    work = [(ops, 2.0 * shape[0] * shape[1] * shape[2]) for shape in shapes for ops in _operands(shape, rng)]
    for gemm in compiled.values():  # first call: thread pool start-up, page faults
        gemm(*work[0][0], threads)
    rates: dict[str, list[float]] = {tile.name: [] for tile in tiles}
    for _ in range(rounds):
        for name, gemm in compiled.items():
            seconds, flops = 0.0, 0.0
            for (lhs, rhs, out), f in work:
                begun = time.perf_counter()
                gemm(lhs, rhs, out, threads)
                seconds += time.perf_counter() - begun
                flops += f
            rates[name].append(flops / seconds / 1e9)
    return rates


def tune(
    path: Path | None = None, log: Callable[[str], None] | None = None, budget: float | None = COMPILE_BUDGET_SECONDS
) -> dict[str, Any]:
    """Time the candidates this CPU can run, remember the fastest (median over rounds) in the
    per-machine cache, and return its entry (which names any candidate left untimed)."""
    started = time.perf_counter()
    candidates = tuple(tile for tile in CANDIDATES if runnable(tile))
    rates = time_candidates(candidates, budget=budget, log=log)
    medians = {name: statistics.median(values) for name, values in rates.items() if values}
    best = max(medians, key=lambda name: medians[name])
    entry = {
        "key": machine_key(),
        "tile": best,
        "params": asdict(TILES[best]),
        "gflops_median": {name: round(value, 2) for name, value in medians.items()},
        "untimed": [tile.name for tile in CANDIDATES if tile.name not in medians],
        "shapes": [list(shape) for shape in TUNING_SHAPES],
        "threads": 1,
        "rounds": TUNING_ROUNDS,
        "tuned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tuning_seconds": round(time.perf_counter() - started, 1),
    }
    try:
        entry["file"] = str(remember(entry, path))
    except OSError as error:  # an unwritable cache costs the next process a new timing, no more
        entry["file"] = None
        if log:
            log(f"not remembered: {error}")
    return entry


@dataclass(frozen=True)
class Choice:
    """The tile in use and where it came from."""

    tile: Tile
    source: str  # "PTREG_NUMBA_TILE", "cache" or "tuned" (just now)
    cache_file: str | None  # where it is remembered (None: forced, or the cache was not writable)

    def details(self) -> dict[str, Any]:
        return {"tile": self.tile.name, "source": self.source, "params": asdict(self.tile), "cache": self.cache_file}


def choose(log: Callable[[str], None] | None = None) -> Choice:
    """PTREG_NUMBA_TILE when set (ValueError naming the candidates if it names none), else this
    machine's remembered tile, else tune now and remember it."""
    tile = forced()
    if tile is not None:
        return Choice(tile, TILE_VARIABLE, None)
    path = cache_path()
    entry = remembered(path)
    if entry is not None:
        return Choice(TILES[entry["tile"]], "cache", str(path))
    entry = tune(path, log)
    return Choice(TILES[entry["tile"]], "tuned", entry["file"])


VECTOR_OPS = ("vmulps", "vaddps")


def loop_counts(code: str, ops: tuple[str, ...] = VECTOR_OPS) -> dict[str, int]:
    """What the hottest loop of ``code`` (x86 assembly, as ``inspect_asm`` gives it) is made of.

    The loop is the one with the most instructions of ``ops`` (instruction names, each matched
    with any suffix: ``vfmadd`` counts vfmadd231ps and its kin); counted in it: each op by
    register width, and stack accesses (a value spilled to memory); and fused multiply-adds
    anywhere in ``code``.
    """
    import re

    names = {op: rf"\b{op}\w*\b" for op in ops}
    loops = re.findall(r"\n(\.LBB\w+):\n((?:(?!\n\.LBB).)*?\bj\w+\s+\1\n)", code, re.S)
    body = max(
        (b for _, b in loops), key=lambda b: sum(len(re.findall(name, b)) for name in names.values()), default=""
    )
    found = {
        f"{op} {width}": len(re.findall(rf"{name}[^\n]*%{width}\d", body))
        for op, name in names.items()
        for width in ("xmm", "ymm", "zmm")
    }
    found["stack accesses"] = len(re.findall(r"\(%rsp\)", body))
    found["fused multiply-adds"] = len(re.findall(r"\bvfn?m(?:add|sub)\w*ps\b", code))
    return found


def inner_loop(tile: Tile) -> dict[str, int]:
    """What the micro-kernel's loop compiled to, from the machine code of a fresh compilation
    (numba shows none for code loaded from its disk cache: use an empty NUMBA_CACHE_DIR; and
    NUMBA_CPU_NAME to compile for a CPU other than this one, to inspect, not run).

    The loop is the one with the most vector multiplies and adds; counted in it: multiplies and
    adds by register width, stack accesses (a sum spilled to memory), and fused multiply-adds
    anywhere (``loop_counts``).
    """
    gemm = dispatcher(tile)
    compile_gemm(tile)
    code = "\n".join(gemm.inspect_asm().values())
    if not code:
        raise ValueError(f"{tile.name} was loaded from numba's disk cache: no machine code to inspect")
    return loop_counts(code)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m ptreg_backends.numba_gemm",
        description="The numba backend's register tiles: time them on this machine and remember the fastest.",
    )
    parser.add_argument("--tune", action="store_true", help="time the candidates now and remember the fastest")
    parser.add_argument("--inspect", metavar="TILE", help="count what the micro-kernel's loop compiled to")
    arguments = parser.parse_args(argv)
    if arguments.inspect:
        if arguments.inspect not in TILES:
            parser.error(f"--inspect: {arguments.inspect!r} is not a candidate (candidates: {', '.join(TILES)})")
        try:
            counts = inner_loop(TILES[arguments.inspect])
        except ValueError as error:
            parser.error(f"{error}; set NUMBA_CACHE_DIR to an empty folder")
        target = getattr(config, "CPU_NAME", None) or "this CPU"
        print(f"{arguments.inspect} compiled for {target}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        return 0

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if arguments.tune:
        entry = tune(log=log, budget=None)  # asked for: every candidate, however long compiling takes
        for name, value in sorted(entry["gflops_median"].items(), key=lambda item: -item[1]):
            print(f"{name:>14}  {value:6.1f} GFLOP/s{'  <- chosen' if name == entry['tile'] else ''}")
        for name in entry["untimed"]:
            print(
                f"{name:>14}  not timed ({'no ' + str(TILES[name].needs) if not runnable(TILES[name]) else 'budget'})"
            )
        print(
            f"remembered in {entry['file']} ({entry['tuning_seconds']} s, 1 thread, median of {TUNING_ROUNDS} rounds)"
        )
        return 0
    for tile in CANDIDATES:
        needs = f", needs {tile.needs}" if tile.needs else ""
        print(
            f"{tile.name:>14}  {tile.mr}x{tile.nr} in {tile.vector_bits}-bit vectors, kc={tile.kc} mc={tile.mc}{needs}"
        )
    print(f"this machine: {describe_choice()}; cache {cache_path()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
