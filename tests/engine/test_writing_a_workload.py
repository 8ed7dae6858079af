"""docs/workloads.md, followed step by step from its own text: write the files it shows,
install the package with pip (into a folder of the test's own), see it in `ptreg workloads`,
freeze its evaluator, admit an attempt through the gate and measure it with `ptreg run`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from helpers import REPO, block_after

PAGE = REPO / "docs" / "workloads.md"


def test_the_page_from_an_empty_folder_to_a_run(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    package = tmp_path / "sorting"
    (package / "ptreg_sorting").mkdir(parents=True)
    (package / "pyproject.toml").write_text(block_after(PAGE, text, "`sorting/pyproject.toml`:", "toml"))
    (package / "ptreg_sorting" / "__init__.py").write_text(
        block_after(PAGE, text, "`sorting/ptreg_sorting/__init__.py`:", "python")
    )
    (tmp_path / "smallest.json").write_text(block_after(PAGE, text, "`smallest.json`, its evaluator:", "json"))
    commands = block_after(PAGE, text, "Install it, check that ptreg sees it, and measure it through the gate:", "sh")
    install, *steps = commands.strip().splitlines()
    assert install == "pip install ./sorting"

    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(package)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}

    def ptreg(command: str, *extra: str) -> subprocess.CompletedProcess[str]:
        argv = shlex.split(command)
        assert argv[0] == "ptreg"
        found = subprocess.run(
            [sys.executable, "-m", "ptreg", *argv[1:], *extra],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=600,
        )
        assert "Traceback" not in found.stderr, found.stderr
        return found

    listing, init, term, freeze, new, run = steps
    listed = ptreg(listing, "--json")
    assert listed.returncode == 0, listed.stderr
    mine = next(w for w in json.loads(listed.stdout) if w["name"] == "smallest")
    assert mine["available"] and mine["kind"] == "arms" and mine["distribution"] == "ptreg-sorting"
    assert set(mine["metrics"]) == {"ms", "checksum"} and set(mine["spec_fields"]) == {"size", "k"}
    for step in (init, term, freeze, new):
        found = ptreg(step)
        assert found.returncode == 0, (step, found.stdout, found.stderr)
    measured = ptreg(run, "--json")
    assert measured.returncode == 0, measured.stderr
    results = json.loads(measured.stdout)["results"]
    assert results["status"] == "complete" and results["parity"] == []
    heap = next(c for c in results["cells"] if c["backend"] == "heap")
    assert heap["metrics"]["ms"]["n"] == 5
    # both ways find the same numbers, seed by seed: their checksum differs by exactly nothing
    same = heap["versus"]["sort"]["checksum"]
    assert same["kind"] == "difference" and same["estimate"] == 0 and same["tied"] == 5
    assert heap["versus"]["sort"]["ms"]["kind"] == "ratio"
