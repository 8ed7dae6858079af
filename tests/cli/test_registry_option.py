"""Where the registry is: --registry, then $PTREG_REGISTRY, then ./attempts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptreg.cli.common import resolve_registry_dir
from ptreg.store.names import DEFAULT_REGISTRY_NAME


def test_registry_option_wins_over_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTREG_REGISTRY", str(tmp_path / "from-env"))
    assert resolve_registry_dir(str(tmp_path / "from-option")) == tmp_path / "from-option"


def test_environment_wins_over_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTREG_REGISTRY", str(tmp_path / "from-env"))
    assert resolve_registry_dir(None) == tmp_path / "from-env"


def test_default_is_attempts_in_the_working_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PTREG_REGISTRY", raising=False)
    assert resolve_registry_dir(None) == Path(DEFAULT_REGISTRY_NAME) == Path("attempts")


def _registry_at(folder: Path) -> Path:
    from ptreg.store.directory import init_registry

    init_registry(folder / "attempts")
    return folder / "attempts"


def test_a_subfolder_finds_the_nearest_registry_above(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    _registry_at(project)
    deeper = project / "sub" / "deeper"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    assert resolve_registry_dir(None) == Path("../../attempts")
    _registry_at(project / "sub")  # the nearest wins, as git's nearest .git does
    assert resolve_registry_dir(None) == Path("../attempts")
    monkeypatch.setenv("PTREG_REGISTRY", str(tmp_path / "from-env"))  # a named registry still wins
    assert resolve_registry_dir(None) == tmp_path / "from-env"
    assert resolve_registry_dir("elsewhere") == Path("elsewhere")


def test_the_walk_stops_at_the_repository_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _registry_at(tmp_path)  # another project's registry, above this repository
    (tmp_path / "repo" / ".git").mkdir(parents=True)  # a worktree's .git is a file: either stops it
    (tmp_path / "repo" / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "repo" / "sub")
    assert resolve_registry_dir(None) == Path("attempts")
    monkeypatch.chdir(tmp_path / "repo")
    assert resolve_registry_dir(None) == Path("attempts")


def test_a_symlinked_registry_above_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = _registry_at(tmp_path / "elsewhere")
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / ".git").mkdir()
    (project / "attempts").symlink_to(elsewhere)
    monkeypatch.chdir(project / "sub")
    assert resolve_registry_dir(None) == Path("attempts")


def test_list_from_a_subfolder_and_init_there_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    _registry_at(project)
    (project / "sub" / "deeper").mkdir(parents=True)
    monkeypatch.chdir(project / "sub" / "deeper")
    listed = cli("list")
    assert listed.code == 0 and "0 of 0 attempts" in listed.out, listed
    made = cli("init")
    assert made.code == 0 and (project / "sub" / "deeper" / "attempts" / "registry.json").is_file()
    assert "a registry exists above, ../../attempts" in made.err and "`-r ../../attempts`" in made.err
    assert cli("init", "other").err == ""  # a folder named is what was asked for: no note
