"""`ptreg run ID --detach` and `ptreg runs`, end to end: the refusals made in the foreground,
the run going on in a session of its own after the one that started it is hung up and killed,
`ptreg runs` following it by its progress.json, and a run id the detached run was not given
refused. No timing is asserted: that the detaching process returns before the run could end is
shown by order, the run's command waiting on a file the test makes only after it returned."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psutil
import pytest

WAITER = """\
import os, pathlib, time
print("waiting for go", flush=True)
go = pathlib.Path(__file__).resolve().parent.parent / "go"
while not go.exists():
    time.sleep(0.05)
print("going", flush=True)
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write('{"score": 1}\\n')
"""
SPEC = {
    "name": "waiter",
    "workload": "command",
    "command": ["python3", "wait.py"],
    "arms": {"baseline": {}, "candidate": {}},
    "baseline": "baseline",
    "metrics": {"score": {"better": "higher", "unit": "fraction"}},
    "repeats": 1,
    "seed": 0,
    "timeout_seconds": 60,
}
ATTEMPT = "wait-a"
T = TypeVar("T")


def ptreg(project: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PTREG_REGISTRY"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    found = subprocess.run(
        [sys.executable, "-m", "ptreg", *args],
        capture_output=True,
        text=True,
        cwd=project,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in found.stdout + found.stderr, found.stderr
    if check:
        assert found.returncode == 0, found.stdout + found.stderr
    return found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose evaluator's command waits for ``<tmp_path>/go``, frozen (so consented
    to) and proposed as ATTEMPT."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "wait.py").write_text(WAITER)
    (folder / "spec.json").write_text(json.dumps(SPEC))
    ptreg(folder, "init", check=True)
    ptreg(folder, "evaluator", "freeze", "spec.json", check=True)
    ptreg(
        folder,
        *("new", "--no-input", "--id", ATTEMPT, "--name", ATTEMPT, "--family", "eval", "--kind", "model-evaluation"),
        *("--question", "Does the waiter wait?", "--method", "vendor-blas", "--objective", "command-latency"),
        *("--evaluator", "waiter", "--budget-seconds", "200", "--tracking-issue", "me/toy#1"),
        *("--worked-if", "diff(score, arm=candidate, over=baseline) > 0"),
        check=True,
    )
    return folder


def assert_one_line_error(found: subprocess.CompletedProcess[str], code: int, *fragments: str) -> None:
    assert found.returncode == code, (found.returncode, found.stderr)
    lines = found.stderr.strip("\n").splitlines()
    assert len(lines) == 1 and lines[0].startswith("ptreg: error: "), found.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def runs_json(project: Path) -> list[dict[str, object]]:
    listed = ptreg(project, "runs", "--json", check=True)
    found = json.loads(listed.stdout)
    assert isinstance(found, list)
    return found


def wait_for(condition: Callable[[], T], what: str, seconds: float = 60) -> T:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {seconds} s")


def ended(pid: int) -> bool:
    """Whether the process is gone; a zombie is gone too. An earlier test in this process may
    have made it a child subreaper, and then the detached run, orphaned, ends as its child."""
    try:
        if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            return False
    except psutil.NoSuchProcess:
        return True
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return True


def test_a_detached_run_returns_before_it_ends_and_completes_with_its_session_gone(project: Path) -> None:
    runs = project / "attempts" / "runs" / ATTEMPT
    # the detaching ptreg as a terminal's job would be: a session of its own, no tty, under a
    # shell (the session's leader) that outlives it until the session is hung up and killed
    shell = subprocess.Popen(
        [
            "sh",
            "-c",
            f'"{sys.executable}" -m ptreg run {ATTEMPT} --detach --json > detached.json; touch answered; exec sleep 60',
        ],
        cwd=project,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={k: v for k, v in os.environ.items() if k != "PTREG_REGISTRY"},
    )
    try:
        wait_for((project / "answered").exists, "the detaching ptreg's answer")
        detached = json.loads((project / "detached.json").read_text())
        # it answered, and the command cannot have ended: it waits for a file not made yet
        assert not (project.parent / "go").exists()
        run_id = detached["run_id"]
        assert not (runs / run_id).exists()
        assert Path(project, detached["log"]).parent == runs / f".running-{run_id}"
        os.killpg(shell.pid, signal.SIGHUP)  # the terminal closes: its session is hung up, then killed
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait(timeout=30)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
    assert psutil.pid_exists(detached["pid"])
    assert os.getsid(detached["pid"]) != shell.pid  # a session of its own, out of the hang-up's reach

    def listed_running() -> dict[str, object] | None:
        found = [r for r in runs_json(project) if r["run_id"] == run_id]
        return found[0] if found and found[0]["state"] == "running" and found[0]["last_line"] else None

    shown = wait_for(listed_running, "ptreg runs showing the run and its command's output")
    assert shown["attempt"] == ATTEMPT and shown["pid"] == detached["pid"]
    assert shown["total"] == 1 and shown["round"] == 1
    assert shown["last_line"] == "waiting for go"
    assert isinstance(shown["budget_left"], float) and shown["budget_left"] <= 200
    table = ptreg(project, "runs", check=True).stdout
    assert run_id in table and "running" in table

    (project.parent / "go").write_text("")
    wait_for(lambda: (runs / run_id / "results.json").exists(), "the run folder")
    wait_for(lambda: ended(detached["pid"]), "the run's end")
    results = json.loads((runs / run_id / "results.json").read_text())
    assert results["status"] == "complete"
    assert not (runs / f".running-{run_id}").exists()
    assert f"run {run_id}: complete" in (runs / run_id / "log.txt").read_text()  # its log went with it
    assert runs_json(project) == []
    assert ptreg(project, "validate").returncode == 0
    assert [r["run_id"] for r in json.loads(ptreg(project, "show", ATTEMPT, "--json").stdout)["attempt"]["runs"]] == [
        run_id
    ]


def test_refusals_come_before_anything_is_detached(project: Path) -> None:
    runs = project / "attempts" / "runs"
    concluded = ptreg(project, "run", "no-such-attempt", "--detach")
    assert_one_line_error(concluded, 2, "no-such-attempt")
    # the consent no longer covers the code: refused here, in the foreground
    (project / "wait.py").write_text(WAITER + "# edited\n")
    refused = ptreg(project, "run", ATTEMPT, "--detach")
    assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "wait.py" in refused.stderr
    plan = ptreg(project, "run", ATTEMPT, "--detach", "--run-id", "20260101T000000Z")
    assert_one_line_error(plan, 2, "--run-id")
    assert not runs.exists() or not any(runs.rglob(".running-*"))


def test_a_run_id_the_run_was_not_given_fresh_is_refused(project: Path) -> None:
    runs = project / "attempts" / "runs" / ATTEMPT
    taken = runs / ".running-20260101T000000Z"
    taken.mkdir(parents=True)
    forged = {"pid": os.getpid(), "created": 1.0, "attempt": ATTEMPT, "run_id": "20260101T000000Z"}
    (taken / "progress.json").write_text(json.dumps(forged))
    refused = ptreg(project, "run", ATTEMPT, "--run-id", "20260101T000000Z")
    assert_one_line_error(refused, 2, "20260101T000000Z", "not to this one")
    assert json.loads((taken / "progress.json").read_text()) == forged
    bad = ptreg(project, "run", ATTEMPT, "--run-id", "../../x")
    assert_one_line_error(bad, 2, "invalid run id")
    # and `ptreg runs` believes none of it: the pid is a live process started at another time
    (listed,) = runs_json(project)
    assert listed["state"] == "process gone" and listed["pid"] == os.getpid()
    assert "ptreg run wait-a --resume" in ptreg(project, "runs").stdout


def test_runs_names_an_unreadable_progress_file_and_lists_the_rest(project: Path) -> None:
    runs = project / "attempts" / "runs" / ATTEMPT
    (runs / ".running-20260101T000000Z").mkdir(parents=True)
    (runs / ".running-20260101T000000Z" / "progress.json").write_text('{"pid": "x"}')
    (runs / ".running-20260102T000000Z").mkdir()
    listed = ptreg(project, "runs", "--json")
    assert listed.returncode == 2
    assert listed.stderr.strip().splitlines() == [
        f"ptreg: error: {Path('attempts/runs', ATTEMPT, '.running-20260101T000000Z', 'progress.json')}#/pid: "
        "not a process id"
    ]
    states = {r["run_id"]: r["state"] for r in json.loads(listed.stdout)}
    assert states == {"20260101T000000Z": "unreadable", "20260102T000000Z": "process gone"}
