"""A run: the record of one measurement under a frozen evaluator, and its folder.

``runs/<attempt id>/<run id>/`` holds ``results.json`` (every sample, the summaries, parity
and attribution, the evaluator, the command line, times and status) and
``environment.json`` (provenance, see ``environment.py``). The folder is written under a
temporary name and renamed into place, so a reader sees a whole run or none.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import EXIT_UNUSABLE, PtregError
from .evaluator import EvaluatorSpec
from .faults import crash_point
from .jsonio import dumps_pretty, fsync_directory, json_type, read_json, refuse_outside, stage_text
from .model import RUN_ID_PATTERN, AttemptId, Budget, RunStatus
from .problems import schema_problems
from .stats import Summary

RUNS_DIR = "runs"
RESULTS_FILE = "results.json"
ENVIRONMENT_FILE = "environment.json"
RESULTS_VERSION = 1
STAGING_PREFIX = ".tmp-"  # a run folder being written; left over only by a killed process

Kernel = Literal["forward", "backward_da", "backward_db"]
CellStatus = Literal["measured", "failed", "parity-failed", "budget-exhausted", "not-started", "interrupted"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ParityCheck(_Strict):
    kernel: Kernel
    shape: list[int] = Field(min_length=3, max_length=3, description="M, K, N of the product.")
    mode: Literal["bit-identical", "tolerance"]
    passed: bool
    max_abs_error: Optional[float]
    max_scaled_error: Optional[float]
    detail: str


class ParityOutcome(_Strict):
    backend: str
    passed: bool
    summary: str = Field(description="One line; names the worst mismatch when it failed.")
    checks: list[ParityCheck]


class StepSample(_Strict):
    """One timed training step."""

    repeat: int = Field(ge=0)
    step: int = Field(ge=0)
    seconds: float = Field(gt=0)
    kernel_seconds: dict[Kernel, float]
    loss: float


class KernelSample(_Strict):
    """One repeat of ``calls`` back-to-back calls of one kernel at one layer's shape."""

    repeat: int = Field(ge=0)
    layer: str
    kernel: Kernel
    calls: int = Field(ge=1)
    seconds_per_call: float = Field(gt=0)


class Share(_Strict):
    ms: float
    share: float = Field(description="Fraction of the step.")
    amdahl_bound: Optional[float] = Field(
        description="End-to-end speedup if this part took no time: 1 / (1 - share); unknown at share 1."
    )


class Attribution(_Strict):
    """Where one training step's time goes (medians over repeats of per-repeat means)."""

    step_ms: float
    forward: Share
    backward_da: Share
    backward_db: Share
    other: Share
    bounding_kernel: Kernel = Field(description="The kernel with the largest share: the one that bounds the step.")
    headroom: Optional[float] = Field(description="The bounding kernel's Amdahl bound.")
    all_matmuls_bound: Optional[float] = Field(description="Speedup if all three kernels took no time.")


class KernelTiming(_Strict):
    layer: str
    kernel: Kernel
    shape: list[int] = Field(min_length=3, max_length=3, description="M, K, N.")
    per_step: int = Field(ge=1, description="Calls of this layer per training step.")
    seconds: Summary
    gflops: Summary
    vs_naive: Optional[float] = Field(description="GFLOP/s ratio to naive in the same run.")
    vs_peer: Optional[float] = Field(description="GFLOP/s ratio to numpy-blas in the same run.")
    vs_baseline: Optional[float]


class Cell(_Strict):
    """One (backend, config) pair, measured in its own worker process."""

    backend: str
    config: str
    status: CellStatus
    reason: Optional[str] = None
    wall_seconds: Optional[float] = None
    worker: Optional[dict[str, Any]] = Field(default=None, description="What the worker reported: threads, pid.")
    step_samples: Optional[list[StepSample]] = None
    kernel_samples: Optional[list[KernelSample]] = None
    ms_per_step: Optional[Summary] = Field(default=None, description="Over repeats, each a repeat's mean.")
    tokens_per_second: Optional[Summary] = None
    step_gflops: Optional[float] = Field(
        default=None, description="kernels: GFLOP/s of one training step's linear layers (all three kernels)."
    )
    spread_too_wide: Optional[bool] = None
    vs_naive: Optional[float] = Field(default=None, description="Speedup over naive in the same run.")
    vs_baseline: Optional[float] = None
    attribution: Optional[Attribution] = None
    kernels: Optional[list[KernelTiming]] = None
    loss_first: Optional[float] = None
    loss_last: Optional[float] = None


