"""The registry's rules beyond the JSON Schema, all checked and all reported in one pass."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, Optional

from .lineage import find_cycles
from .model import (
    INFRASTRUCTURE_KIND,
    RESERVED_IDS,
    SHAPE_FIELDS,
    STATUSES_NEEDING_REASON,
    Attempt,
    RegistryMeta,
)
from .jsonio import shorten
from .problems import Problem, pointer_join, shown_id
from .errors import PtregError
from .registry import REGISTRY_FILE, Progress, Record, Registry, load_directory, load_path

# Fields every record needs to be complete, whatever its status.
ALWAYS_KNOWN = ("family", "kind", "failure_reason_confidence")
# Fields a record needs once it has an outcome: a not-tried proposal has no evidence yet.
KNOWN_ONCE_TRIED = ("evidence", "lesson", "next_action", "evidence_sources", "source")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def check_registry(registry: Registry, check_sources: Optional[Path] = None) -> list[Problem]:
    """Every problem of the registry: those found while reading it, then the semantic rules."""
    problems = list(registry.problems)
    problems.extend(_duplicate_ids(registry.records))
    valid = [r for r in registry.records if r.attempt is not None]
    known_ids = {r.raw_id for r in registry.records if r.raw_id is not None}
    for record in valid:
        problems.extend(check_attempt(record, registry.meta, known_ids, check_sources))
    problems.extend(_cycles(valid))
    problems.extend(_tracking_scope(valid))
    if registry.root is not None:
        problems.extend(_evaluators(registry.root, valid))
        problems.extend(_runs(registry.root, valid))
        problems.extend(_leftovers(registry.root, valid))
    return problems


def validate_path(
    path: Path, check_sources: Optional[Path] = None, progress: Optional[Progress] = None
) -> tuple[Registry, list[Problem]]:
    """Validate a registry directory, a single attempts.json file, or one record file of a
    registry (checked in its registry's context, so varied_from and duplicates still resolve)."""
    if path.is_file() and (path.parent / REGISTRY_FILE).is_file():
        registry = load_directory(path.parent, progress)
        problems = check_registry(registry, check_sources)
        if path.name == REGISTRY_FILE:
            return registry, problems
        mine = [r for r in registry.records if r.file == str(path)]
        if not mine and not any(p.file == str(path) for p in problems):
            raise PtregError(f"{path}: not an attempt file of the registry {path.parent}")
        registry.records = mine
        return registry, [p for p in problems if p.file == str(path)]
    registry = load_path(path, progress)
    return registry, check_registry(registry, check_sources)


def _duplicate_ids(records: list[Record]) -> Iterator[Problem]:
    first_seen: dict[str, Record] = {}
    for record in records:
        rid = record.raw_id
        if rid is None:
            continue
        if rid in first_seen:
            other = first_seen[rid]
            yield Problem(
                "unique-id",
                f"duplicate id {shorten(rid)} (first at {_where(other)})",
                shown_id(rid),
                pointer_join(record.pointer, "id"),
                record.file,
            )
        else:
            first_seen[rid] = record


def _where(record: Record) -> str:
    if record.file and record.pointer:
        return f"{record.file}#{record.pointer}"
    return record.file or record.pointer


def check_attempt(
    record: Record, meta: RegistryMeta, known_ids: set[str], check_sources: Optional[Path] = None
) -> Iterator[Problem]:
    attempt = record.attempt
    assert attempt is not None

    def problem(rule: str, field: str, message: str, *more: object) -> Problem:
        return Problem(rule, message, attempt.id, pointer_join(record.pointer, field, *more), record.file)

    if attempt.id in RESERVED_IDS:
        yield problem("id-reserved", "id", f"id {attempt.id!r} is reserved for the registry's own file")

    for name in ALWAYS_KNOWN + (KNOWN_ONCE_TRIED if attempt.status != "not-tried" else ()):
        if getattr(attempt, name) is None:
            yield problem("unknown-field", name, f"{name} is unknown; a complete record states it")

    if attempt.status in STATUSES_NEEDING_REASON:
        # lesson and next_action are required of every tried attempt (unknown-field above).
        if attempt.failure_reason is None:
            yield problem("needs-reason", "failure_reason", f"status {attempt.status!r} requires failure_reason")
        if attempt.failure_reason_confidence == "not-applicable":
            yield problem(
                "confidence",
                "failure_reason_confidence",
                f"status {attempt.status!r} needs a confidence other than 'not-applicable'",
            )
    elif attempt.failure_reason is None and attempt.failure_reason_confidence not in (None, "not-applicable"):
        yield problem(
            "confidence",
            "failure_reason_confidence",
            f"status {attempt.status!r} without a failure_reason uses 'not-applicable', "
            f"not {attempt.failure_reason_confidence!r}",
        )

    yield from _vocabulary(attempt, meta, problem)

    if attempt.varied_from is not None:
        if attempt.varied_from not in known_ids:
            yield problem("varied-from", "varied_from", f"varied_from {attempt.varied_from!r} names no attempt")
        if attempt.varied is None:
            yield problem("varied-from", "varied", "varied_from needs `varied`: say what was varied")
    elif attempt.varied is not None:
        yield problem("varied-from", "varied", "`varied` without varied_from: name the attempt it varies")

    if attempt.kind == INFRASTRUCTURE_KIND:
        for name in SHAPE_FIELDS:
            if getattr(attempt, name) is not None:
                yield problem("infrastructure-shape", name, f"infrastructure attempts carry no {name}")

    if attempt.evidence_sources is not None and not attempt.evidence_sources:
        yield problem("evidence-sources", "evidence_sources", "evidence_sources is empty; name at least one source")

    if check_sources is not None:
        yield from _sources(attempt, check_sources, problem)


def _vocabulary(attempt: Attempt, meta: RegistryMeta, problem) -> Iterator[Problem]:
    if attempt.kind is not None and attempt.kind not in meta.kind_vocabulary:
        yield problem("vocabulary", "kind", f"kind {attempt.kind!r} is not in the registry's kind_vocabulary")
    for index, method in enumerate(attempt.methods or ()):
        if method not in meta.method_vocabulary:
            yield problem("vocabulary", "methods", f"method {method!r} is not in the method_vocabulary", index)
    if attempt.objective is not None and attempt.objective not in meta.objective_vocabulary:
        yield problem(
            "vocabulary", "objective", f"objective {attempt.objective!r} is not in the objective_vocabulary"
        )


def _sources(attempt: Attempt, base: Path, problem) -> Iterator[Problem]:
    """Local sources must exist under ``base``; URLs are not fetched."""
    root = base.resolve()
    named = [("evidence_sources", i, s) for i, s in enumerate(attempt.evidence_sources or ())]
    if attempt.source is not None:
        named.append(("source", None, attempt.source))
    for field, index, source in named:
        if _URL.match(source):
            continue
        local = source.split("#", 1)[0]
        target = (root / local).resolve()
        extra = () if index is None else (index,)
        if not target.is_relative_to(root):
            yield problem("source-exists", field, f"source {shorten(source, 200)} points outside {base}", *extra)
        elif not target.exists():
            yield problem("source-exists", field, f"source {shorten(source, 200)} does not exist under {base}", *extra)


def _cycles(records: list[Record]) -> Iterator[Problem]:
    by_id = {r.attempt.id: r for r in records if r.attempt is not None}
    for cycle in find_cycles({i: r.attempt.varied_from for i, r in by_id.items()}):
        first = by_id[cycle[0]]
        yield Problem(
            "varied-from-cycle",
            "varied_from cycle: " + " -> ".join(cycle + [cycle[0]]),
            cycle[0],
            pointer_join(first.pointer, "varied_from"),
            first.file,
        )


def _evaluators(root: Path, records: list[Record]) -> Iterator[Problem]:
    """Every frozen evaluator still verifies, and every attempt's evaluator is one of them."""
    from .evaluator import evaluator_files, evaluators_dir, verify_file

    for path in evaluator_files(root):
        mismatch = verify_file(path)
        if mismatch is not None:
            yield Problem("evaluator-integrity", f"frozen evaluator no longer verifies: {mismatch}", None, "", str(path))
    directory = evaluators_dir(root)
    for record in records:
        ref = record.attempt.evaluator
        if ref is not None and not (directory / f"{ref}.json").is_file():
            yield Problem(
                "evaluator", f"evaluator {ref!r} is not frozen in {directory}", record.attempt.id,
                pointer_join(record.pointer, "evaluator"), record.file,
            )


def _runs(root: Path, records: list[Record]) -> Iterator[Problem]:
    """Every linked run folder is whole and agrees with its link; `exact` rests on a complete run."""
    from .run import check_folder, read_results, run_folder

    for record in records:
        attempt = record.attempt
        for index, ref in enumerate(attempt.runs or ()):
            where = pointer_join(record.pointer, "runs", index)
            broken = check_folder(root, attempt.id, ref.run_id)
            if broken is not None:
                yield Problem("run", broken, attempt.id, where, record.file)
                continue
            results = read_results(run_folder(root, attempt.id, ref.run_id), root)
            if results.status != ref.status or results.evaluator != ref.evaluator:
                yield Problem(
                    "run", f"run {ref.run_id} is {results.status} under {results.evaluator} in its results, but the "
                    f"record says {ref.status} under {ref.evaluator}", attempt.id, where, record.file,
                )
        if attempt.runs and attempt.failure_reason_confidence == "exact" and not any(r.status == "complete" for r in attempt.runs):
            yield Problem(
                "run", "confidence 'exact' needs a complete run, and none of the linked runs is", attempt.id,
                pointer_join(record.pointer, "failure_reason_confidence"), record.file,
            )


def _leftovers(root: Path, records: list[Record]) -> Iterator[Problem]:
    """What a killed write left behind: warnings, since none of it is part of the record."""
    from .repair import find_leftovers, linked_runs

    for leftover in find_leftovers(root, linked_runs(r.attempt for r in records)):
        rule = "orphaned-run" if leftover.kind == "orphaned-run" else "leftover"
        hint = "" if leftover.kind == "orphaned-run" else "; `ptreg repair` removes it"
        yield Problem(rule, leftover.message + hint, leftover.attempt_id, "", str(leftover.path), severity="warning")


def _tracking_scope(records: list[Record]) -> Iterator[Problem]:
    """One tracking issue scopes one lineage; a warning, since imported files may predate the rule."""
    from .lineage import lineage_root

    by_id = {r.attempt.id: r.attempt for r in records}
    seen: dict[str, tuple[str, str]] = {}  # reference -> (lineage root, first attempt id)
    for record in records:
        reference = record.attempt.tracking_issue
        if reference is None:
            continue
        root = lineage_root(record.attempt.id, by_id)
        first = seen.setdefault(reference, (root, record.attempt.id))
        if first[0] != root:
            yield Problem(
                "tracking-issue-scope",
                f"tracking issue {reference} also scopes {first[1]}, of another lineage; one issue scopes one lineage",
                record.attempt.id, pointer_join(record.pointer, "tracking_issue"), record.file, severity="warning",
            )
