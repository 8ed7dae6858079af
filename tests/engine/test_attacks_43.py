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

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_command_workload import propose, ptreg

from helpers import env_without_hooks
from ptreg.engine.workloads.command import CommandWorkload, environment
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


# --------------------------------------------------------------------------- consent


@pytest.mark.parametrize(
    "command",
    [
        ["./bench.py"],  # run by its #! line: Python puts its folder first all the same
        ["nice", "-n", "5", "./bench.py"],
        ["bash", "-c", "python3 bench.py"],  # one string, to a shell
        ["sh", "-ec", "cd . && exec python3 bench.py | cat"],
        ["bash", "-c", "sh -c 'python3 bench.py'"],  # a shell's string that runs a shell
        ["timeout", "60", "sh", "-c", "python3 -m bench"],
    ],
)
def test_the_code_a_command_runs_is_frozen_however_python_is_started(project: Path, command: list[str]) -> None:
    (project / "bench.py").chmod(0o755)
    frozen = code_of(project, command)
    assert {"bench.py", "helper.py"} <= set(frozen)
    (project / "json.py").write_text("planted beside the script\n")
    assert "json.py" in code_of(project, command)


def test_a_shebang_that_keeps_the_script_folder_off_the_path_freezes_only_the_script(project: Path) -> None:
    (project / "bench.py").write_text("#!/usr/bin/python3 -I\nprint(1)\n")
    assert set(code_of(project, ["./bench.py"])) == {"bench.py"}
    (project / "data.txt").write_text("#!/usr/bin/env python3\n")  # named, not run: a .txt given to a Python program
    assert set(code_of(project, ["python3", "-I", "bench.py", "data.txt"])) == {"bench.py", "data.txt"}


def test_a_path_that_leaves_the_project_and_comes_back_names_its_files(project: Path) -> None:
    command = ["python3", f"../{project.name}/bench.py"]
    assert {"bench.py", "helper.py"} <= set(code_of(project, command))
    (project / "json.py").write_text("planted\n")
    assert "json.py" in code_of(project, command)


def test_an_absolute_path_through_a_symlinked_folder_names_the_projects_files(project: Path, tmp_path: Path) -> None:
    """The project reached by one path (a symlink to it) and the script named by the other:
    either way round, the script and its folder are the project's code."""
    link = tmp_path / "link"
    link.symlink_to(project, target_is_directory=True)
    by_link = code_of(project, ["python3", str(link / "bench.py")])
    by_real = code_of(project, ["python3", str(project / "bench.py")], registry=link / "attempts")
    assert {"bench.py", "helper.py"} <= set(by_link) and by_link == by_real


def test_a_command_finds_no_program_through_a_relative_path_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative or empty PATH entry would be looked up in the project the command runs in,
    where a planted `python3` is code nobody consented to."""
    monkeypatch.setenv("PATH", os.pathsep.join(["bin", "", "/usr/bin", ".", "/bin"]))
    spec = parse_spec(SPEC, "spec")
    assert isinstance(spec, ArmsSpec)
    env = environment(spec, "a", 0, tmp_path / "m", tmp_path / "i")
    assert env["PATH"].split(os.pathsep) == ["/usr/bin", "/bin"]


def test_a_module_planted_beside_a_script_run_by_its_shebang_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    """End to end: frozen and proposed, then a json.py placed beside the script, which Python
    would import in place of the standard library's."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "bench.py").write_text(
        "#!/usr/bin/env python3\nimport json, os\nopen('ran', 'w')\n"
        "open(os.environ['PTREG_METRICS'], 'w').write(json.dumps({'score': 1}))\n"
    )
    (project / "bench.py").chmod(0o755)
    (project / "spec.json").write_text(json.dumps({**SPEC, "command": ["./bench.py"]}))
    assert ptreg(project, "init").returncode == 0
    frozen = ptreg(project, "evaluator", "freeze", "spec.json", "--json")
    assert frozen.returncode == 0, frozen.stderr
    propose(project, "shebang", json.loads(frozen.stdout)["ref"], 43)
    (project / "json.py").write_text("open('planted-ran', 'w')\n")
    refused = ptreg(project, "run", "shebang")
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "json.py: sha256 absent when frozen" in line and "nothing run" in line
    assert not (project / "planted-ran").exists() and not (project / "ran").exists()


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
