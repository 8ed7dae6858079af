"""Import and export of the single-file ``attempts.json`` format (schema_version 1 and 2).

An import is all or nothing: every record is staged, then the journal commits them together.
Each imported record keeps its origin (``records/attempt.py:Origin``), so export gives the
ledger back as it came: in its order, each record with its keys in their order.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..clock import utc_now
from ..errors import CheckFailed, UnusableInput
from ..records.attempt import (
    ATTEMPTS_FILE_KEYS,
    RESERVED_IDS,
    V1_FIELDS,
    VOCABULARY_KEYS,
    Attempt,
    RegistryMeta,
    in_ledger_order,
)
from ..records.evaluator import FrozenEvaluator, mismatch
from ..records.problems import Problem, first_schema_error, pointer_join, shown_id
from ..records.registry import Record, Registry, ids_in, parse_record
from ..records.rules import duplicate_ids
from ..records.vocabulary import VOCABULARIES
from ..text import counted, shorten
from .attempts_file import load_attempts_file
from .bundle import Bundle, read_bundle, refuse_unreadable
from .directory import (
    PROGRESS_EVERY,
    REGISTRY_FILE,
    Progress,
    load_directory,
    make_directory,
    parse_meta,
    record_path,
    write_ignore_file,
)
from .journal import commit
from .jsonio import JsonError, decode_json, discard, dumps_pretty, refuse_outside, stage_text
from .locks import registry_lock
from .names import VOCABULARY_DIR
from .runs import ENVIRONMENT_FILE, RESULTS_FILE, RUNS_DIR, apart_file_names, parse_results
from .vocabulary_files import is_term_layout, refuse_old_layout, term_file_name, term_layout_files, vocabularies_of

# The fields a complete record states; a version 1 file lacks most of them.
_REPORTED_UNKNOWN = (
    "family",
    "kind",
    "failure_reason",
    "failure_reason_confidence",
    "lesson",
    "next_action",
    "evidence_sources",
)


_STAGING_THREADS = 8


class ImportRefused(CheckFailed):
    """The file cannot be imported as it is; ``problems`` says why, record by record."""

    def __init__(self, message: str, problems: list[Problem]):
        super().__init__(message)
        self.problems = problems


@dataclass
class ImportReport:
    source: str
    schema_version: int
    imported: list[str]
    replaced: list[str]
    created_registry: bool
    unknown_fields: dict[str, int]  # field -> how many imported attempts leave it unknown
    # vocabulary the file lacked -> the terms its records use, taken without a definition
    inferred_vocabularies: dict[str, list[str]] = field(default_factory=dict)
    lacks: list[str] = field(default_factory=list)  # fields the file's format did not have
    vocabulary_added: dict[str, list[str]] = field(default_factory=dict)
    vocabulary_conflicts: list[str] = field(default_factory=list)
    evaluators: int = 0  # frozen evaluators a bundle added
    runs: int = 0  # run folders a bundle added
    problems_after: list[Problem] = field(default_factory=list)  # rule problems of the imported records

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "schema_version": self.schema_version,
            "imported": len(self.imported),
            "replaced": self.replaced,
            "created_registry": self.created_registry,
            "unknown_fields": self.unknown_fields,
            "inferred_vocabularies": self.inferred_vocabularies,
            "format_lacks": self.lacks,
            "vocabulary_added": self.vocabulary_added,
            "vocabulary_conflicts": self.vocabulary_conflicts,
            "evaluators_added": self.evaluators,
            "runs_added": self.runs,
            "problems_after_import": [p.to_json() for p in self.problems_after],
        }


def import_file(
    root: Path,
    path: Path,
    *,
    replace: bool = False,
    progress: Progress | None = None,
    origin_name: str | None = None,
) -> ImportReport:
    """Import every attempt of the attempts.json at ``path`` into the registry at ``root``, or
    none of them; ``origin_name`` is what the records' origin calls the file (default: ``path``).

    Refused, with nothing written: a record that does not match the schema, an id used twice
    in the file, or an id the registry already holds (unless ``replace``). Rule problems that
    the records bring with them (e.g. fields a version 1 file does not have) do not block the
    import (``operations/importing.py`` reports them).
    """
    incoming = load_attempts_file(path, origin_name)
    return _import(root, path, incoming, {}, replace=replace, progress=progress)


def import_bundle(root: Path, path: Path, *, replace: bool = False, progress: Progress | None = None) -> ImportReport:
    """Import a bundle (``store/bundle.py``): its records as ``import_file`` would, and with them
    its frozen evaluators and run folders, all of it or none. An evaluator or a run folder the
    registry already has must be the same bytes: neither is ever rewritten."""
    bundle = read_bundle(path)
    incoming = _registry_of(bundle)
    return _import(root, path, incoming, _checked_extras(bundle, incoming), replace=replace, progress=progress)


def _import(
    root: Path, path: Path, incoming: Registry, extras: dict[str, str], *, replace: bool, progress: Progress | None
) -> ImportReport:
    _refuse_unimportable(path, incoming)
    attempts = incoming.attempts
    make_directory(root)  # the lock file lives in it
    # The clash check and the writes see one state of the registry: no writer in between.
    with registry_lock(root):
        created = not (root / REGISTRY_FILE).exists()
        held: dict[str, Attempt] = {}
        if created:
            existing_ids: set[str] = set()
            # the ledger's own vocabularies (or those taken from its records), never ptreg's defaults
            meta = incoming.meta
        else:
            refuse_old_layout(root)
            current = load_directory(root, progress)
            existing_ids = set(ids_in(current.records)) | {Path(p.file).stem for p in current.problems if p.file}
            meta = current.meta
            held = current.by_id()
        attempts = _stamped(attempts, held)
        clashes = sorted(existing_ids & {a.id for a in attempts})
        if clashes and not replace:
            shown = ", ".join(clashes[:10]) + (f" and {len(clashes) - 10} more" if len(clashes) > 10 else "")
            raise CheckFailed(
                f"{root} already holds {len(clashes)} of these ids: {shown}; nothing imported "
                "(use --replace to overwrite)",
            )
        new_extras = _new_extras(root, path, extras)
        added, conflicts = ({}, []) if created else _merge_vocabularies(meta, incoming)
        files = [(record_path(root, a.id).name, dumps_pretty(a.to_json_dict())) for a in attempts]
        files += sorted(new_extras.items())
        if created:
            # registry.json last: a registry directory only counts as one once it is in place.
            layout = term_layout_files(meta)
            files += [*layout[1:], layout[0]]
        else:  # only the terms added: each its own file, so that nothing else is rewritten
            files += [(f, text) for f, text in term_layout_files(meta)[1:] if f in _term_names(added)]
        stage_and_commit(root, files, progress)
        if created:
            write_ignore_file(root)
    return ImportReport(
        source=str(path),
        schema_version=incoming.schema_version,
        imported=[a.id for a in attempts],
        replaced=clashes,
        created_registry=created,
        unknown_fields=_unknown_fields(attempts, incoming.schema_version),
        inferred_vocabularies={key: list(getattr(incoming.meta, key)) for key in incoming.inferred_vocabularies},
        lacks=next((list(a.origin.lacks) for a in attempts if a.origin is not None), []),
        vocabulary_added=added,
        vocabulary_conflicts=conflicts,
        evaluators=sum(1 for n in new_extras if n.startswith("evaluators/")),
        runs=len({n.rsplit("/", 1)[0] for n in new_extras if n.startswith(f"{RUNS_DIR}/")}),
    )


def _stamped(attempts: list[Attempt], held: dict[str, Attempt]) -> list[Attempt]:
    """The incoming records with their origin's time and import number. A record the registry
    already holds as it is, from the same place of the same file, keeps its origin whole, so
    that importing the same file again changes no byte."""
    if not any(a.origin is not None and a.origin.imported_at is None for a in attempts):
        return attempts  # a bundle's records keep the origins they were imported with
    number = 1 + max((a.origin.import_number or 0 for a in held.values() if a.origin is not None), default=0)
    now = utc_now()
    stamped = []
    for attempt in attempts:
        origin = attempt.origin
        if origin is None or origin.imported_at is not None:
            stamped.append(attempt)
            continue
        same = held.get(attempt.id)
        if (
            same is not None
            and same.origin is not None
            and same.origin.model_copy(update={"imported_at": None, "import_number": None}) == origin
            and same.model_copy(update={"origin": None}) == attempt.model_copy(update={"origin": None})
        ):
            stamped.append(same)
            continue
        stamped.append(
            attempt.model_copy(
                update={"origin": origin.model_copy(update={"imported_at": now, "import_number": number})}
            )
        )
    return stamped


def _registry_of(bundle: Bundle) -> Registry:
    """The bundle's registry.json and records, read as a registry directory reads them."""
    where = f"{bundle.source}:{REGISTRY_FILE}"
    raw_meta = decode_json(bundle.files[REGISTRY_FILE], where)
    if is_term_layout(raw_meta):
        held = [
            (name.split("/")[1], name.split("/")[2], data, f"{bundle.source}:{name}")
            for name, data in sorted(bundle.files.items())
            if name.startswith(f"{VOCABULARY_DIR}/")
        ]
        meta = vocabularies_of(raw_meta, held, where, f"{bundle.source}:{VOCABULARY_DIR}")
    else:  # a bundle of a registry of the older layout
        meta = parse_meta(raw_meta, where)
    records: list[Record] = []
    problems: list[Problem] = []
    for name in sorted(n for n in bundle.files if "/" not in n and n != REGISTRY_FILE):
        where = f"{bundle.source}:{name}"
        try:
            raw = decode_json(bundle.files[name], where)
        except JsonError as exc:
            problems.append(Problem("json", exc.problem, shown_id(name[: -len(".json")]), exc.pointer, where))
            continue
        record, found = parse_record(raw, file=where)
        problems.extend(found)
        if record.raw_id is not None and f"{record.raw_id}.json" != name:
            problems.append(
                Problem(
                    "file-name",
                    f"id {shorten(record.raw_id)} does not match the file name",
                    shown_id(record.raw_id),
                    "/id",
                    where,
                )
            )
        records.append(record)
    return Registry(source=bundle.source, meta=meta, records=records, problems=problems)


