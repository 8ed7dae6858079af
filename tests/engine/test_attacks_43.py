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
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from test_command_workload import propose, ptreg
from test_processes import METHODS, command_attempt, no_survivors, run_it, survivors

from helpers import as_a_shell_starts_it, env_without_hooks, patient
from ptreg.engine import cgroups, processes
from ptreg.engine.processes import start
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


# --------------------------------------------------------------------------- the supervisor

CGROUPS = [m for m in METHODS if m != "process-tree"]
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="only root can move a process out of its cgroup")

# Moves itself to the top of its cgroup hierarchy (as root may), then leaves a daemon there.
ESCAPE = """\
import os, subprocess, sys, time
hierarchy, mark, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(os.path.join(hierarchy, "cgroup.procs"), "w") as procs:
    procs.write(str(os.getpid()))
code = f"import time; b = bytearray({size} << 20); open('started', 'a').write('x\\\\n'); time.sleep(600)"
subprocess.Popen([sys.executable, "-c", code, mark], start_new_session=True)
time.sleep(600)
"""


def _top_of(method: str) -> str:
    folder = cgroups.hierarchy(method)
    while folder.parent != folder and (folder.parent / "cgroup.procs").exists():
        folder = folder.parent
    return str(folder)


@ROOT_ONLY
@pytest.mark.parametrize("method", CGROUPS)
def test_a_process_moved_out_of_its_trees_cgroup_is_still_of_the_tree(tmp_path: Path, method: str) -> None:
    """Killed with the tree, and its memory counted against the tree's limit."""
    mark = f"ptreg-test-{uuid.uuid4().hex}"
    (tmp_path / "escape.py").write_text(ESCAPE)
    argv = [sys.executable, "escape.py", _top_of(method), mark, "200"]
    tree = start(argv, cwd=tmp_path, env={"PATH": os.environ["PATH"]}, memory_limit_mb=100, method=method)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline, "the escaped process never started"
            time.sleep(0.05)
        while not tree.over_limit():
            assert time.monotonic() < deadline, f"never over its limit, at {tree.sample()} MB"
            tree.sample()
            time.sleep(0.1)
        assert (tree.peak_mb() or 0) > 150
        assert tree.end() == []
        no_survivors(mark)
    finally:
        for process in survivors(mark):
            process.kill()


LEAVES_AND_KILLS_ITS_WORKER = """\
import os, subprocess, sys, time
code = "import time; open('started', 'w'); time.sleep(600)"
# a daemon with no mark in its environment, in a session of its own
subprocess.Popen(["setsid", "env", "-i", sys.executable, "-c", code, sys.argv[2]])
while not os.path.exists("started"):
    time.sleep(0.02)
os.kill(os.getppid(), 9)
time.sleep(600)
"""


@pytest.mark.parametrize("method", METHODS)
def test_what_a_command_leaves_when_it_kills_its_worker_is_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """The worker's orphans go to the executor, which adopts them (a child subreaper) and ends
    them with the worker's tree, even with no cgroup and no mark to find them by."""
    monkeypatch.setenv(processes.METHOD_VARIABLE, method)
    mark = f"ptreg-test-{uuid.uuid4().hex}"
    root = command_attempt(
        tmp_path, LEAVES_AND_KILLS_ITS_WORKER, {"a": {"mode": "a", "mark": mark}}, 60, "--budget-seconds", "60"
    )
    try:
        results = run_it(root)
        assert [c.reason for c in results.cells] == ["worker killed by SIGKILL"]
        no_survivors(mark)
    finally:
        for process in survivors(mark):
            process.kill()


