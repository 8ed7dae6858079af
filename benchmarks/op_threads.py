"""The numba backend's memory-bound ops, serial kernel against parallel, at 2^14 to 2^22 elements,
on a set thread count: from what size the parallel kernel pays on this machine.

    python benchmarks/op_threads.py                         # numba's threads, 15 rounds
    python benchmarks/op_threads.py --threads 2 --rounds 25 --json op_threads.json
    python benchmarks/op_threads.py --op layernorm --op bias_gelu --rounds 5
    python benchmarks/op_threads.py --remember              # also keep the thresholds for the backend

Each kernel (an op's forward or backward) is called through the backend's method at xl's row
widths, serial and parallel alternating within each round (``ptreg_backends.numba_op_timing``);
a cell is the median over rounds of the µs a call, the ratio the geometric mean of each round's
parallel / serial (below 1: parallel is faster), the center of its 95% interval (``ptreg.engine.stats``,
rounds taken in order). The thresholds under the table (where the interval lies below 1 from
that size up) are what the backend would choose from
this measurement (``ptreg_backends.numba_threads``); ``--remember`` writes them to the cache the
backend reads, for this machine and thread count (every op and size must have been measured).
Errors are one line, ``op_threads: error: ...``, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import numba

from ptreg.engine.environment import cpu_model
from ptreg.engine.stats import log_interval
from ptreg.store.jsonio import atomic_write_text
from ptreg_backends import numba_threads
from ptreg_backends.numba_op_timing import PARALLEL, SERIAL, measure, ratios_of, round_ratios
from ptreg_backends.numba_step import NumbaStepOps
from ptreg_backends.numba_threads import KERNELS, SIZES


def op_of(kernel: str) -> str:
    """The op a kernel belongs to: its name without _forward, _backward, _update or _add."""
    for suffix in ("_forward", "_backward", "_update", "_add"):
        if kernel.endswith(suffix):
            return kernel.removesuffix(suffix)
    return kernel


OPS = tuple(dict.fromkeys(op_of(k) for k in KERNELS))


def rows_of(samples: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for kernel, by_size in samples.items():
        for size, by_way in by_size.items():
            ratios = round_ratios(by_way)
            interval = log_interval(ratios, in_order=True)
            rows.append(
                {
                    "op": op_of(kernel),
                    "kernel": kernel,
                    "elements": size,
                    "serial_us": 1e6 * statistics.median(by_way[SERIAL]),
                    "parallel_us": 1e6 * statistics.median(by_way[PARALLEL]),
                    # the interval's own center (the mean of the log ratios): a median of ratios
                    # can fall outside it when the rounds are bimodal
                    "ratio": statistics.geometric_mean(ratios) if ratios and min(ratios) > 0 else None,
                    "ratio_low": interval[0] if interval else None,
                    "ratio_high": interval[1] if interval else None,
                    "rounds": len(ratios),
                }
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| kernel | elements | serial µs | parallel µs | parallel / serial (95% interval) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        shown = "unknown" if row["ratio"] is None else f"{row['ratio']:.2f}"
        if row["ratio_low"] is not None:
            shown += f" ({row['ratio_low']:.2f}-{row['ratio_high']:.2f})"
        size = f"2^{row['elements'].bit_length() - 1}"
        lines.append(f"| {row['kernel']} | {size} | {row['serial_us']:.1f} | {row['parallel_us']:.1f} | {shown} |")
    return "\n".join(lines)


class _OneLine(argparse.ArgumentParser):
    """An unusable setting is one line, no usage text, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"op_threads: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    parser = _OneLine(
        prog="op_threads",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--threads", type=int, help="threads of the parallel kernels (default: numba's)")
    parser.add_argument(
        "--rounds", type=int, default=15, help="interleaved rounds of serial and parallel (default: 15)"
    )
    parser.add_argument("--op", action="append", choices=OPS, help="only this op (repeatable; default: all)")
    parser.add_argument("--json", metavar="FILE", help="also write the table and its setting as JSON")
    parser.add_argument("--remember", action="store_true", help="keep the thresholds for the backend")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds: at least 2 (an interval needs two)")
    pool = int(numba.config.NUMBA_NUM_THREADS)
    asked = args.threads if args.threads is not None else numba.get_num_threads()
    if not 2 <= asked <= pool:
        parser.error(f"--threads: from 2 to numba's pool of {pool} (NUMBA_NUM_THREADS); serial needs no comparison")
    kernels = tuple(k for k in KERNELS if args.op is None or op_of(k) in args.op)
    if args.remember and kernels != KERNELS:
        parser.error("--remember: every op must be measured (no --op)")
    numba.set_num_threads(asked)
    ops = NumbaStepOps()
    ops.load_ops()
    ops.threads = numba.get_num_threads()
    samples = measure(ops, kernels, SIZES, args.rounds)
    try:
        layer: str | None = numba.threading_layer()
    except ValueError:
        layer = None
    thresholds = numba_threads.decide(ratios_of(samples))
    rows = rows_of(samples)
    machine = cpu_model() or "an unnamed CPU"
    setting = {
        "machine": machine,
        "key": numba_threads.machine_key(ops.threads),
        "threads": ops.threads,
        "threading_layer": layer,
        "rounds": args.rounds,
        "load_average": list(os.getloadavg()),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    print(f"{machine}, {ops.threads} threads ({layer} layer), {args.rounds} interleaved rounds")
    print(table(rows))
    print("parallel from (what the backend would choose; none: serial at every size):")
    for kernel, least in thresholds.items():
        print(f"  {kernel:<28} {'none' if least is None else f'2^{least.bit_length() - 1}'}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    try:
        if args.json:
            document = {**setting, "rows": rows, "thresholds": thresholds}
            atomic_write_text(Path(args.json), json.dumps(document, indent=2) + "\n")
        if args.remember:
            how = {"measured_at": setting["measured_at"], "rounds": args.rounds, "by": "benchmarks/op_threads.py"}
            print(f"remembered in {numba_threads.remember(ops.threads, thresholds, how)}")
    except OSError as error:
        print(f"op_threads: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
