"""The numba backend's rule for where a memory-bound kernel goes parallel (``numba_threads.decide``),
simulated where the truth is known: does it ever send a kernel parallel at a size where the
parallel kernel is slower, and how often does it find the true crossover?

    python benchmarks/threshold_rule.py                 # the table, 400 draws a row
    python benchmarks/threshold_rule.py --draws 2000 --json rule.json

A draw is one calibration: serial and parallel timed at each of the rule's sizes (2^14 to 2^22)
in interleaved rounds, first place alternating between rounds as ``numba_op_timing`` does, under
the noise of ``round_noise`` (its scenarios, and a busier machine still); the per-round ratios go
to ``decide``. Three truths: no difference at any size; the parallel kernel 1.5x slower below
2^18 elements and 1.6x faster from there up; the parallel kernel 1.3x slower everywhere.
Nothing here is measured.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from round_noise import SCENARIOS, Noise, one_run

from ptreg.store.jsonio import atomic_write_text
from ptreg_backends.numba_threads import SIZES, decide

CROSSOVER = 1 << 18
BUSIER = Noise(
    "a busy machine: t(3) 10%, busy 30% (+50%), AR(1) 10%",
    spread=0.10,
    tails=3,
    busy=0.3,
    busy_cost=0.5,
    load=0.1,
    phi=0.7,
)
TRUTHS: dict[str, Callable[[int], float]] = {
    "no difference": lambda size: 1.0,
    "crossover at 2^18": lambda size: 1 / 1.6 if size >= CROSSOVER else 1.5,
    "parallel slower everywhere": lambda size: 1.3,
}


def alternating(number: int) -> list[str]:
    return ["a", "b"] if number % 2 == 0 else ["b", "a"]


def one_calibration(rng: random.Random, noise: Noise, rounds: int, truth: Callable[[int], float]) -> int | None:
    """The threshold ``decide`` picks from one simulated calibration (arm a serial, b parallel)."""
    by_size: dict[int, list[float]] = {}
    for size in SIZES:
        serial, parallel = one_run(rng, noise, rounds, truth(size), alternating)
        by_size[size] = [parallel[r] / serial[r] for r in range(rounds)]
    return decide({"kernel": by_size})["kernel"]


def row(rng: random.Random, noise: Noise, rounds: int, truth: str, draws: int) -> dict[str, object]:
    picks = [one_calibration(rng, noise, rounds, TRUTHS[truth]) for _ in range(draws)]
    slower_at = [s for s in SIZES if TRUTHS[truth](s) > 1]
    wrong = sum(p is not None and p in slower_at for p in picks)  # parallel where it is slower
    return {
        "noise": noise.name,
        "rounds": rounds,
        "truth": truth,
        "draws": draws,
        "serial": sum(p is None for p in picks) / draws,
        "parallel_where_slower": wrong / draws,
        "at_crossover": sum(p == CROSSOVER for p in picks) / draws if truth.startswith("crossover") else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="threshold_rule", description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=400, help="simulated calibrations a row (default: 400)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    if args.draws < 1:
        print("threshold_rule: --draws: at least 1", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    rows = [
        row(rng, noise, rounds, truth, args.draws)
        for noise in (SCENARIOS[0], SCENARIOS[-1], BUSIER)
        for rounds in (5, 25)
        for truth in TRUTHS
    ]
    print("| noise | rounds | truth | serial chosen | parallel where slower | at the crossover |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        at = "-" if r["at_crossover"] is None else f"{r['at_crossover']:.1%}"
        print(
            f"| {r['noise']} | {r['rounds']} | {r['truth']} | {r['serial']:.1%} | {r['parallel_where_slower']:.1%} | {at} |"
        )
    if args.json:
        atomic_write_text(
            Path(args.json), json.dumps({"draws": args.draws, "seed": args.seed, "rows": rows}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
