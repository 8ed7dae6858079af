"""JSON Schema (draft 2020-12) generated from the models; the committed files must not drift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .jsonio import atomic_write_text, dumps_pretty
from .evaluator import FrozenEvaluator
from .model import Attempt, AttemptsFile, RegistryMeta
from .run import RunResults

DIALECT = "https://json-schema.org/draft/2020-12/schema"
# name of the file -> (model, what it validates)
SCHEMAS = {
    "attempt.schema.json": (Attempt, "One attempt record: a <id>.json file of a registry directory."),
    "registry.schema.json": (RegistryMeta, "registry.json of a registry directory: schema version and vocabularies."),
    "attempts-file.schema.json": (AttemptsFile, "The single-file interchange format (attempts.json, schema_version 2)."),
    "evaluator.schema.json": (FrozenEvaluator, "A frozen evaluator: evaluators/<name>@<hash12>.json of a registry directory."),
    "run-results.schema.json": (RunResults, "A run's results: runs/<attempt id>/<run id>/results.json of a registry directory."),
}


def generate(name: str) -> dict[str, Any]:
    model, description = SCHEMAS[name]
    body = model.model_json_schema(mode="validation")
    return {"$schema": DIALECT, "$id": f"https://ptreg.invalid/schemas/{name}", "description": description, **{
        k: v for k, v in body.items() if k != "description"
    }}


def render(name: str) -> str:
    return dumps_pretty(generate(name))


def write_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCHEMAS:
        path = directory / name
        atomic_write_text(path, render(name))
        written.append(path)
    return written


def check_schemas(directory: Path) -> list[str]:
    """Names of the schema files that are missing or differ from what the models generate."""
    stale = []
    for name in SCHEMAS:
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != render(name):
            stale.append(name)
    return stale
