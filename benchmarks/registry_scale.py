"""How ptreg's registry commands scale: import, validate, the query index (its build, its size,
and the first command after a `git pull`), list, streaks, show, lineage, and the gate
(`new --dry-run`, `gate`) at 1k-100k attempts, with `ptreg --version` as the floor.

Each command runs as a cold `ptreg` process (what a person waits for), several times; the table
gives the median and the range in seconds. The query commands run with the index warm (built by
`index rebuild` before them), and once more with `PTREG_INDEX=off` (every file read, as before
the index) for `list`. `list after a pull of 100` rewrites 100 record files (new inodes, as git
writes them) before each run; `list of 100, every file read` is a registry of just 100 attempts
read without the index, what reading those 100 files costs. For `show` against the start-up
floor of a Typer + pydantic CLI, measured side by side, use benchmarks/cold_start.py.

    python benchmarks/registry_scale.py                 # 1k, 10k, 100k; 3 repeats
    python benchmarks/registry_scale.py --sizes 1000 10000 --repeats 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ptreg.store.jsonio import atomic_write_text

PTREG = str(Path(sys.executable).parent / "ptreg")


def installed_as_users_have_it() -> dict[str, str]:
    """The environment for timed children, after compiling ptreg's own modules: `pip install`
    writes the bytecode of what it installs, but an editable install under
    PYTHONDONTWRITEBYTECODE never has any, and compiling every module on every start (about 30 ms
    of a 0.15 s start) would be timed as if it were ptreg's."""
    import compileall

    import ptreg
    import ptreg_backends

    for package in (ptreg, ptreg_backends):
        compileall.compile_dir(Path(package.__file__).parent, quiet=1)
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


CHILD_ENV = installed_as_users_have_it()
STATUSES = ["worked", "worked-with-caveat", "failed", "regressed", "inconclusive", "not-tried"]
METHODS = ["cache-blocking", "register-blocking", "multithreading", "vectorization", "jit-compilation", "vendor-blas"]
OBJECTIVES = ["training-step-time", "kernel-throughput", "peak-memory", "command-latency"]
FAMILIES = ["matmul", "attention", "optimizer", "data-loader", "cache", "compiler"]


def synthetic_attempts(n: int, seed: int = 0) -> dict:
    """A valid schema_version 2 registry of n attempts; about 60% sit in varied_from chains."""
    rng = random.Random(seed)
    attempts = []
    open_chains: list[str] = []  # tips that may be varied again
    for i in range(n):
        status = rng.choice(STATUSES)
        kind = "infrastructure" if rng.random() < 0.3 else "runtime-benchmark"
        a = {
            "id": f"attempt-{i:06d}",
            "name": f"Synthetic attempt {i}",
            "family": rng.choice(FAMILIES),
            "status": status,
            "evidence": f"step time `{rng.uniform(50, 2000):.1f}` ms, or about `{rng.uniform(0.8, 4):.2f}x` over naive",
            "failure_reason_confidence": "not-applicable",
            "lesson": "Synthetic lesson text of a realistic length, long enough to matter when rendering tables.",
            "next_action": "Synthetic next action: rerun with a fresh question if the headroom is real.",
            "evidence_sources": [f"docs/bench-{i % 97}.md"],
            "source": f"docs/bench-{i % 97}.md",
            "kind": kind,
        }
        if status in ("failed", "regressed", "worked-with-caveat", "inconclusive"):
            a["failure_reason"] = "Synthetic reason: the remaining kernel bounds the step."
            a["failure_reason_confidence"] = rng.choice(["exact", "inferred", "missing-evidence"])
        if kind != "infrastructure":
            a["methods"] = rng.sample(METHODS, rng.randint(1, 3))
            a["bases"] = [rng.choice(["naive", "blocked-numpy", "numba", "numpy-blas"])]
            a["objective"] = rng.choice(OBJECTIVES)
            if open_chains and rng.random() < 0.6:
                parent = open_chains.pop(rng.randrange(len(open_chains)))
                a["varied_from"] = parent
                a["varied"] = "tile size 64 -> 128"
            open_chains.append(a["id"])
            if len(open_chains) > 200:
                open_chains.pop(0)
        attempts.append(a)
    return {
        "schema_version": 2,
        "confidence_vocabulary": {c: c for c in ["exact", "inferred", "missing-evidence", "not-applicable"]},
        "attempts": attempts,
        "method_vocabulary": {m: m for m in METHODS},
        "objective_vocabulary": {o: o for o in OBJECTIVES},
        "kind_vocabulary": {"infrastructure": "tooling", "runtime-benchmark": "kernels"},
    }


def timed(argv: list[str], repeats: int, expect: int = 0, fresh=None, env=None) -> list[float]:
    """Wall-clock seconds of a cold process, `repeats` times; `fresh` resets state before each run."""
    env = CHILD_ENV if env is None else env
    samples = []
    for _ in range(repeats):
        if fresh:
            fresh()
        start = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        samples.append(time.perf_counter() - start)
        if done.returncode != expect:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return samples


def summary(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "samples": samples}