def _term_names(added: dict[str, list[str]]) -> set[str]:
    """The term files, relative to the registry, of the terms an import adds or defines."""
    by_field = {field: vocabulary for vocabulary, field in VOCABULARIES.items()}
    return {f"{VOCABULARY_DIR}/{by_field[key]}/{term_file_name(t)}" for key, terms in added.items() for t in terms}


def _checked_extras(bundle: Bundle, incoming: Registry) -> dict[str, str]:
    """The bundle's frozen evaluators and run files as text, each verified as a registry would."""
    extras: dict[str, str] = {}
    for name in bundle.evaluators:
        where = f"{bundle.source}:{name}"
        raw = decode_json(bundle.files[name], where)
        try:
            frozen = FrozenEvaluator.model_validate(raw)
        except ValidationError as exc:
            raise UnusableInput(f"{first_schema_error(exc, where)}; nothing imported") from None
        problem = mismatch(raw, frozen, name.rsplit("/", 1)[1])
        if problem is not None:
            raise CheckFailed(f"{where}: {problem}; nothing imported")
        extras[name] = bundle.files[name].decode("utf-8")
    ids = set(ids_in(incoming.records))
    for folder in bundle.run_folders:
        _, attempt_id, run_id = folder.split("/")
        for file in (RESULTS_FILE, ENVIRONMENT_FILE):
            if f"{folder}/{file}" not in bundle.files:
                raise UnusableInput(f"{bundle.source}:{folder}: a run folder without {file}; nothing imported")
        where = f"{bundle.source}:{folder}/{RESULTS_FILE}"
        raw = decode_json(bundle.files[f"{folder}/{RESULTS_FILE}"], where)
        files = [RESULTS_FILE, ENVIRONMENT_FILE, *apart_file_names(raw, where)]
        stray = sorted(n for n in bundle.files if n.rsplit("/", 1)[0] == folder and n.rsplit("/", 1)[1] not in files)
        if stray:
            raise UnusableInput(
                f"{bundle.source}:{stray[0]}: a file its {RESULTS_FILE} does not name; nothing imported"
            )

        def apart_file(name: str, folder: str = folder) -> bytes:
            if f"{folder}/{name}" not in bundle.files:
                raise UnusableInput(f"{bundle.source}:{folder}/{name}: named by {RESULTS_FILE}, not in the bundle")
            return bundle.files[f"{folder}/{name}"]

        try:
            results = parse_results(raw, where, f"{bundle.source}:{folder}", apart_file)
        except UnusableInput as exc:
            raise UnusableInput(f"{exc.message}; nothing imported") from None
        if (results.attempt, results.run_id) != (attempt_id, run_id) or attempt_id not in ids:
            raise CheckFailed(
                f"{where}: not a run of an attempt the bundle holds, under its own name; nothing imported",
            )
        environment = f"{folder}/{ENVIRONMENT_FILE}"
        if not isinstance(decode_json(bundle.files[environment], f"{bundle.source}:{environment}"), dict):
            raise UnusableInput(f"{bundle.source}:{environment}: expected a JSON object; nothing imported")
        for file in files:
            extras[f"{folder}/{file}"] = bundle.files[f"{folder}/{file}"].decode("utf-8")
    return extras


