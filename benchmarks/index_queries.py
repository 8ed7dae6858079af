"""The query commands against the start-up floor, side by side: at each registry size, rounds in
which `ptreg --version`, `ptreg index` (the check of the index against the directory, alone),
list, streaks, show, lineage and gate each run once as a cold process, in an order shuffled per
round, so that a busy spell of a shared machine weighs on all of them alike. Each command's time is also given over `--version`'s time of the same round (the median
of those per-round ratios, with its range): the index's targets are stated that way.

With ``--watch``, a change watcher (`ptreg index watch`) follows the registry throughout, and
every query command also runs a second time in the same rounds with it consulted (", watched");
the others run with PTREG_WATCHER=off, so they check every file as without a watcher.

Wall-clock and CPU seconds (user + system of the child, which another process's load changes
less than the wall clock) are both reported. The registries are the synthetic ones of
benchmarks/registry_scale.py, imported once and indexed before the rounds (the index warm).

    python benchmarks/index_queries.py --sizes 10000 100000 --rounds 7 [--watch]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from registry_scale import CHILD_ENV, EVALUATOR_SPEC, PROPOSAL, PTREG, synthetic_attempts

from ptreg.store.index import RACY_NS


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# a command run with every file read and no index: what reading a registry's files costs
FULL_READ = "every file read: "
# a command that asks the change watcher (the others are told not to)
WATCHED = "watched: "
WATCHED_SUFFIX = ", watched"


def once(argv: list[str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one cold process; it must exit 0."""
    cpu, start = children_cpu(), time.perf_counter()
    env = {**CHILD_ENV, "PTREG_WATCHER": "off"}
    if argv[0] == FULL_READ:
        env["PTREG_INDEX"] = "off"
    elif argv[0] == WATCHED:
        del env["PTREG_WATCHER"]
    argv = [PTREG, *argv[1:]] if argv[0] in (FULL_READ, WATCHED) else argv
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


def watcher_of(registry: Path) -> subprocess.Popen[str]:
    """`ptreg index watch` of ``registry``, once it answers."""
    process = subprocess.Popen(
        [PTREG, "-r", str(registry), "index", "watch", "--json"], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    while process.stdout.readline() not in ("}\n", ""):
        pass
    if process.poll() is not None:
        raise SystemExit(f"the watcher of {registry} did not start")
    return process


def with_watched(phase: dict[str, list[str]]) -> dict[str, list[str]]:
    """``phase`` and, after each ptreg command of it that reads a registry, its twin that asks the watcher."""
    twins = {}
    for name, argv in phase.items():
        twins[name] = argv
        if argv[0] == PTREG and "-r" in argv:
            twins[name + WATCHED_SUFFIX] = [WATCHED, *argv[1:]]
    return twins


def measure(size: int, rounds: int, work: Path, watch: bool = False) -> dict[str, dict[str, list[float]]]:
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

    if watch:
        commands, after_edit = with_watched(commands), with_watched(after_edit)
    found: dict[str, dict[str, list[float]]] = {c: {"wall": [], "cpu": []} for c in [*commands, *after_edit]}
    shuffle = random.Random(size)
    watcher = watcher_of(registry) if watch else None
    try:
        for phase in (commands, after_edit):
            run_phase(phase, rounds, shuffle, found, edit, pull)
    finally:
        if watcher is not None:
            watcher.send_signal(signal.SIGTERM)
            watcher.wait()
    return found


def run_phase(
    phase: dict[str, list[str]],
    rounds: int,
    shuffle: random.Random,
    found: dict[str, dict[str, list[float]]],
    edit: Callable[[], None],
    pull: Callable[[], None],
) -> None:
    order = list(phase)
    for name in order:  # one unrecorded round: the page cache as it is after a first run
        once(phase[name])
    for round_ in range(rounds):
        shuffle.shuffle(order)
        for name in order:
            what = name.removesuffix(WATCHED_SUFFIX)
            if what.endswith("first after an edit"):
                edit()
            elif what.endswith("first after a pull of 100"):
                pull()
            elif what.endswith("beside the pulls"):
                # warm: past the window in which a file just changed is hashed again, and
                # with what an earlier pull or edit left re-checked out of the count
                time.sleep(RACY_NS / 1e9 + 0.1)
                once(phase[name])
            wall, cpu = once(phase[name])
            found[name]["wall"].append(wall)
            found[name]["cpu"].append(cpu)
        print(f"  round {round_ + 1}/{rounds} done", file=sys.stderr, flush=True)


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
    parser.add_argument("--watch", action="store_true", help="Also time each query with a change watcher running.")
    parser.add_argument("--json", type=Path, help="Also write every sample here.")
    args = parser.parse_args()
    if not Path(PTREG).exists():
        raise SystemExit(f"{PTREG} not found: install ptreg into this Python first (pip install .)")
    load_before = os.getloadavg()
    results = {}
    with tempfile.TemporaryDirectory(prefix="ptreg-queries-") as tmp:
        for size in args.sizes:
            results[size] = measure(size, args.rounds, Path(tmp), args.watch)
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
