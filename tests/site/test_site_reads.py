"""A site build reads each run once: an evaluator's page compares each of its runs with the one
before it, and each comparison looks through every run of the registry for its history. The
pages are the same bytes as when every comparison reads the runs afresh."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import Result, registry_with_runs
from ptreg.site import build as site_build
from ptreg.views import comparison

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

RUNS = 5


def pages(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.html"))}


def test_each_run_is_read_once_and_the_pages_are_the_same(
    cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project" / "attempts"
    registry_with_runs(root, RUNS)
    reads: Counter[Path] = Counter()
    read_results = comparison.read_results

    def counted(folder: Path, registry: Path | None = None) -> object:
        reads[folder] += 1
        return read_results(folder, registry)

    monkeypatch.setattr(comparison, "read_results", counted)
    assert cli("--registry", root, "site", "-o", tmp_path / "once").code == 0
    assert len(reads) == RUNS and set(reads.values()) == {1}, reads
    # every comparison reading the runs afresh, as outside a build: the same pages
    monkeypatch.setattr(site_build, "runs_read_once", contextlib.nullcontext)
    reads.clear()
    assert cli("--registry", root, "site", "-o", tmp_path / "afresh").code == 0
    assert sum(reads.values()) > RUNS  # what reading once saves
    assert pages(tmp_path / "once") == pages(tmp_path / "afresh") != {}
