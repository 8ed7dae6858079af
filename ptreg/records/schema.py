"""JSON Schema (draft 2020-12) of every file format, generated from the models.

The committed files in ``schemas/`` hold these documents (``store/schema_files.py`` writes
and checks them); ``ptreg schema --check`` says when they have drifted from the models.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .attempt import Attempt, AttemptsFile, RegistryMeta
from .evaluator import FrozenEvaluator
from .run_results import RunResults
from .vocabulary import RegistryLayout, TermFile

DIALECT = "https://json-schema.org/draft/2020-12/schema"
# name of the file -> (model, what it validates)
SCHEMAS: dict[str, tuple[type[BaseModel], str]] = {
    "attempt.schema.json": (Attempt, "One attempt record: a <id>.json file of a registry directory."),
    "registry.schema.json": (
        RegistryLayout,
        "registry.json of a registry directory: schema version 3, and the folder of its term files.",
    ),
    "term.schema.json": (
        TermFile,
        "One vocabulary term: vocabulary/<vocabulary>/<term file>.json of a registry directory.",
    ),
    "registry-v2.schema.json": (
        RegistryMeta,
        "registry.json of an older registry directory (schema version 2, every vocabulary inside it); read, never written.",
    ),
    "attempts-file.schema.json": (
        AttemptsFile,
        "The single-file interchange format (attempts.json, schema_version 2).",
    ),
    "evaluator.schema.json": (
        FrozenEvaluator,
        "A frozen evaluator: evaluators/<name>@<hash12>.json of a registry directory.",
    ),
    "run-results.schema.json": (
        RunResults,
        "A run's results: runs/<attempt id>/<run id>/results.json of a registry directory.",
    ),
}


def generate(name: str) -> dict[str, Any]:
    model, description = SCHEMAS[name]
    body = model.model_json_schema(mode="validation")
    return {
        "$schema": DIALECT,
        "$id": f"https://ptreg.invalid/schemas/{name}",
        "description": description,
        **{k: v for k, v in body.items() if k != "description"},
    }
