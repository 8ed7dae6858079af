"""The query commands against the start-up floor, side by side: at each registry size, rounds in
which `ptreg --version`, `ptreg index` (the check of the index against the directory, alone),
list, streaks, show, lineage and gate each run once as a cold process, in an order shuffled per
round, so that a busy spell of a shared machine weighs on all of them alike. Each command's time is also given over `--version`'s time of the same round (the median
of those per-round ratios, with its range): the index's targets are stated that way.

Wall-clock and CPU seconds (user + system of the child, which another process's load changes
less than the wall clock) are both reported. The registries are the synthetic ones of
benchmarks/registry_scale.py, imported once and indexed before the rounds (the index warm).

    python benchmarks/index_queries.py --sizes 10000 100000 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from registry_scale import CHILD_ENV, EVALUATOR_SPEC, PROPOSAL, PTREG, synthetic_attempts

from ptreg.store.index import RACY_NS


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# a command run with every file read and no index: what reading a registry's files costs
FULL_READ = "every file read: "


def once(argv: list[str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one cold process; it must exit 0."""
    cpu, start = children_cpu(), time.perf_counter()
    env = {**CHILD_ENV, "PTREG_INDEX": "off"} if argv[0] == FULL_READ else CHILD_ENV
    argv = [PTREG, *argv[1:]] if argv[0] == FULL_READ else argv
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return wall, children_cpu() - cpu


def build(size: int, work: Path) -> Path:
    source = work / f"attempts-{size}.json"
    source.write_text(json.dumps(synthetic_attempts(size)))
    registry = work / f"registry-{size}"
    r = [PTREG, "-r", str(registry)]
    subprocess.run([*r, "import", str(source)], check=True, capture_output=True)
    spec = work / "evaluator.json"
    spec.write_text(json.dumps(EVALUATOR_SPEC))
    subprocess.run([*r, "evaluator", "freeze", str(spec)], check=True, capture_output=True)
    subprocess.run([*r, "new", *PROPOSAL], check=True, capture_output=True)
    subprocess.run([*r, "index"], check=True, capture_output=True)
    return registry


def measure(size: int, rounds: int, work: Path) -> dict[str, dict[str, list[float]]]:
    print(f"building {size} attempts ...", file=sys.stderr, flush=True)
    registry = build(size, work)
    r = [PTREG, "-r", str(registry)]
    middle = f"attempt-{size // 2:06d}"
    commands = {
        "--version": [PTREG, "--version"],
        # opens the index and checks it against the directory, and nothing else: what every
        # command that reads through the index pays before its own query
        "index (the check alone)": [*r, "index"],
        "list --method vectorization": [*r, "list", "--method", "vectorization"],
        # the same query narrowed until it prints about 1% of the registry: what the index
        # costs apart from printing a quarter of it
        "list, 1% printed": [*r, "list", "--method", "vectorization", "--family", "matmul", "--status", "failed"],
        "streaks": [*r, "streaks"],
        "show": [*r, "show", middle],
        "lineage": [*r, "lineage", middle],
        "gate": [*r, "gate", "scale-proposal"],
    }
    # Measured in rounds of their own after the others (an edit drops every result the index
    # keeps, which would slow the next command of a shared round): the first of each after one
    # record was edited by hand, which must compute again the streaks' chains and tips and the
    # admission's digest; each round has its own `--version`.
    # Beside them, the narrow `list` warm and as the first command after a `git pull` that
    # rewrote 100 record files, and the same `list` reading every file of a registry of 100
    # attempts without an index: what reading 100 files costs.
    small = work / "registry-100"
    if not small.exists():
        build(100, work)
    narrow = ["list", "--method", "vectorization", "--family", "matmul", "--status", "failed"]
    after_edit = {
        "--version, beside the edits": [PTREG, "--version"],
        "streaks, first after an edit": [*r, "streaks"],
        "gate, first after an edit": [*r, "gate", "scale-proposal"],
        "list, 1% printed, beside the pulls": [*r, *narrow],
        "list, 1% printed, first after a pull of 100": [*r, *narrow],
        "list of a 100-attempt registry, every file read": [FULL_READ, "-r", str(small), *narrow],
    }

    def rewrite(number: int) -> None:
        record = json.loads((registry / f"attempt-{number:06d}.json").read_text())
        record["lesson"] = f"edited {time.time_ns()}"
        fresh = registry / f"attempt-{number:06d}.tmp"  # written anew and renamed, as git does
        fresh.write_text(json.dumps(record, indent=2))
        fresh.replace(registry / f"attempt-{number:06d}.json")

    def edit() -> None:
        rewrite(size // 3)

    def pull() -> None:
        for i in range(100):
            rewrite((i * 997) % size)

    found: dict[str, dict[str, list[float]]] = {c: {"wall": [], "cpu": []} for c in [*commands, *after_edit]}
    shuffle = random.Random(size)
    for phase in (commands, after_edit):
        order = list(phase)
        for name in order:  # one unrecorded round: the page cache as it is after a first run
            once(phase[name])
        for round_ in range(rounds):
            shuffle.shuffle(order)
            for name in order:
                if name.endswith("first after an edit"):
                    edit()
                elif name.endswith("first after a pull of 100"):
                    pull()
                elif name.endswith("beside the pulls"):
                    # warm: past the window in which a file just changed is hashed again, and
                    # with what an earlier pull or edit left re-checked out of the count
                    time.sleep(RACY_NS / 1e9 + 0.1)
                    once(phase[name])
                wall, cpu = once(phase[name])
                found[name]["wall"].append(wall)
                found[name]["cpu"].append(cpu)
            print(f"  round {round_ + 1}/{rounds} done", file=sys.stderr, flush=True)
    return found


def floor_of(name: str) -> str:
    """The `--version` of the same rounds as ``name``."""
    second_phase = ("first after", "beside the pulls", "100-attempt registry")
    return "--version, beside the edits" if any(part in name for part in second_phase) else "--version"


def cell(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f} ({min(samples):.2f}-{max(samples):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path, help="Also write every sample here.")
    args = parser.parse_args()
    if not Path(PTREG).exists():
        raise SystemExit(f"{PTREG} not found: install ptreg into this Python first (pip install .)")
    load_before = os.getloadavg()
    results = {}
    with tempfile.TemporaryDirectory(prefix="ptreg-queries-") as tmp:
        for size in args.sizes:
            results[size] = measure(size, args.rounds, Path(tmp))
    print(f"load average before: {load_before[0]:.2f}, after: {os.getloadavg()[0]:.2f}")
    for size, found in results.items():
        print(f"\n{size:,} attempts, {args.rounds} rounds: seconds, median (min-max)\n")
        print("| command | wall | CPU | wall over `--version`, same round |")
        print("| --- | --- | --- | --- |")
        for name, samples in found.items():
            floor = found[floor_of(name)]
            ratios = [w / f for w, f in zip(samples["wall"], floor["wall"], strict=True)]
            ratio = "" if name.startswith("--version") else f"{cell(ratios)}x"
            print(f"| {name} | {cell(samples['wall'])} | {cell(samples['cpu'])} | {ratio} |")
    if args.json:
        from ptreg.store.jsonio import atomic_write_text

        atomic_write_text(args.json, json.dumps({str(k): v for k, v in results.items()}, indent=2) + "\n")


if __name__ == "__main__":
    main()
