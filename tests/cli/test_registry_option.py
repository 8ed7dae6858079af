"""Where the registry is: --registry, then $PTREG_REGISTRY, then ./attempts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptreg.cli.common import DEFAULT_REGISTRY_DIR, resolve_registry_dir


def test_registry_option_wins_over_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTREG_REGISTRY", str(tmp_path / "from-env"))
    assert resolve_registry_dir(str(tmp_path / "from-option")) == tmp_path / "from-option"


def test_environment_wins_over_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTREG_REGISTRY", str(tmp_path / "from-env"))
    assert resolve_registry_dir(None) == tmp_path / "from-env"


def test_default_is_attempts_in_the_working_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PTREG_REGISTRY", raising=False)
    assert resolve_registry_dir(None) == Path(DEFAULT_REGISTRY_DIR) == Path("attempts")
