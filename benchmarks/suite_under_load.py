"""Does the test suite pass again and again while something else keeps every core busy?

    python benchmarks/suite_under_load.py --runs 5                     # the default suite, 5 times
    python benchmarks/suite_under_load.py --runs 3 -- tests/cli/test_interactive_new.py
    python benchmarks/suite_under_load.py --runs 5 --json load.json

One busy process per core (a Python loop that never sleeps) is started first and kept running
through every run; each run is ``python -m pytest -q -p no:cacheprovider`` with the arguments
after ``--`` (none: the default suite, ``-m 'not slow'`` from pyproject.toml), in this
repository, one after the other. Each run's exit code, its last summary line and its wall time
are printed as it ends. The load is ended whole (every process of its tree, with psutil) when
the runs end, also on Ctrl-C or an error. The exit code is 0 when every run passed, else 1.

A run that fails under load and passes alone points at a test that assumes a fast machine: a
fixed sleep before an assertion, or a short timeout. The tests bound their waits with
``helpers.patient``; PTREG_TEST_TIMEOUT_SCALE=N gives a slower machine N times as long.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from ptreg.store.jsonio import atomic_write_text

REPO = Path(__file__).resolve().parents[1]
BUSY = "while True: pass"


def start_load(cores: int) -> list[psutil.Popen]:
    """One busy loop per core, each a process of its own."""
    return [psutil.Popen([sys.executable, "-c", BUSY]) for _ in range(cores)]


def end_load(load: list[psutil.Popen]) -> None:
    """Every busy process and anything it started, killed and reaped."""
    tree: list[psutil.Process] = []
    for busy in load:
        try:
            tree += [*busy.children(recursive=True), busy]
        except psutil.NoSuchProcess:
            continue
    for process in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(tree, timeout=30)


def one_run(pytest_args: list[str]) -> dict[str, object]:
    """One pytest run: its exit code, its last summary line and its wall seconds."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - started
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    summary = lines[-1] if lines else done.stderr.strip()[-300:]
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return {"exit": done.returncode, "summary": summary, "seconds": round(seconds, 1), "failed": failed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs in a row (default 5)")
    parser.add_argument("--cores", type=int, default=psutil.cpu_count() or 1, help="busy processes (default: cores)")
    parser.add_argument("--json", type=Path, help="also write the runs to this file")
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest runs (default: the default suite)")
    options = parser.parse_args()
    if options.runs < 1 or options.cores < 1:
        parser.error("--runs and --cores must be at least 1")

    # SIGTERM and SIGHUP end this script as Ctrl-C does, through the finally that ends the load
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, frame: sys.exit(128 + number))
    load = start_load(options.cores)
    runs: list[dict[str, object]] = []
    try:
        print(f"load: {options.cores} busy process(es), pids {', '.join(str(p.pid) for p in load)}", flush=True)
        for number in range(1, options.runs + 1):
            run = one_run(options.pytest_args)
            runs.append(run)
            verdict = "passed" if run["exit"] == 0 else f"FAILED (exit {run['exit']})"
            print(f"run {number}/{options.runs}: {verdict} in {run['seconds']} s: {run['summary']}", flush=True)
            for line in run["failed"] if isinstance(run["failed"], list) else []:
                print(f"  {line}", flush=True)
    finally:
        end_load(load)
    passed = sum(1 for run in runs if run["exit"] == 0)
    print(f"{passed} of {len(runs)} run(s) passed under load; the load is ended")
    if options.json:
        document = {"cores": options.cores, "pytest_args": options.pytest_args, "runs": runs}
        atomic_write_text(options.json, json.dumps(document, indent=2) + "\n")
    return 0 if passed == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
