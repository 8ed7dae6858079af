"""Each claim docs/architecture.md makes about what a command imports, held to the command itself:
run in a process of its own (as a person runs it), on a copy of this project's registry whose
index is already up to date, with the modules it loaded read at exit.

The table "Imports inside functions" in docs/architecture.md names, row by row, the commands
below; a row that changes there changes here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

# The modules the claims are about. A name counts when it, or a module inside it, was loaded.
WATCHED = (
    "pydantic",
    "numpy",
    "scipy",
    "tabulate",
    "lark",
    "jinja2",
    "matplotlib",
    "ray",
    "inotify_simple",
    "rich.progress",
    "importlib.metadata",
    "ptreg.records.attempt",
    "ptreg.records.run_results",
    "ptreg.engine.workloads.discovery",
)
REPORT = """
import atexit, sys
watched = {watched!r}
def report():
    found = sorted(w for w in watched if any(m == w or m.startswith(w + ".") for m in sys.modules))
    sys.stderr.write("LOADED " + " ".join(found) + "\\n")
atexit.register(report)
from ptreg.cli import main
main(sys.argv[1:])
"""
NO_RUNS = "cli-lazy-imports"  # an attempt of this project's registry with no run
WITH_RUNS = "tinygpt-step-attribution"  # and one with runs


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("claims") / "attempts"
    shutil.copytree(REPO / "attempts", root, ignore=shutil.ignore_patterns(".ptreg-*"))
    assert loaded(root, "index")  # built now: the claims are of a registry the index is up to date with
    return root


def loaded(root: Path, *args: str) -> set[str]:
    """The watched modules ``ptreg -r root ARGS`` loaded, its output to pipes (no terminal)."""
    done = subprocess.run(
        [sys.executable, "-c", REPORT.format(watched=WATCHED), "-r", str(root), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next(line for line in done.stderr.splitlines() if line.startswith("LOADED"))
    return {"(ran)", *line.split()[1:]}


# The commands that read a registry whose index is up to date, and what none of them loads.
READERS = {
    "list": ["list"],
    "streaks": ["streaks"],
    "lineage": ["lineage", NO_RUNS],
    "coverage": ["coverage"],
    "precedents": ["precedents", "--objective", "command-latency"],
    "show": ["show", NO_RUNS],
    "index": ["index"],
    "runs": ["runs"],
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_the_read_commands_build_no_model_and_load_no_heavy_library(registry: Path, name: str) -> None:
    """'list, streaks, lineage, coverage and precedents on an unchanged registry build no model,
    nor does show of a lineage whose files the index vouches for'; NumPy, scipy, lark, the
    run models, Jinja2, matplotlib, Ray, inotify_simple, rich.progress (no terminal) and
    importlib.metadata each stay where the table puts them."""
    found = loaded(registry, *READERS[name])
    heavy = {"pydantic", "ptreg.records.attempt", "ptreg.records.run_results", *WATCHED} - {"tabulate"}
    assert found & heavy == set(), name


def test_help_loads_neither_pydantic_nor_numpy(registry: Path) -> None:
    assert loaded(registry, "--help") & {"pydantic", "numpy", "ptreg.records.attempt"} == set()


def test_backends_loads_the_backends_and_so_numpy(registry: Path) -> None:
    """'`ptreg backends` imports each backend's module to say whether it can run here': the
    built-in ones import NumPy. Nothing of the registry's models or intervals, though."""
    found = loaded(registry, "backends")
    assert "numpy" in found and "importlib.metadata" in found
    assert found & {"scipy", "lark", "jinja2", "matplotlib", "ray", "inotify_simple"} == set()


def test_a_dossier_with_runs_loads_the_run_models_and_no_interval_library(registry: Path) -> None:
    """'the run models and the workloads: views/dossier.py, only for a dossier with runs';
    'scipy: never by show'; 'lark: show never loads it'."""
    found = loaded(registry, "show", WITH_RUNS)
    assert {"ptreg.records.run_results", "ptreg.engine.workloads.discovery"} <= found
    assert found & {"scipy", "lark", "numpy", "jinja2", "matplotlib", "ray", "inotify_simple"} == set()


def test_the_gate_loads_no_parser_and_no_numpy(registry: Path) -> None:
    """'lark: the gate never loads it'; NumPy only in the worker and for the environment."""
    found = loaded(registry, "gate", WITH_RUNS)
    assert found & {"lark", "numpy", "scipy", "jinja2", "matplotlib", "ray", "inotify_simple"} == set()


def test_only_the_watcher_loads_inotify_simple(registry: Path) -> None:
    """'`inotify_simple` is imported only when the watcher starts': the module that holds the
    watcher imports it only there."""
    code = "import sys, ptreg.store.watcher; print('inotify_simple' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
