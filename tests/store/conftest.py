"""Fixtures shared by the store's test modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import write_registry


@pytest.fixture(scope="session")
def empty_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty registry that the property tests copy for each example (never to be written to):
    `init_registry` fsyncs every term file, a fifth of an example's time when each made its own."""
    return write_registry(tmp_path_factory.mktemp("empty") / "reg", [])
