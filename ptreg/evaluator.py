"""Frozen evaluators: the hash-pinned spec of how an attempt is measured.

An evaluator's identity is the sha256 of its canonical JSON (sorted keys, no insignificant
whitespace) taken together with EVALUATOR_VERSION, the version of the code that interprets
the spec. It is stored once as ``evaluators/<name>@<hash12>.json`` and never rewritten: a
changed spec, or a new interpretation of the same spec, is a new evaluator.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from .errors import EXIT_CHECK_FAILED, PtregError
from .jsonio import create_text_exclusive, dumps_pretty, json_type, outside, read_json, refuse_outside, shorten
from .model import EVALUATOR_REF_PATTERN, ID_MAX_LENGTH, ID_PATTERN
from .problems import schema_problems

# Bump when the benchmark engine would measure an unchanged spec differently (new defaults,
# another timer, other shapes): every evaluator frozen under the old version then stops
# passing the gate until it is frozen again, so no old admission silently changes meaning.
EVALUATOR_VERSION = 1
EVALUATORS_DIR = "evaluators"
HASH_SHOWN = 12

Slug = Annotated[str, StringConstraints(pattern=ID_PATTERN, max_length=ID_MAX_LENGTH)]
WORKLOADS = ("kernels", "tinygpt-train")
CONFIGS = ("tiny", "small", "medium", "large", "xl")
METRIC_OF_WORKLOAD = {"kernels": "gflops", "tinygpt-train": "ms-per-step"}


class Tolerance(BaseModel):
    """How far a backend that does not keep the reference order may stray from float64."""

    model_config = ConfigDict(extra="forbid", strict=True)

    rtol: float = Field(ge=0, le=1, allow_inf_nan=False)
    atol: float = Field(ge=0, le=1, allow_inf_nan=False)


class EvaluatorSpec(BaseModel):
    """Exactly how an attempt is measured; every field is explicit, nothing defaults."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: Slug
    description: Optional[Annotated[str, StringConstraints(min_length=1)]] = None
    workload: Literal[WORKLOADS]  # type: ignore[valid-type]
    configs: list[Literal[CONFIGS]] = Field(min_length=1)  # type: ignore[valid-type]
    backends: list[Slug] = Field(min_length=1)
    baseline: Slug = Field(description="The backend every other is compared with, besides naive.")
    warmup_steps: int = Field(ge=0, le=10_000)
    timed_steps: int = Field(ge=1, le=1_000_000)
    repeats: int = Field(ge=1, le=1000)
    seed: int = Field(ge=0, le=2**32 - 1)
    threads: int = Field(ge=1, le=1024)
    tolerance: Tolerance
    max_relative_spread: float = Field(
        gt=0, le=10, allow_inf_nan=False, description="(max - min) / median above which a cell is flagged untrustworthy."
    )
    metric: Literal["gflops", "ms-per-step"]

    @model_validator(mode="after")
    def _consistent(self) -> "EvaluatorSpec":
        for field in ("configs", "backends"):
            values = getattr(self, field)
            if len(set(values)) != len(values):
                raise ValueError(f"{field} names an entry twice")
        if self.baseline not in self.backends:
            raise ValueError(f"baseline {self.baseline!r} is not one of the backends")
        if self.metric != METRIC_OF_WORKLOAD[self.workload]:
            raise ValueError(f"workload {self.workload!r} is measured in {METRIC_OF_WORKLOAD[self.workload]!r}, not {self.metric!r}")
        return self