def measure(size: int, repeats: int, work: Path) -> dict:
    source = work / f"attempts-{size}.json"
    source.write_text(json.dumps(synthetic_attempts(size)))
    registry = work / f"registry-{size}"

    def wipe() -> None:
        shutil.rmtree(registry, ignore_errors=True)

    results: dict = {"size": size}
    r = ["-r", str(registry)]
    results["--version"] = summary(timed([PTREG, "--version"], repeats))
    results["import"] = summary(timed([PTREG, *r, "import", str(source)], repeats, fresh=wipe))
    results["validate"] = summary(timed([PTREG, "validate", str(registry)], repeats))
    results["index rebuild"] = summary(timed([PTREG, *r, "index", "rebuild"], repeats))
    index_file = registry / ".ptreg-index.sqlite"
    results["index MiB"] = index_file.stat().st_size / 2**20
    off = {**CHILD_ENV, "PTREG_INDEX": "off"}
    results["list --method, every file read"] = summary(
        timed([PTREG, *r, "list", "--method", "vectorization"], repeats, env=off)
    )
    results["list --method vectorization"] = summary(timed([PTREG, *r, "list", "--method", "vectorization"], repeats))
    results["streaks"] = summary(timed([PTREG, *r, "streaks"], repeats))
    middle = f"attempt-{size // 2:06d}"
    results["show"] = summary(timed([PTREG, *r, "show", middle], repeats))
    results["lineage"] = summary(timed([PTREG, *r, "lineage", middle], repeats))
    pulls = iter(range(10**6))

    def pull() -> None:  # 100 record files rewritten as git writes them: new file, renamed into place
        round_ = next(pulls)
        for i in random.Random(round_).sample(range(size), 100):
            path = registry / f"attempt-{i:06d}.json"
            raw = json.loads(path.read_text(encoding="utf-8"))
            raw["lesson"] = f"Pulled change {round_}."
            staged = registry / f".pull-{i}.json.tmp"
            staged.write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
            os.replace(staged, path)

    results["list after a pull of 100"] = summary(
        timed([PTREG, *r, "list", "--method", "vectorization"], repeats, fresh=pull)
    )
    small = work / "registry-100"
    if not small.exists():
        small_source = work / "attempts-100.json"
        small_source.write_text(json.dumps(synthetic_attempts(100)))
        subprocess.run([PTREG, "-r", str(small), "import", str(small_source)], check=True, capture_output=True)
    results["list of 100, every file read"] = summary(
        timed([PTREG, "-r", str(small), "list", "--method", "vectorization"], repeats, env=off)
    )
    # The gate reads every record (freshness, streaks, precedents) and digests every file.
    spec = work / "evaluator.json"
    spec.write_text(json.dumps(EVALUATOR_SPEC))
    subprocess.run([PTREG, "-r", str(registry), "evaluator", "freeze", str(spec)], check=True, capture_output=True)
    propose = [PTREG, "-r", str(registry), "new", *PROPOSAL]
    results["new --dry-run"] = summary(timed([*propose, "--dry-run"], repeats))
    subprocess.run(propose, check=True, capture_output=True)
    results["gate"] = summary(timed([PTREG, "-r", str(registry), "gate", "scale-proposal"], repeats))
    return results


EVALUATOR_SPEC = {
    "name": "scale-eval",
    "workload": "kernels",
    "configs": ["xl"],
    "backends": ["naive", "numpy-blas"],
    "baseline": "numpy-blas",
    "warmup_steps": 1,
    "timed_steps": 5,
    "repeats": 3,
    "seed": 0,
    "threads": 1,
    "tolerance": {"rtol": 1e-5, "atol": 1e-6},
    "max_relative_spread": 0.25,
    "metric": "gflops",
}
# A proposal the gate admits on any synthetic registry (the override covers a long streak).
PROPOSAL = [
    "--id",
    "scale-proposal",
    "--name",
    "Scale proposal",
    "--family",
    "matmul",
    "--kind",
    "runtime-benchmark",
    "--objective",
    "training-step-time",
    "--method",
    "cache-blocking",
    "--question",
    "How long does the gate take on a registry of this size?",
    "--evaluator",
    "scale-eval",
    "--budget-seconds",
    "600",
    "--tracking-issue",
    "#1",
    "--override-streak",
    "synthetic registry",
    "--no-input",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="Also write the samples here.")
    args = parser.parse_args()
    if not Path(PTREG).exists():
        raise SystemExit(f"{PTREG} not found: install ptreg into this Python first (pip install .)")

    rows = []
    with tempfile.TemporaryDirectory(prefix="ptreg-scale-") as tmp:
        for size in args.sizes:
            print(f"measuring {size} attempts ...", file=sys.stderr, flush=True)
            rows.append(measure(size, args.repeats, Path(tmp)))
    commands = [k for k in rows[0] if k != "size"]
    # one row per command, one column per size: the table stays readable with many commands
    print("| command | " + " | ".join(f"{row['size']:,} attempts" for row in rows) + " |")
    print("|" + " --- |" * (len(rows) + 1))
    for c in commands:
        cells = [
            f"{row[c]:.1f}"
            if isinstance(row[c], float)
            else f"{row[c]['median']:.2f} ({row[c]['min']:.2f}-{row[c]['max']:.2f})"
            for row in rows
        ]
        print(f"| {c} | " + " | ".join(cells) + " |")
    print(f"\nseconds, cold process, median (min-max) of {args.repeats}; index MiB: the index file's size")
    if args.json:
        atomic_write_text(
            args.json, json.dumps({"rows": rows, "python": sys.version, "cpus": os.cpu_count()}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
