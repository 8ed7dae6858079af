"""The figures the README and docs/registry.md quote from this project's own registry
(`attempts/`) are what ptreg prints of it now: each example's lines are run again on a copy of
the registry and compared, so an attempt added without updating the pages fails here instead of
leaving them stale (issue 35)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from helpers import REPO

README = REPO / "README.md"
REGISTRY_PAGE = REPO / "docs" / "registry.md"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    # a copy, run from its parent as `ptreg` runs in the repository: reading writes an index
    shutil.copytree(REPO / "attempts", tmp_path / "attempts")
    return tmp_path


def _after(page: Path, command: str) -> list[str]:
    """The output lines a page shows after ``$ command`` in a fenced block, up to the next
    command or the block's end."""
    text = page.read_text(encoding="utf-8")
    found = re.search(rf"^\$ {re.escape(command)}\n(.*?)(?=^\$ |^```)", text, re.M | re.S)
    assert found, f"{page.relative_to(REPO)} shows no `{command}`"
    return found.group(1).splitlines()


@pytest.mark.parametrize("page", [README, REGISTRY_PAGE], ids=lambda p: p.name)
def test_validate_counts_the_registry_as_it_is(cli, project: Path, page: Path) -> None:
    # sources are resolved where they are, in the repository
    done = cli("validate", "--check-sources", "--sources-base", REPO / "attempts")
    assert done.code == 0, done.out
    assert _after(page, "ptreg validate --check-sources")[0] == done.out.strip()


def test_the_readmes_failures_are_the_registrys(cli, project: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    done = cli("list", "--failures-only")
    assert done.code == 0, done.err
    shown = _after(README, "ptreg list --failures-only")
    ours = done.out.strip().splitlines()
    assert shown[-1] == ours[-1], "the count line"
    assert _ids_and_statuses(shown) == _ids_and_statuses(ours)


def _ids_and_statuses(lines: list[str]) -> list[list[str]]:
    # a lesson that does not fit beside its row goes on an indented line of its own
    return [line.split()[:2] for line in lines[2:-1] if not line.startswith(" ")]


def test_the_bundle_example_carries_what_the_registry_holds(cli, project: Path) -> None:
    bundle = project / "attempts.tar.gz"
    wrote = cli("export", "--bundle", bundle)
    assert wrote.code == 0, wrote.err
    assert _after(REGISTRY_PAGE, "ptreg export --bundle /tmp/attempts.tar.gz") == [
        wrote.err.strip().replace(str(bundle), "/tmp/attempts.tar.gz")
    ]
    restored = cli("-r", project / "copy", "import", bundle)
    assert restored.code == 0, restored.err
    shown = _after(REGISTRY_PAGE, "ptreg -r /tmp/copy import /tmp/attempts.tar.gz")
    assert (
        shown
        == restored.out.replace(str(bundle), "/tmp/attempts.tar.gz")
        .replace(str(project / "copy"), "/tmp/copy")
        .strip()
        .splitlines()
    )
