"""Fixtures: the test-only backend package, the ../shared material, synthetic registries, and
the in-process CLI runner.

The shared files are read where they are (``../shared`` beside the repository root) and only
ever imported into ``tmp_path`` registries; nothing of them is copied into the repository.
The test-only backends (``tests/plugin_backend``) are installed for the test session only, into
a folder of its own: the user's environment never sees them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import HISTORY_FILES, REPO, SEED_FILE, SHARED, SHARED_FILE, Result, sample_records, write_attempts_file
from ptreg.cli import main
from ptreg.store.interchange import import_file


@pytest.fixture(scope="session", autouse=True)
def _test_backends(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Install the test-only backend package for this session, where only the tests look.

    pip installs it into a temporary folder, which goes first on sys.path (entry points are
    read from there) and on PYTHONPATH (for the worker processes and CLI subprocesses).
    """
    target = tmp_path_factory.mktemp("plugin-site")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-input",
            "--target",
            str(target),
            str(REPO / "tests" / "plugin_backend"),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.exit(f"cannot install tests/plugin_backend for the tests: {done.stderr.strip()[-500:]}", returncode=3)
    sys.path.insert(0, str(target))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))


@pytest.fixture(scope="session", autouse=True)
def _tile_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The numba backend remembers its tile in a cache folder of this session's own (the worker
    processes inherit it): the user's cache is never read or written, and no tile is forced.
    Its parallel thresholds are the fixed default, as before they were measured: measuring them
    takes seconds a thread count, and minutes when the suite runs beside busy loops
    (tests/engine/test_numba_threads.py measures, and unsets this where it tests the choice)."""
    os.environ["PTREG_CACHE_DIR"] = str(tmp_path_factory.mktemp("ptreg-cache"))
    os.environ.pop("PTREG_NUMBA_TILE", None)
    os.environ["PTREG_NUMBA_PARALLEL_MIN"] = "default"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the caller's PTREG_REGISTRY or can reach the repository's ./attempts, and
    consent to run an evaluator's command is kept in a configuration folder of the test's own.
    Nor does it inherit a terminal width: ptreg reads $COLUMNS, which a shell may export and
    pytest-xdist sets to 80 in its workers; a test that means a width sets it."""
    monkeypatch.delenv("PTREG_REGISTRY", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    monkeypatch.setenv("PTREG_CONFIG_HOME", str(tmp_path / ".ptreg-config"))
    monkeypatch.chdir(tmp_path)


# --------------------------------------------------------------------------- shared material


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared; skipped when absent, a failure when PTREG_REQUIRE_SHARED=1."""
    missing = [p for p in (SHARED_FILE, SEED_FILE, *HISTORY_FILES) if not p.is_file()]
    if missing:
        reason = (
            f"shared test material not found ({', '.join(str(p) for p in missing)}); "
            f"it is expected in ../shared beside the repository root"
        )
        if os.environ.get("PTREG_REQUIRE_SHARED") == "1":
            pytest.fail(f"PTREG_REQUIRE_SHARED=1 requires the shared material, but {reason}", pytrace=False)
        pytest.skip(reason)
    return SHARED


@pytest.fixture(scope="session")
def shared_file(shared_dir: Path) -> Path:
    return SHARED_FILE


@pytest.fixture(scope="session")
def seed_file(shared_dir: Path) -> Path:
    return SEED_FILE


@pytest.fixture(scope="session")
def shared_raw(shared_file: Path) -> dict[str, Any]:
    """The shared file as plain JSON, to compute expectations independently of ptreg."""
    return json.loads(shared_file.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def _shared_registry_master(shared_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shared") / "registry"
    import_file(root, shared_file)
    return root


@pytest.fixture
def shared_registry(_shared_registry_master: Path, tmp_path: Path) -> Path:
    """A registry directory holding the imported shared file; each test gets its own copy."""
    root = tmp_path / "shared-registry"
    shutil.copytree(_shared_registry_master, root)
    return root


# --------------------------------------------------------------------------- synthetic material


@pytest.fixture
def sample_file(tmp_path: Path) -> Path:
    return write_attempts_file(tmp_path / "sample-attempts.json", sample_records())


@pytest.fixture
def sample_registry(sample_file: Path, tmp_path: Path) -> Path:
    root = tmp_path / "registry"
    import_file(root, sample_file)
    return root


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run ``ptreg.cli.main(args)`` in-process and return exit code, stdout and stderr."""

    def run(*args: Any) -> Result:
        capsys.readouterr()
        code: Any = 0
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        if code is None:
            code = 0
        assert isinstance(code, int), f"exit code {code!r} is not an int (stderr: {err!r})"
        return Result(code, out, err)

    return run