def _new_extras(root: Path, path: Path, extras: dict[str, str]) -> dict[str, str]:
    """The evaluators and run files the registry lacks; one it has must be the same bytes."""
    new = {}
    for name, text in extras.items():
        target = root / name
        refuse_outside(root, target, "nothing imported")
        if not target.exists():
            new[name] = text
        elif target.read_bytes() != text.encode("utf-8"):
            raise CheckFailed(
                f"{path}: {name} differs from the registry's own {target}, which is never rewritten; nothing imported",
            )
    return new


def _refuse_unimportable(path: Path, incoming: Registry) -> None:
    """Refuse, before anything is written, a file with a record the schema rejects, a reserved
    id, or an id used twice."""
    if incoming.problems:
        raise ImportRefused(f"{path}: {len(incoming.problems)} schema problem(s); nothing imported", incoming.problems)
    reserved = [
        Problem(
            "id-reserved",
            f"id {r.raw_id!r} is reserved for the registry's own file",
            r.raw_id,
            pointer_join(r.pointer, "id"),
            r.file,
        )
        for r in incoming.records
        if r.raw_id in RESERVED_IDS
    ]
    if reserved:
        names = ", ".join(repr(p.attempt_id) for p in reserved)
        raise ImportRefused(f"{path}: {names} reserved for the registry's own file; nothing imported", reserved)
    twice = sorted({str(p.attempt_id) for p in duplicate_ids(incoming.records)})
    if twice:
        raise CheckFailed(f"{path}: ids used more than once: {', '.join(twice)}; nothing imported")


