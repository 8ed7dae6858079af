"""Cache-blocked NumPy: naive's rank-1 updates, done one output tile at a time.

All three kernels are one loop: ``out[i, j] = sum over r ascending of L[r, i] · R[r, j]``
with the reduction index r outermost per tile, where

- forward: L = Aᵀ (copied contiguous), R = B,               r = k
- dA:      L = dCᵀ (copied),           R = Bᵀ (copied),     r = n
- dB:      L = A,                      R = dC,              r = m

Each output still sees exactly naive's sequence (start at 0.0; per r a float32 multiply into
scratch, then a float32 add), so the bits are naive's. Where the speed comes from: every
operand slice is contiguous, the tile accumulator and its scratch
are contiguous and stay in L2 for the whole reduction, and the tiles are wide (NumPy pays per
row of a broadcast multiply, see the tile table below and ``_rank1_sum``).

Threads: tiles are independent outputs, so ``set_threads(n)`` hands them to n Python threads;
NumPy releases the GIL inside each ufunc's loop, so the threads overlap. One thread is bounded
by NumPy's ufunc loops themselves: a float32 multiply or add over an L2-resident array runs at
about 8 G elements/s here (0.12-0.13 ns per element at 64 Ki elements, measured with
``np.multiply(x, y, out=z)``), so two ufunc passes per multiply-add cap a thread near 8 GFLOP/s
whatever the tiling.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# Chosen at the xl fc shape M=1024, K=256, N=1024 on this 2-core AMD EPYC (1 MiB L2 per
# core), one thread, best of 3 calls; GFLOP/s forward / dA / dB (naive: 5.1 / 4.7 / 4.9):
#   python -m ptreg_backends.blocked_numpy       (no arguments: this grid; or e.g. 64x1024)
# (an earlier session's figures; the machine's speed drifts by a third from hour to hour)
#   tile_n:     256                512                1024
#   tile_m 16   2.9  2.2  2.2      3.6  4.8  5.1      7.8  7.0  7.7
#   tile_m 64   5.6  5.3  5.6      8.4  7.5  7.9     10.7  8.8 10.2
#   tile_m 256  6.9  6.5  6.9      9.1  7.9  9.1     10.6  8.9 10.9
# Width is what counts (NumPy pays per row of a broadcast multiply); past 64 rows it is flat,
# and 64×1024 keeps the tile and its scratch (512 KiB) inside L2. Tiles are laid over the
# output's wide orientation (dA at xl is computed as its 256×1024 transpose, see _rank1_sum).
DEFAULT_TILE_M = 64
DEFAULT_TILE_N = 1024
# With several threads the tiles grow: every ufunc call hands the GIL over, and in this VM a
# hand-over costs microseconds, so small calls serialise the threads. Same shape and output,
# 2 threads (``--threads 2``), GFLOP/s forward / dA / dB; one thread gave 7.3 / 5.9 / 6.8 at
# 64×1024 in the same minute:
#   64×1024: 7.2 6.5 9.6    128×1024: 10.1 8.9 10.0    256×1024: 11.6 8.5 10.1    512×1024: 12.3 8.4 9.7
THREADED_TILE_M = 256
# ...but only where a thread's tile is large enough to pay for the hand-overs: below this many
# elements per ufunc call the GIL hand-overs cost more than the second core gives, and the
# product runs on the calling thread alone (small dB, 96×288 out of a 1,024-long reduction,
# split in two 48×288 tiles: 2.1 GFLOP/s on two threads against 3.5 on one).
MIN_THREADED_TILE = 32 * 1024
# NumPy (2.4 here) routes broadcast rows shorter than about bufsize/3 through its iterator
# buffers, which halved the speed here (xl forward, 64×1024: 5.3 vs 9.4 GFLOP/s); a small
# bufsize (context-local, so per thread; restored after; no casting, so the same bits) lets the
# ufunc loop run on the arrays themselves.
_BUFSIZE = 64


class BlockedNumpyBackend:
    name = "blocked-numpy"
    description = (
        "NumPy rank-1 updates per cache-sized output tile, tiles on threads, in naive's order (bit-identical)."
    )
    order_preserving = True
    thread_control = (
        "Python threads over output tiles (NumPy releases the GIL in ufunc loops), set per backend; "
        "one thread where a thread's tile would be under 32 Ki elements"
    )

    def __init__(self, tile_m: int | None = None, tile_n: int = DEFAULT_TILE_N):
        """``tile_m`` None: 64 rows on one thread, 256 on several (the tables above)."""
        if (tile_m is not None and tile_m < 1) or tile_n < 1:
            raise ValueError(f"tile sizes must be positive, got {tile_m}x{tile_n}")
        self.tile_m = tile_m
        self.tile_n = int(tile_n)
        self.threads = 1
        self._pool: ThreadPoolExecutor | None = None

    @staticmethod
    def default_threads() -> int:
        return os.cpu_count() or 1

    @staticmethod
    def unavailable_reason() -> str | None:
        return None

    def set_threads(self, n: int) -> int:
        used = max(1, min(int(n), os.cpu_count() or 1))  # more threads than cores only queue
        if used != self.threads and self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self.threads = used
        if used > 1:
            self._pool = ThreadPoolExecutor(used, thread_name_prefix="blocked-numpy")
        return used

    def matmul_forward(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._rank1_sum(np.ascontiguousarray(a.T), b, out)

    def matmul_backward_da(self, dc: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._rank1_sum(np.ascontiguousarray(dc.T), np.ascontiguousarray(b.T), out)

    def matmul_backward_db(self, a: np.ndarray, dc: np.ndarray, out: np.ndarray) -> None:
        self._rank1_sum(a, dc, out)

    def _rank1_sum(self, lhs_t: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
        """out[i, j] = sum over r ascending of lhs_t[r, i] · rhs[r, j]."""
        rows, cols = out.shape
        if out.size == 0:
            return
        if rows > cols:
            # Broadcast multiplies pay per row, so build the wide orientation outᵀ[j, i] =
            # sum of rhs[r, j] · lhs_t[r, i] and copy it back (x·y == y·x exactly in IEEE).
            out_t = np.empty((cols, rows), dtype=out.dtype)
            self._rank1_sum(rhs, lhs_t, out_t)
            out[...] = out_t.T
            return
        self._tiles(lhs_t, rhs, out)

    def _tiles(self, lhs_t: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
        rows, cols = out.shape
        tile_m = self.tile_m or (DEFAULT_TILE_M if self._pool is None else THREADED_TILE_M)
        # at least one tile per thread
        tm, tn = min(tile_m, -(-rows // self.threads)), min(self.tile_n, cols)
        if self._pool is not None and tm * tn < MIN_THREADED_TILE:  # too small to share: one thread
            tm, tn = min(DEFAULT_TILE_M if self.tile_m is None else self.tile_m, rows), min(self.tile_n, cols)
            self._tile_run(
                lhs_t, rhs, out, [(i0, j0) for i0 in range(0, rows, tm) for j0 in range(0, cols, tn)], tm, tn
            )
            return
        tiles = [(i0, j0) for i0 in range(0, rows, tm) for j0 in range(0, cols, tn)]
        if self._pool is None or len(tiles) == 1:
            self._tile_run(lhs_t, rhs, out, tiles, tm, tn)
            return
        # tile t goes to thread t mod n: neighbouring tiles (similar sizes) spread over threads
        shares = [tiles[t :: self.threads] for t in range(self.threads)]
        futures = [self._pool.submit(self._tile_run, lhs_t, rhs, out, share, tm, tn) for share in shares if share]
        for future in futures:
            future.result()

    @staticmethod
    def _tile_run(
        lhs_t: np.ndarray, rhs: np.ndarray, out: np.ndarray, tiles: list[tuple[int, int]], tm: int, tn: int
    ) -> None:
        rows, cols = out.shape
        # contiguous accumulator and product scratch, one pair per thread; edge tiles use a corner
        acc_buf = np.empty((tm, tn), dtype=out.dtype)
        term_buf = np.empty((tm, tn), dtype=out.dtype)
        saved = np.getbufsize()
        np.setbufsize(_BUFSIZE)  # per thread (see _rank1_sum): set here, restored below
        try:
            for i0, j0 in tiles:
                i1, j1 = min(i0 + tm, rows), min(j0 + tn, cols)
                acc = acc_buf[: i1 - i0, : j1 - j0]
                term = term_buf[: i1 - i0, : j1 - j0]
                lhs_panel = lhs_t[:, i0:i1, None]
                rhs_panel = rhs[:, None, j0:j1]
                acc.fill(0.0)
                for r in range(lhs_t.shape[0]):
                    np.multiply(lhs_panel[r], rhs_panel[r], out=term)
                    np.add(acc, term, out=acc)
                out[i0:i1, j0:j1] = acc
        finally:
            np.setbufsize(saved)


def _sweep(tiles: list[str], threads: int = 1, m: int = 1024, k: int = 256, n: int = 1024) -> None:
    """Print GFLOP/s (best of 3) of forward, dA, dB for each ``MxN`` tile: the tables above."""
    import time

    from ptreg.engine.backends import METHOD_OF_KERNEL, kernel_shapes
    from ptreg.records.configs import flops
    from ptreg.records.run_results import KERNELS

    rng = np.random.default_rng(0)
    for tile in tiles:
        backend = BlockedNumpyBackend(*(int(v) for v in tile.split("x")))
        backend.set_threads(threads)
        rates = []
        for kernel in KERNELS:
            x_shape, y_shape, out_shape = kernel_shapes(kernel, m, k, n)
            x, y = rng.standard_normal(x_shape, np.float32), rng.standard_normal(y_shape, np.float32)
            out, run = np.empty(out_shape, np.float32), getattr(backend, METHOD_OF_KERNEL[kernel])
            seconds = []
            for _ in range(3):
                start = time.perf_counter()
                run(x, y, out)
                seconds.append(time.perf_counter() - start)
            rates.append(flops(m, k, n) / min(seconds) / 1e9)
        print(f"{tile:>9}", *(f"{r:6.2f}" for r in rates), flush=True)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="GFLOP/s of forward, dA, dB at the xl fc shape per tile size.")
    parser.add_argument("tiles", nargs="*", default=[f"{tm}x{tn}" for tm in (16, 64, 256) for tn in (256, 512, 1024)])
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args()
    try:
        _sweep(arguments.tiles, arguments.threads)
    except ValueError as error:  # a tile like "0x5" or "ax1"
        parser.error(f"tiles are MxN with positive integers: {error}")
