"""The instructions timer: a repeat's timed region counted in instructions executed, under valgrind.

Wall time on a shared machine moves by tens of percent from run to run; the number of
instructions a region executes does not, as long as the code, its inputs, the CPU it sees and
its thread count stay the same. So an evaluator that says ``"timer": "instructions"`` has each
cell's worker started under valgrind's callgrind, with one thread and a fixed hash seed.

Only the timed regions are counted, not the start-up, the imports, the JIT or the warm-up.
Python cannot issue callgrind's client requests (they are a special instruction sequence), so
the worker marks a region by calling a libc function that nothing else in it calls,
``ctermid``, through ``os.ctermid``; callgrind is told to dump its counts each time that
function is entered (``--dump-before``), which also zeroes them. Each dump holds the
instructions executed since the previous mark; the worker reads its total and deletes it. The
two marks around a region cost a fixed number of instructions, measured on empty regions once
the cell is warm and taken off every region. Why this cut and not another (the difference of
two whole runs, a toggle on a named function) is in docs/measurements.md ("Instruction counts").
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PtregError, UnusableInput
from ..records.counting import BlasPool, CountedCell, CountedUnder, CountedWorker

TOOL = "callgrind"
MARKER = "ctermid"  # a libc function the worker calls to mark a region, and nothing else calls
DUMP_NAME = "callgrind.out"
# What every counted worker runs with, whatever the caller's environment says: a second thread
# would add its instructions whenever it ran, and str hashes (dict and set order) change with
# the hash seed, and with them the work some code does.
HASH_SEED = "0"
COUNTED_VARIABLES = {
    "PYTHONHASHSEED": HASH_SEED,
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "BLIS_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
}
# Where the worker finds callgrind's dumps; set by the executor for a counted worker only.
FOLDER_VARIABLE = "PTREG_COUNT_DIR"
# The options that decide what is counted, as recorded; the output file is added per worker.
OPTIONS = [f"--tool={TOOL}", f"--dump-before={MARKER}", "--quiet"]
EMPTY_REGIONS = 20  # empty regions for the marks' own cost; the least is taken, once Python has specialized the path


def valgrind() -> str:
    """valgrind's path; unusable input (the spec asks for what this machine lacks) when absent."""
    found = shutil.which("valgrind")
    if found is None:
        raise UnusableInput(
            "timer 'instructions' needs valgrind, which is not on PATH (Debian: apt-get install valgrind)",
        )
    return found


