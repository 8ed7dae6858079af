"""The machine's measured ceilings (float32 compute peak, memory bandwidth) per thread count,
cached per machine as the numba tile choice is, and the floors of a tinygpt-train run from them.

The ceilings take a minute or more to measure, so nothing measures them unasked: ``python
benchmarks/step_floor.py --remember`` measures and caches them (``step_ceilings.py`` holds the
measuring). The file is ``step-ceilings.json`` in ptreg's cache folder
(``environment.cache_folder``), one entry per machine key: the CPU's model and flags, the
architecture and the CPU count. An entry whose key does not match exactly is another machine's
and is not used; a file that cannot be read, is a symlink, another user's or not a regular file,
or fails its schema counts as no ceilings: the floors are then unknown, never guessed.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from ..errors import UnusableInput
from ..records.configs import CONFIGS
from ..records.evaluator import EvaluatorSpec
from ..records.measured import Positive, _Strict
from ..records.step_work import ConfigFloors, config_floors
from ..store.jsonio import JsonError, atomic_write_text, decode_json, read_bytes
from ..store.workfiles import file_problem
from .environment import cache_folder, cpu_flags, cpu_model

CACHE_FILE = "step-ceilings.json"
CACHE_MAX_BYTES = 4 * 2**20  # a few hundred bytes per machine
HOW_TO_MEASURE = "python benchmarks/step_floor.py --remember"


class AtThreads(_Strict):
    peak_gflops: Positive
    bandwidth_gbs: Positive
    cache_gbs: Positive | None = None  # the triad within the last-level cache: for reading, not the floors


class Entry(_Strict):
    key: dict[str, str | int | None]
    measured_at: str = Field(max_length=64)
    threads: dict[Annotated[int, Field(ge=1, le=1024)], AtThreads] = Field(min_length=1)


class CacheFile(_Strict):
    format: Literal[1]
    entries: dict[str, Entry]


def machine_key() -> dict[str, str | int | None]:
    """What the ceilings depend on: the CPU (model and every flag: a VM may hide AVX-512), the
    architecture, and how many CPUs there are to run threads on."""
    flags = cpu_flags()
    return {
        "cpu_model": cpu_model(),
        "cpu_flags": " ".join(sorted(flags)) if flags is not None else None,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def key_id(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def cache_path() -> Path:
    return cache_folder() / CACHE_FILE


def _read(path: Path) -> CacheFile | None:
    """The file, or None when it is missing or not one ptreg wrote and may believe."""
    if file_problem(path) is not None:
        return None
    try:
        return CacheFile.model_validate(decode_json(read_bytes(path, CACHE_MAX_BYTES, follow=False), str(path)))
    except (JsonError, ValidationError):
        return None


def remembered(path: Path | None = None) -> Entry | None:
    """This machine's ceilings, when the cache holds an entry for exactly its key."""
    found = _read(path or cache_path())
    key = machine_key()
    entry = found.entries.get(key_id(key)) if found else None
    return entry if entry is not None and entry.key == key else None


def remember(threads: dict[int, AtThreads], path: Path | None = None) -> Path:
    """Add this machine's ceilings to the cache, atomically: other machines' entries stay, an
    unreadable file is replaced, a symlink or another user's file is left alone (an error)."""
    path = path or cache_path()
    foreign = file_problem(path)
    if foreign is not None:
        raise UnusableInput(f"{path}: {foreign}, not ptreg's ceilings cache; left alone")
    found = _read(path) or CacheFile(format=1, entries={})
    key = machine_key()
    measured_at = datetime.now(UTC).isoformat(timespec="seconds")
    found.entries[key_id(key)] = Entry(key=key, measured_at=measured_at, threads=threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(found.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    return path


def run_floors(spec: Any, path: Path | None = None) -> dict[str, ConfigFloors] | None:
    """The floors of each config of a tinygpt-train spec from this machine's cached ceilings at
    the spec's thread count; None when the spec times no step or no such ceilings are cached."""
    if not isinstance(spec, EvaluatorSpec) or spec.workload != "tinygpt-train":
        return None
    entry = remembered(path)
    at = entry.threads.get(spec.threads) if entry is not None else None
    if entry is None or at is None:
        return None
    machine = key_id(entry.key)
    return {
        name: config_floors(CONFIGS[name], spec.threads, at.peak_gflops, at.bandwidth_gbs, machine, entry.measured_at)
        for name in spec.configs
    }


def missing_note(threads: int) -> str:
    """What to say when a run has no floors: how to get them."""
    return (
        f"distance to the floor: unknown (no ceilings cached for this machine at {threads} thread(s)); "
        f"{HOW_TO_MEASURE} measures and caches them (a minute or more)"
    )
