"""The committed JSON Schema files (``schemas/``): written from the models, or checked against them."""

from __future__ import annotations

from pathlib import Path

from ..records.schema import SCHEMAS, generate
from .jsonio import dumps_pretty
from .outputs import open_output, refuse_in_registry


def render(name: str) -> str:
    return dumps_pretty(generate(name))


def write_schemas(directory: Path, registry: Path | None = None) -> list[Path]:
    """Each schema file into ``directory`` (made when missing), never into ``registry``."""
    refuse_in_registry(directory, registry)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCHEMAS:
        path = directory / name
        with open_output(path, registry=registry) as out:
            out.handle.write(render(name).encode("utf-8"))
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
