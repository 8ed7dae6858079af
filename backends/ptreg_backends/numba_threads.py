"""From how many elements each memory-bound op of the numba backend runs its parallel kernel,
chosen per machine and thread count, and the per-machine memory of that choice.

Waking a second thread costs microseconds, more on a machine whose other cores are busy, and
an op of a few thousand elements is done in less: below some size the serial kernel wins. Where
is a property of the machine (its cores, caches, memory, load) and of each op's work per
element (GELU's tanh pays a thread earlier than an add), so it is measured, per kernel, on the
backend's thread count (``numba_op_timing``), as the register tile is (``numba_tiles``).

Each kernel's threshold is the smallest measured size from which the parallel kernel was resolved
faster (the 95% interval of its per-round parallel/serial ratios below 1) at that size and every
larger one measured; None when it was not at the largest: the kernel then runs serially at
every size. A noisy machine so gets the serial kernel wherever the gain is not clear.

The choice is kept in ``numba-threads.json`` in ptreg's cache folder, one entry per key: the tile
cache's machine key, the CPU count and the thread count. An entry is used only when its key, its
sizes and its kernels match exactly and every threshold is one of the sizes (or None); anything
else (another machine, a forged number, a file that is a symlink, another user's, unreadable or
of another format) counts as none, and the backend measures again and rewrites the file
atomically. Nothing here imports numba.

``PTREG_NUMBA_PARALLEL_MIN``: a whole number of elements from which every op runs parallel
(nothing measured or remembered), or ``default``: the fixed threshold below, not calibrated.
Unset, the backend uses the remembered thresholds, else measures them (a few seconds).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptreg.engine.environment import cache_folder
from ptreg.store.jsonio import JsonError, atomic_write_text, decode_json, read_bytes
from ptreg.store.workfiles import file_problem
from ptreg_backends.numba_tiles import key_id
from ptreg_backends.numba_tiles import machine_key as tile_machine_key

# What the backend does when nothing is measured: before the thresholds were measured, one fixed
# size chosen on one machine whose second core was often busy (docs/backends.md, numba's ops).
DEFAULT_PARALLEL_MIN = 1 << 21

# The kernels whose threshold is measured: the memory-bound ops, forward and backward. Attention
# is not among them: its size is counted in multiply-adds and it is parallel at every config.
KERNELS: tuple[str, ...] = (
    "encoder_forward",
    "encoder_backward",
    "layernorm_forward",
    "layernorm_backward",
    "residual_layernorm_forward",
    "residual_layernorm_backward",
    "gelu_forward",
    "gelu_backward",
    "bias_gelu_forward",
    "bias_gelu_backward",
    "bias_forward",
    "bias_backward",
    "residual_add",
    "crossentropy_forward",
    "crossentropy_backward",
    "adamw_update",
)

# 2^14 to 2^22 elements: the memory-bound ops of the step's configs lie in it (xl's layernorm
# 2^18, its GELU 2^20, AdamW's largest tensor 2^21)
SIZES: tuple[int, ...] = tuple(1 << p for p in range(14, 23))

THRESHOLD_VARIABLE = "PTREG_NUMBA_PARALLEL_MIN"
CACHE_FILE = "numba-threads.json"
CACHE_FORMAT = 1
CACHE_MAX_BYTES = 1 << 20  # about a kilobyte per entry

Thresholds = dict[str, int | None]


def machine_key(threads: int) -> dict[str, Any]:
    """What a threshold depends on: the tile cache's key (CPU model and flags, numba and its
    target), how many CPUs there are, and how many threads the kernels run on."""
    return {**tile_machine_key(), "cpu_count": os.cpu_count(), "threads": threads}


def cache_path() -> Path:
    return cache_folder() / CACHE_FILE


def decide(ratios: dict[str, dict[int, list[float]]]) -> Thresholds:
    """Each kernel's threshold from its per-round parallel/serial ratios per size (in the order
    taken): the smallest size from which, at that size and every larger one, the parallel kernel
    was resolved faster, the 95% interval of its typical ratio wholly below 1
    (``ptreg.engine.stats.log_interval``); None when that does not hold at the largest size."""
    from ptreg.engine.stats import log_interval  # SciPy's t quantile: not for listing backends

    thresholds: Thresholds = {}
    for kernel, by_size in ratios.items():
        least: int | None = None
        for size in sorted(by_size, reverse=True):
            interval = log_interval(by_size[size], in_order=True)
            if interval is None or not interval[1] < 1.0:  # unknown (a round, a NaN) is no win either
                break
            least = size
        thresholds[kernel] = least
    return thresholds


def _entries(path: Path) -> dict[str, Any]:
    """The file's entries by key id; none when it is missing, not a regular file of this user
    (a symlink is never followed), unreadable, or of another format."""
    try:
        if file_problem(path) is not None:
            return {}
        document = decode_json(read_bytes(path, CACHE_MAX_BYTES, follow=False), str(path))
    except (OSError, JsonError):  # OSError: the folder's name is a file, or cannot be searched
        return {}
    if not isinstance(document, dict) or document.get("format") != CACHE_FORMAT:
        return {}
    entries = document.get("entries")
    return entries if isinstance(entries, dict) else {}


def _valid_thresholds(found: Any) -> bool:
    if not isinstance(found, dict) or set(found) != set(KERNELS):
        return False
    # type() rather than isinstance: true is an int to Python, never a size here
    return all(value is None or (type(value) is int and value in SIZES) for value in found.values())


def remembered(threads: int, path: Path | None = None) -> Thresholds | None:
    """This machine's thresholds at ``threads``, when the file holds a valid entry for exactly
    its key, measured at exactly these sizes."""
    key = machine_key(threads)
    entry = _entries(path or cache_path()).get(key_id(key))
    if not isinstance(entry, dict) or entry.get("key") != key or entry.get("sizes") != list(SIZES):
        return None
    found = entry.get("thresholds")
    if not isinstance(found, dict) or not _valid_thresholds(found):
        return None
    return dict(found)


def remember(threads: int, thresholds: Thresholds, measured: dict[str, Any], path: Path | None = None) -> Path:
    """Add this machine's entry at ``threads``, atomically: other keys' entries stay, an
    unreadable file is replaced, a symlink or another user's file is left alone (an OSError)."""
    if not _valid_thresholds(thresholds):
        raise ValueError(f"not thresholds of {', '.join(KERNELS)} among the measured sizes: {thresholds!r}")
    path = path or cache_path()
    foreign = file_problem(path)
    if foreign is not None:
        raise PermissionError(f"{path}: {foreign}, not ptreg's cache file; left alone")
    entries = _entries(path)
    key = machine_key(threads)
    entries[key_id(key)] = {"key": key, "sizes": list(SIZES), "thresholds": thresholds, **measured}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"format": CACHE_FORMAT, "entries": entries}, indent=2, sort_keys=True) + "\n")
    return path


