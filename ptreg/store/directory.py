"""A registry directory: ``registry.json``, one ``<id>.json`` per attempt and one file per
vocabulary term (``vocabulary_files.py``).

One file per attempt keeps git diffs and merges per attempt. Reading never stops at the first
bad record: each record that cannot be used becomes a Problem, and the rest stay usable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..errors import CheckFailed, UnknownAttempt, UnusableInput
from ..records.attempt import Attempt, RegistryMeta
from ..records.problems import Problem
from ..records.refs import check_id
from ..records.registry import Record, Registry, parse_record
from ..records.vocabulary import default_meta
from .journal import recover
from .jsonio import atomic_write_text, create_text_exclusive, dumps_pretty, read_json, refuse_outside
from .names import RECORD_FILE_MAX_BYTES as RECORD_FILE_MAX_BYTES
from .names import REGISTRY_FILE as REGISTRY_FILE
from .record_file import parse_meta as parse_meta
from .record_file import read_record
from .record_file import symlink_problem as symlink_problem
from .vocabulary_files import load_vocabularies, read_vocabularies, term_layout_files

IGNORE_FILE = ".gitignore"
# What ptreg keeps beside the records that is not part of them, for git to leave out.
IGNORED = """# ptreg's working files: locks, their holders, an import's journal, staged writes, the query index,
# the folders of runs in progress
.ptreg*.lock
.ptreg*.lock.holder
.ptreg-journal.json
.*.tmp
.tmp-*/
.ptreg-index.sqlite*
.running-*/
"""
# The .gitignore ptreg wrote before runs kept an in-progress folder; `ptreg repair` adds it.
IGNORED_BEFORE_RUNNING = """# ptreg's working files: locks, their holders, an import's journal, staged writes, the query index
.ptreg*.lock
.ptreg*.lock.holder
.ptreg-journal.json
.*.tmp
.tmp-*/
.ptreg-index.sqlite*
"""
# The .gitignore ptreg wrote before the query index existed; `ptreg repair` adds the index to it.
IGNORED_BEFORE_INDEX = """# ptreg's working files: locks, their holders, an import's journal, staged writes
.ptreg*.lock
.ptreg*.lock.holder
.ptreg-journal.json
.*.tmp
.tmp-*/
"""


def load_meta(root: Path) -> RegistryMeta:
    """The registry's vocabularies; refused in one line when ``root`` holds no registry, or one
    of its term files cannot be used."""
    _require_registry(root)
    return load_vocabularies(root)


def _require_registry(root: Path) -> None:
    if not root.is_dir():
        if root.exists():
            raise UnusableInput(f"{root}: not a registry directory (it is a file)")
        raise UnusableInput(f"{root}: not a registry directory (no such directory){_where_instead(root)}")
    recover(root)  # an import cut short after its commit point is finished before any read
    meta_path = root / REGISTRY_FILE
    if not meta_path.exists():
        raise UnusableInput(f"{root}: no {REGISTRY_FILE}, so not a ptreg registry{_where_instead(root)}")


def registries_inside(folder: Path) -> list[Path]:
    """The registries one level inside ``folder``, ``attempts`` first: a project root given
    where its registry was meant."""
    try:
        with os.scandir(folder) as entries:
            names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
    except OSError:
        return []
    names.sort(key=lambda name: name != "attempts")
    return [folder / name for name in names if (folder / name / REGISTRY_FILE).is_file()]


def _where_instead(root: Path) -> str:
    """What to do instead, for a path that holds no registry: the registry inside it, if it
    holds one (a project root given for its registry), else `ptreg init` of that very path
    (a plain `ptreg init` would make ./attempts, not the registry asked for)."""
    inside = registries_inside(root) if root.is_dir() else []
    if inside:
        return f"; it holds one in {inside[0]}: use `-r {inside[0]}`"
    return f"; create one there with `ptreg init {root}`, or give the registry's own folder with -r"


def record_order(name: str) -> str:
    """The sort key of a record file's name: its id, so that ``a.json`` comes before ``a-b.json``."""
    return name[: -len(".json")]


def _attempt_entries(root: Path) -> list[tuple[Path, bool]]:
    """(path, is a symlink) of each attempt file, in id order (deterministic output). A
    symlink is listed whatever it points to, so that reading it can say what is wrong."""
    with os.scandir(root) as entries:
        found = [
            (e.name, e.is_symlink())
            for e in entries
            if e.name.endswith(".json") and e.name != REGISTRY_FILE and (e.is_symlink() or e.is_file())
        ]
    found.sort(key=lambda item: record_order(item[0]))
    return [(root / name, link) for name, link in found]