def valgrind_version() -> str | None:
    """What ``valgrind --version`` says; unknown when it cannot be run."""
    try:
        done = subprocess.run([valgrind(), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError, PtregError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def worker_command(python: list[str], folder: Path) -> list[str]:
    """The command line of a counted worker: ``python``, the worker's own command line, which
    starts Python itself (never a launcher script, whose child valgrind would not follow), under
    callgrind."""
    return [valgrind(), *OPTIONS, f"--callgrind-out-file={folder / DUMP_NAME}", *python]


def counted_environment(folder: Path) -> dict[str, str]:
    """The variables a counted worker gets on top of every worker's."""
    return {**COUNTED_VARIABLES, FOLDER_VARIABLE: str(folder)}


class InstructionClock:
    """Marks in the worker, and the instructions callgrind counted between two of them.

    A mark only calls ``ctermid``: reading and deleting a dump is done after the mark that
    ends a region, so that it lands in the gap before the next region and never inside one."""

    def __init__(self, folder: Path):
        self.base = folder / DUMP_NAME
        self.marks = 0
        self.read = 0  # the dumps up to this mark are removed

    def mark(self) -> int:
        """Mark here; the number of this mark."""
        os.ctermid()  # callgrind dumps (and zeroes) its counts on entering ctermid
        self.marks += 1
        return self.marks

    def since(self, first: int, last: int) -> int:
        """Instructions executed from mark ``first`` to mark ``last``; every dump up to ``last``
        is read and removed."""
        executed = 0
        for number in range(first + 1, last + 1):
            executed += _executed(self._dump(number))
        for number in range(self.read + 1, last + 1):
            self._dump(number).unlink(missing_ok=True)
        self.read = max(self.read, last)
        if self._dump(self.marks + 1).exists():
            raise UnusableInput(
                f"something in the worker besides ptreg called {MARKER}(), so callgrind dumped where no region "
                "ends: its counts cannot be attributed"
            )
        return executed

    def _dump(self, number: int) -> Path:
        return Path(f"{self.base}.{number}")


def _executed(dump: Path) -> int:
    """The instructions a callgrind dump holds: its ``summary:`` line, in the header."""
    try:
        with dump.open() as handle:
            for line in handle:
                if line.startswith("summary:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError) as exc:
        raise UnusableInput(f"cannot read callgrind's dump {dump}: {exc}") from None
    raise UnusableInput(f"callgrind's dump {dump} has no summary line")


@dataclass(frozen=True)
class Reading:
    """One region: its wall time, and its instructions when counted."""

    seconds: float
    instructions: int | None


@dataclass(frozen=True)
class Started:
    seconds: float
    mark: int | None  # the clock's mark that opened the region, when counted


class Stopwatch:
    """Times a region in seconds, and counts it in instructions when the worker runs under
    callgrind. A workload times its regions through this and never through a clock of its own."""

    def __init__(self, clock: InstructionClock | None = None):
        self.clock = clock
        self.marks_cost = 0  # instructions of an empty region, taken off every region

    def start(self) -> Started:
        mark = None
        if self.clock is not None:
            # Python's collector runs after a number of allocations: collected here, every
            # region starts at the same point of its cycle, so that a collection falls in the
            # same place of every repeat (a region's own garbage is still collected in it).
            gc.collect()
            mark = self.clock.mark()  # the mark stays outside the seconds
        return Started(time.perf_counter(), mark)

    def stop(self, started: Started) -> Reading:
        seconds = time.perf_counter() - started.seconds
        if self.clock is None or started.mark is None:
            return Reading(seconds, None)
        executed = self.clock.since(started.mark, self.clock.mark()) - self.marks_cost
        if executed < 1:
            raise UnusableInput("a counted region executed no instructions beyond its marks")
        return Reading(seconds, executed)

    def calibrate(self) -> int:
        """Measure what the marks around an empty region cost, once the cell is warm: the
        least over several, once Python has specialized the path.

        First the warm worker's objects (its modules, the backend, the workload's set-up, all
        alive until the worker ends) are frozen out of the collector's reach: the collection
        before each region then walks only what was made since, not every object of the worker
        (under valgrind that walk was a quarter to a half of a counted worker's time), and a full collection
        inside a region no longer counts how many modules the worker happens to hold."""
        assert self.clock is not None
        gc.collect()
        gc.freeze()
        costs = []
        for _ in range(EMPTY_REGIONS):
            started = self.start()
            reading = self.stop(started)
            costs.append(reading.instructions or 0)
        self.marks_cost = min(costs)
        return self.marks_cost


WALL_CLOCK = Stopwatch()


def stopwatch_for(timer: str) -> Stopwatch:
    """The worker's stopwatch for a task's timer; counting needs the worker under callgrind."""
    if timer != "instructions":
        return Stopwatch()
    folder = os.environ.get(FOLDER_VARIABLE)
    if not folder:
        raise UnusableInput(f"timer 'instructions' needs the worker started under valgrind (no {FOLDER_VARIABLE})")
    return Stopwatch(InstructionClock(Path(folder)))


def worker_report(stopwatch: Stopwatch) -> CountedWorker:
    """What this counted worker sees of the CPU valgrind emulates, and the BLAS kernel it chose."""
    return CountedWorker(cpu_features=_cpu_features(), blas=_blas_pools(), marker_instructions=stopwatch.marks_cost)


def _cpu_features() -> list[str] | None:
    """The features NumPy's dispatch found (under valgrind: those valgrind emulates)."""
    import importlib

    for module in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):  # NumPy 2, then 1
        try:
            features = getattr(importlib.import_module(module), "__cpu_features__", None)
        except ImportError:
            continue
        if isinstance(features, dict):
            return sorted(str(name) for name, present in features.items() if present)
    return None


def _blas_pools() -> list[BlasPool]:
    from threadpoolctl import threadpool_info

    def text(pool: dict[str, Any], key: str) -> str | None:
        value = pool.get(key)
        return str(value) if value is not None else None

    return [
        BlasPool(
            user_api=text(p, "user_api"),
            internal_api=text(p, "internal_api"),
            version=text(p, "version"),
            architecture=text(p, "architecture"),
            num_threads=p.get("num_threads") if isinstance(p.get("num_threads"), int) else None,
        )
        for p in threadpool_info()
    ]


def counted_under(cells: list[tuple[str, str, dict[str, Any] | None]]) -> CountedUnder:
    """How a run's counts were taken: valgrind's version and the options every counted worker
    ran with, and each (backend, config, what its worker reported once warm)."""
    return CountedUnder(
        tool=TOOL,
        valgrind=valgrind_version(),
        options=list(OPTIONS),
        hash_seed=HASH_SEED,
        environment=dict(COUNTED_VARIABLES),
        cells=[
            CountedCell(
                backend=backend,
                config=config,
                worker=CountedWorker.model_validate(report) if report is not None else None,
            )
            for backend, config, report in cells
        ],
    )
