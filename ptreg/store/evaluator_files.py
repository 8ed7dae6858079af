"""Frozen evaluator files: ``evaluators/<name>@<hash12>.json`` of a registry directory.

A file is created once and never rewritten. Reading one verifies it: its spec must still hash
to the identity it was frozen under, and its name must be that identity's.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import CheckFailed, PtregError, UnusableInput
from ..records.evaluator import FrozenEvaluator, mismatch
from ..records.problems import first_schema_error
from ..records.refs import EVALUATOR_REF_PATTERN
from ..text import json_type, shorten
from .jsonio import create_text_exclusive, dumps_pretty, outside, read_json, refuse_outside
from .locks import registry_lock

EVALUATORS_DIR = "evaluators"
# A frozen evaluator is a spec of a few hundred bytes; anything near this is not one.
EVALUATOR_FILE_MAX_BYTES = 1024 * 1024


def evaluators_dir(root: Path) -> Path:
    return root / EVALUATORS_DIR


def evaluator_files(root: Path) -> list[Path]:
    directory = evaluators_dir(root)
    if not directory.is_dir():
        return []
    with os.scandir(directory) as entries:
        names = sorted(e.name for e in entries if e.name.endswith(".json") and not e.name.startswith("."))
    return [directory / n for n in names]


def _load(path: Path) -> tuple[dict[str, Any], FrozenEvaluator]:
    # evaluators/<file> lives two levels below the registry; a symlink that leads elsewhere
    # (of the file, or of evaluators/ itself) could make any file pass for a frozen one.
    target = outside(path.parent.parent, path)
    if target is not None:
        raise UnusableInput(f"{path}: a symlink to {target}, outside the registry; not trusted")
    raw = read_json(path, EVALUATOR_FILE_MAX_BYTES)
    if not isinstance(raw, dict):
        raise UnusableInput(f"{path}: a frozen evaluator must be a JSON object, got {json_type(raw)}")
    try:
        return raw, FrozenEvaluator.model_validate(raw)
    except ValidationError as exc:
        raise UnusableInput(first_schema_error(exc, str(path))) from None


def check_file(path: Path) -> tuple[FrozenEvaluator | None, str | None]:
    """Read a frozen evaluator once: (the evaluator, None) when it still is what was frozen,
    else (None, what no longer matches)."""
    try:
        raw, frozen = _load(path)
    except PtregError as exc:
        return None, exc.message.removeprefix(f"{path}").lstrip(": ").lstrip("#")
    problem = mismatch(raw, frozen, path.name)
    return (None, problem) if problem is not None else (frozen, None)


def verify_file(path: Path) -> str | None:
    """None when the file still is what was frozen; else what no longer matches."""
    return check_file(path)[1]


def resolve(root: Path, ref: str) -> Path:
    """The file of ``name@hash12``, or of ``name`` when exactly one evaluator has that name."""
    if "@" in ref:
        if not re.fullmatch(EVALUATOR_REF_PATTERN, ref):
            raise UnusableInput(f"evaluator {shorten(ref)} is not a reference of the form name@hash12")
        path = evaluators_dir(root) / f"{ref}.json"
        if path.exists():
            return path
        raise UnusableInput(f"no frozen evaluator {shorten(ref)} in {evaluators_dir(root)}{_known_hint(root)}")
    named = [p for p in evaluator_files(root) if p.name.split("@", 1)[0] == ref]
    if len(named) == 1:
        return named[0]
    if not named:
        raise UnusableInput(f"no frozen evaluator named {shorten(ref)} in {evaluators_dir(root)}{_known_hint(root)}")
    choices = ", ".join(p.name[: -len(".json")] for p in named)
    raise UnusableInput(f"evaluator name {shorten(ref)} is ambiguous; give one of: {choices}")


def _known_hint(root: Path) -> str:
    known = [p.name[: -len(".json")] for p in evaluator_files(root)]
    if not known:
        return " (none frozen yet; freeze one with `ptreg evaluator freeze SPEC.json`)"
    shown = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
    return f" (frozen: {shown})"


def frozen_names(root: Path) -> dict[str, list[str]]:
    """Every frozen evaluator's name, with the references frozen under it (more than one: a
    registry merged from two clones, or frozen before a name held one identity)."""
    named: dict[str, list[str]] = {}
    for file in evaluator_files(root):
        ref = file.name.removesuffix(".json")
        named.setdefault(ref.split("@", 1)[0], []).append(ref)
    return named


def same_name(root: Path, ref: str) -> list[str]:
    """The other frozen evaluators of ``ref``'s name: a name is one measure, and these are others."""
    return [other for other in frozen_names(root).get(ref.split("@", 1)[0], []) if other != ref]


def free_name(root: Path, name: str) -> str:
    """A name no evaluator holds, after ``name``: NAME-2, NAME-3, ..."""
    taken = frozen_names(root)
    return next(f"{name}-{n}" for n in range(2, len(taken) + 3) if f"{name}-{n}" not in taken)


def _refuse_a_second_of_the_name(root: Path, frozen: FrozenEvaluator, source: str) -> None:
    others = same_name(root, frozen.ref)
    if others:
        raise UnusableInput(
            f"{source}#/name: evaluator name {frozen.name!r} is frozen already as {', '.join(others)}, with another "
            "spec (or other "
            f"inputs, code or engine version), and a name is one measure: nothing frozen. Give the spec a name of "
            f'its own ("name": "{free_name(root, frozen.name)}") and freeze it; to amend an attempt whose runs all '
            "measured nothing, then `ptreg readmit ID --evaluator NEW --reason ...`"
        )


def store_frozen(root: Path, frozen: FrozenEvaluator, source: str = "the spec") -> tuple[Path, bool]:
    """Write the frozen evaluator's file once: (its path, whether this call created it).

    An identical evaluator frozen before is left as it is; a file of the same name that no
    longer verifies is refused, since a frozen evaluator is never rewritten; and so is another
    identity under a name already frozen (an edited spec frozen under its old name), naming
    ``source``, the spec's file, and its name field.
    """
    directory = evaluators_dir(root)
    path = directory / f"{frozen.ref}.json"
    refuse_outside(root, directory, "nothing frozen")
    text = dumps_pretty(frozen.model_dump(mode="json", exclude_none=True))
    try:
        with registry_lock(root):  # its staged file must not look like a leftover to `ptreg repair`
            # under the lock: of two specs frozen at once under one name, the second sees the first
            if not path.exists():
                _refuse_a_second_of_the_name(root, frozen, source)
            directory.mkdir(exist_ok=True)
            create_text_exclusive(path, text)
    except FileExistsError:
        problem = verify_file(path)
        if problem is not None:
            raise CheckFailed(
                f"{path}: already exists and no longer verifies ({problem}); it is never rewritten"
            ) from None
        return path, False
    return path, True
