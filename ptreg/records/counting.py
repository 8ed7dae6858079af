"""How a run's instruction counts were taken: what differs under valgrind from the machine.

A run whose evaluator says ``"timer": "instructions"`` counts each repeat's timed region in
instructions executed, with each cell's worker run under valgrind's callgrind
(engine/callgrind.py). A count depends on more than the code measured: valgrind emulates a CPU
of its own (without AVX-512, for one), so NumPy's dispatch and the BLAS kernel chosen at start
differ from a run on the bare machine, and so do they between valgrind versions. This records
those, so that a count is compared only with a count taken the same way
(``counted_the_same_way``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .refs import INT_MAX

UNIT: Literal["instructions"] = "instructions"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class BlasPool(_Strict):
    """One BLAS or OpenMP pool, as threadpoolctl saw it inside the counted worker."""

    user_api: str | None
    internal_api: str | None
    version: str | None
    architecture: str | None = Field(description="The kernel set the library chose at start (OpenBLAS's corename).")
    num_threads: int | None


class CountedWorker(_Strict):
    """What one counted worker saw of the CPU valgrind emulates, and what a mark costs there."""

    cpu_features: list[str] | None = Field(
        description="The CPU features NumPy found and uses under valgrind (its dispatch); unknown without NumPy."
    )
    blas: list[BlasPool] = Field(description="Every BLAS/OpenMP pool loaded, with the kernel it chose.")
    marker_instructions: int = Field(
        ge=0,
        le=INT_MAX,
        description="Instructions of an empty region (the two marks around it), taken off every counted region.",
    )


class CountedCell(_Strict):
    backend: str
    config: str
    worker: CountedWorker | None = Field(description="Unknown when the worker ended before it was warm.")


class CountedUnder(_Strict):
    """The run's instruction timer: the tool, its version and options, and each cell's view."""

    unit: Literal["instructions"] = UNIT
    tool: str = Field(description="valgrind's tool that counted: callgrind.")
    valgrind: str | None = Field(description="`valgrind --version`; unknown when it could not be read.")
    options: list[str] = Field(description="The tool's options, as the worker was started with them.")
    hash_seed: str = Field(description="PYTHONHASHSEED of every counted worker.")
    environment: dict[str, str | None] = Field(
        description="The variables set for a counted worker (thread counts), null when unset."
    )
    cells: list[CountedCell]


def counted_the_same_way(a: CountedUnder | None, b: CountedUnder | None) -> list[str]:
    """What differs between the ways two runs were counted, one short phrase each; empty when
    their counts may be compared. A run timed in seconds is never comparable with a counted one."""
    if a is None and b is None:
        return []
    if a is None or b is None:
        return ["one run is timed in seconds, the other counted in instructions"]
    found: list[str] = []
    for name in ("unit", "tool", "valgrind", "options", "hash_seed", "environment"):
        mine, theirs = getattr(a, name), getattr(b, name)
        if mine != theirs:
            found.append(f"{name}: {_shown(mine)} vs {_shown(theirs)}")
    theirs_by_cell = {(c.config, c.backend): c.worker for c in b.cells}
    for cell in a.cells:
        key = (cell.config, cell.backend)
        if key not in theirs_by_cell:
            continue
        other = theirs_by_cell[key]
        if cell.worker is None or other is None:
            continue  # a cell that never got warm has no count to compare
        if cell.worker.cpu_features != other.cpu_features:
            found.append(f"{cell.backend}/{cell.config}: CPU features seen under valgrind differ")
        if _kernels(cell.worker) != _kernels(other):
            found.append(
                f"{cell.backend}/{cell.config}: BLAS {_shown(_kernels(cell.worker))} vs {_shown(_kernels(other))}"
            )
    return found


def _kernels(worker: CountedWorker) -> list[tuple[str, str, str]]:
    """Which BLAS ran, in which version, with which kernel set: a count changes with each."""
    return sorted((p.internal_api or "?", p.version or "?", p.architecture or "?") for p in worker.blas)


def _shown(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."
