"""The admission: what the gate found when it admitted a proposal, and against which registry.

The registry state is a digest of every file the gate reads (``registry.json`` and the term
files, every record, every frozen evaluator), so a later ``ptreg gate`` can say whether the registry has changed
since the admission.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..clock import utc_now
from ..records.analysis_plan import Plan, plan_digest
from ..records.attempt import Admission, Attempt, GateCheck, RegistryState
from ..store.directory import REGISTRY_FILE, attempt_files, record_order
from ..store.evaluator_files import evaluator_files
from ..store.vocabulary_files import term_files
from .checks import CheckResult, GateReport

if TYPE_CHECKING:
    from ..store.reader import RegistryReader


def registry_state(
    root: Path, attempts: int, exclude: str | None = None, hashes: Mapping[str, str | None] | None = None
) -> RegistryState:
    """A digest of every file the gate reads. ``exclude`` leaves out one attempt's own file, to
    compare with the state at its admission (before it was written). ``hashes`` are the SHA-256
    of files as the query index has just checked them against the directory (``store/index/``),
    the same digests of the same bytes, keyed by every file the directory holds; a file without
    one is read."""
    digest = hashlib.sha256()
    evaluators = evaluator_files(root)
    if not hashes:  # none given, or a full read's (which has none)
        records = [p.name for p in attempt_files(root)]
    else:  # the index has just listed the directory: names as strings, no path object per file
        records = sorted((n for n in hashes if n != REGISTRY_FILE), key=record_order)
    if exclude is not None:
        records = [n for n in records if n != f"{exclude}.json"]
    terms = [p.relative_to(root).as_posix() for _, p in term_files(root)]
    names = [REGISTRY_FILE, *terms, *records, *(p.relative_to(root).as_posix() for p in evaluators)]
    for name in names:
        known = hashes.get(name) if hashes is not None else None
        if known is not None:
            digest.update(name.encode("utf-8") + b"\0" + bytes.fromhex(known))
            continue
        try:
            content = (root / name).read_bytes()
        except OSError:
            content = b""  # unreadable: still named, so the digest differs from a readable one
        digest.update(name.encode("utf-8") + b"\0" + hashlib.sha256(content).digest())
    return RegistryState(attempts=attempts, evaluators=len(evaluators), sha256=digest.hexdigest())


def admission(
    report: GateReport,
    precedents: list[str],
    root: Path,
    attempts: int,
    now: datetime | None = None,
    hashes: Mapping[str, str | None] | None = None,
    plan: Plan | None = None,
) -> Admission:
    """The admission of a proposal the gate has just admitted, against the registry at ``root``,
    with the digest of the analysis plan admitted with it."""
    return Admission(
        admitted_at=utc_now(now),
        ptreg_version=__version__,
        registry_state=registry_state(root, attempts, hashes=hashes),
        checks=[_stored(c) for c in report.checks],
        precedents=precedents,
        plan_sha256=plan_digest(plan) if plan is not None else None,
    )


def _stored(check: CheckResult) -> GateCheck:
    """A check as the admission keeps it; only a passing outcome can be admitted."""
    if check.outcome == "failed":
        raise ValueError(f"{check.check} failed: a refused proposal has no admission")
    return GateCheck(check=check.check, outcome=check.outcome, detail=check.detail)


def changed_since_admission(root: Path, attempt: Attempt, index: RegistryReader) -> bool | None:
    """Whether the registry differs from the one ``attempt`` was admitted against; unknown
    when it has no recorded admission."""
    if attempt.admission is None:
        return None
    records = index.records() - 1  # record files, usable or not, but its own
    # The digest over the records follows from the indexed files alone, so the index keeps it;
    # the evaluators are not indexed, so their bytes are read now and name the kept digest.
    evaluators = hashlib.sha256()
    for path in evaluator_files(root):
        try:
            content = path.read_bytes()
        except OSError:
            content = b""
        evaluators.update(path.name.encode("utf-8") + b"\0" + hashlib.sha256(content).digest())
    now = index.remembered(
        f"registry-state {records} {attempt.id} {evaluators.hexdigest()}",
        lambda: registry_state(root, records, exclude=attempt.id, hashes=index.hashes()).sha256,
    )
    return bool(now != attempt.admission.registry_state.sha256)
