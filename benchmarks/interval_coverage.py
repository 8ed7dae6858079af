"""How often a 95% interval holds the truth, at the repeat counts ptreg takes.

Draws n log-noise values around a true center of 0 (normal with a 3% standard deviation, and
Student's t with 3 degrees of freedom for heavy tails) and counts how often each method's
interval holds 0: the percentile bootstrap of the median (scipy.stats.bootstrap) and Student's
t on the log values (what ptreg uses, ``ptreg/engine/stats.py``). Seeded; no timing.

    python benchmarks/interval_coverage.py --draws 2000
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats


def bootstrap_median(x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    found = stats.bootstrap(
        (x,), np.median, confidence_level=0.95, n_resamples=999, method="percentile", rng=rng, vectorized=True
    )
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


def student_t(x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    found = stats.ttest_1samp(x, 0.0).confidence_interval(0.95)
    return float(found.low), float(found.high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 4, 5, 8, 12])
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    print(f"coverage of 95% intervals over {args.draws} seeded draws (the share that holds the true center)")
    print("| repeats | noise | bootstrap of the median | Student's t on logs |")
    print("| --- | --- | --- | --- |")
    for n in args.sizes:
        for noise in ("normal", "t3"):
            held = {"boot": 0, "t": 0}
            for _ in range(args.draws):
                x = rng.normal(0, 0.03, n) if noise == "normal" else rng.standard_t(3, n) * 0.03
                for name, method in (("boot", bootstrap_median), ("t", student_t)):
                    low, high = method(x, rng)
                    held[name] += low <= 0 <= high
            print(f"| {n} | {noise} | {held['boot'] / args.draws:.3f} | {held['t'] / args.draws:.3f} |")


if __name__ == "__main__":
    main()
