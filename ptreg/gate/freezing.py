"""Freezing an evaluator: the spec of how an attempt will be measured, fixed before any number
is seen, under the identity this engine's version gives it."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.backends import entries
from ..engine.plan import EVALUATOR_VERSION
from ..engine.workloads.discovery import require_measurable
from ..errors import CheckFailed, PtregError, UnusableInput
from ..records.evaluator import BACKEND_PATTERN, ArmsSpec, FrozenEvaluator, backend_at, frozen_from_spec, parse_spec
from ..store.directory import load_directory, load_meta
from ..store.evaluator_files import resolve, store_frozen
from ..store.input_digests import digest_inputs, project_root
from ..store.jsonio import fsync_directory, read_json
from ..store.locks import registry_lock
from ..store.runs import RESULTS_FILE, RUNS_DIR, read_results
from ..store.trust import trust
from ..store.vocabulary_files import refuse_old_layout
from .verification import verify_evaluator


@dataclass
class Frozen:
    evaluator: FrozenEvaluator
    path: Path
    created: bool  # False when the identical evaluator was frozen already
    # what the person should know: a backend no entry point registers here (frozen all the same:
    # an evaluator may be frozen here and run on a machine that has it)
    warnings: list[str] = field(default_factory=list)


def _backend_names(raw: object) -> list[str]:
    backends = raw.get("backends") if isinstance(raw, dict) else None
    return [b for b in backends if isinstance(b, str)] if isinstance(backends, list) else []


def _closest_backends(name: str, registered: list[str]) -> str:
    """' (did you mean: numpy-blas?)' for a backend name near a registered one, '_' read as '-'."""
    close = difflib.get_close_matches(name.replace("_", "-").lower(), registered, n=3, cutoff=0.6)
    return f" (did you mean: {', '.join(close)}?)" if close else ""


def _check_backend_names(raw: object, where: str) -> None:
    """A backend name that cannot be one (not a slug, as ``numpy_blas``) refused in one line with
    the registered name it was probably meant as, before the schema's pattern error."""
    registered = sorted(entries())
    for i, name in enumerate(_backend_names(raw)):
        if not re.fullmatch(BACKEND_PATTERN, name):
            raise UnusableInput(
                f"{where}#/backends/{i}: {name!r} is not a backend name (lowercase letters, digits and '-', and "
                "'@LABEL' for one taken at a revision)"
                f"{_closest_backends(name, registered)}; registered here: {', '.join(registered) or 'none'}"
            )


def _unregistered(names: list[str]) -> list[str]:
    registered = sorted(entries())
    return [
        f"backend {name!r} is not registered here{_closest_backends(name, registered)}: `ptreg run` refuses it "
        f"until it is installed (registered here: {', '.join(registered) or 'none'})"
        for name in dict.fromkeys(backend_at(n)[0] for n in names)  # numba@before is numba, at a revision
        if name not in registered
    ]


def freeze(root: Path, spec_path: Path) -> Frozen:
    """Store the spec under its identity, with the digests of the inputs it reads and, for a
    workload that runs code, of the project's files it runs; freezing an identical spec over
    identical files again changes nothing. Freezing an evaluator whose workload runs code is
    this user's consent to run it, those files as they are (``store/trust.py``)."""
    load_meta(root)  # only into a real registry
    refuse_old_layout(root)
    raw = read_json(spec_path)
    _check_backend_names(raw, str(spec_path))
    spec = parse_spec(raw, str(spec_path))
    workload = require_measurable(spec, str(spec_path))
    inputs = digest_inputs(project_root(root), spec.inputs) if isinstance(spec, ArmsSpec) and spec.inputs else None
    # consent to a command is to the code it runs: those files are frozen with it, by content;
    # backends taken at revisions run the revisions' code, which is consented to by name (none frozen)
    runs = workload.runs_code or bool(spec.revisions)
    code = (workload.code(spec, root) if workload.runs_code else {}) if runs else None
    frozen = frozen_from_spec(spec, EVALUATOR_VERSION, inputs, code)
    path, created = store_frozen(root, frozen, str(spec_path))
    if runs:
        trust(frozen.sha256)
    return Frozen(frozen, path, created, _unregistered(_backend_names(raw) if workload.kind == "backends" else []))


def remove(root: Path, ref: str) -> Path:
    """Delete the frozen evaluator ``ref`` (``name@hash12``, or a name frozen once) that no
    attempt names and no run was measured by; refused, naming them, otherwise. A frozen file is
    never rewritten, but one nothing rests on may go (a spec frozen by mistake)."""
    load_meta(root)
    refuse_old_layout(root)
    with registry_lock(root):
        path = resolve(root, ref)
        exact = path.name.removesuffix(".json")
        registry = load_directory(root)
        users = [a.id for a in registry.attempts if a.evaluator == exact]
        measured, unreadable = _runs_of(root, exact)
        if users or measured:
            named = ", ".join([*users, *(f"run {m}" for m in measured)][:6])
            raise CheckFailed(f"{exact} is used by {named}: a frozen evaluator something rests on is kept")
        if registry.unusable() or unreadable:
            raise CheckFailed(
                f"{registry.unusable() + len(unreadable)} record(s) or run(s) cannot be read, and may name {exact}; "
                "`ptreg validate` names them: put them right first"
            )
        path.unlink()
        fsync_directory(path.parent)
    return path


@dataclass
class Verified:
    """What `ptreg evaluator verify` found."""

    checked: list[tuple[Path, str | None]]  # each evaluator's file, and why it does not verify (None: it does)
    # runs measured by them whose inputs or code changed under them (``attempt/run``, what changed)
    changed_under_runs: list[tuple[str, str]] = field(default_factory=list)


def verify(root: Path, paths: list[Path]) -> Verified:
    """Each frozen evaluator at ``paths`` checked against its identity and against the project's
    files it froze (inputs, and the code a command runs), and the runs measured by them that
    recorded inputs changed under them."""
    checked = [(path, verify_evaluator(root, path).problem) for path in paths]
    refs = {p.name.removesuffix(".json") for p in paths}
    found = []
    runs = root / RUNS_DIR
    for results_file in sorted(runs.glob(f"*/*/{RESULTS_FILE}")) if runs.is_dir() else []:
        folder = results_file.parent
        if folder.name.startswith("."):
            continue
        try:
            results = read_results(folder, root)
        except PtregError:
            continue  # `ptreg validate` names a run that cannot be read
        if results.evaluator in refs and results.inputs_changed is not None:
            found.append((f"{folder.parent.name}/{folder.name}", results.inputs_changed))
    return Verified(checked, found)


def _runs_of(root: Path, ref: str) -> tuple[list[str], list[str]]:
    """The runs (``attempt/run``) whose results name the evaluator ``ref``, and those whose
    results cannot be read (which might)."""
    measured, unreadable = [], []
    runs = root / RUNS_DIR
    for results in sorted(runs.glob(f"*/*/{RESULTS_FILE}")) if runs.is_dir() else []:
        label = f"{results.parent.parent.name}/{results.parent.name}"
        try:
            raw = read_json(results)
        except PtregError:
            unreadable.append(label)
            continue
        if isinstance(raw, dict) and raw.get("evaluator") == ref:
            measured.append(label)
    return measured, unreadable
