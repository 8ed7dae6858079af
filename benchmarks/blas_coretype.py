"""How much OpenBLAS's kernel choice moves numpy-blas: one product of tiny-GPT xl's fc layer,
(1024×256)·(256×1024) in float32 on one thread, in a fresh process per OPENBLAS_CORETYPE value
(unset: OpenBLAS picks by the CPU), the values interleaved round by round.

OpenBLAS reads the variable once, when NumPy loads it, so each sample is its own process. This
matters to every ratio over numpy-blas: an environment that sets OPENBLAS_CORETYPE=Haswell on an
AVX-512 CPU holds the peer backend to AVX2 kernels.

    python benchmarks/blas_coretype.py --rounds 3 --coretypes unset Haswell SkylakeX
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CHILD = """
import statistics, time, numpy as np
from threadpoolctl import threadpool_info, threadpool_limits
threadpool_limits(1)
rng = np.random.default_rng(0)
a = rng.standard_normal((1024, 256), np.float32)
b = rng.standard_normal((256, 1024), np.float32)
out = np.empty((1024, 1024), np.float32)
for _ in range(20):  # warm-up: pages, packing buffers
    np.matmul(a, b, out=out)
rates = []
for _ in range(7):
    begun = time.perf_counter()
    for _ in range(20):
        np.matmul(a, b, out=out)
    rates.append(20 * 2 * 1024 * 256 * 1024 / (time.perf_counter() - begun) / 1e9)
core = [p["architecture"] for p in threadpool_info() if p.get("user_api") == "blas"]
print(statistics.median(rates), core[-1] if core else "unknown")
"""


def sample(coretype: str) -> tuple[float, str]:
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype != "unset":
        env["OPENBLAS_CORETYPE"] = coretype
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    rate, core = done.stdout.split()
    return float(rate), core


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--coretypes", nargs="+", default=["unset", "Haswell", "SkylakeX"])
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {c: [] for c in args.coretypes}
    cores: dict[str, str] = {}
    for _ in range(args.rounds):
        for coretype in args.coretypes:
            rate, cores[coretype] = sample(coretype)
            rates[coretype].append(rate)
    load_after = os.getloadavg()
    print(f"load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print("OPENBLAS_CORETYPE  kernels   GFLOP/s, median of each process's median (min-max)")
    for coretype, values in rates.items():
        shown = f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"
        print(f"{coretype:<17}  {cores[coretype]:<8}  {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