def _unknown_fields(attempts: list[Attempt], schema_version: int) -> dict[str, int]:
    """Field -> how many imported attempts leave it unknown."""
    unknown = {
        name: sum(1 for a in attempts if getattr(a, name) is None)
        for name in _REPORTED_UNKNOWN
        if any(getattr(a, name) is None for a in attempts)
    }
    # failure_reason is legitimately absent for worked and not-tried; report it only for v1.
    if schema_version == 2:
        unknown.pop("failure_reason", None)
    return unknown


def _merge_vocabularies(meta: RegistryMeta, incoming: Registry) -> tuple[dict[str, list[str]], list[str]]:
    """Add the file's unknown terms to the registry; a term defined differently keeps the
    registry's text. A term the registry holds without a definition takes the file's; a term
    the file uses without one adds nothing to a definition the registry has."""
    added: dict[str, list[str]] = {}
    conflicts: list[str] = []
    for key in (*VOCABULARY_KEYS, "confidence_vocabulary"):
        ours: dict[str, str | None] = getattr(meta, key)
        for term, text in getattr(incoming.meta, key).items():
            if term not in ours or (ours[term] is None and text is not None):
                ours[term] = text
                added.setdefault(key, []).append(term)
            elif text is not None and ours[term] != text:
                conflicts.append(f"{key}.{term}")
    return added, conflicts


def stage_and_commit(root: Path, files: list[tuple[str, str]], progress: Progress | None = None) -> None:
    """Stage every file (a path relative to ``root`` and its text), then commit them through
    the journal: all of them land or none."""
    # fsync waits on the disk, not the CPU; overlapping the waits makes a large import
    # about twice as fast (benchmarks/registry_scale.py, attempt import-parallel-fsync).
    with ThreadPoolExecutor(max_workers=_STAGING_THREADS) as pool:
        futures = [pool.submit(stage_text, root, text, prefix=".import.") for _, text in files]
        for done, future in enumerate(futures, start=1):
            future.exception()  # waits for it
            if progress is not None and (done % PROGRESS_EVERY == 0 or done == len(futures)):
                progress("writing records", done, len(futures))
    failed = [error for f in futures if (error := f.exception()) is not None]
    if failed:
        for f in futures:
            if f.exception() is None:
                discard(f.result())
        raise failed[0]
    commit(root, [(Path(f.result()).name, target) for f, (target, _) in zip(futures, files, strict=True)], "import")


