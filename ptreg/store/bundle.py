"""A bundle: a whole registry in one file (``.tar.gz``) or folder, for moving it elsewhere.

It holds what the single-file ``attempts.json`` cannot: ``registry.json``, every record, every
frozen evaluator and every run folder, under the names they have in a registry directory, and
nothing else (no lock, journal or staged file). Reading one refuses, before anything is
written, a member that is not one of those names, not a regular file, or too large.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from ..errors import EXIT_CHECK_FAILED, EXIT_UNUSABLE, PtregError
from ..records.registry import Registry
from ..text import shorten
from .directory import IGNORE_FILE, IGNORED, RECORD_FILE_MAX_BYTES, REGISTRY_FILE, attempt_files
from .evaluators import EVALUATOR_FILE_MAX_BYTES, evaluator_files
from .jsonio import fsync_directory, refuse_outside
from .runs import ENVIRONMENT_FILE, RESULTS_FILE, RUNS_DIR

SUFFIXES = (".tar.gz", ".tgz")
RUN_FILE_MAX_BYTES = 256 * 1024 * 1024  # a run keeps every sample; no real one comes near this
_SLUG = r"[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*"
# name -> the most bytes a member of that name may have
_MEMBERS = (
    (re.compile(re.escape(REGISTRY_FILE)), RECORD_FILE_MAX_BYTES),
    (re.compile(rf"{_SLUG}\.json"), RECORD_FILE_MAX_BYTES),
    (re.compile(rf"evaluators/{_SLUG}@[0-9a-f]{{12}}\.json"), EVALUATOR_FILE_MAX_BYTES),
    (
        re.compile(rf"{RUNS_DIR}/{_SLUG}/[0-9]{{8}}T[0-9]{{6}}Z(?:-[0-9]+)?/(?:{RESULTS_FILE}|{ENVIRONMENT_FILE})"),
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
        raise PtregError(
            f"{where}: {len(broken)} record(s) cannot be read ({', '.join(broken[:5])}); "
            "run `ptreg validate` and fix them before exporting",
            EXIT_CHECK_FAILED,
        )


def bundle_files(root: Path, registry: Registry) -> list[Path]:
    """The files of the registry at ``root`` that a bundle carries."""
    refuse_unreadable(registry, root)
    runs = sorted(p for p in (root / RUNS_DIR).glob(f"*/*/{RESULTS_FILE}") if not p.parent.name.startswith("."))
    found = [root / REGISTRY_FILE, *attempt_files(root), *evaluator_files(root)]
    found += [f for results in runs for f in (results, results.parent / ENVIRONMENT_FILE)]
    for path in found:
        refuse_outside(root, path, "not bundled")
    return found


def write_bundle(root: Path, registry: Registry, target: Path) -> int:
    """Write the bundle of the registry at ``root`` to ``target`` (a .tar.gz file, or a folder
    that does not exist yet), whole or not at all; how many files it holds."""
    files = bundle_files(root, registry)
    names = [f.relative_to(root).as_posix() for f in files]
    if not target.parent.is_dir():
        raise PtregError(f"{target}: directory {target.parent} does not exist")
    if target.name.endswith(SUFFIXES):
        _write_tar(files, names, target)
    else:
        _write_folder(files, names, target)
    return len(files)


def _write_tar(files: list[Path], names: list[str], target: Path) -> None:
    fd, staged = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            with tarfile.open(fileobj=handle, mode="w:gz") as tar:
                for path, name in zip(files, names, strict=True):
                    data = path.read_bytes()
                    info = tarfile.TarInfo(name)
                    info.size, info.mode = len(data), 0o644
                    tar.addfile(info, io.BytesIO(data))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staged, target)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise
    fsync_directory(target.parent)


def _write_folder(files: list[Path], names: list[str], target: Path) -> None:
    if target.exists():
        raise PtregError(f"{target}: exists; a bundle folder is written only where nothing is", EXIT_UNUSABLE)
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
    holds."""
    bundle = Bundle(str(path))
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if not p.is_dir()):
            if _working_file(file.relative_to(path)):
                continue  # a registry directory read as a bundle: its locks and staged files stay
            _take(
                bundle,
                file.relative_to(path).as_posix(),
                file.is_file() and not file.is_symlink(),
                file.stat().st_size if file.is_file() else 0,
                file.read_bytes,
            )
    elif path.exists():
        try:
            with tarfile.open(path, mode="r:gz") as tar:
                for member in tar.getmembers():
                    if member.isdir():
                        continue
                    extracted = tar.extractfile(member) if member.isfile() else None
                    _take(
                        bundle,
                        member.name,
                        extracted is not None,
                        member.size,
                        extracted.read if extracted is not None else bytes,
                    )
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise PtregError(f"{path}: not a readable .tar.gz bundle: {exc}") from None
    else:
        raise PtregError(f"{path}: no such file or directory")
    if REGISTRY_FILE not in bundle.files:
        raise PtregError(f"{path}: not a bundle: it has no {REGISTRY_FILE}")
    return bundle


def _working_file(name: Path) -> bool:
    """Whether ``name`` is one of ptreg's working files (or the .gitignore naming them), which a
    registry directory holds beside its records and a bundle never carries."""
    patterns = [line.rstrip("/") for line in IGNORED.splitlines() if line and not line.startswith("#")]
    return name.as_posix() == IGNORE_FILE or any(fnmatch(part, p) for part in name.parts for p in patterns)


def _take(bundle: Bundle, name: str, regular: bool, size: int, read: Callable[[], bytes]) -> None:
    where = f"{bundle.source}: member {shorten(name)}"
    most = _limit(name)
    if most is None:
        raise PtregError(f"{where} is not a file a registry holds; not imported")
    if not regular:
        raise PtregError(f"{where} is not a regular file; not imported")
    if size > most:
        raise PtregError(f"{where} has {size} bytes, more than the {most} allowed; not imported")
    if name in bundle.files:
        raise PtregError(f"{where} is there twice; not imported")
    bundle.files[name] = read()