def attempt_files(root: Path) -> list[Path]:
    """The attempt files of a registry directory, in id order (deterministic output)."""
    return [path for path, _ in _attempt_entries(root)]


# progress(what, done, total): told how far a long read or write has come.
Progress = Callable[[str, int, int], None]
PROGRESS_EVERY = 500


def load_directory(root: Path, progress: Progress | None = None, *, every_problem: bool = False) -> Registry:
    """Every record of the registry at ``root``, usable or not. With ``every_problem``, as
    `validate` reads it, a term file that cannot be used is one more problem (its term left out
    of the vocabularies) and a stray file a warning, instead of stopping the read."""
    problems: list[Problem] = []
    if every_problem:
        _require_registry(root)
        meta, problems = read_vocabularies(root)
    else:
        meta = load_meta(root)
    records: list[Record] = []
    paths = _attempt_entries(root)
    for index, (path, is_symlink) in enumerate(paths):
        if progress is not None and index % PROGRESS_EVERY == 0:
            progress("reading records", index, len(paths))
        record, found = read_record(root, path, is_symlink)
        problems.extend(found)
        records.append(record)
    if progress is not None:
        progress("reading records", len(paths), len(paths))
    return Registry(source=str(root), meta=meta, records=records, problems=problems, root=root)


def record_path(root: Path, attempt_id: str) -> Path:
    return root / f"{check_id(attempt_id)}.json"


def read_attempt(root: Path, attempt_id: str) -> Attempt:
    """Read one attempt by id without loading the whole registry."""
    path = record_path(root, attempt_id)
    if not path.exists():
        load_meta(root)  # a missing registry is a clearer error than a missing record
        known = [p.stem for p in attempt_files(root)]
        raise UnknownAttempt(attempt_id, str(root), known)
    link_problem = symlink_problem(root, path) if path.is_symlink() else None
    if link_problem is not None:
        raise UnusableInput(f"{path}: {link_problem}")
    record, problems = parse_record(read_json(path, RECORD_FILE_MAX_BYTES), file=str(path))
    if record.attempt is None:
        first = problems[0]
        raise CheckFailed(
            f"{first.location()}: {first.message} (not a valid record; `ptreg validate` lists every problem)",
        )
    if record.attempt.id != attempt_id:
        raise CheckFailed(f"{path}#/id: id {record.attempt.id!r} does not match the file name")
    return record.attempt


def write_attempt(root: Path, attempt: Attempt) -> Path:
    path = record_path(root, attempt.id)
    atomic_write_text(path, dumps_pretty(attempt.to_json_dict()))
    return path


def make_directory(root: Path) -> None:
    """The registry's directory, created with its parents if needed; one line when it cannot be."""
    if root.exists() and not root.is_dir():
        raise UnusableInput(f"{root}: exists and is not a directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UnusableInput(f"{root}: cannot create directory: {exc.strerror}") from None


def init_registry(root: Path, meta: RegistryMeta | None = None) -> Path:
    """Create an empty registry, with a .gitignore for its working files; refuse to overwrite an
    existing one."""
    make_directory(root)
    path = root / REGISTRY_FILE
    if os.path.lexists(path):
        raise CheckFailed(f"{root}: already a registry ({REGISTRY_FILE} exists)")
    files = term_layout_files(meta or default_meta())
    for relative, text in files[1:]:  # the term files first: a registry counts once registry.json is there
        target = root / relative
        if not target.parent.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
        refuse_outside(root, target, "not written")
        atomic_write_text(target, text)
    try:
        # link(2), not a rename: of two `ptreg init` at once, one creates it and one is refused.
        create_text_exclusive(path, files[0][1])
    except FileExistsError:
        raise CheckFailed(f"{root}: already a registry ({REGISTRY_FILE} exists)") from None
    write_ignore_file(root)
    return path


def ignore_file_lacks_index(root: Path) -> bool:
    """Whether the registry's .gitignore is one ptreg wrote before the query index (or the
    folders of runs in progress) existed."""
    try:
        return (root / IGNORE_FILE).read_text(encoding="utf-8") in (IGNORED_BEFORE_INDEX, IGNORED_BEFORE_RUNNING)
    except (OSError, UnicodeDecodeError):
        return False


def upgrade_ignore_file(root: Path) -> None:
    """Rewrite ptreg's own old .gitignore with what it lacks added (a file the user changed is left alone)."""
    atomic_write_text(root / IGNORE_FILE, IGNORED)


def write_ignore_file(root: Path) -> bool:
    """Give the registry its .gitignore when it has none; whether this call wrote it. A file
    the user keeps there is never touched."""
    try:
        create_text_exclusive(root / IGNORE_FILE, IGNORED)
    except FileExistsError:
        return False
    return True
