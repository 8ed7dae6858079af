"""Every process ptreg starts: isolated from the caller's working directory and registry, and
supervised as a whole tree, which is measured, bounded and killed whole, however it regroups.

The trees are held by a cgroup where the kernel offers one and by psutil otherwise; the tests
that matter run under each method this machine offers (``PTREG_SUPERVISION``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from helpers import complete_record, freeze_evaluator, patient, propose_in_process, write_registry
from ptreg.engine import cgroups, processes
from ptreg.engine.processes import import_path, python_argv, start

PTREG_SCRIPT = Path(sys.executable).parent / "ptreg"


def methods_here() -> list[str]:
    """The methods this machine can hold a tree by (process-tree always)."""
    found = []
    for method in processes.METHODS[:2]:
        try:
            folder = cgroups.make_cgroup(method)
        except OSError:
            continue
        folder.rmdir()
        found.append(method)
    return [*found, "process-tree"]


METHODS = methods_here()


def survivors(mark: str) -> list[psutil.Process]:
    """Live processes with ``mark`` in their command line or environment."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if mark in " ".join(process.cmdline()) or mark in "".join(process.environ().values()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def no_survivors(mark: str) -> None:
    deadline = time.monotonic() + patient(60)
    while (left := survivors(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, [(p.pid, p.cmdline()) for p in left]
    for process in left:  # never leave a test's processes behind, even when it fails
        process.kill()


# --------------------------------------------------------------------------- the import path


def test_a_worker_imports_nothing_from_the_working_directory_the_registry_or_the_script_folder(
    tmp_path: Path,
) -> None:
    here, registry, plugins, bin_dir = tmp_path / "here", tmp_path / "reg", tmp_path / "plugins", tmp_path / "bin"
    for folder in (here, registry, plugins, bin_dir):
        folder.mkdir()
    (here / "sub").mkdir()
    (here / "installed" / "plugin-1.0.dist-info").mkdir(parents=True)  # pip install --target here/installed
    (registry / "fake.dist-info").mkdir()
    (tmp_path / "link").symlink_to(here)
    path = ["", "relative", str(here), str(here / "sub"), str(tmp_path / "link"), str(registry), str(plugins)]
    path += [str(bin_dir), str(here / "installed"), "/usr/lib/python3.11"]
    kept = import_path(path, [here, registry], str(bin_dir / "ptreg"))
    assert kept == [str(plugins), str(here / "installed"), "/usr/lib/python3.11"]


def test_the_bootstrap_keeps_the_interpreters_own_path_and_the_callers_plugins(tmp_path: Path) -> None:
    """A site-packages inside a refused folder stays, since the interpreter puts it there
    itself (a virtual environment inside the project); a loose folder there does not."""
    plugins, shadow = tmp_path / "plugins", tmp_path / "shadow"
    plugins.mkdir()
    shadow.mkdir()
    (plugins / "ptreg_report_path.py").write_text("import json, os, sys; print(json.dumps([sys.path, os.getcwd()]))\n")
    site = next(p for p in sys.path if p.endswith("site-packages"))
    parent = [str(shadow), str(plugins), *sys.path]
    argv = python_argv(sys.executable, "ptreg_report_path", parent, [shadow, Path(site).parent], None)
    env = processes.python_environment({**os.environ, "PYTHONPATH": str(shadow)})
    assert "PYTHONPATH" not in env
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    path, cwd = json.loads(done.stdout)
    assert str(shadow) not in path and "" not in path and str(tmp_path) not in path
    assert path.index(str(plugins)) < path.index(site)
    assert cwd == str(tmp_path)


SHADOW = """\
import importlib, os, sys
with open({marker!r}, "a") as out:
    out.write(f"{{__name__}} {{os.getpid()}}\\n")
# then step aside, so that the run goes on as if nothing happened: only the marker tells
here = os.path.dirname(os.path.abspath(__file__))
del sys.modules[__name__]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
sys.modules[__name__] = importlib.import_module(__name__)
"""

KERNELS_TINY = {
    "name": "kernels-tiny",
    "configs": ["tiny"],
    "backends": ["naive", "example-transpose"],
    "baseline": "naive",
    "warmup_steps": 1,
    "timed_steps": 2,
    "repeats": 2,
    "max_relative_spread": 10.0,
}


def ptreg_program() -> list[str]:
    """ptreg as a person runs it: the console script when installed, else python -m."""
    return [str(PTREG_SCRIPT)] if PTREG_SCRIPT.exists() else [sys.executable, "-m", "ptreg"]


def plant_shadows(folder: Path, marker: Path) -> None:
    for module in ("threadpoolctl", "numpy"):
        (folder / f"{module}.py").write_text(SHADOW.format(marker=str(marker)))


@pytest.mark.parametrize("where", ["cwd", "cwd-on-pythonpath", "registry-as-cwd"])
def test_run_of_a_kernels_evaluator_imports_nothing_from_where_it_was_started(tmp_path: Path, where: str) -> None:
    root = write_registry(tmp_path / "project" / "attempts", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **KERNELS_TINY)
    propose_in_process(root, ref, "shadowed", "#1")
    cwd = root if where == "registry-as-cwd" else root.parent
    marker = tmp_path / "IMPORTED"
    plant_shadows(cwd, marker)
    env = {k: v for k, v in os.environ.items() if k != "PTREG_CRASH_AT"}
    if where == "cwd-on-pythonpath":
        env["PYTHONPATH"] = os.pathsep.join([str(cwd), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [*ptreg_program(), "-r", str(root), "run", "shadowed", "--json"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )
    assert not marker.exists(), marker.read_text()
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    # the test plugin, installed on PYTHONPATH by conftest, still reaches the workers
    assert [(c["backend"], c["status"]) for c in results["cells"]] == [
        ("naive", "measured"),
        ("example-transpose", "measured"),
    ]


BRIEF = ["--warmup-steps", "1", "--timed-steps", "2", "--repeats", "2", "--json"]


def test_bench_imports_nothing_from_the_working_directory(tmp_path: Path) -> None:
    marker = tmp_path / "IMPORTED"
    plant_shadows(tmp_path, marker)
    done = subprocess.run(
        [*ptreg_program(), "bench", "-w", "kernels", "-b", "naive", "-b", "example-transpose", "-c", "tiny", *BRIEF],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
        timeout=300,
    )
    assert not marker.exists(), marker.read_text()
    assert done.returncode == 0, done.stderr
    assert [c["status"] for c in json.loads(done.stdout)["cells"]] == ["measured", "measured"]


# --------------------------------------------------------------------------- the supervisor


@pytest.mark.parametrize("method", METHODS)
def test_ending_a_tree_kills_every_descendant_however_it_regrouped(tmp_path: Path, method: str) -> None:
    mark = f"ptreg-test-{uuid.uuid4().hex}"
    script = tmp_path / "regroup.py"
    script.write_text(REGROUP)
    tree = start(
        [sys.executable, str(script), "child-group", mark],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        method=method,
    )
    try:
        wait_for_lines(tmp_path / "started", 4)
        assert len(survivors(mark)) >= 5
        assert tree.end() == []
        assert tree.status is not None and os.WIFSIGNALED(tree.status)
        no_survivors(mark)
        assert tree.cgroup is None or not tree.cgroup.exists()
    finally:
        for process in survivors(mark):
            process.kill()


# What a command leaves behind before it sleeps, each a sleeper that writes a line when it
# starts: a child in a session of its own, a daemon by double fork, and a child that leaves the
# command's group for the group of a child of its own. Then the command itself leaves its own
# group, for its child's or for its worker's, where it may (not as a session's leader).
REGROUP = """\
import contextlib, json, os, subprocess, sys, time
mode, mark = sys.argv[1], sys.argv[2]
code = "import sys, time; open('started', 'a').write('x\\\\n'); time.sleep(600)"
sleeper = [sys.executable, "-c", code, mark]
subprocess.Popen(sleeper, start_new_session=True)
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, sleeper)
    os._exit(0)
if os.fork() == 0:
    grandchild = os.fork()
    if grandchild == 0:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        os.execv(sys.executable, sleeper)
    with contextlib.suppress(OSError):
        os.setpgid(grandchild, grandchild)
    with contextlib.suppress(OSError):
        os.setpgid(0, grandchild)
    os.execv(sys.executable, sleeper)
while not os.path.exists("started") or len(open("started").read().splitlines()) < 3:
    time.sleep(0.05)
with contextlib.suppress(OSError):
    if mode == "child-group":
        leader = subprocess.Popen(sleeper, process_group=0).pid
        time.sleep(0.5)
        os.setpgid(0, leader)
    elif mode == "worker-group":
        os.setpgid(0, os.getpgid(os.getppid()))
if mode == "done":
    open(os.environ["PTREG_METRICS"], "w").write(json.dumps({"score": 1}) + "\\n")
    sys.exit(0)
time.sleep(600)
"""


def wait_for_lines(path: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while not (path.exists() and len(path.read_text().splitlines()) >= count):
        assert time.monotonic() < deadline, f"{path} has not {count} lines"
        time.sleep(0.05)


@pytest.mark.parametrize("method", METHODS)
def test_seventy_nested_setsid_daemons_all_die(tmp_path: Path, method: str) -> None:
    mark = f"ptreg-test-{uuid.uuid4().hex}"
    (tmp_path / "nest.sh").write_text(NEST)
    env = {"PATH": os.environ["PATH"], "NEST_MARK": mark}
    tree = start(["sh", "nest.sh", "70"], cwd=tmp_path, env=env, method=method)
    try:
        wait_for_lines(tmp_path / "levels", 70)
        assert len(survivors(mark)) >= 70
        assert tree.end() == []
        no_survivors(mark)
    finally:
        for process in survivors(mark):
            process.kill()


# Each level starts the next in a session of its own, in the background, and then sleeps: a
# chain of 70 daemons, each the parent of the next.
NEST = """\
n=$1
echo "$n" >> levels
if [ "$n" -gt 1 ]; then setsid sh nest.sh $((n - 1)) & fi
exec sleep 600
"""


@pytest.mark.parametrize("method", METHODS)
def test_a_trees_peak_memory_is_all_of_it_and_its_limit_holds(tmp_path: Path, method: str) -> None:
    two = (
        "import subprocess, sys\n"
        "hold = 'import time; b = b\"x\" * (150 << 20); time.sleep(1)'\n"
        "children = [subprocess.Popen([sys.executable, '-c', hold]) for _ in range(2)]\n"
        "sys.exit(sum(c.wait() for c in children))\n"
    )
    tree = start([sys.executable, "-c", two], cwd=tmp_path, env={}, method=method)
    while not tree.reap():
        tree.sample()
        time.sleep(0.02)
    tree.end()
    assert tree.status == 0
    peak = tree.peak_mb()
    assert peak is not None and peak >= 250, peak  # two children of 150 MB, not the larger one
    assert not tree.over_limit()

    grows = "import time; b = b'x' * (800 << 20); time.sleep(3)"
    tree = start([sys.executable, "-c", grows], cwd=tmp_path, env={}, memory_limit_mb=100, method=method)
    while not tree.reap() and not tree.over_limit():
        tree.sample()
        time.sleep(0.02)
    tree.end()
    assert tree.over_limit()
    assert tree.bounded_by is not None


# --------------------------------------------------------------------------- through a run


def command_attempt(tmp_path: Path, script: str, arms: dict[str, dict[str, str]], timeout: float, *budget: str) -> Path:
    """A project whose command evaluator runs ``script`` (as arm.py, with the arm's mode and a
    mark), frozen (so consented to) and proposed as attempt ``arms-run`` with ``budget``."""
    from ptreg.cli import main
    from ptreg.gate.freezing import freeze

    project = tmp_path / "project"
    project.mkdir()
    (project / "arm.py").write_text(script)
    root = write_registry(project / "attempts", [complete_record("seed-record")])
    spec = {
        "name": "arms",
        "workload": "command",
        "command": [sys.executable, "arm.py", "{mode}", "{mark}"],
        "arms": arms,
        "baseline": next(iter(arms)),
        "metrics": {"score": {"better": "higher", "unit": "fraction"}},
        "repeats": 1,
        "seed": 0,
        "timeout_seconds": timeout,
    }
    (project / "spec.json").write_text(json.dumps(spec))
    ref = freeze(root, project / "spec.json").evaluator.ref
    proposal = ["-r", str(root), "new", "--no-input", "--id", "arms-run", "--name", "arms", "--family", "eval"]
    proposal += ["--kind", "model-evaluation", "--question", "Does the command stay inside its tree?"]
    proposal += ["--method", "vendor-blas", "--objective", "command-latency", "--evaluator", ref]
    proposal += ["--tracking-issue", "me/procs#1", "--worked-if", f"metric(score, arm={next(iter(arms))}) > 0", *budget]
    with pytest.raises(SystemExit) as exited:
        main(proposal)
    assert not exited.value.code
    return root


def run_it(root: Path):
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    done = run_attempt(root, "arms-run", ["test"])
    return read_results(done.folder)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("leaves", ["child-group", "worker-group"])
def test_a_command_that_regroups_dies_whole_at_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, leaves: str
) -> None:
    monkeypatch.setenv(processes.METHOD_VARIABLE, method)
    mark = f"ptreg-test-{uuid.uuid4().hex}"
    root = command_attempt(tmp_path, REGROUP, {"sleeps": {"mode": leaves, "mark": mark}}, 2, "--budget-seconds", "40")
    try:
        results = run_it(root)
        (cell,) = results.cells
        assert cell.reason == "repeat 0 (seed 0): killed at its timeout of 2 s"
        no_survivors(mark)
    finally:
        for process in survivors(mark):
            process.kill()


@pytest.mark.parametrize("method", METHODS)
def test_a_command_that_regroups_dies_whole_at_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    monkeypatch.setenv(processes.METHOD_VARIABLE, method)
    mark = f"ptreg-test-{uuid.uuid4().hex}"
    root = command_attempt(
        tmp_path, REGROUP, {"sleeps": {"mode": "child-group", "mark": mark}}, 600, "--budget-seconds", "4"
    )
    try:
        results = run_it(root)
        assert results.status == "budget-exhausted"
        assert [c.status for c in results.cells] == ["budget-exhausted"]
        no_survivors(mark)
    finally:
        for process in survivors(mark):
            process.kill()


def test_seventy_nested_daemons_a_command_leaves_behind_die_with_its_repeat(
    tmp_path: Path,
) -> None:
    mark = f"ptreg-test-{uuid.uuid4().hex}"
    leaves = (
        "import json, os, subprocess, sys, time\n"
        "open('nest.sh', 'w').write(" + repr(NEST) + ")\n"
        "subprocess.Popen(['setsid', 'sh', 'nest.sh', '70'], env={**os.environ, 'NEST_MARK': sys.argv[2]})\n"
        "while not os.path.exists('levels') or len(open('levels').read().splitlines()) < 70:\n"
        "    time.sleep(0.05)\n"
        "open(os.environ['PTREG_METRICS'], 'w').write(json.dumps({'score': 1}) + '\\n')\n"
    )
    root = command_attempt(tmp_path, leaves, {"nests": {"mode": "nest", "mark": mark}}, 60, "--budget-seconds", "60")
    try:
        results = run_it(root)
        assert results.status == "complete", [c.reason for c in results.cells]
        no_survivors(mark)
    finally:
        for process in survivors(mark):
            process.kill()


MEMORY = """\
import json, os, subprocess, sys, time
mode = sys.argv[1]
if mode == "grows":
    held = b"x" * (800 << 20)
    time.sleep(2)
else:  # two children of 150 MB each, at once
    hold = "import time; b = b'x' * (150 << 20); time.sleep(1)"
    children = [subprocess.Popen([sys.executable, "-c", hold]) for _ in range(2)]
    assert all(c.wait() == 0 for c in children)
open(os.environ["PTREG_METRICS"], "w").write(json.dumps({"score": 1}) + "\\n")
"""


@pytest.mark.parametrize("method", METHODS)
def test_a_commands_peak_memory_is_its_whole_trees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    monkeypatch.setenv(processes.METHOD_VARIABLE, method)
    root = command_attempt(tmp_path, MEMORY, {"two": {"mode": "two", "mark": "-"}}, 60, "--budget-seconds", "60")
    results = run_it(root)
    (cell,) = results.cells
    assert results.status == "complete", cell.reason
    assert cell.metrics is not None
    assert cell.metrics["peak_memory_mb"].mean >= 250  # both children, not the larger one
    assert cell.worker is not None and cell.worker["memory"]["measured_by"]


@pytest.mark.parametrize("method", METHODS)
def test_the_memory_budget_bounds_the_commands_whole_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    monkeypatch.setenv(processes.METHOD_VARIABLE, method)
    arms = {"grows": {"mode": "grows", "mark": "-"}}
    root = command_attempt(tmp_path, MEMORY, arms, 60, "--budget-seconds", "60", "--budget-memory-mb", "100")
    results = run_it(root)
    (cell,) = results.cells
    assert results.status == "budget-exhausted", cell.reason
    assert cell.status == "budget-exhausted" and "the budget's 100 MB of memory" in (cell.reason or "")
    assert cell.worker is not None and cell.worker["memory"]["bounded_by"]


def test_a_supervision_method_nobody_knows_is_refused_in_one_line_before_anything_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [*ptreg_program(), "bench", "-b", "naive", "-c", "tiny", "--repeats", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, processes.METHOD_VARIABLE: "cgroup-v9"},
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "ptreg: error: PTREG_SUPERVISION='cgroup-v9' is not one of auto, cgroup-v1, cgroup-v2, process-tree\n"
    )
    assert done.stdout == ""


@pytest.mark.parametrize("method", [m for m in METHODS if m != "process-tree"])
def test_cgroups_left_by_a_ptreg_that_was_killed_are_removed_and_no_others(
    monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)
    parent = cgroups.hierarchy(method)
    left = parent / f"ptreg-{dead}-0-abcdef"
    (left / f"ptreg-{dead + 1}-0-012345").mkdir(parents=True)  # what its worker made below it
    mine = parent / f"ptreg-{os.getpid()}-99-fedcba"
    mine.mkdir()
    try:
        monkeypatch.setattr(cgroups, "_swept", set())
        cgroups.make_cgroup(method).rmdir()
        assert not left.exists()
        assert mine.exists()  # its owner is alive
    finally:
        for folder in (left / f"ptreg-{dead + 1}-0-012345", left, mine):
            if folder.exists():
                folder.rmdir()


def test_a_tree_started_to_die_with_its_parent_does(tmp_path: Path) -> None:
    """A command dies with its worker even when the worker is killed outright."""
    parent = (
        "import sys, time\n"
        "from ptreg.engine.processes import start\n"
        "tree = start(['sleep', '600'], cwd='.', env={'PATH': '/usr/bin:/bin'}, die_with_parent=True)\n"
        "print(tree.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    assert process.stdout is not None
    child = psutil.Process(int(process.stdout.readline()))
    process.kill()
    process.wait()
    child.wait(timeout=patient(60))  # psutil.TimeoutExpired if it outlived its parent
