"""A bundle: a whole registry in one file (``.tar.gz``) or folder, for moving it elsewhere.

It holds what the single-file ``attempts.json`` cannot: ``registry.json``, every record, every
frozen evaluator and every run folder, under the names they have in a registry directory, and
nothing else (no lock, journal or staged file). Reading one refuses, before anything is
written, a member that is not one of those names, not a regular file, or too large.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ..errors import CheckFailed, UnusableInput
from ..records.registry import Registry
from ..records.run_results import APART_FILE_NAME
from ..records.vocabulary import VOCABULARIES
from ..text import shorten
from .directory import IGNORE_FILE, IGNORED, RECORD_FILE_MAX_BYTES, REGISTRY_FILE, attempt_files
from .evaluator_files import EVALUATOR_FILE_MAX_BYTES, evaluator_files
from .jsonio import fsync_directory, read_json, refuse_outside
from .names import VOCABULARY_DIR
from .outputs import open_output, output_target, refuse_in_registry
from .runs import ENVIRONMENT_FILE, RESULTS_FILE, RUN_FILE_MAX_BYTES, RUNS_DIR, apart_file_names
from .vocabulary_files import TERM_FILE_MAX_BYTES, term_files

SUFFIXES = (".tar.gz", ".tgz")
# The bounds of a bundle, each far above any real registry (docs/registry.md says them): the
# largest run file so far is 0.3 MB, a whole registry 1.6 MB in 34 files. A bundle is read
# into memory before it is checked whole, so these bound what reading one can cost. A run's
# file is held to the bound every run file is written under (store/runs.py).
BUNDLE_MAX_BYTES = 64 * 1024 * 1024  # all members together
BUNDLE_MAX_MEMBERS = 100_000  # files and folders
_CHUNK = 1024 * 1024
_SLUG = r"[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*"
_RUN_FOLDER = rf"{RUNS_DIR}/{_SLUG}/[0-9]{{8}}T[0-9]{{6}}Z(?:-[0-9]+)?"
# the folders a registry keeps files in, which a tar may list as members of their own
_VOCABULARY = rf"{VOCABULARY_DIR}/(?:{'|'.join(VOCABULARIES)})"
_FOLDERS = re.compile(rf"evaluators|{RUNS_DIR}|{RUNS_DIR}/{_SLUG}|{_RUN_FOLDER}|{VOCABULARY_DIR}|{_VOCABULARY}")
# name -> the most bytes a member of that name may have
_MEMBERS = (
    (re.compile(re.escape(REGISTRY_FILE)), RECORD_FILE_MAX_BYTES),
    (re.compile(rf"{_SLUG}\.json"), RECORD_FILE_MAX_BYTES),
    (re.compile(rf"evaluators/{_SLUG}@[0-9a-f]{{12}}\.json"), EVALUATOR_FILE_MAX_BYTES),
    (re.compile(rf"{_VOCABULARY}/(?:{_SLUG}|~[0-9a-f]{{12}})\.json"), TERM_FILE_MAX_BYTES),
    (
        re.compile(rf"{_RUN_FOLDER}/(?:{RESULTS_FILE}|{ENVIRONMENT_FILE}|{APART_FILE_NAME})"),
        RUN_FILE_MAX_BYTES,
    ),
)


@dataclass
class Bundle:
    source: str
    files: dict[str, bytes] = field(default_factory=dict)  # name in a registry directory -> content

    @property
    def evaluators(self) -> list[str]:
        return sorted(n for n in self.files if n.startswith("evaluators/"))

    @property
    def run_folders(self) -> list[str]:
        return sorted({n.rsplit("/", 1)[0] for n in self.files if n.startswith(f"{RUNS_DIR}/")})


def is_bundle(path: Path) -> bool:
    return path.is_dir() or path.name.endswith(SUFFIXES)


def _limit(name: str) -> int | None:
    """The most bytes the member ``name`` may have, or None when no bundle holds such a name."""
    return next((most for pattern, most in _MEMBERS if pattern.fullmatch(name)), None)


def refuse_unreadable(registry: Registry, where: str | Path) -> None:
    """Refuse to export a registry with a record that cannot be read: what is exported must
    import whole, in either form."""
    broken = sorted({p.file or p.attempt_id or "?" for p in registry.problems})
    if broken:
        raise CheckFailed(
            f"{where}: {len(broken)} record(s) cannot be read ({', '.join(broken[:5])}); "
            "run `ptreg validate` and fix them before exporting",
        )


def bundle_files(root: Path, registry: Registry) -> list[Path]:
    """The files of the registry at ``root`` that a bundle carries."""
    refuse_unreadable(registry, root)
    runs = sorted(p for p in (root / RUNS_DIR).glob(f"*/*/{RESULTS_FILE}") if not p.parent.name.startswith("."))
    terms = [path for _, path in term_files(root)]
    found = [root / REGISTRY_FILE, *terms, *attempt_files(root), *evaluator_files(root)]
    found += [f for results in runs for f in (results, results.parent / ENVIRONMENT_FILE)]
    # What is exported must import whole: a registry past a bundle's bounds is refused here.
    tally = _Tally(str(root), refused="not exported")
    for path in found:
        _tallied(root, path, tally)
    apart = []
    for results in runs:  # read only once its size is known to be within the bound
        apart += [results.parent / name for name in apart_file_names(read_json(results), str(results))]
    for path in apart:
        _tallied(root, path, tally)
    return found + apart


def _tallied(root: Path, path: Path, tally: _Tally) -> None:
    refuse_outside(root, path, "not bundled")
    name = path.relative_to(root).as_posix()
    tally.counted(name)
    tally.file(name, path.is_file(), path.stat().st_size if path.is_file() else 0)


def write_bundle(root: Path, registry: Registry, target: Path, *, overwrite: bool = False) -> int:
    """Write the bundle of the registry at ``root`` to ``target``, whole or not at all; how many
    files it holds. ``target`` is a .tar.gz file, a folder that does not exist yet, or what a
    user pipes to (``-``, ``/dev/stdout``, a FIFO: the .tar.gz stream, in place; ``outputs.py``).
    A .tar.gz file already there is replaced only with ``overwrite``: a bundle is often the one
    copy of a registry carried elsewhere."""
    refuse_in_registry(target, root)  # the bundle would be in what it bundles
    files = bundle_files(root, registry)
    names = [f.relative_to(root).as_posix() for f in files]
    if output_target(target).in_place or target.name.endswith(SUFFIXES):
        with open_output(target, overwrite=overwrite, registry=root) as out:
            if out.terminal:
                raise UnusableInput(f"{target}: a terminal; a bundle is a .tar.gz: give a file, or redirect it")
            _write_tar(files, names, out.handle)
        return len(files)
    if not target.parent.is_dir():
        raise UnusableInput(f"{target}: directory {target.parent} does not exist")
    _write_folder(files, names, target)
    return len(files)


def _write_tar(files: list[Path], names: list[str], handle: BinaryIO) -> None:
    with tarfile.open(fileobj=handle, mode="w:gz") as tar:
        for path, name in zip(files, names, strict=True):
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))


def _write_folder(files: list[Path], names: list[str], target: Path) -> None:
    if target.exists():
        raise UnusableInput(f"{target}: exists; a bundle folder is written only where nothing is")
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        for path, name in zip(files, names, strict=True):
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, staging / name)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_directory(target.parent)


def read_bundle(path: Path) -> Bundle:
    """Every member of the bundle at ``path`` (a .tar.gz file or a folder, which may be a registry
    directory itself), refused in one line, with nothing written, when one is not what a bundle
    holds.

    Two passes: the first lists the members lazily from their headers (or ``lstat``), refusing
    the first one past a bound, so that nothing is read before every name, type, size and the
    total are known to be acceptable; the second reads them in chunks, counting the bytes that
    actually come, so that a header that lies cannot carry more than it declared."""
    bundle = Bundle(str(path))
    tally = _Tally(bundle.source)
    if path.is_dir():
        try:
            listed = _folder_members(path, "", tally)
        except OSError as exc:
            raise UnusableInput(f"{path}: a folder of the bundle cannot be listed: {exc.strerror}") from None
        for name, size in listed:
            bundle.files[name] = _read_file(path / name, tally.where(name), size)
    elif path.exists():
        try:
            with (
                _open_regular(path) as raw,
                gzip.GzipFile(fileobj=raw, mode="rb") as unzipped,
                tarfile.open(fileobj=_Capped(unzipped, bundle.source), mode="r:") as tar,
            ):
                bundle.files.update(_tar_files(tar, tally))
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            raise UnusableInput(f"{path}: not a readable .tar.gz bundle: {exc}") from None
    else:
        raise UnusableInput(f"{path}: no such file or directory")
    if REGISTRY_FILE not in bundle.files:
        raise UnusableInput(f"{path}: not a bundle: it has no {REGISTRY_FILE}")
    return bundle


class _Tally:
    """The members of one bundle seen so far: their number, names and declared bytes, each
    bound checked as a member comes, so that the first one past a bound is the one refused."""

    def __init__(self, source: str, refused: str = "not imported") -> None:
        self.source = source
        self.refused = refused  # what a refusal says was not done
        self.count = 0
        self.total = 0
        self.names: set[str] = set()

    def where(self, name: str) -> str:
        return f"{self.source}: member {shorten(name)}"

    def counted(self, name: str) -> None:
        self.count += 1
        if self.count > BUNDLE_MAX_MEMBERS:
            raise UnusableInput(
                f"{self.where(name)} is one more than the {BUNDLE_MAX_MEMBERS} members a bundle may have; {self.refused}"
            )

    def file(self, name: str, regular: bool, size: int) -> int:
        """Check the file member ``name`` from its header; the most bytes it may then bring."""
        where = self.where(name)
        most = _limit(name)
        if most is None:
            raise UnusableInput(f"{where} is not a file a registry holds; {self.refused}")
        if not regular:
            raise UnusableInput(f"{where} is not a regular file; {self.refused}")
        if size > most:
            raise UnusableInput(f"{where} has {size} bytes, more than the {most} allowed; {self.refused}")
        if name in self.names:
            raise UnusableInput(f"{where} is there twice; {self.refused}")
        self.names.add(name)
        self.total += size
        if self.total > BUNDLE_MAX_BYTES:
            raise UnusableInput(
                f"{where} brings the bundle to {self.total} bytes, more than the {BUNDLE_MAX_BYTES} "
                f"a bundle may have; {self.refused}"
            )
        return size

    def folder(self, name: str) -> None:
        """Check the folder member ``name``: one of the folders a registry holds its files in."""
        if _limit(name) is not None:
            raise UnusableInput(f"{self.where(name)} is a folder where a file belongs; {self.refused}")
        if not _FOLDERS.fullmatch(name):
            raise UnusableInput(f"{self.where(name)} is not a folder a registry holds; {self.refused}")


def _tar_files(tar: tarfile.TarFile, tally: _Tally) -> dict[str, bytes]:
    """The files of ``tar``: every header checked first, lazily, then each file read."""
    files = [(info, size) for info in tar if (size := _tar_member(info, tally)) is not None]
    read: dict[str, bytes] = {}
    for info, size in files:
        extracted = tar.extractfile(info)
        if extracted is None:  # cannot happen: _tar_member takes regular files only
            raise UnusableInput(f"{tally.where(info.name)} is not a regular file; not imported")
        read[info.name] = _read_capped(extracted.read, tally.where(info.name), size)
    return read


def _tar_member(info: tarfile.TarInfo, tally: _Tally) -> int | None:
    """Check the tar member ``info`` from its header alone; for a file, the bytes it declares."""
    tally.counted(info.name)
    if info.isdir():
        tally.folder(info.name)
        return None
    # A sparse member's data expands to more than the archive holds; ptreg never writes one.
    return tally.file(info.name, info.isfile() and not info.issparse(), info.size)


def _folder_members(root: Path, relative: str, tally: _Tally) -> list[tuple[str, int]]:
    """The files under ``root / relative`` with their sizes, checked from ``lstat`` alone and
    listed one directory at a time, refusing the first entry past a bound; a symlink is refused,
    whether to a file or a folder, and ptreg's working files stay behind."""
    entries: list[os.DirEntry[str]] = []
    with os.scandir(root / relative) as listing:
        for entry in listing:
            tally.counted(f"{relative}/{entry.name}" if relative else entry.name)
            entries.append(entry)
    found: list[tuple[str, int]] = []
    for entry in sorted(entries, key=lambda e: e.name):
        name = f"{relative}/{entry.name}" if relative else entry.name
        if _working_file(PurePosixPath(name)):
            continue  # a registry directory read as a bundle: its locks and staged files stay
        if entry.is_symlink():
            raise UnusableInput(f"{tally.where(name)} is a symlink, not a regular file or folder; not imported")
        if entry.is_dir(follow_symlinks=False):
            tally.folder(name)
            found += _folder_members(root, name, tally)
        else:
            info = entry.stat(follow_symlinks=False)
            found.append((name, tally.file(name, stat.S_ISREG(info.st_mode), info.st_size)))
    return found