class RunResults(_Strict):
    """The file ``results.json``."""

    results_version: Literal[1]
    run_id: Optional[str] = Field(pattern=RUN_ID_PATTERN, description="Null for an ad hoc `ptreg bench`.")
    attempt: Optional[AttemptId]
    evaluator: Optional[str] = Field(description="name@hash12 of the frozen evaluator; null for bench.")
    evaluator_sha256: Optional[str]
    evaluator_version: int
    spec: EvaluatorSpec
    budget: Optional[Budget]
    command: list[str]
    started_at: str
    finished_at: str
    status: RunStatus
    reason: Optional[str]
    ptreg_version: str
    parity: list[ParityOutcome]
    cells: list[Cell]


def runs_dir(root: Path, attempt_id: str) -> Path:
    return root / RUNS_DIR / attempt_id


def run_folder(root: Path, attempt_id: str, run_id: str) -> Path:
    return runs_dir(root, attempt_id) / run_id


def new_run_id(root: Path, attempt_id: str, started: str) -> str:
    """``YYYYMMDDTHHMMSSZ`` of the start, with ``-2``, ``-3``... when that second is taken."""
    base = started.replace("-", "").replace(":", "")[:15] + "Z"
    candidate, n = base, 1
    while run_folder(root, attempt_id, candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def write_run(root: Path, results: RunResults, environment: dict[str, Any]) -> Path:
    """Write the run folder whole: both files in a hidden temporary folder, then one rename."""
    assert results.attempt is not None and results.run_id is not None
    parent = runs_dir(root, results.attempt)
    refuse_outside(root, parent, "the run is not written there")
    parent.mkdir(parents=True, exist_ok=True)
    final = parent / results.run_id
    staging = parent / f"{STAGING_PREFIX}{results.run_id}-{os.getpid()}"
    staging.mkdir()
    try:
        for name, data in ((RESULTS_FILE, results.model_dump(mode="json")), (ENVIRONMENT_FILE, environment)):
            staged = stage_text(staging, dumps_pretty(data), prefix=f".{name}.")
            os.replace(staged, staging / name)
            crash_point()
        fsync_directory(staging)
        os.rename(staging, final)  # fails if the folder exists: a run is never overwritten
        crash_point()  # the folder is in place; the attempt does not point to it yet
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_directory(parent)
    return final


def read_results(folder: Path, root: Optional[Path] = None) -> RunResults:
    """The run's results; with ``root``, refused when a symlink leads them out of the registry."""
    path = folder / RESULTS_FILE
    if root is not None:  # a symlinked run folder (or file) could make any file pass for the results
        refuse_outside(root, path)
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise PtregError(f"{path}: expected a JSON object, got {json_type(raw)}", EXIT_UNUSABLE)
    try:
        return RunResults.model_validate(raw)
    except ValidationError as exc:
        first = next(iter(schema_problems(exc, attempt_id=None, pointer="", file=str(path))))
        raise PtregError(f"{first.location()}: {first.message}", EXIT_UNUSABLE) from None


def check_folder(root: Path, attempt_id: str, run_id: str) -> Optional[str]:
    """Why the run folder an attempt links to is unusable, or None when it is whole."""
    folder = run_folder(root, attempt_id, run_id)
    if not folder.is_dir():
        return f"run folder {folder} does not exist"
    try:
        results = read_results(folder, root)
        refuse_outside(root, folder / ENVIRONMENT_FILE)
        environment = read_json(folder / ENVIRONMENT_FILE)
    except PtregError as exc:
        return exc.message
    if not isinstance(environment, dict):
        return f"{folder / ENVIRONMENT_FILE}: expected a JSON object, got {json_type(environment)}"
    if results.run_id != run_id or results.attempt != attempt_id:
        return f"{folder / RESULTS_FILE}: names run {results.run_id!r} of {results.attempt!r}, not {run_id!r} of {attempt_id!r}"
    return None