class FrozenEvaluator(BaseModel):
    """The file ``evaluators/<name>@<hash12>.json``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: Slug
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    evaluator_version: int = Field(ge=1)
    spec: EvaluatorSpec

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.sha256[:HASH_SHOWN]}"


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8: the bytes the identity is taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def identity(spec: Any, evaluator_version: int = EVALUATOR_VERSION) -> str:
    """sha256 of the spec's canonical JSON together with the interpreting code's version."""
    return hashlib.sha256(canonical_json({"evaluator_version": evaluator_version, "spec": spec})).hexdigest()


def evaluators_dir(root: Path) -> Path:
    return root / EVALUATORS_DIR


def _first_error(exc: ValidationError, where: str, pointer: str = "") -> str:
    first = next(iter(schema_problems(exc, attempt_id=None, pointer=pointer, file=where)))
    return f"{first.location()}: {first.message}"


def parse_spec(raw: Any, where: str) -> EvaluatorSpec:
    if not isinstance(raw, dict):
        raise PtregError(f"{where}: an evaluator spec must be a JSON object")
    try:
        return EvaluatorSpec.model_validate(raw)
    except ValidationError as exc:
        raise PtregError(_first_error(exc, where)) from None


@dataclass
class Frozen:
    evaluator: FrozenEvaluator
    path: Path
    created: bool  # False when the identical evaluator was frozen already


def freeze(root: Path, spec_path: Path) -> Frozen:
    """Store the spec under its identity; freezing an identical spec again changes nothing."""
    from .registry import load_meta

    load_meta(root)  # only into a real registry
    spec = parse_spec(read_json(spec_path), str(spec_path))
    body = spec.model_dump(mode="json", exclude_none=True)
    frozen = FrozenEvaluator(name=spec.name, sha256=identity(body), evaluator_version=EVALUATOR_VERSION, spec=spec)
    from .lock import registry_lock

    directory = evaluators_dir(root)
    path = directory / f"{frozen.ref}.json"
    refuse_outside(root, directory, "nothing frozen")
    text = dumps_pretty(frozen.model_dump(mode="json", exclude_none=True))
    try:
        with registry_lock(root):  # its staged file must not look like a leftover to `ptreg repair`
            directory.mkdir(exist_ok=True)
            create_text_exclusive(path, text)
    except FileExistsError:
        problem = verify_file(path)
        if problem is not None:
            raise PtregError(f"{path}: already exists and no longer verifies ({problem}); it is never rewritten", EXIT_CHECK_FAILED) from None
        return Frozen(frozen, path, created=False)
    return Frozen(frozen, path, created=True)


def evaluator_files(root: Path) -> list[Path]:
    directory = evaluators_dir(root)
    if not directory.is_dir():
        return []
    with os.scandir(directory) as entries:
        names = sorted(e.name for e in entries if e.name.endswith(".json") and not e.name.startswith("."))
    return [directory / n for n in names]


# A frozen evaluator is a spec of a few hundred bytes; anything near this is not one.
EVALUATOR_FILE_MAX_BYTES = 1024 * 1024


def _load(path: Path) -> tuple[dict[str, Any], FrozenEvaluator]:
    # evaluators/<file> lives two levels below the registry; a symlink that leads elsewhere
    # (of the file, or of evaluators/ itself) could make any file pass for a frozen one.
    target = outside(path.parent.parent, path)
    if target is not None:
        raise PtregError(f"{path}: a symlink to {target}, outside the registry; not trusted")
    raw = read_json(path, EVALUATOR_FILE_MAX_BYTES)
    if not isinstance(raw, dict):
        raise PtregError(f"{path}: a frozen evaluator must be a JSON object, got {json_type(raw)}")
    try:
        return raw, FrozenEvaluator.model_validate(raw)
    except ValidationError as exc:
        raise PtregError(_first_error(exc, str(path))) from None


def check_file(path: Path) -> tuple[Optional[FrozenEvaluator], Optional[str]]:
    """Read a frozen evaluator once: (the evaluator, None) when it still is what was frozen,
    else (None, what no longer matches)."""
    try:
        raw, frozen = _load(path)
    except PtregError as exc:
        return None, exc.message.removeprefix(f"{path}").lstrip(": ").lstrip("#")
    # The stored text of the spec, not its re-validation, so that any edit shows.
    actual = identity(raw["spec"], frozen.evaluator_version)
    if actual != frozen.sha256:
        return None, f"its spec hashes to {actual[:HASH_SHOWN]}, not the recorded {frozen.sha256[:HASH_SHOWN]} (edited after freezing?)"
    if frozen.spec.name != frozen.name:
        return None, f"spec name {frozen.spec.name!r} differs from the evaluator's name {frozen.name!r}"
    if path.name != f"{frozen.ref}.json":
        return None, f"file name should be {frozen.ref}.json for this content"
    return frozen, None


def verify_file(path: Path) -> Optional[str]:
    """None when the file still is what was frozen; else what no longer matches."""
    return check_file(path)[1]


def resolve(root: Path, ref: str) -> Path:
    """The file of ``name@hash12``, or of ``name`` when exactly one evaluator has that name."""
    if "@" in ref:
        import re

        if not re.fullmatch(EVALUATOR_REF_PATTERN, ref):
            raise PtregError(f"evaluator {shorten(ref)} is not a reference of the form name@hash12")
        path = evaluators_dir(root) / f"{ref}.json"
        if path.exists():
            return path
        raise PtregError(f"no frozen evaluator {shorten(ref)} in {evaluators_dir(root)}{_known_hint(root)}")
    named = [p for p in evaluator_files(root) if p.name.split("@", 1)[0] == ref]
    if len(named) == 1:
        return named[0]
    if not named:
        raise PtregError(f"no frozen evaluator named {shorten(ref)} in {evaluators_dir(root)}{_known_hint(root)}")
    choices = ", ".join(p.name[: -len(".json")] for p in named)
    raise PtregError(f"evaluator name {shorten(ref)} is ambiguous; give one of: {choices}")


def _known_hint(root: Path) -> str:
    known = [p.name[: -len(".json")] for p in evaluator_files(root)]
    if not known:
        return " (none frozen yet; freeze one with `ptreg evaluator freeze SPEC.json`)"
    shown = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
    return f" (frozen: {shown})"
