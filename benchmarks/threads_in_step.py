"""A kernel right after a BLAS call, as inside the training step: does BLAS's idle pool slow it?

    python benchmarks/threads_in_step.py                 # 2 threads, 7 interleaved rounds
    python benchmarks/threads_in_step.py --rounds 9 --threads 2

In the tiny-GPT step, attention's own products run on NumPy's BLAS and the linear layers on
the backend. This times one xl forward product (M=1024, K=256, N=1024) of the numba backend and
of numpy-blas in three situations: alone (after an idle pause), right after attention's batched
products on BLAS (xl: 64 heads·batch, 128×32 by 32×128), and the same with the BLAS pool's spin
wait cut to its least (OPENBLAS_THREAD_TIMEOUT=4, the rule)
against OpenBLAS's default (2^28 cycles). Each (setting, backend) runs in a fresh process (the
variable is read when OpenBLAS loads); rounds are interleaved, and each figure is the median
GFLOP/s over rounds of the median of 20 calls in a process, with the min-max over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SETTINGS = {
    "OPENBLAS_THREAD_TIMEOUT=28 (default)": "28",
    "OPENBLAS_THREAD_TIMEOUT=20": "20",
    "OPENBLAS_THREAD_TIMEOUT=4": "4",
}
CALLS = 20


def child(backend: str, threads: int) -> dict[str, float]:
    """In the fresh process: GFLOP/s of the forward product alone and after attention's products."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from ptreg.engine.backends import create, set_backend_threads

    limiter = threadpool_limits(limits=threads)  # as the worker does, for every backend
    kernels = create(backend)
    set_backend_threads(kernels, threads)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((1024, 256), np.float32), rng.standard_normal((256, 1024), np.float32)
    out = np.empty((1024, 1024), np.float32)
    q, k = rng.standard_normal((64, 128, 32), np.float32), rng.standard_normal((64, 32, 128), np.float32)
    scores = np.empty((64, 128, 128), np.float32)
    flops = 2.0 * 1024 * 256 * 1024
    found: dict[str, float] = {}
    # small's fc dB (96×384 out of a 1,024-long reduction), back to back: a pool that sleeps
    # between calls must be woken for each
    x, dy = rng.standard_normal((1024, 96), np.float32), rng.standard_normal((1024, 384), np.float32)
    grad = np.empty((96, 384), np.float32)
    rates = []
    for _ in range(CALLS + 2):
        start = time.perf_counter()
        kernels.matmul_backward_db(x, dy, grad)
        rates.append(2.0 * 1024 * 96 * 384 / (time.perf_counter() - start) / 1e9)
    found["small dB, back to back"] = statistics.median(rates[2:])
    for case in ("alone", "after BLAS"):
        rates = []
        for _ in range(CALLS + 2):
            if case == "alone":
                time.sleep(0.2)  # long enough for any pool to have gone to sleep
            else:
                np.matmul(q, k, out=scores)
            start = time.perf_counter()
            kernels.matmul_forward(a, b, out)
            rates.append(flops / (time.perf_counter() - start) / 1e9)
        found[case] = statistics.median(rates[2:])
    del limiter
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--backends", nargs="+", default=["numba", "numpy-blas"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.threads)))
        return 0
    if args.rounds < 1 or args.threads < 1:
        parser.error("--rounds and --threads must be at least 1")
    found: dict[tuple[str, str, str], list[float]] = {}
    for round_ in range(args.rounds):
        for label, value in SETTINGS.items():
            for backend in args.backends:
                env = {**os.environ, "OPENBLAS_THREAD_TIMEOUT": value, "OMP_WAIT_POLICY": "PASSIVE"}
                command = [sys.executable, __file__, "--child", backend, "--threads", str(args.threads)]
                done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
                if done.returncode != 0:
                    raise SystemExit(f"threads_in_step: {backend} under {label} failed: {done.stderr.strip()[-400:]}")
                for case, rate in json.loads(done.stdout.splitlines()[-1]).items():
                    found.setdefault((label, backend, case), []).append(rate)
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"{args.threads} thread(s); GFLOP/s of xl's forward product, median (min-max) over {args.rounds} rounds")
    for (label, backend, case), rates in found.items():
        print(f"{label:32} {backend:11} {case:11} {statistics.median(rates):6.1f} ({min(rates):.1f}-{max(rates):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