def forced() -> int | str | None:
    """What PTREG_NUMBA_PARALLEL_MIN says: a number of elements, "default", or None when unset;
    ValueError when it is neither."""
    value = os.environ.get(THRESHOLD_VARIABLE, "").strip()
    if not value:
        return None
    if value == "default":
        return value
    if value.isascii() and value.isdigit() and len(value) <= 19:  # no int() of a huge, signed or non-ASCII string
        return int(value)
    raise ValueError(f"{THRESHOLD_VARIABLE}={value!r} is neither a whole number of elements nor 'default'")


@dataclass(frozen=True)
class ParallelChoice:
    """The thresholds in use at a thread count and where they came from."""

    threads: int
    # "one thread" (no parallel kernel runs), "PTREG_NUMBA_PARALLEL_MIN", "cache", "measured"
    # (just now), or "default, not calibrated" (DEFAULT_PARALLEL_MIN, the one unmeasured case)
    source: str
    least: int  # for every kernel without a threshold of its own in per_kernel
    per_kernel: Thresholds  # measured: each kernel's own (overrides least for it)
    cache_file: str | None  # where they are remembered (None: not measured, or not writable)
    note: str | None = None  # why nothing was measured, when that was not asked for

    def details(self) -> dict[str, Any]:
        """For the cell's provenance, beside the tile."""
        return {
            "threads": self.threads,
            "source": self.source,
            "parallel_min": self.least,
            "per_kernel": dict(self.per_kernel) or None,
            "cache": self.cache_file,
            "note": self.note,
        }
