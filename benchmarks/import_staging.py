"""Serial versus threaded staging of an import: fsync is disk-bound, so threads overlap the waits.

Both variants import the same synthetic registry into a fresh directory, interleaved, in one
process; the table gives the median and range of seconds.

    python benchmarks/import_staging.py --size 10000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from registry_scale import synthetic_attempts  # noqa: E402

from ptreg import interchange  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    samples: dict[int, list[float]] = {t: [] for t in args.threads}
    with tempfile.TemporaryDirectory(prefix="ptreg-import-") as tmp:
        source = Path(tmp) / "attempts.json"
        source.write_text(json.dumps(synthetic_attempts(args.size)))
        for _ in range(args.repeats):
            for threads in args.threads:  # interleaved, so drift on a shared machine hits both
                target = Path(tmp) / f"registry-{threads}"
                shutil.rmtree(target, ignore_errors=True)
                interchange._STAGING_THREADS = threads
                start = time.perf_counter()
                interchange.import_file(target, source)
                samples[threads].append(time.perf_counter() - start)
    base = statistics.median(samples[args.threads[0]])
    print(f"import of {args.size:,} attempts, {args.repeats} repeats, seconds")
    print("| staging threads | median | min | max | speedup |")
    print("| --- | --- | --- | --- | --- |")
    for threads, values in samples.items():
        median = statistics.median(values)
        print(f"| {threads} | {median:.2f} | {min(values):.2f} | {max(values):.2f} | {base / median:.2f}x |")


if __name__ == "__main__":
    main()
