"""The vocabularies: those a new registry starts with, for runtime and training work, how a
term is looked up, and the two small formats that keep them on disk (``registry.json`` and one
file per term, ``store/vocabulary_files.py``).

The defaults are a starting point, not a closed list: a registry's own term files are the ones
that count, and `ptreg vocab add` defines a new term there.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from .attempt import SCHEMA_VERSION, RegistryMeta, Term, Text

# registry.json's version from which each term is a file of its own; 2 held every vocabulary
# inside registry.json (read still, never written). The records keep their own format.
LAYOUT_VERSION: Final = 3


class RegistryLayout(BaseModel):
    """``registry.json`` of a registry whose terms are files: it names the folder that holds
    them and nothing that changes, so that two clones never both edit it."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    schema_version: Literal[3]
    vocabularies: Literal["vocabulary"]


class TermFile(BaseModel):
    """One term: ``vocabulary/<vocabulary>/<term file>.json``. ``order`` places it in its
    vocabulary's listing (ties by term); a null description: imported without one."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    term: Term
    description: Text | None
    order: Annotated[int, Field(ge=0, le=2**53)]


def layout() -> RegistryLayout:
    return RegistryLayout(schema_version=LAYOUT_VERSION, vocabularies="vocabulary")


def default_meta() -> RegistryMeta:
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


# The vocabularies a person names on the command line, and the field of registry.json of each.
VOCABULARIES = {
    "method": "method_vocabulary",
    "objective": "objective_vocabulary",
    "kind": "kind_vocabulary",
    "confidence": "confidence_vocabulary",
}
# The confidence vocabulary's terms are fixed by the record format; its texts may be edited.
EXTENSIBLE = ("method", "objective", "kind")


def terms(meta: RegistryMeta, vocabulary: str) -> dict[str, str | None]:
    """The terms of a vocabulary and their definitions (None: imported without one)."""
    found: dict[str, str | None] = getattr(meta, VOCABULARIES[vocabulary])
    return found


def unknown_terms(meta: RegistryMeta, given: list[tuple[str, str, str]]) -> str | None:
    """One line naming every given term its vocabulary lacks, each with the closest terms, and how
    to add one; None when all are known. ``given`` holds (flag, vocabulary, term)."""
    missing = []
    for flag, vocabulary, term in given:
        known = terms(meta, vocabulary)
        if term in known:
            continue
        close = difflib.get_close_matches(term, list(known), n=3, cutoff=0.5)
        hint = f"closest: {', '.join(close)}" if close else f"known: {', '.join(known) or 'none'}"
        missing.append((flag, vocabulary, term, hint))
    if not missing:
        return None
    listed = "; ".join(
        f"{flag} {term!r} is not in the {vocabulary} vocabulary ({hint})" for flag, vocabulary, term, hint in missing
    )
    _, vocabulary, term, _ = missing[0]
    return f'{listed}; add a term with `ptreg vocab add {vocabulary} {term} --description "..."`'
