"""The numba backend's register tiles, and the per-machine memory of which one is fastest.

Nothing here imports numba, so ``ptreg backends`` can say which tile this machine uses without
starting it; the CPU is read as ptreg's provenance reads it (``ptreg.engine.environment``). The timing itself is in ``numba_gemm`` (``python -m ptreg_backends.numba_gemm --tune``).

The choice is kept in ``numba-tiles.json`` in the user's cache directory ($PTREG_CACHE_DIR,
else $XDG_CACHE_HOME/ptreg, else ~/.cache/ptreg), one entry per machine key: the CPU's model
and flags, numba's version and numba's compile target if one is forced. An entry whose key or
tile does not match exactly is foreign and ignored, as is a file that cannot be read: the
backend then times the candidates again and rewrites the file (atomically).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ptreg.engine.environment import cache_folder, cpu_flags, cpu_model
from ptreg.store.workfiles import file_problem


@dataclass(frozen=True)
class Tile:
    """A register tile (mr × nr sums, in vectors of vector_bits) and the cache blocks around it."""

    name: str
    mr: int  # rows of the register tile (values of L broadcast per step)
    nr: int  # columns of the register tile (nr / lanes vector loads of R per step)
    kc: int  # reduction chunk: a kc × nr strip of R stays in L1
    mc: int  # rows of L in a thread's block, packed per chunk: mc × kc stays in L2
    vector_bits: int  # 256 (8 float32 lanes) or 512 (16 lanes)
    needs: str | None  # the CPU flag without which it is not timed (None: runs anywhere)


# float32 throughout. AVX2 has 16 vector registers of 8 lanes, AVX-512 32 of 16. Each candidate
# keeps its sums in at most 28 registers of 32 (12 of 16 for AVX2), leaving room for the R
# vectors and the broadcast L value; which one wins is decided by timing, never by the CPU's name.
CANDIDATES: tuple[Tile, ...] = (
    # 6×16: 12 ymm of sums, two R loads per step; the shape of the earlier fixed kernel
    Tile("avx2-6x16", 6, 16, 256, 96, 256, None),
    # 4×24: 12 ymm of sums, three R loads per step (fewer broadcasts per multiply)
    Tile("avx2-4x24", 4, 24, 256, 96, 256, None),
    # 8×32: 16 zmm of sums, half the register file
    Tile("avx512-8x32", 8, 32, 256, 128, 512, "avx512f"),
    # 12×32: 24 zmm of sums
    Tile("avx512-12x32", 12, 32, 256, 144, 512, "avx512f"),
    # 14×32: 28 zmm of sums, the most that leaves two for R and one for the broadcast
    Tile("avx512-14x32", 14, 32, 256, 112, 512, "avx512f"),
    # 6×64: 24 zmm of sums, four R loads per step, a shorter chunk (a 32 KiB strip of R)
    Tile("avx512-6x64", 6, 64, 128, 96, 512, "avx512f"),
)
TILES = {tile.name: tile for tile in CANDIDATES}

TILE_VARIABLE = "PTREG_NUMBA_TILE"  # a candidate's name: use it, no tuning, nothing remembered
CACHE_FILE = "numba-tiles.json"
CACHE_FORMAT = 1


def runnable(tile: Tile, flags: set[str] | None = None) -> bool:
    """Whether ``tile`` is worth timing here: its register file exists (unknown flags: try all)."""
    flags = cpu_flags() if flags is None else flags
    return tile.needs is None or flags is None or tile.needs in flags


def numba_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numba")
    except PackageNotFoundError:
        return None


def machine_key() -> dict[str, Any]:
    """What a choice depends on: the CPU (model and every flag it reports: two machines with one
    model name can differ, a VM may hide AVX-512), numba's version (its LLVM), and the target
    numba compiles for when one is forced instead of the host."""
    flags = cpu_flags()
    return {
        "cpu_model": cpu_model(),
        "cpu_flags": " ".join(sorted(flags)) if flags is not None else None,
        "machine": platform.machine(),
        "numba": numba_version(),
        "numba_cpu_name": os.environ.get("NUMBA_CPU_NAME"),
        "numba_cpu_features": os.environ.get("NUMBA_CPU_FEATURES"),
    }


def key_id(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def cache_path() -> Path:
    return cache_folder() / CACHE_FILE


CACHE_MAX_BYTES = 16 * 1024 * 1024  # a few hundred bytes per machine


def _entries(path: Path) -> dict[str, Any]:
    """The file's entries by key id; missing, unreadable, of another format, or not a file of
    this user's (a symlink is never followed, a pipe never waited on): none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_size > CACHE_MAX_BYTES:
            return {}
        document = json.loads(os.read(fd, CACHE_MAX_BYTES + 1))
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    if not isinstance(document, dict) or document.get("format") != CACHE_FORMAT:
        return {}
    entries = document.get("entries")
    return entries if isinstance(entries, dict) else {}


def remembered(path: Path | None = None) -> dict[str, Any] | None:
    """This machine's entry, when the file holds a valid one for exactly this key."""
    key = machine_key()
    entry = _entries(path or cache_path()).get(key_id(key))
    if not isinstance(entry, dict) or entry.get("key") != key or entry.get("tile") not in TILES:
        return None  # foreign (another CPU or numba under a colliding id), or no candidate now
    if entry.get("params") != asdict(TILES[entry["tile"]]):
        return None  # a candidate of that name, re-shaped since: its timing says nothing now
    return entry


def remember(entry: dict[str, Any], path: Path | None = None) -> Path:
    """Add this machine's entry to the file, atomically (temp file, fsync, rename): entries of
    other machines stay, an unreadable file is replaced. Returns the file's path."""
    path = path or cache_path()
    foreign = file_problem(path)
    if foreign is not None:  # left alone: an OSError, as an unwritable cache is
        raise PermissionError(f"{path}: {foreign}, not ptreg's cache file; left alone")
    entries = _entries(path)
    entries[key_id(entry["key"])] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"format": CACHE_FORMAT, "entries": entries}, indent=2, sort_keys=True) + "\n"
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path


def forced() -> Tile | None:
    """The tile PTREG_NUMBA_TILE names, None when it is unset; ValueError naming the candidates
    when it names none of them."""
    name = os.environ.get(TILE_VARIABLE)
    if not name:
        return None
    if name not in TILES:
        raise ValueError(f"{TILE_VARIABLE}={name!r} is not a candidate (candidates: {', '.join(TILES)})")
    return TILES[name]


def describe_choice() -> str:
    """One short line for ``ptreg backends``: the tile this machine will use and why, read without
    numba (``python -m ptreg_backends.numba_gemm`` also names the cache file)."""
    try:
        tile = forced()
    except ValueError as error:
        return str(error)
    if tile is not None:
        return f"tile {tile.name} (forced by {TILE_VARIABLE})"
    entry = remembered()
    if entry is None:
        return "tile chosen on first use (none remembered for this machine)"
    return f"tile {entry['tile']} (timed here {entry.get('tuned_at', '?')})"
