"""Run folders: ``runs/<attempt id>/<run id>/`` with ``results.json`` and ``environment.json``.

The folder is written under a hidden temporary name and renamed into place, so a reader sees
a whole run or none, and a run is never overwritten.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import PtregError, UnusableInput
from ..records.problems import first_schema_error
from ..records.run_results import RunResults
from ..text import json_type
from .faults import crash_point
from .jsonio import dumps_pretty, fsync_directory, read_json, refuse_outside, stage_text
from .names import RUNS_DIR as RUNS_DIR

RESULTS_FILE = "results.json"
ENVIRONMENT_FILE = "environment.json"
STAGING_PREFIX = ".tmp-"  # a run folder being written; left over only by a killed process


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


def read_results(folder: Path, root: Path | None = None) -> RunResults:
    """The run's results; with ``root``, refused when a symlink leads them out of the registry."""
    path = folder / RESULTS_FILE
    if root is not None:  # a symlinked run folder (or file) could make any file pass for the results
        refuse_outside(root, path)
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise UnusableInput(f"{path}: expected a JSON object, got {json_type(raw)}")
    try:
        return RunResults.model_validate(raw)
    except ValidationError as exc:
        raise UnusableInput(first_schema_error(exc, str(path))) from None


def read_environment(root: Path, folder: Path) -> dict[str, Any]:
    """The run's environment.json, refused when it is not a JSON object inside the registry."""
    path = folder / ENVIRONMENT_FILE
    refuse_outside(root, path)
    environment = read_json(path)
    if not isinstance(environment, dict):
        raise UnusableInput(f"{path}: expected a JSON object, got {json_type(environment)}")
    return environment


def check_folder(root: Path, attempt_id: str, run_id: str) -> str | None:
    """Why the run folder an attempt links to is unusable, or None when it is whole."""
    folder = run_folder(root, attempt_id, run_id)
    if not folder.is_dir():
        return f"run folder {folder} does not exist"
    try:
        results = read_results(folder, root)
        read_environment(root, folder)
    except PtregError as exc:
        return exc.message
    if results.run_id != run_id or results.attempt != attempt_id:
        return (
            f"{folder / RESULTS_FILE}: names run {results.run_id!r} of {results.attempt!r}, "
            f"not {run_id!r} of {attempt_id!r}"
        )
    return None
