"""How `ptreg compare` behaves on this machine: false alarms on unchanged code, and the smallest
slowdown it finds.

Everything runs in a scratch registry of its own, through ptreg's command line, as a user
would: freeze an evaluator, propose attempts through the gate, run them, compare.

- ``--aa``: the same evaluator run ``--runs`` times on unchanged code (tinygpt-train, all four
  built-in backends); then every pair of runs, each judged against the others (its history of
  unchanged code). A flagged cell is a false alarm. Prints the flags and each cell's spread.
- ``--sensitivity``: the kernels workload on ``example-slowed`` (tests/plugin_backend, installed
  into a folder of its own) and numpy-blas; ``--runs`` runs at factor 1 (the history), then one
  run per slowdown, each with the factor written into the installed module (a change of its
  code, so that its digest changes and it joins no history); each compared with the last
  unchanged run. Prints which slowdowns were found.

    python benchmarks/compare_runs.py --aa --config small --runs 5
    python benchmarks/compare_runs.py --sensitivity --config medium --runs 4 --slowdowns 0.1 0.5
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ptreg.engine.environment import BEHAVIOUR_VARIABLES, cpu_model, usable_cores

REPO = Path(__file__).resolve().parent.parent


def ptreg(root: Path, *args: str, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ptreg", "-r", str(root), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if done.returncode not in ok:
        sys.exit(f"ptreg {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return done.stdout


def propose_and_run(root: Path, evaluator: str, attempt: str, issue: int, env: dict[str, str] | None = None) -> None:
    # Each run asks the same question again, which the gate rightly refuses within one family:
    # in this scratch registry every run is a family of its own.
    ptreg(
        root, "new", "--id", attempt, "--name", attempt, "--family", f"check-{attempt}", "--kind", "runtime-benchmark",
        "--objective", "training-step-time", "--method", "vendor-blas",
        "--question", f"What does run {attempt} measure?", "--evaluator", evaluator,
        "--budget-seconds", "7200", "--tracking-issue", f"#{issue}", "--no-input",
    )  # fmt: skip
    ptreg(root, "run", attempt, env=env)
    print(f"ran {attempt}", file=sys.stderr, flush=True)


def freeze(root: Path, spec: dict[str, Any]) -> str:
    path = root.parent / f"{spec['name']}.json"
    path.write_text(json.dumps(spec))
    return str(json.loads(ptreg(root, "evaluator", "freeze", str(path), "--json"))["ref"])


def machine() -> str:
    found = ", ".join(f"{k}={v}" for k, v in os.environ.items() if k in BEHAVIOUR_VARIABLES) or "none set"
    return f"machine: {cpu_model() or 'unknown CPU'}, {usable_cores()} usable cores; variables: {found}"


def aa(args: argparse.Namespace, root: Path) -> None:
    spec = {
        "name": "aa-check", "workload": "tinygpt-train", "metric": "ms-per-step", "configs": [args.config],
        "backends": ["naive", "blocked-numpy", "numba", "numpy-blas"], "baseline": "numpy-blas",
        "warmup_steps": 2, "timed_steps": args.steps, "repeats": args.repeats, "seed": 0, "threads": args.threads,
        "tolerance": {"rtol": 1e-4, "atol": 1e-6}, "max_relative_spread": 1.0,
    }  # fmt: skip
    evaluator = freeze(root, spec)
    names = [f"unchanged-{i}" for i in range(args.runs)]
    for i, name in enumerate(names):
        propose_and_run(root, evaluator, name, 100 + i)
    print(machine())
    print(f"A/A: {args.runs} runs of {evaluator} ({args.config}, {args.repeats} rounds of {args.steps} steps, "
          f"{args.threads} threads), every ordered pair, each judged against the other runs")  # fmt: skip
    for relative in ([], ["--relative-to", "numpy-blas"]):
        flagged = compared = 0
        print("absolute times:" if not relative else "relative to numpy-blas in the same round:")
        alarmed = pairs = 0
        for a, b in itertools.permutations(names, 2):
            found = json.loads(ptreg(root, "compare", a, b, "--json", *relative))
            moved = [c for c in found["cells"] if c["verdict"] in ("slower", "faster")]
            flagged, compared = flagged + len(moved), compared + len(found["cells"])
            alarmed, pairs = alarmed + bool(moved), pairs + 1
            print(f"  {a} -> {b}: {len(moved)} flagged; {cells_text(found)}")
        print(f"  false alarms: {flagged} of {compared} cell comparisons; {alarmed} of {pairs} comparisons flagged any")


def cells_text(found: dict[str, Any]) -> str:
    return ", ".join(
        f"{c['backend']} {c['ratio']:.3f} ({c['low']:.3f}-{c['high']:.3f}, spread {100 * (c['drift'] or 0):.1f}%, "
        f"{len(c['history'])} runs) {c['verdict']}"
        if c["ratio"] is not None
        else f"{c['backend']} {c['verdict']}"
        for c in found["cells"]
    )


SLOWDOWN_READ = 'float(os.environ.get("PTREG_EXAMPLE_SLOWDOWN", "1"))'


def set_factor(site: Path, factor: float | None) -> None:
    """Write the slowdown into the installed module (None: read it from the environment, as
    shipped): a change of the backend's code, as a real regression is."""
    module = site / "ptreg_example_backend" / "__init__.py"
    text = module.read_text()
    start = text.index("self.factor = ") + len("self.factor = ")
    end = text.index("\n", start)
    module.write_text(text[:start] + (SLOWDOWN_READ if factor is None else repr(factor)) + text[end:])