LEAVES_DAEMONS = """\
import os, subprocess, sys, time
code = "import time; open('started', 'a').write('x\\\\n'); time.sleep(600)"
subprocess.Popen(["setsid", sys.executable, "-c", code, sys.argv[2]])
if os.fork() == 0:
    os.setsid()
    os.execve(sys.executable, [sys.executable, "-c", code, sys.argv[2]], {})
time.sleep(600)
"""


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGQUIT])
def test_nothing_a_run_started_outlives_ptreg_killed_by_a_signal_it_does_not_handle(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """Each worker is told to end when ptreg dies (its parent-death signal, SIGTERM), and ends
    its command's tree whole: the command and the daemons it left, with no mark to find them by.
    SIGQUIT dumps core, and its threads die one by one: the worker hears of it more than once."""
    mark = f"ptreg-test-{uuid.uuid4().hex}"
    root = command_attempt(tmp_path, LEAVES_DAEMONS, {"a": {"mode": "a", "mark": mark}}, 60, "--budget-seconds", "60")
    run = subprocess.Popen(
        [sys.executable, "-m", "ptreg", "-r", str(root), "run", "arms-run"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env_without_hooks(),
        start_new_session=True,
        preexec_fn=as_a_shell_starts_it,  # SIGQUIT quits, however pytest was started
    )
    try:
        deadline = time.monotonic() + patient(60)
        started = root.parent / "started"
        while not (started.exists() and len(started.read_text().splitlines()) >= 2):
            assert time.monotonic() < deadline and run.poll() is None, "the command never left its daemons"
            time.sleep(0.05)
        run.send_signal(stop)
        run.wait(timeout=patient(60))
        no_survivors(mark)
    finally:
        if run.poll() is None:
            run.kill()
        for process in survivors(mark):
            process.kill()


def test_a_worker_told_to_end_twice_ends_its_command_once_and_whole() -> None:
    """The second SIGTERM (the kernel's parent-death signal again, as the parent's next thread
    dies) is ignored, so that it cannot cut short the end of the command's tree the first began."""
    told = (
        "import signal\n"
        "from ptreg.engine import worker\n"
        "signal.signal(signal.SIGTERM, worker._told_to_end)\n"
        "try:\n"
        "    signal.raise_signal(signal.SIGTERM)\n"
        "except SystemExit as ended:\n"
        "    assert ended.code == 143, ended.code\n"
        "signal.raise_signal(signal.SIGTERM)\n"
        "print('still here')\n"
    )
    done = subprocess.run([sys.executable, "-c", told], capture_output=True, text=True, env=env_without_hooks())
    assert done.returncode == 0 and done.stdout == "still here\n", done.stderr


def test_the_executor_adopts_no_child_of_its_own_session() -> None:
    """A process ptreg itself starts and waits for (git, in its own session) is never taken for
    an orphan of a tree, killed or reaped by a tree's end."""
    processes.become_subreaper()
    own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert own.pid not in processes._adopted()
        assert psutil.Process(own.pid).status() != psutil.STATUS_ZOMBIE
    finally:
        own.kill()
        own.wait()


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


# --------------------------------------------------------------------------- runs too wide to write


def _results_with(arms: list[str], metrics: list[str], summary: dict, comparison: dict) -> str:
    """A results.json shaped as a run writes its arms: each cell's summaries and comparisons."""
    from ptreg.store.jsonio import dumps_pretty

    cells = [
        {
            "backend": arm,
            "metrics": dict.fromkeys(metrics, summary),
            "versus": {other: dict.fromkeys(metrics, comparison) for other in arms if other != arm},
        }
        for arm in arms
    ]
    return dumps_pretty({"results_version": 7, "cells": cells})


def test_a_comparison_and_a_summary_take_no_more_than_the_width_bound_counts() -> None:
    """Each at its longest: names of the longest an arm and a metric may have, numbers of 24
    characters, the longest interval method, counts of 19 digits; a cell's own lines (a KB at
    most each, 64 KB for 64 arms) come out of the reserve."""
    from ptreg.engine.stats import ADAPTIVE_PAIRED_METHOD
    from ptreg.engine.workloads.arms import COMPARISON_BYTES, SUMMARY_BYTES

    number, count = -1.2345678901234567e-300, 2**63 - 1
    interval = {"low": number, "high": number, "level": 0.95, "method": ADAPTIVE_PAIRED_METHOD}
    summary = {"n": count, "mean": number, "median": number, "min": number, "max": number, "ci": interval}
    comparison = {"kind": "difference", "estimate": number, "ci": interval, "n": count, "paired_by": "round"}
    comparison |= {"seeds": count, "won": count, "lost": count, "tied": count}
    arms = [f"{'a' * 126}{n:02d}" for n in range(20)]
    metrics = [f"m{'x' * 61}{n:02d}" for n in range(64)]
    for width, depth in ((2, 1), (3, 1), (10, 1), (20, 1), (10, 3), (20, 3), (4, 64)):
        written = len(_results_with(arms[:width], metrics[:depth], summary, comparison))
        bound = width * (width - 1) * depth * COMPARISON_BYTES + width * depth * SUMMARY_BYTES + 1024 * width
        assert written <= bound, (width, depth, written, bound)


def test_an_arms_spec_whose_run_could_not_be_written_is_refused_before_it_runs(tmp_path: Path) -> None:
    """40 arms on 40 metrics made a 34 MB results.json after 80 commands had run, refused at the
    end with the measurement lost: such a spec is refused when it is frozen, and any narrower
    one is written."""
    from ptreg.engine.workloads.discovery import spec_problem

    def spec(arms: int, metrics: int) -> ArmsSpec:
        found = parse_spec(
            {
                **SPEC,
                "command": ["python3", "bench.py", "{level}"],
                "arms": {f"a{n}": {"level": str(n)} for n in range(arms)},
                "baseline": "a0",
                "metrics": {f"m{n}": {"better": "higher", "unit": "u"} for n in range(metrics)},
            },
            "spec",
        )
        assert isinstance(found, ArmsSpec)
        return found

    problem = spec_problem(spec(40, 40))
    assert problem is not None and "40 arms, each compared with every other on 42 metrics, make 65,520" in problem
    assert spec_problem(spec(20, 20)) is None
    project = tmp_path / "wide"
    project.mkdir()
    (project / "spec.json").write_text(json.dumps(spec(40, 40).model_dump(mode="json", exclude_none=True)))
    assert ptreg(project, "init").returncode == 0
    refused = ptreg(project, "evaluator", "freeze", "spec.json")
    assert refused.returncode == 2 and "65,520 comparisons" in refused.stderr
    assert not list((project / "attempts" / "evaluators").glob("*.json"))