def _read_file(path: Path, where: str, most: int) -> bytes:
    """The bytes of the regular file ``path`` (never through a symlink), refused past ``most``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise UnusableInput(f"{where} cannot be read ({exc.strerror}); not imported") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnusableInput(f"{where} is not a regular file; not imported")
        return _read_capped(lambda size: os.read(fd, size), where, most)
    except OSError as exc:
        raise UnusableInput(f"{where} cannot be read ({exc.strerror}); not imported") from None
    finally:
        os.close(fd)


def _open_regular(path: Path) -> io.BufferedReader:
    """``path`` opened for reading when it is a regular file; a FIFO is refused, not waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnusableInput(f"{path}: not a regular file; not imported")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_capped(read: Callable[[int], bytes], where: str, most: int) -> bytes:
    """What ``read`` gives, in chunks, refused as soon as it brings more than ``most`` bytes: the
    size the member declared, whatever it turns out to hold."""
    parts: list[bytes] = []
    total = 0
    while chunk := read(min(_CHUNK, most + 1 - total)):
        total += len(chunk)
        if total > most:
            raise UnusableInput(f"{where} holds more than the {most} bytes it was listed with; not imported")
        parts.append(chunk)
    return b"".join(parts)


class _Capped(io.RawIOBase):
    """The decompressed stream of a .tar.gz as tarfile reads it, refused past what a bundle at
    its bounds can hold: tarfile reads an extended header (a long name, pax attributes) whole,
    and skips a member's data by decompressing it, so neither may run on unbounded."""

    def __init__(self, unzipped: gzip.GzipFile, source: str) -> None:
        super().__init__()
        self._unzipped = unzipped
        self._source = source
        # every member's bytes, and a header, its padding and an extended header for each member
        self._most = BUNDLE_MAX_BYTES + BUNDLE_MAX_MEMBERS * 4 * tarfile.BLOCKSIZE

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._unzipped.tell()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence != io.SEEK_SET:
            raise io.UnsupportedOperation("tar reading seeks to an offset from the start")
        self._past(offset)
        return self._unzipped.seek(offset)

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > 2 * _CHUNK:
            shown = "all the rest" if size is None or size < 0 else f"{size} bytes"
            raise UnusableInput(
                f"{self._source}: the tar header at byte {self.tell()} asks to read {shown} at once, "
                f"more than a bundle's headers ever need ({2 * _CHUNK}); not imported"
            )
        data = self._unzipped.read(size)
        self._past(self._unzipped.tell())
        return data

    def _past(self, offset: int) -> None:
        if offset > self._most:
            raise UnusableInput(
                f"{self._source}: more than {self._most} bytes once decompressed, past what a bundle "
                "may hold; not imported"
            )


def _working_file(name: PurePosixPath) -> bool:
    """Whether ``name`` is one of ptreg's working files (or the .gitignore naming them), which a
    registry directory holds beside its records and a bundle never carries."""
    patterns = [line.rstrip("/") for line in IGNORED.splitlines() if line and not line.startswith("#")]
    return name.as_posix() == IGNORE_FILE or any(fnmatch(part, p) for part in name.parts for p in patterns)
