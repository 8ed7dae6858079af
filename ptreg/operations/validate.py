"""Validating a registry: the record rules, and the checks that read the files the records name.

Beyond ``records.rules`` (which look only at the records), a registry directory must keep:
every frozen evaluator still verifies and every attempt's evaluator is one of them; every
linked run folder is whole and agrees with its link; an amended evaluator was replaced before
any run under it measured; and, with ``--check-sources``, every
local source exists. What a killed write left behind is reported as a warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

from ..errors import UnusableInput
from ..gate.readmission import measured_something, readmit_all
from ..gate.verification import verify_evaluator
from ..records.attempt import Attempt
from ..records.problems import Problem
from ..records.registry import Record, Registry
from ..records.rules import check_records, problem_at
from ..records.run_results import undecisive
from ..store.attempts_file import load_attempts_file
from ..store.directory import REGISTRY_FILE, Progress, load_directory
from ..store.evaluator_files import evaluator_files, evaluators_dir
from ..store.leftovers import find_leftovers
from ..store.runs import check_folder, read_results, run_folder
from ..text import shorten

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def check_registry(registry: Registry, check_sources: Path | None = None, *, strict: bool = False) -> list[Problem]:
    """Every problem of the registry: those found while reading it, the record rules, then
    what its files say. ``strict`` makes the fields an older format lacked errors."""
    base = check_sources
    problems = check_records(registry, None if base is None else lambda record: _sources(record, base), strict=strict)
    valid = [r for r in registry.records if r.attempt is not None]
    if registry.root is not None:
        problems.extend(_evaluators(registry.root, valid))
        problems.extend(_runs(registry.root, valid, strict))
        problems.extend(_leftovers(registry.root, valid))
    problems.extend(_readmissions(valid))
    problems.extend(_amendments(valid))
    return problems


def load_path(path: Path, progress: Progress | None = None) -> Registry:
    """A registry directory or a single attempts.json file, with every problem its vocabulary
    files have as problems of the registry."""
    if path.is_dir():
        return load_directory(path, progress, every_problem=True)
    if not path.exists():
        raise UnusableInput(f"{path}: no such file or directory")
    return load_attempts_file(path)


def validate_path(
    path: Path, check_sources: Path | None = None, progress: Progress | None = None, *, strict: bool = False
) -> tuple[Registry, list[Problem]]:
    """Validate a registry directory, a single attempts.json file, or one record file of a
    registry (checked in its registry's context, so varied_from and duplicates still resolve)."""
    if path.is_file() and (path.parent / REGISTRY_FILE).is_file():
        registry = load_directory(path.parent, progress, every_problem=True)
        problems = check_registry(registry, check_sources, strict=strict)
        if path.name == REGISTRY_FILE:
            return registry, problems
        mine = [r for r in registry.records if r.file == str(path)]
        if not mine and not any(p.file == str(path) for p in problems):
            raise UnusableInput(f"{path}: not an attempt file of the registry {path.parent}")
        registry.records = mine
        return registry, [p for p in problems if p.file == str(path)]
    registry = load_path(path, progress)
    return registry, check_registry(registry, check_sources, strict=strict)


def _sources(record: Record, base: Path) -> Iterator[Problem]:
    """Local sources, paths relative to ``base`` (the registry directory unless told otherwise),
    must exist; they may lead out of it (``../README.md``). URLs are not fetched."""
    attempt = record.attempt
    assert attempt is not None
    problem = problem_at(record)
    root = base.resolve()
    named: list[tuple[str, int | None, str]] = [
        ("evidence_sources", i, s) for i, s in enumerate(attempt.evidence_sources or ())
    ]
    if attempt.source is not None:
        named.append(("source", None, attempt.source))
    for field, index, source in named:
        if _URL.match(source):
            continue
        target = root / source.split("#", 1)[0]
        if not target.exists():
            extra = () if index is None else (index,)
            yield problem("source-exists", field, f"source {shorten(source, 200)} does not exist under {base}", *extra)


def _evaluators(root: Path, records: list[Record]) -> Iterator[Problem]:
    """Every frozen evaluator's file still is what was frozen, and every attempt's evaluator is
    one of them. A file changed is an error of the registry. A project file an evaluator froze
    (an input, the code its command runs) that changed since is a warning, on each attempt still
    to be run under it (not tried): the records are as they were written, but `gate` and `run`
    refuse that attempt until the file is put right. A concluded attempt's evaluator may fall
    behind the project without anything left to refuse (`evaluator verify` still says so)."""
    verified = {path.name.removesuffix(".json"): verify_evaluator(root, path) for path in evaluator_files(root)}
    for found in verified.values():
        if found.frozen is None:
            yield Problem("evaluator-integrity", f"frozen evaluator {found.said}", None, "", str(found.path))
    for record, attempt in _valid(records):
        stale = verified.get(attempt.evaluator or "")
        if attempt.status == "not-tried" and stale is not None and stale.frozen is not None and not stale.verifies:
            yield replace(
                problem_at(record)(
                    "evaluator-project-files",
                    "evaluator",
                    f"its evaluator {attempt.evaluator} {stale.said}; `ptreg gate` and `ptreg run` refuse it until "
                    f"that is restored (or, while no run of it has measured anything, `ptreg readmit {attempt.id} "
                    "--evaluator NEW`)",
                ),
                severity="warning",
            )
    directory = evaluators_dir(root)
    for record, attempt in _valid(records):
        ref = attempt.evaluator
        if ref is not None and not (directory / f"{ref}.json").is_file():
            yield problem_at(record)("evaluator", "evaluator", f"evaluator {ref!r} is not frozen in {directory}")


def _runs(root: Path, records: list[Record], strict: bool = False) -> Iterator[Problem]:
    """Every linked run folder is whole and agrees with its link; a run whose inputs changed
    under it is named (a warning: it is recorded as it happened, and decides nothing; an
    error with ``strict``)."""
    for record, attempt in _valid(records):
        problem = problem_at(record)
        for index, ref in enumerate(attempt.runs or ()):
            broken = check_folder(root, attempt.id, ref.run_id)
            if broken is not None:
                yield problem("run", "runs", broken, index)
                continue
            results = read_results(run_folder(root, attempt.id, ref.run_id), root)
            replaced = [m for m in attempt.amendments or () if m.before == ref.evaluator]
            seen = measured_something(results) if replaced else None
            if seen is not None:
                # an amendment is believed only while every run under what it replaced measured nothing
                yield problem(
                    "amendment",
                    "runs",
                    f"run {ref.run_id} measured something under {ref.evaluator} ({seen}), which an amendment "
                    f"replaced at {replaced[0].amended_at}: an evaluator is fixed once a run measured",
                    index,
                )
            if results.status != ref.status or results.evaluator != ref.evaluator:
                yield problem(
                    "run",
                    "runs",
                    f"run {ref.run_id} is {results.status} under {results.evaluator} in its results, "
                    f"but the record says {ref.status} under {ref.evaluator}",
                    index,
                )
            if results.continues != ref.continues:  # the link is what counting reads: it must be the run's
                yield problem(
                    "run",
                    "runs",
                    f"run {ref.run_id} continues {results.continues or 'no run'} in its results, but the record says "
                    f"{ref.continues or 'no run'}",
                    index,
                )
            if results.inputs_changed is not None:
                said = undecisive(results)
                if strict:
                    yield problem("run-inputs-changed", "runs", said, index)
                else:
                    found = problem(
                        "run-inputs-changed", "runs", f"{said}; `validate --strict` makes this an error", index
                    )
                    yield replace(found, severity="warning")


def _amendments(records: list[Record]) -> Iterator[Problem]:
    """Each amendment follows the one before it, and the last gives the attempt its evaluator."""
    for record, attempt in _valid(records):
        problem = problem_at(record)
        amendments = attempt.amendments or []
        for index, (earlier, later) in enumerate(pairwise(amendments), start=1):
            if later.before != earlier.after:
                yield problem(
                    "amendment",
                    "amendments",
                    f"replaces {later.before}, but the one before it gave {earlier.after}",
                    index,
                )
        if amendments and amendments[-1].after != attempt.evaluator:
            yield problem(
                "amendment",
                "amendments",
                f"the last amendment gives {amendments[-1].after}, but the attempt is measured by {attempt.evaluator}",
                len(amendments) - 1,
            )


def _leftovers(root: Path, records: list[Record]) -> Iterator[Problem]:
    """What a killed write left behind: warnings, since none of it is part of the record."""
    for leftover in find_leftovers(root, (a for _, a in _valid(records))):
        if leftover.kind == "symlink":  # planted, not left: what a bundle of the registry would refuse
            yield Problem("symlink", leftover.message, leftover.attempt_id, "", str(leftover.path))
            continue
        rule = "orphaned-run" if leftover.kind == "orphaned-run" else "leftover"
        hint = "" if leftover.kind in ("orphaned-run", "lost-run") else "; `ptreg repair` removes it"
        yield Problem(rule, leftover.message + hint, leftover.attempt_id, "", str(leftover.path), severity="warning")


def _readmissions(records: list[Record]) -> Iterator[Problem]:
    """Every admission decided again against those before it (``gate/readmission.py``): what
    clones admitted apart may clash once merged."""
    files = {attempt.id: record for record, attempt in _valid(records)}
    for conflict in readmit_all(a for _, a in _valid(records)).conflicts:
        yield problem_at(files[conflict.attempt_id])(conflict.rule, "admission", conflict.message())


def _valid(records: list[Record]) -> Iterator[tuple[Record, Attempt]]:
    for record in records:
        if record.attempt is not None:
            yield record, record.attempt
