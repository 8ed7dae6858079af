"""Serial versus threaded staging of an import: fsync is disk-bound, so threads overlap the waits.

Both variants import the same synthetic registry into a fresh directory, interleaved, in one
process; the table gives the median and range of seconds.

    python benchmarks/import_staging.py --size 10000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from registry_scale import synthetic_attempts
from timing import interleaved, table

from ptreg.store import interchange


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ptreg-import-") as tmp:
        source = Path(tmp) / "attempts.json"
        source.write_text(json.dumps(synthetic_attempts(args.size)))
        target = Path(tmp) / "registry"

        def fresh(name: str) -> None:
            shutil.rmtree(target, ignore_errors=True)
            interchange._STAGING_THREADS = int(name.split()[0])

        runs = {f"{t} threads": partial(interchange.import_file, target, source) for t in args.threads}
        samples = interleaved(runs, args.repeats, before_each=fresh)
    print(f"import of {args.size:,} attempts, {args.repeats} repeats, seconds")
    print(table(samples, "staging", reference=next(iter(runs)), speedup=True, digits=2))


if __name__ == "__main__":
    main()
