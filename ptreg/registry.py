"""Storage: a registry is a directory with ``registry.json`` and one ``<id>.json`` per attempt.

One file per attempt keeps git diffs and merges per attempt. Reading never stops at the first
bad record: each record that cannot be used becomes a Problem, and the rest stay usable.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from pydantic import ValidationError

from .errors import EXIT_CHECK_FAILED, PtregError, UnknownAttempt
from .jsonio import JsonError, atomic_write_text, dumps_pretty, outside, parse_json, read_json, shorten
from .jsonio import json_type as _json_type
from .model import (
    ID_MAX_LENGTH,
    ID_PATTERN,
    RESERVED_IDS,
    SCHEMA_VERSION,
    SUPPORTED_IMPORT_VERSIONS,
    Attempt,
    RegistryMeta,
    RegistryState,
)
from .problems import Problem, pointer_join, schema_problems, shown_id

REGISTRY_FILE = "registry.json"
DEFAULT_REGISTRY_DIR = "attempts"
REGISTRY_ENV = "PTREG_REGISTRY"
_ID_RE = re.compile(ID_PATTERN)
# A record file larger than this is refused unread: its free text is capped at
# model.TEXT_MAX_LENGTH characters, so only a broken or hostile file comes near it. The
# single-file attempts.json holds a whole registry and has no such cap.
RECORD_FILE_MAX_BYTES = 2 * 1024 * 1024


def resolve_registry_dir(option: Optional[str]) -> Path:
    """--registry wins, then $PTREG_REGISTRY, then ./attempts."""
    if option:
        return Path(option)
    env = os.environ.get(REGISTRY_ENV)
    return Path(env) if env else Path(DEFAULT_REGISTRY_DIR)


def check_id(attempt_id: str) -> str:
    """Refuse an id that is not a slug, so it can never name a file outside the registry."""
    if not isinstance(attempt_id, str) or len(attempt_id) > ID_MAX_LENGTH or not _ID_RE.fullmatch(attempt_id):
        raise PtregError(
            f"invalid attempt id {shorten(attempt_id)}: use lowercase letters, digits, '-' and single '.' "
            f"(at most {ID_MAX_LENGTH} characters; no '/', '..' or spaces)"
        )
    if attempt_id in RESERVED_IDS:
        raise PtregError(f"invalid attempt id {attempt_id!r}: reserved for the registry's own file")
    return attempt_id


@dataclass
class Record:
    """One attempt as read: the raw JSON, the parsed Attempt (None when it did not parse)."""

    raw: Any
    attempt: Optional[Attempt]
    file: Optional[str]
    pointer: str = ""

    @property
    def raw_id(self) -> Optional[str]:
        if isinstance(self.raw, dict) and isinstance(self.raw.get("id"), str):
            return self.raw["id"]
        return None


@dataclass
class Registry:
    """A registry as read from a directory or a single attempts.json file."""

    source: str
    meta: RegistryMeta
    records: list[Record]
    problems: list[Problem] = field(default_factory=list)
    root: Optional[Path] = None  # the directory, when the registry is one
    schema_version: int = SCHEMA_VERSION

    @property
    def attempts(self) -> list[Attempt]:
        return [r.attempt for r in self.records if r.attempt is not None]

    def by_id(self) -> dict[str, Attempt]:
        return {a.id: a for a in self.attempts}

    def get(self, attempt_id: str) -> Attempt:
        found = self.by_id().get(attempt_id)
        if found is None:
            if any(r.raw_id == attempt_id or (r.file and Path(r.file).stem == attempt_id) for r in self.records):
                raise PtregError(
                    f"attempt {attempt_id!r} in {self.source} is not a valid record; run `ptreg validate` to see why",
                    EXIT_CHECK_FAILED,
                )
            raise UnknownAttempt(attempt_id, self.source, (r.raw_id for r in self.records if r.raw_id))
        return found


def default_meta() -> RegistryMeta:
    """Vocabularies of a new registry, for runtime and training work; extend registry.json freely."""
    return RegistryMeta(
        schema_version=SCHEMA_VERSION,
        confidence_vocabulary={
            "exact": "A run report, decision file or current source states the result and the reason directly.",
            "inferred": "The reason is reconstructed from prose or notes; no complete run record proves it.",
            "missing-evidence": "The attempt is known, but too little evidence survives to state a real reason.",
            "not-applicable": "No failure reason is expected for this status.",
        },
        method_vocabulary={
            "cache-blocking": "Tile loops so operands stay in cache.",
            "register-blocking": "Keep a tile of outputs in registers across the reduction.",
            "multithreading": "Split independent outputs across threads.",
            "vectorization": "Use SIMD lanes, by hand or through the compiler.",
            "jit-compilation": "Compile a kernel at run time (e.g. Numba).",
            "vendor-blas": "Call a tuned BLAS library instead of an own kernel.",
            "operator-fusion": "Fuse several operations into one pass over memory.",
            "buffer-reuse": "Reuse scratch and gradient buffers instead of allocating each step.",
            "lazy-import": "Defer imports off the hot start-up path.",
            "compiled-validation": "Validate with a compiled engine instead of an interpreted one.",
            "parallel-io": "Overlap disk waits (reads, fsync) across threads.",
            "partial-read": "Read only the records or bytes a command needs.",
            "dependency-pin": "Pin a dependency's version for speed or behaviour.",
        },
        objective_vocabulary={
            "training-step-time": "Milliseconds per end-to-end training step.",
            "kernel-throughput": "GFLOP/s of one kernel at fixed shapes.",
            "peak-memory": "Peak resident memory of a run.",
            "command-latency": "Wall-clock seconds of a command, cold process included.",
        },
        kind_vocabulary={
            "training-run": "Weights or an adapter were trained.",
            "model-evaluation": "An existing model was measured; nothing trained.",
            "runtime-benchmark": "A runtime, kernel or tool-speed change measured by a benchmark; shape fields apply.",
            "infrastructure": "Tooling, harness, docs or runtime work; no model shape applies.",
        },
    )


def parse_meta(raw: Any, where: str) -> RegistryMeta:
    if not isinstance(raw, dict):
        raise PtregError(f"{where}: expected a JSON object, got {_json_type(raw)}")
    version = raw.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise PtregError(
            f"{where}: schema_version {shorten(version)} is newer than this ptreg reads (up to {SCHEMA_VERSION}); upgrade ptreg"
        )
    try:
        return RegistryMeta.model_validate(raw)
    except ValidationError as exc:
        first = next(iter(schema_problems(exc, attempt_id=None, pointer="", file=where)))
        raise PtregError(f"{first.location()}: {first.message}") from None


def load_meta(root: Path) -> RegistryMeta:
    if not root.is_dir():
        hint = "; create one with `ptreg init`" if not root.exists() else ""
        raise PtregError(f"{root}: not a registry directory{hint}")
    from .journal import recover

    recover(root)  # an import cut short after its commit point is finished before any read
    meta_path = root / REGISTRY_FILE
    if not meta_path.exists():
        raise PtregError(f"{root}: no {REGISTRY_FILE}, so not a ptreg registry; create one with `ptreg init {root}`")
    return parse_meta(read_json(meta_path), str(meta_path))


def parse_record(raw: Any, *, file: Optional[str], pointer: str = "") -> tuple[Record, list[Problem]]:
    """Validate one raw record against the model; problems carry its file and pointer."""
    attempt_id = shown_id(raw["id"]) if isinstance(raw, dict) and isinstance(raw.get("id"), str) else None
    if not isinstance(raw, dict):
        problem = Problem("schema", f"an attempt must be a JSON object, got {_json_type(raw)}", None, pointer, file)
        return Record(raw, None, file, pointer), [problem]
    try:
        attempt = Attempt.model_validate(raw)
    except ValidationError as exc:
        return Record(raw, None, file, pointer), list(
            schema_problems(exc, attempt_id=attempt_id, pointer=pointer, file=file)
        )
    return Record(raw, attempt, file, pointer), []


def _attempt_entries(root: Path) -> list[tuple[Path, bool]]:
    """(path, is a symlink) of each attempt file, in id order (deterministic output). A
    symlink is listed whatever it points to, so that reading it can say what is wrong."""
    with os.scandir(root) as entries:
        found = [
            (e.name, e.is_symlink())
            for e in entries
            if e.name.endswith(".json") and e.name != REGISTRY_FILE and (e.is_symlink() or e.is_file())
        ]
    found.sort(key=lambda item: item[0][: -len(".json")])
    return [(root / name, link) for name, link in found]


def attempt_files(root: Path) -> list[Path]:
    """The attempt files of a registry directory, in id order (deterministic output)."""
    return [path for path, _ in _attempt_entries(root)]


def _symlink_problem(root: Path, path: Path) -> Optional[str]:
    """Why the symlink ``path`` is not read: it leads out of the registry, or nowhere."""
    target = outside(root, path)
    if target is not None:
        return f"a symlink to {target}, outside the registry; not read"
    if not path.exists():
        return f"a symlink to {os.readlink(path)}, which does not exist"
    return None


# progress(what, done, total): told how far a long read or write has come.
Progress = Callable[[str, int, int], None]
PROGRESS_EVERY = 500


def load_directory(root: Path, progress: Optional[Progress] = None) -> Registry:
    meta = load_meta(root)
    records: list[Record] = []
    problems: list[Problem] = []
    paths = _attempt_entries(root)
    for index, (path, is_symlink) in enumerate(paths):
        if progress is not None and index % PROGRESS_EVERY == 0:
            progress("reading records", index, len(paths))
        shown = str(path)
        unread: Optional[Problem] = None
        link_problem = _symlink_problem(root, path) if is_symlink else None
        if link_problem is not None:
            unread = Problem("symlink", link_problem, shown_id(path.stem), "", shown)
        else:
            try:
                raw = read_json(path, RECORD_FILE_MAX_BYTES)
            except JsonError as exc:
                unread = Problem("json", exc.problem, shown_id(path.stem), exc.pointer, shown)
        if unread is not None:
            problems.append(unread)
            records.append(Record(None, None, shown))  # counted, so that no file goes unmentioned
            continue
        record, found = parse_record(raw, file=shown)
        problems.extend(found)
        if record.raw_id is not None and record.raw_id != path.stem:
            problems.append(
                Problem(
                    "file-name",
                    f"id {shorten(record.raw_id)} does not match the file name "
                    f"(expected {path.stem}.json to hold id {path.stem!r})",
                    shown_id(record.raw_id),
                    "/id",
                    shown,
                )
            )
        records.append(record)
    if progress is not None:
        progress("reading records", len(paths), len(paths))
    return Registry(source=str(root), meta=meta, records=records, problems=problems, root=root)


def load_attempts_file(path: Path) -> Registry:
    """Read a single-file registry (attempts.json, schema_version 1 or 2)."""
    raw = read_json(path)
    where = str(path)
    if not isinstance(raw, dict):
        raise PtregError(f"{where}: expected a JSON object with 'schema_version' and 'attempts', got {_json_type(raw)}")
    version = raw.get("schema_version")
    if version not in SUPPORTED_IMPORT_VERSIONS or isinstance(version, bool):
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise PtregError(
                f"{where}: schema_version {version} is newer than this ptreg reads (1 and 2); upgrade ptreg"
            )
        raise PtregError(f"{where}: schema_version must be 1 or 2, got {shorten(version)}")
    attempts = raw.get("attempts")
    if not isinstance(attempts, list):
        raise PtregError(f"{where}#/attempts: expected an array of attempts, got {_json_type(attempts)}")
    if version == 2:
        meta = parse_meta({k: v for k, v in raw.items() if k != "attempts"}, where)
    else:
        # A version 1 file has no vocabularies: they are unknown, not the defaults.
        meta = RegistryMeta(
            schema_version=SCHEMA_VERSION,
            confidence_vocabulary={},
            method_vocabulary={},
            objective_vocabulary={},
            kind_vocabulary={},
        )
    records: list[Record] = []
    problems: list[Problem] = []
    for index, item in enumerate(attempts):
        record, found = parse_record(item, file=where, pointer=pointer_join("/attempts", index))
        records.append(record)
        problems.extend(found)
    return Registry(source=where, meta=meta, records=records, problems=problems, schema_version=version)


def load_path(path: Path, progress: Optional[Progress] = None) -> Registry:
    """A registry directory or a single attempts.json file."""
    if path.is_dir():
        return load_directory(path, progress)
    if not path.exists():
        raise PtregError(f"{path}: no such file or directory")
    return load_attempts_file(path)


def record_path(root: Path, attempt_id: str) -> Path:
    return root / f"{check_id(attempt_id)}.json"


def read_attempt(root: Path, attempt_id: str) -> Attempt:
    """Read one attempt by id without loading the whole registry."""
    path = record_path(root, attempt_id)
    if not path.exists():
        load_meta(root)  # a missing registry is a clearer error than a missing record
        known = [p.stem for p in attempt_files(root)]
        raise UnknownAttempt(attempt_id, str(root), known)
    link_problem = _symlink_problem(root, path) if path.is_symlink() else None
    if link_problem is not None:
        raise PtregError(f"{path}: {link_problem}")
    record, problems = parse_record(read_json(path, RECORD_FILE_MAX_BYTES), file=str(path))
    if record.attempt is None:
        first = problems[0]
        raise PtregError(
            f"{first.location()}: {first.message} (not a valid record; `ptreg validate` lists every problem)",
            EXIT_CHECK_FAILED,
        )
    if record.attempt.id != attempt_id:
        raise PtregError(f"{path}#/id: id {record.attempt.id!r} does not match the file name", EXIT_CHECK_FAILED)
    return record.attempt


_VARIED_FROM = re.compile(rb'"varied_from"\s*:\s*"((?:[^"\\]|\\.)*)"')


def load_lineage(root: Path, attempt_id: str) -> Registry:
    """The attempt, its ancestors and everything that varies it, without parsing every record.

    `show` and `lineage` need only that neighbourhood. Each file is read once and searched
    for its varied_from value; only the attempts of the lineage are parsed and validated.
    Records that are not valid are left out, as in `load_directory`.
    """
    meta = load_meta(root)
    target = read_attempt(root, attempt_id)
    parent_of: dict[str, str] = {}
    # Plain strings and os.scandir here: at 10k records pathlib's overhead was a third of the scan.
    # Only regular files (is_file follows symlinks; a FIFO would block the read), and a
    # symlink only when it stays inside the registry: what `load_directory` would read.
    with os.scandir(root) as entries:
        names = [
            e.name for e in entries
            if e.name.endswith(".json") and e.name != REGISTRY_FILE and e.is_file()
            and not (e.is_symlink() and outside(root, Path(e.path)) is not None)
        ]
    for name in names:
        try:
            with open(os.path.join(root, name), "rb") as handle:
                data = handle.read(RECORD_FILE_MAX_BYTES + 1)
        except OSError:
            continue  # an unreadable record cannot be part of the lineage; validate reports it
        if len(data) > RECORD_FILE_MAX_BYTES:
            continue  # refused by every read; validate reports it
        found = _VARIED_FROM.search(data) if b'"varied_from"' in data else None
        if found:
            try:
                parent_of[name[:-5]] = parse_json('"' + found.group(1).decode("utf-8") + '"', name)
            except (PtregError, UnicodeDecodeError):
                continue
    wanted = {attempt_id}
    node = target.varied_from
    while node is not None and node not in wanted and _ID_RE.fullmatch(node) and (root / f"{node}.json").exists():
        wanted.add(node)
        node = parent_of.get(node)
    children: dict[str, list[str]] = {}
    for child, parent in parent_of.items():
        children.setdefault(parent, []).append(child)
    stack = [attempt_id]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in wanted:
                wanted.add(child)
                stack.append(child)
    records = []
    for other in sorted(wanted):
        path = root / f"{other}.json"
        if path.is_symlink() and _symlink_problem(root, path) is not None:
            continue
        try:
            record, _ = parse_record(read_json(path, RECORD_FILE_MAX_BYTES), file=str(path))
        except PtregError:
            continue
        if record.attempt is not None and record.attempt.id == other:
            records.append(record)
    return Registry(source=str(root), meta=meta, records=records, root=root)


def write_meta(root: Path, meta: RegistryMeta) -> None:
    atomic_write_text(root / REGISTRY_FILE, dumps_pretty(meta.model_dump(mode="json")))


def write_attempt(root: Path, attempt: Attempt) -> Path:
    path = record_path(root, attempt.id)
    atomic_write_text(path, dumps_pretty(attempt.to_json_dict()))
    return path


def make_directory(root: Path) -> None:
    """The registry's directory, created with its parents if needed; one line when it cannot be."""
    if root.exists() and not root.is_dir():
        raise PtregError(f"{root}: exists and is not a directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PtregError(f"{root}: cannot create directory: {exc.strerror}") from None


def init_registry(root: Path, meta: Optional[RegistryMeta] = None) -> Path:
    """Create an empty registry; refuse to overwrite an existing one."""
    from .jsonio import create_text_exclusive

    make_directory(root)
    path = root / REGISTRY_FILE
    try:
        # link(2), not a rename: of two `ptreg init` at once, one creates it and one is refused.
        create_text_exclusive(path, dumps_pretty((meta or default_meta()).model_dump(mode="json")))
    except FileExistsError:
        raise PtregError(f"{root}: already a registry ({REGISTRY_FILE} exists)", EXIT_CHECK_FAILED) from None
    return path


def ids_in(records: Iterable[Record]) -> list[str]:
    return [r.raw_id for r in records if r.raw_id is not None]


def registry_state(root: Path, attempts: int, exclude: Optional[str] = None) -> RegistryState:
    """A digest of every file the gate reads (registry.json, records, frozen evaluators), so an
    admission says exactly which registry it was judged against. ``exclude`` leaves out one
    attempt's own file, to compare with the state at its admission (before it was written)."""
    import hashlib

    from .evaluator import evaluator_files
    digest = hashlib.sha256()
    evaluators = evaluator_files(root)
    records = [p for p in attempt_files(root) if p.stem != exclude]
    for path in [root / REGISTRY_FILE, *records, *evaluators]:
        name = path.relative_to(root).as_posix()
        try:
            content = path.read_bytes()
        except OSError:
            content = b""  # unreadable: still named, so the digest differs from a readable one
        digest.update(name.encode("utf-8") + b"\0" + hashlib.sha256(content).digest())
    return RegistryState(attempts=attempts, evaluators=len(evaluators), sha256=digest.hexdigest())
