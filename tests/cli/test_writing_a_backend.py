"""docs/backends.md, followed step by step from its own text: write the two files it shows,
install the package with pip (into a folder of the test's own, not the environment), see it
in `ptreg backends`, and measure it with `ptreg bench`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO, block_after

PAGE = REPO / "docs" / "backends.md"


def test_the_page_from_an_empty_folder_to_bench(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    package = tmp_path / "mine"
    (package / "ptreg_mine").mkdir(parents=True)
    (package / "pyproject.toml").write_text(block_after(PAGE, text, "`mine/pyproject.toml`:", "toml"))
    (package / "ptreg_mine" / "__init__.py").write_text(
        block_after(PAGE, text, "`mine/ptreg_mine/__init__.py`:", "python")
    )
    commands = block_after(
        PAGE, text, "Install it, check that ptreg sees it, and measure it beside the reference:", "sh"
    )
    install, listing, bench = commands.strip().splitlines()
    assert install == "pip install ./mine"

    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(package)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}

    def ptreg(command: str) -> subprocess.CompletedProcess[str]:
        argv = command.split()
        assert argv[0] == "ptreg"
        return subprocess.run(
            [sys.executable, "-m", "ptreg", *argv[1:]],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=600,
        )

    listed = ptreg(listing + " --json")
    assert listed.returncode == 0, listed.stderr
    mine = next(b for b in json.loads(listed.stdout) if b["name"] == "mine")
    assert mine["available"] and mine["distribution"] == "ptreg-mine" and mine["order_preserving"] is False
    measured = ptreg(bench + " --json")
    assert measured.returncode == 0, measured.stderr
    results = json.loads(measured.stdout)
    assert {p["backend"]: p["passed"] for p in results["parity"]} == {"mine": True, "naive": True}
    cell = next(c for c in results["cells"] if c["backend"] == "mine")
    assert cell["status"] == "measured" and cell["worker"]["threads"]["backend"] is None
    assert "Traceback" not in measured.stderr