def export_registry(registry: Registry, *, sort_by_id: bool = False, schema_version: int = 2) -> dict[str, Any]:
    """The registry as one single-file document: the ledger's order (or by id, ``sort_by_id``),
    each imported record's keys in the order of its file, top-level keys in the source
    project's order.

    schema_version 2 writes the vocabularies' defined terms (a term imported without a
    definition has none to write, and a vocabulary with no defined term is left out, as a file
    from before vocabularies has none). schema_version 1 writes only the fields that version
    had, and is refused, naming them, when records hold more: it would lose them.
    """
    refuse_unreadable(registry, registry.source)
    attempts = sorted(registry.attempts, key=lambda a: a.id) if sort_by_id else in_ledger_order(registry.attempts)
    records = [a.to_ledger_dict() for a in attempts]
    if schema_version == 1:
        return {"schema_version": 1, "attempts": _version_1(registry.source, records)}
    body: dict[str, Any] = {"schema_version": 2, "attempts": records}
    for key in ("confidence_vocabulary", *VOCABULARY_KEYS):
        defined = {term: text for term, text in getattr(registry.meta, key).items() if text is not None}
        if defined:
            body[key] = defined
    return {key: body[key] for key in ATTEMPTS_FILE_KEYS if key in body}


def export_version(registry: Registry) -> int:
    """The schema_version a plain ``export`` writes: the one the records came in. A registry
    imported from a schema_version 1 ledger (and nothing added since) goes back as 1, since as 2
    its records would lack what 2 requires; one that mixes such records with records of 2 is
    refused, naming ``--schema-version``, for no version holds both as they are."""
    short = [a.id for a in registry.attempts if a.origin is not None and a.origin.schema_version == 1]
    if not short:
        return 2
    if len(short) == len(registry.attempts):
        return 1
    lacking = [a.id for a in registry.attempts if a.origin is not None and any(a.lacks(f) for f in a.origin.lacks)]
    if not lacking:
        return 2
    raise UnusableInput(
        f"{registry.source}: {counted(len(short), 'attempt')} came from a schema_version 1 ledger and "
        f"{counted(len(registry.attempts) - len(short), 'other')} did not; give --schema-version 2 (the "
        f"records of 1 lacking what 2 requires: {', '.join(lacking[:5])}{' ...' if len(lacking) > 5 else ''}) "
        "or --schema-version 1 (refused if a record holds more than 1 has)"
    )


def _version_1(source: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records as schema_version 1 holds them; refused when any holds a field it has not."""
    losing = [(r["id"], [k for k in r if k not in V1_FIELDS]) for r in records]
    losing = [(attempt_id, fields) for attempt_id, fields in losing if fields]
    if losing:
        shown = "; ".join(f"{attempt_id} ({', '.join(fields)})" for attempt_id, fields in losing[:10])
        more = f"; and {len(losing) - 10} more" if len(losing) > 10 else ""
        raise CheckFailed(
            f"{source}: schema_version 1 holds only {', '.join(V1_FIELDS)}, so {counted(len(losing), 'attempt')} "
            f"would lose fields: {shown}{more}; nothing written (--schema-version 2 keeps them)",
        )
    return records


def export_notes(registry: Registry, document: dict[str, Any]) -> list[str]:
    """What a reader of the exported file should know it lacks: terms the records use that no
    vocabulary defines, and records whose older format leaves fields this version requires."""
    notes = []
    if document["schema_version"] == 2:
        undefined = [
            f"{key.removesuffix('_vocabulary')} {term}"
            for key in ("confidence_vocabulary", *VOCABULARY_KEYS)
            for term, text in getattr(registry.meta, key).items()
            if text is None
        ]
        if undefined:
            notes.append(
                f"{counted(len(undefined), 'term')} imported without a definition {'is' if len(undefined) == 1 else 'are'} "
                f"left out of the vocabularies: {', '.join(undefined[:10])}"
                + (" ..." if len(undefined) > 10 else "")
                + '; `ptreg vocab add KIND TERM --description "..."` defines one'
            )
        older = sorted({a.origin.schema_version for a in registry.attempts if a.origin is not None and a.origin.lacks})
        count = sum(1 for a in registry.attempts if a.origin is not None and any(a.lacks(f) for f in a.origin.lacks))
        if count:
            hint = "; `--schema-version 1` writes them in the format they came in" if older == [1] else ""
            notes.append(
                f"{counted(count, 'attempt')} came from an older format (schema_version "
                f"{', '.join(map(str, older))}) and lack{'s' if count == 1 else ''} fields the current one has{hint}"
            )
    return notes
