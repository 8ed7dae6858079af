"""The numba backend's compiled loops: a BLIS-style product in naive's accumulation order.

One routine serves all three kernels: ``out[i, j] = sum over r ascending of L[i, r] · R[r, j]``
(start at 0.0; per r a float32 multiply, rounded, then a float32 add, rounded). The blocking:

- the reduction is cut into chunks of ``KC``; between chunks the running sums wait in ``out``
  (a float32 store and reload change no bits), so each output still sees r in ascending order;
- R is packed once per call, per chunk into ``NR``-wide strips (``KC × NR``, 16 KiB: stays
  in L1), and per chunk each ``MC``-row block of L into ``MR``-tall strips (``MC × KC``,
  96 KiB: stays in L2);
- the micro-kernel keeps an ``MR × NR`` tile of sums in registers for the whole chunk:
  per r it loads ``NR`` values of R and ``MR`` of L, and does ``MR·NR`` multiplies and adds,
  each add on its own output; 6×16 floats are 12 AVX2 registers, the rest hold operands;
- ``prange`` hands out (row block, column panel) tiles of the output: every output element is
  written by one thread only, and no sum is ever split between threads.

Bits: ``fastmath=False`` keeps LLVM's IEEE semantics and numba emits ``fmul`` and ``fadd``
without the ``contract`` flag, so they are never fused into an FMA; the parity gate checks
every result against naive bit for bit. Importing this module imports numba.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import prange
from numba.core import cgutils, config, types
from numba.extending import intrinsic

# Register tile and cache blocks. MR×NR = 6×16 uses 12 of the 16 AVX2 registers for sums;
# 4×16 and 3×32 were tried and LLVM kept them scalar or spilled (5 and 21 GFLOP/s against 63
# for 6×16 on one thread at the xl forward shape). KC×NR and MC×KC are sized for L1 and L2.
MR, NR = 6, 16
KC = 256
MC = 96
NC = 512


@contextlib.contextmanager
def slp_vectorizer() -> Iterator[None]:
    """Compile with LLVM's SLP vectorizer, which numba leaves off by default.

    The micro-kernel is straight-line code once its fixed loops are unrolled; only the SLP
    vectorizer turns it into vector multiplies and adds (without it: scalar code, ~5 GFLOP/s).
    The setting is read per compilation and changes no floating-point semantics.
    """
    # numba's config module sets its options as attributes at run time
    saved = getattr(config, "SLP_VECTORIZE")  # noqa: B009
    setattr(config, "SLP_VECTORIZE", 1)  # noqa: B010
    try:
        yield
    finally:
        setattr(config, "SLP_VECTORIZE", saved)  # noqa: B010


@intrinsic
def _register_tile(typingctx: Any) -> tuple[Any, Callable[..., Any]]:  # pragma: no cover - runs at compile time
    """Stack storage for the MR×NR sums, which LLVM promotes to registers.

    A NumPy array would live on the heap, where LLVM cannot keep it in registers.
    """
    signature = types.CPointer(types.float32)()

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        f32 = ir.FloatType()
        tile = cgutils.alloca_once(builder, ir.ArrayType(f32, MR * NR))
        return builder.bitcast(tile, f32.as_pointer())

    return signature, codegen


@numba.njit(inline="always", fastmath=False, cache=True)
def micro_kernel(l_strip: np.ndarray, r_strip: np.ndarray, tile: np.ndarray, first: bool) -> None:  # pragma: no cover
    """tile (MR×NR) = [0 if first else tile] + sum over r of l_strip[r, :] ⊗ r_strip[r, :]."""
    chunk = l_strip.shape[0] // MR
    acc = numba.carray(_register_tile(), (MR * NR,))  # type: ignore[call-arg]  # numba passes typingctx itself
    if first:
        for x in range(MR * NR):
            acc[x] = 0.0
    else:
        for ii in range(MR):
            for jj in range(NR):
                acc[ii * NR + jj] = tile[ii, jj]
    for r in range(chunk):
        b = r_strip[r * NR : r * NR + NR]
        for ii in range(MR):
            a = l_strip[r * MR + ii]
            for jj in range(NR):
                acc[ii * NR + jj] = acc[ii * NR + jj] + a * b[jj]
    for ii in range(MR):
        for jj in range(NR):
            tile[ii, jj] = acc[ii * NR + jj]


@numba.njit(parallel=True, fastmath=False, cache=True)
def pack_rhs(rhs: np.ndarray, packed: np.ndarray) -> None:  # pragma: no cover - runs compiled
    """All of rhs, chunk by chunk: chunk c, strip s is a (chunk length × NR) block at
    c·strips·NR·KC + s·NR·(chunk length), zero past the last column."""
    reduction, cols = rhs.shape
    strips = (cols + NR - 1) // NR
    rows_contiguous = rhs.strides[1] == rhs.itemsize  # else a transposed view
    for strip in prange(strips):
        width = min(NR, cols - strip * NR)
        for r0 in range(0, reduction, KC):
            chunk = min(KC, reduction - r0)
            base = (r0 // KC) * strips * NR * KC + strip * NR * chunk
            if width < NR:
                packed[base : base + NR * chunk] = 0.0
            # read along whichever index is contiguous in memory (4x faster packing for dB)
            if rows_contiguous:
                for r in range(chunk):
                    for jj in range(width):
                        packed[base + r * NR + jj] = rhs[r0 + r, strip * NR + jj]
            else:
                for jj in range(width):
                    for r in range(chunk):
                        packed[base + r * NR + jj] = rhs[r0 + r, strip * NR + jj]


@numba.njit(inline="always", fastmath=False, cache=True)
def pack_lhs(lhs: np.ndarray, packed: np.ndarray, i0: int, i1: int, r0: int, chunk: int) -> None:  # pragma: no cover
    """packed[strip][r][ii] = lhs[i0 + strip·MR + ii, r0 + r], zero past row i1."""
    for strip in range((i1 - i0 + MR - 1) // MR):
        base = strip * MR * chunk
        i = i0 + strip * MR
        for r in range(chunk):
            for ii in range(MR):
                packed[base + r * MR + ii] = lhs[i + ii, r0 + r] if i + ii < i1 else 0.0


@numba.njit(parallel=True, fastmath=False, cache=True)
def gemm(lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray, threads: int) -> None:  # pragma: no cover - runs compiled
    """out = lhs @ rhs with every output summed in ascending order of the reduction index.

    Two parallel regions per call, packing then computing: each tile runs all its chunks
    itself, so threads meet at no barrier between chunks (on this VM the two vCPUs are at
    times siblings of one core, and a thread spinning at a barrier slows the other).
    ``threads`` is numba's thread count, passed in: calling numba.get_num_threads() here
    would make the function uncacheable (it reads a dynamic global).
    """
    rows, reduction = lhs.shape
    cols = rhs.shape[1]
    if reduction == 0:
        out[:, :] = 0.0
        return
    strips = (cols + NR - 1) // NR
    packed_rhs = np.empty(((reduction + KC - 1) // KC) * strips * NR * KC, np.float32)
    pack_rhs(rhs, packed_rhs)
    col_panels = (cols + NC - 1) // NC
    # Row blocks of at most MC rows, as many as a multiple of the threads, of equal height
    # (in whole MR strips): a thread that gets one block more than another waits for nothing.
    row_blocks = (rows + MC - 1) // MC
    row_blocks = (row_blocks + threads - 1) // threads * threads
    mc = ((rows + row_blocks - 1) // row_blocks + MR - 1) // MR * MR
    row_blocks = (rows + mc - 1) // mc
    for t in prange(row_blocks * col_panels):
        i0 = (t % row_blocks) * mc
        i1 = min(i0 + mc, rows)
        j0 = (t // row_blocks) * NC
        j1 = min(j0 + NC, cols)
        packed_lhs = np.empty(((i1 - i0 + MR - 1) // MR) * MR * KC, np.float32)
        edge = np.empty((MR, NR), np.float32)  # sums of tiles cut by the matrix edge
        for r0 in range(0, reduction, KC):
            chunk = min(KC, reduction - r0)
            chunk_rhs = packed_rhs[(r0 // KC) * strips * NR * KC :]
            pack_lhs(lhs, packed_lhs, i0, i1, r0, chunk)
            for j in range(j0, j1, NR):
                strip = j // NR
                r_strip = chunk_rhs[strip * NR * chunk : (strip + 1) * NR * chunk]
                width = min(NR, j1 - j)
                for i in range(i0, i1, MR):
                    s = (i - i0) // MR
                    l_strip = packed_lhs[s * MR * chunk : (s + 1) * MR * chunk]
                    height = min(MR, i1 - i)
                    if height == MR and width == NR:
                        micro_kernel(l_strip, r_strip, out[i : i + MR, j : j + NR], r0 == 0)
                    else:
                        edge[:, :] = 0.0
                        edge[:height, :width] = out[i : i + height, j : j + width]
                        micro_kernel(l_strip, r_strip, edge, r0 == 0)
                        out[i : i + height, j : j + width] = edge[:height, :width]


# One compiled version: operands of any layout (transposed views included), C-contiguous out,
# and the thread count.
SIGNATURE = "void(float32[:, :], float32[:, :], float32[:, ::1], int64)"


def compile_gemm() -> Callable[[np.ndarray, np.ndarray, np.ndarray, int], None]:
    """Compile (or load from the disk cache) the one signature, with the SLP vectorizer on."""
    with slp_vectorizer():
        gemm.compile(SIGNATURE)
    # Any other signature would compile without the vectorizer; arrays convert to this one.
    gemm.disable_compile()
    return gemm