def sensitivity(args: argparse.Namespace, root: Path) -> None:
    site = root.parent / "plugin-site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(REPO / "tests" / "plugin_backend")],
        check=True,
    )  # fmt: skip
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    spec = {
        "name": "slowed-check", "workload": "kernels", "metric": "gflops", "configs": [args.config],
        "backends": ["example-slowed", "numpy-blas"], "baseline": "numpy-blas", "warmup_steps": 2,
        "timed_steps": args.steps, "repeats": args.repeats, "seed": 0, "threads": args.threads,
        "tolerance": {"rtol": 1e-4, "atol": 1e-6}, "max_relative_spread": 1.0,
    }  # fmt: skip
    evaluator = freeze(root, spec)
    base = [f"factor-1-{i}" for i in range(args.runs)]
    for i, name in enumerate(base):
        propose_and_run(root, evaluator, name, 200 + i)
    print(machine())
    print(f"sensitivity: {evaluator} ({args.config}, {args.repeats} rounds of {args.steps} calls, {args.threads} threads); "
          f"{args.runs} unchanged runs, then one run per slowdown of example-slowed, each against {base[-1]}")  # fmt: skip
    for relative in ([], ["--relative-to", "numpy-blas"]):
        exits = [
            subprocess.run(
                [sys.executable, "-m", "ptreg", "-r", str(root), "compare", a, b, "--fail-on-regression", *relative],
                capture_output=True,
            ).returncode
            for a, b in itertools.permutations(base, 2)
        ]
        how = "relative to numpy-blas" if relative else "absolute"
        print(f"every pair of unchanged runs, {how}, --fail-on-regression: exit codes {sorted(exits)}")
    for i, slowdown in enumerate(args.slowdowns):
        name = f"slowed-{i}"
        set_factor(site, 1 + slowdown)
        propose_and_run(root, evaluator, name, 300 + i)
        set_factor(site, None)
        for relative in ([], ["--relative-to", "numpy-blas"]):
            found = json.loads(ptreg(root, "compare", base[-1], name, "--json", *relative))
            how = "relative to numpy-blas" if relative else "absolute"
            gate = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ptreg",
                    "-r",
                    str(root),
                    "compare",
                    base[-1],
                    name,
                    "--fail-on-regression",
                    *relative,
                ],
                capture_output=True,
            ).returncode
            print(f"slowdown {100 * slowdown:g}%, {how}: {cells_text(found)}; --fail-on-regression exits {gate}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aa", action="store_true")
    parser.add_argument("--sensitivity", action="store_true")
    parser.add_argument("--config", default="small")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0.03, 0.05, 0.1, 0.2])
    args = parser.parse_args()
    if not (args.aa or args.sensitivity):
        parser.error("give --aa or --sensitivity")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "attempts"
        ptreg(root, "init")
        if args.aa:
            aa(args, root)
        if args.sensitivity:
            sensitivity(args, root)


if __name__ == "__main__":
    main()
