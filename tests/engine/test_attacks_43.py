"""The second round of attacks on code that runs and who may run it (issue 43): the variants
that got through after the first round's fixes, each held here.

- consent: a script run by its ``#!`` line, a script given to a shell as one string, a path
  that leaves the project and comes back in (or reaches it through a symlinked folder), and a
  relative ``PATH`` entry that finds a program planted in the project;
- the supervisor: a process that root moves out of its tree's cgroup (still killed, its memory
  still counted), what a command leaves when it kills its own worker, and ptreg itself dying by
  a signal it does not handle (its workers end their commands' trees whole).

docs/hostile-input.md lists every attack of the round and what it found.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import env_without_hooks
from ptreg.engine.workloads.command import CommandWorkload
from ptreg.records.evaluator import ArmsSpec, parse_spec

SPEC = {
    "name": "attack",
    "workload": "command",
    "command": ["python3", "bench.py"],
    "arms": {"a": {}},
    "baseline": "a",
    "metrics": {"score": {"better": "higher", "unit": "fraction"}},
    "repeats": 1,
    "seed": 0,
    "timeout_seconds": 60,
}


def code_of(project: Path, command: list[str], registry: Path | None = None) -> dict[str, str]:
    """What freezing a command evaluator over ``command`` freezes of ``project``."""
    spec = parse_spec({**SPEC, "command": command}, "spec")
    assert isinstance(spec, ArmsSpec)
    found = CommandWorkload().code(spec, registry or project / "attempts")
    assert found is not None
    return found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / "attempts").mkdir(parents=True)
    (folder / "bench.py").write_text("#!/usr/bin/env python3\nimport helper\n")
    (folder / "helper.py").write_text("X = 1\n")
    return folder


# --------------------------------------------------------------------------- ptreg itself


@pytest.mark.parametrize("how", ["python -m ptreg", "PYTHONPATH=."])
def test_ptreg_itself_imports_nothing_from_the_working_directory(tmp_path: Path, how: str) -> None:
    """ptreg imports json (and its command line's packages) before any command runs: the
    working directory is off its import path before that, however it was put there."""
    (tmp_path / "json.py").write_text("open('planted-ran', 'w')\n")
    env = env_without_hooks()
    if how == "python -m ptreg":
        argv = [sys.executable, "-m", "ptreg", "--version"]
    else:
        argv = [str(Path(sys.executable).parent / "ptreg"), "--version"]
        env["PYTHONPATH"] = os.pathsep.join([".", env.get("PYTHONPATH", "")])
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "planted-ran").exists()
