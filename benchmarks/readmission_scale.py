"""What deciding every admission again costs `ptreg validate` (docs/gate.md, "Admissions after a
merge"): registries of N admitted attempts, every one in one family (so the freshness check
compares each question with every earlier one: the worst case), in lineages of five that share
a tracking issue and an evaluator, some concluded as failures so that the streak check finds
chains; with --clash, lineages also share tracking issues and one evaluator name has seven
specs, so that nearly every admission conflicts. Timed: ``readmit_all`` in-process over the parsed records (the part validate added), and
`ptreg validate`, `ptreg gate --all` and `ptreg gate` of the attempt admitted last (which reads
only what its checks read) as cold processes. Medians and ranges in seconds.

    python benchmarks/readmission_scale.py                      # 300 and 1000 attempts, 5 repeats
    python benchmarks/readmission_scale.py --sizes 300 --repeats 9 --clash
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ptreg.gate.readmission import readmit_all
from ptreg.store.directory import init_registry, load_directory

PTREG = str(Path(sys.executable).parent / "ptreg")
WORDS = [
    "tiling",
    "blocking",
    "fusion",
    "threads",
    "caches",
    "packing",
    "unrolling",
    "prefetch",
    "layout",
    "vectors",
    "kernels",
    "steps",
]


def admitted_attempt(i: int, clash: bool) -> dict[str, Any]:
    lineage, depth = divmod(i, 5)
    words = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7))  # distinct questions, some words shared
    record: dict[str, Any] = {
        "id": f"a{i:05d}",
        "name": f"Attempt {i}",
        "family": "runtime-perf",
        "status": "failed" if depth < 2 else "not-tried",
        "failure_reason_confidence": "exact" if depth < 2 else "not-applicable",
        "kind": "runtime-benchmark",
        "methods": ["cache-blocking"],
        "objective": "training-step-time",
        "question": f"Does {words} help at {i}x{i * 31 % 997}?",
        # clashing: seven specs under one name, and every fifth lineage on one tracking issue
        "evaluator": f"kx@{lineage % 7:012d}" if clash else f"kx{lineage % 7}@{lineage % 7:012d}",
        "budget": {"wall_clock_seconds": 600.0},
        "tracking_issue": f"owner/repo#{(lineage if not clash else lineage // 5) + 1}",
        "admission": {
            "admitted_at": f"2026-12-{1 + i // 1440:02d}T{(i // 60) % 24:02d}:{i % 60:02d}:00Z",
            "ptreg_version": "0.1.0",
            "registry_state": {"attempts": i, "evaluators": 1, "sha256": "0" * 64},
            "checks": [],
            "precedents": [],
        },
    }
    if depth:
        record.update(varied_from=f"a{i - 1:05d}", varied="the next step")
    if depth < 2:
        record.update(
            evidence="slower",
            failure_reason="no gain",
            lesson="measure end to end",
            next_action="stop",
            evidence_sources=["x"],
            source="x",
        )
    return record


def build(root: Path, n: int, clash: bool) -> None:
    init_registry(root)
    for i in range(n):
        record = admitted_attempt(i, clash)
        (root / f"{record['id']}.json").write_text(json.dumps(record, indent=2), encoding="utf-8")


def timed(run: Any, repeats: int) -> tuple[float, float, float]:
    found = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        found.append(time.perf_counter() - start)
    return statistics.median(found), min(found), max(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clash", action="store_true", help="a registry of clashing admissions (the worst case)")
    args = parser.parse_args()
    print(
        "| attempts | readmit_all (in-process) | `ptreg validate` | `ptreg gate --all` | `ptreg gate LAST` | conflicts |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "reg"
            build(root, n, args.clash)
            attempts = load_directory(root).attempts
            conflicts = len(readmit_all(attempts).conflicts)
            cells = [timed(lambda parsed=attempts: readmit_all(parsed), args.repeats)]
            last = f"a{n - 1:05d}"  # admitted last: judged against every other
            for command in (["validate"], ["gate", "--all"], ["gate", last]):
                cells.append(
                    timed(
                        lambda argv=[PTREG, "-r", str(root), *command]: subprocess.run(argv, capture_output=True),
                        args.repeats,
                    )
                )
            shown = " | ".join(f"{m:.2f} ({lo:.2f}-{hi:.2f})" for m, lo, hi in cells)
            print(f"| {n} | {shown} | {conflicts} |", flush=True)


if __name__ == "__main__":
    main()
