"""Generators of hostile bundles for the corpus (tests/data/bad/cases-bundle.json): inputs too
large to keep as files (a bundle past its bounds) or that cannot be kept in git as they are (a
folder bundle holding a symlink). Each takes (registry, a folder outside it, a work folder) and
returns the bundle that ``{case_file}`` names."""

from __future__ import annotations

import gzip
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

from ptreg.store.bundle import BUNDLE_MAX_BYTES, BUNDLE_MAX_MEMBERS, RUN_FILE_MAX_BYTES

CHUNK = b"\0" * (1024 * 1024)


def _folder_bundle(root: Path, work: Path) -> Path:
    """The registry copied as a folder bundle (its working files stay behind when it is read)."""
    return Path(shutil.copytree(root, work / "bundle", symlinks=True))


def symlinked_folder_in_folder_bundle(root: Path, outside: Path, work: Path) -> Path:
    bundle = _folder_bundle(root, work)
    shutil.move(bundle / "runs" / "measured", outside / "measured")
    (bundle / "runs" / "measured").symlink_to(outside / "measured", target_is_directory=True)
    return bundle


def symlinked_record_in_folder_bundle(root: Path, outside: Path, work: Path) -> Path:
    bundle = _folder_bundle(root, work)
    [record] = sorted(p for p in bundle.glob("*.json") if p.name != "registry.json")[:1]
    (bundle / "zz-linked.json").symlink_to(record.name)
    return bundle


def folder_where_file_in_folder_bundle(root: Path, outside: Path, work: Path) -> Path:
    bundle = _folder_bundle(root, work)
    (bundle / "zz-folder.json").mkdir()
    return bundle


def _streamed(path: Path, members: list[tuple[str, int, bytes]]) -> Path:
    """A .tar.gz written header by header, each member's zeros streamed into gzip."""
    with gzip.open(path, "wb", compresslevel=1) as gz:
        for name, size, kind in members:
            info = tarfile.TarInfo(name)
            info.size, info.type = size, kind
            gz.write(info.tobuf(format=tarfile.GNU_FORMAT))
            for start in range(0, size, len(CHUNK)):
                gz.write(CHUNK[: min(len(CHUNK), size - start)])
            gz.write(b"\0" * (-size % tarfile.BLOCKSIZE))
        gz.write(b"\0" * 2 * tarfile.BLOCKSIZE)
    return path


def bundle_past_the_member_count(root: Path, outside: Path, work: Path) -> Path:
    """One folder a registry may hold, listed as a member once more than the bound allows."""
    info = tarfile.TarInfo("runs/measured")
    info.type = tarfile.DIRTYPE
    path = work / "many.tar.gz"
    with gzip.open(path, "wb", compresslevel=1) as gz:
        gz.write(info.tobuf(format=tarfile.GNU_FORMAT) * (BUNDLE_MAX_MEMBERS + 1) + b"\0" * 2 * tarfile.BLOCKSIZE)
    return path


def bundle_past_the_total(root: Path, outside: Path, work: Path) -> Path:
    size = RUN_FILE_MAX_BYTES - tarfile.BLOCKSIZE
    names = [f"runs/measured/20240101T00000{i}Z/results.json" for i in range(BUNDLE_MAX_BYTES // size + 1)]
    return _streamed(work / "total.tar.gz", [(n, size, tarfile.REGTYPE) for n in names])


BUNDLE_GENERATORS: dict[str, Callable[[Path, Path, Path], Path | None]] = {
    f.__name__: f
    for f in (
        symlinked_folder_in_folder_bundle,
        symlinked_record_in_folder_bundle,
        folder_where_file_in_folder_bundle,
        bundle_past_the_member_count,
        bundle_past_the_total,
    )
}
