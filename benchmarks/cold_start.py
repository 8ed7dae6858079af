"""Cold-process cost of `ptreg show` against the floor of any Typer + pydantic CLI.

Interleaves, in one run: `python -c "import typer, pydantic"` (the floor), `ptreg show ID`
as shipped, and `ptreg show ID` with pydantic's plugin scan left on (PYDANTIC_DISABLE_PLUGINS=0),
the one start-up cost ptreg removes. Prints medians and ranges in seconds, and ratios.

    python benchmarks/cold_start.py --registry attempts --id <attempt id> --repeats 30
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PTREG = str(Path(sys.executable).parent / "ptreg")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--registry", default="attempts")
    parser.add_argument("--id", required=True)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    plain = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    variants = {
        "import typer, pydantic": ([sys.executable, "-c", "import typer, pydantic"], plain),
        "ptreg show": ([PTREG, "-r", args.registry, "show", args.id], plain),
        "ptreg show, plugin scan on": ([PTREG, "-r", args.registry, "show", args.id], {**plain, "PYDANTIC_DISABLE_PLUGINS": "0"}),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, (argv, env) in variants.items():  # interleaved
            start = time.perf_counter()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
            samples[name].append(time.perf_counter() - start)
    floor = statistics.median(samples["import typer, pydantic"])
    print(f"cold process, {args.repeats} repeats, seconds")
    print("| command | median | min | max | / floor |")
    print("| --- | --- | --- | --- | --- |")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.3f} | {min(values):.3f} | {max(values):.3f} | {median / floor:.2f}x |")


if __name__ == "__main__":
    main()
