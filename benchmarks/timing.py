"""Timing shared by the benchmark scripts: interleaved repeats and a markdown table of medians.

Variants run interleaved (A, B, C, A, B, C, ...) so that drift on a shared, noisy machine hits
all of them alike; a ratio is only ever taken between variants of the same run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def interleaved(
    variants: dict[str, Callable[[], object]], repeats: int, before_each: Callable[[str], None] | None = None
) -> dict[str, list[float]]:
    """Seconds of each variant, ``repeats`` times, in interleaved order."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            if before_each is not None:
                before_each(name)
            start = time.perf_counter()
            run()
            samples[name].append(time.perf_counter() - start)
    return samples


def table(
    samples: dict[str, list[float]], label: str, *, reference: str, speedup: bool = False, digits: int = 3
) -> str:
    """Median, min and max per variant, and each median against the ``reference`` variant:
    as ``reference / median`` when ``speedup`` (higher is faster), else ``median / reference``."""
    base = statistics.median(samples[reference])
    ratio_name = f"speedup vs {reference}" if speedup else f"/ {reference}"
    lines = [f"| {label} | median | min | max | {ratio_name} |", "| --- | --- | --- | --- | --- |"]
    for name, values in samples.items():
        median = statistics.median(values)
        ratio = base / median if speedup else median / base
        lines.append(
            f"| {name} | {median:.{digits}f} | {min(values):.{digits}f} | {max(values):.{digits}f} | {ratio:.2f}x |"
        )
    return "\n".join(lines)
