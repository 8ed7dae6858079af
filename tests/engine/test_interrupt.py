"""Ctrl-C, SIGTERM and SIGHUP during `ptreg run`: the workers stop, what finished is written as an
`interrupted` run, and the exit code is 128 + the signal (130, 143, 129)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import complete_record, freeze_evaluator, patient, propose_in_process, wait_for_timed_steps, write_registry

LONG = {
    "name": "interrupt-tiny",
    "workload": "tinygpt-train",
    "metric": "ms-per-step",
    "configs": ["tiny"],
    "backends": ["numpy-blas", "naive"],
    "baseline": "naive",
    "warmup_steps": 1,
    "timed_steps": 4000,
    "repeats": 3,
    "threads": 1,
    "tolerance": {"rtol": 1e-4, "atol": 1e-6},
    "max_relative_spread": 5.0,
}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


@pytest.mark.parametrize(
    "signum, code",
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
def test_a_signal_mid_cell_writes_an_interrupted_run_and_exits_128_plus_it(
    tmp_path: Path, signum: int, code: int
) -> None:
    from ptreg.operations.validate import validate_path
    from ptreg.store.runs import read_results

    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **LONG)
    propose_in_process(root, ref, "stop-me", "#81")
    process = subprocess.Popen(
        [sys.executable, "-m", "ptreg", "-r", str(root), "run", "stop-me"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PTREG_CRASH_AT"},
    )
    # The progress log (stderr is not a terminal) says when the first cell starts; 4000 steps
    # of it take far longer than the wait, so the signal lands mid-cell.
    seen = []
    deadline = time.monotonic() + patient(120)
    while True:
        line = process.stderr.readline()
        assert line and time.monotonic() < deadline, "".join(seen)
        seen.append(line)
        if line.startswith("ptreg: numpy-blas/tiny"):
            break
    wait_for_timed_steps(root, "stop-me", process)  # a step's sample has reached the run
    process.send_signal(signum)
    out, err = process.communicate(timeout=patient(120))
    assert process.returncode == code, err
    assert "Traceback" not in err + out

    folders = list((root / "runs" / "stop-me").iterdir())
    assert len(folders) == 1
    results = read_results(folders[0])
    assert results.status == "interrupted" and signal.Signals(signum).name in results.reason
    # both backends' workers were warm, taking repeats in turn: both stop with the run
    assert [(c.backend, c.status) for c in results.cells] == [("numpy-blas", "interrupted"), ("naive", "interrupted")]
    assert any(c.step_samples for c in results.cells), "the steps that finished are kept"
    for cell in results.cells:
        assert not alive(cell.worker["pid"]), "every worker was stopped with the run"
    assert f"run {results.run_id}: interrupted" in out
    record = json.loads((root / "stop-me.json").read_text())
    assert record["runs"][-1]["status"] == "interrupted"
    _, problems = validate_path(root)
    assert not [p for p in problems if p.severity == "error"], problems
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".tmp-")]


def test_interrupted_runner_keeps_whole_repeats_and_stops_the_plan(tmp_path: Path) -> None:
    """In-process: the handler's exception reaches the runner mid-worker, as a signal would."""
    from ptreg.engine.interruption import Interrupted
    from ptreg.operations.running import run_attempt
    from ptreg.store.runs import read_results

    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **{**LONG, "timed_steps": 3, "repeats": 200})
    propose_in_process(root, ref, "stop-in-process", "#82")
    steps = []

    def progress(event) -> None:
        if event.task == "naive/tiny" and event.phase.endswith("timed"):
            steps.append(event.done)
            if len(steps) == 12:
                raise Interrupted(signal.SIGTERM)

    done = run_attempt(root, "stop-in-process", ["test"], progress=progress)
    assert done.exit_code == 143 and done.interrupted_by == signal.SIGTERM
    results = read_results(done.folder)
    assert [(c.backend, c.status) for c in results.cells] == [("numpy-blas", "interrupted"), ("naive", "interrupted")]
    assert results.status == "interrupted"
    for cell in results.cells:
        assert cell.ms_per_step is not None and cell.ms_per_step.n >= 1, "whole repeats are summarized"
    assert results.rounds is not None and results.rounds[0].stopped == "interrupted by SIGTERM"


def test_sigterm_during_a_command_kills_its_group_and_keeps_the_repeats_that_finished(tmp_path: Path) -> None:
    """The command workload: a repeat that is running when SIGTERM arrives dies with its whole
    process group; the repeats before it are written as an interrupted run."""
    from ptreg.store.runs import read_results

    project = tmp_path / "project"
    project.mkdir()
    # round 0 finishes at once; from round 1 on, the command and a child of it sleep
    (project / "arm.py").write_text(
        "import json, os, subprocess, sys, time\n"
        "if int(os.environ['PTREG_SEED']) > 0:\n"
        "    child = subprocess.Popen(['sleep', '302'])\n"
        "    open(f\"pids-{os.environ['PTREG_ARM']}\", 'a').write(f'{os.getpid()} {child.pid}\\n')\n"
        "    time.sleep(300)\n"
        "open(os.environ['PTREG_METRICS'], 'w').write(json.dumps({'score': 1.0}) + '\\n')\n"
    )
    spec = {
        "name": "sleepy",
        "workload": "command",
        "command": [sys.executable, "arm.py", "{n}"],
        "arms": {"one": {"n": "1"}, "two": {"n": "2"}},
        "baseline": "one",
        "metrics": {"score": {"better": "higher", "unit": "fraction"}},
        "repeats": 3,
        "seed": 0,
        "timeout_seconds": 600,
    }
    (project / "spec.json").write_text(json.dumps(spec))
    root = write_registry(project / "attempts", [complete_record("seed-record")])
    env = {k: v for k, v in os.environ.items() if k != "PTREG_CRASH_AT"}
    frozen = subprocess.run(
        [sys.executable, "-m", "ptreg", "-r", str(root), "evaluator", "freeze", str(project / "spec.json")],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
    )
    assert frozen.returncode == 0, frozen.stderr
    propose_in_process(root, "sleepy", "stop-command", "#82")
    process = subprocess.Popen(
        [sys.executable, "-m", "ptreg", "-r", str(root), "run", "stop-command"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=project,
    )
    deadline = time.monotonic() + patient(120)
    while not list(project.glob("pids-*")):
        assert time.monotonic() < deadline and process.poll() is None, process.stderr.read() if process.stderr else ""
        time.sleep(0.1)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=patient(120))
    assert process.returncode == 143, err
    assert "Traceback" not in err + out
    for pids in project.glob("pids-*"):
        for pid in map(int, pids.read_text().split()):
            end = time.monotonic() + patient(60)
            while time.monotonic() < end and alive(pid):
                time.sleep(0.1)
            assert not alive(pid), f"{pid}, started by the command, outlived the run"
    (folder,) = list((root / "runs" / "stop-command").iterdir())
    results = read_results(folder)
    assert results.status == "interrupted"
    assert all(c.metrics and c.metrics["score"].n == 1 for c in results.cells), "round 0 is kept"


def test_sighup_kills_a_command_that_regrouped_and_writes_an_interrupted_run(tmp_path: Path) -> None:
    """A closed terminal (SIGHUP) stops `ptreg run` as SIGTERM does, and nothing the command
    started outlives it, though it left its session, its group, or was left as a daemon."""
    import uuid

    import psutil

    from ptreg.store.runs import read_results

    mark = f"ptreg-test-{uuid.uuid4().hex}"
    project = tmp_path / "project"
    project.mkdir()
    (project / "arm.py").write_text(
        "import os, subprocess, sys, time\n"
        "sleeper = [sys.executable, '-c', 'import time; time.sleep(600)', sys.argv[1]]\n"
        "subprocess.Popen(sleeper, start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        os.execv(sys.executable, sleeper)\n"
        "    os._exit(0)\n"
        "open('started', 'w').write('yes')\n"
        "time.sleep(600)\n"
    )
    spec = {
        "name": "hangs-up",
        "workload": "command",
        "command": [sys.executable, "arm.py", mark],
        "arms": {"one": {}},
        "baseline": "one",
        "metrics": {"score": {"better": "higher", "unit": "fraction"}},
        "repeats": 2,
        "seed": 0,
        "timeout_seconds": 600,
    }
    (project / "spec.json").write_text(json.dumps(spec))
    root = write_registry(project / "attempts", [complete_record("seed-record")])
    env = {k: v for k, v in os.environ.items() if k != "PTREG_CRASH_AT"}
    frozen = subprocess.run(
        [sys.executable, "-m", "ptreg", "-r", str(root), "evaluator", "freeze", str(project / "spec.json")],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
    )
    assert frozen.returncode == 0, frozen.stderr
    propose_in_process(root, "hangs-up", "hang-up", "#83")
    process = subprocess.Popen(
        [sys.executable, "-m", "ptreg", "-r", str(root), "run", "hang-up"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=project,
    )

    def marked() -> list[psutil.Process]:
        found = []
        for candidate in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if candidate.status() != psutil.STATUS_ZOMBIE and mark in " ".join(candidate.cmdline()):
                    found.append(candidate)
        return found

    try:
        deadline = time.monotonic() + patient(120)
        while not (project / "started").exists() or len(marked()) < 3:
            assert time.monotonic() < deadline and process.poll() is None, (
                process.stderr.read() if process.stderr else ""
            )
            time.sleep(0.1)
        process.send_signal(signal.SIGHUP)
        out, err = process.communicate(timeout=patient(120))
        assert process.returncode == 129, err
        assert "Traceback" not in err + out
        end = time.monotonic() + patient(60)
        while marked() and time.monotonic() < end:
            time.sleep(0.1)
        assert not marked(), [p.cmdline() for p in marked()]
    finally:
        for left in marked():
            left.kill()
    (folder,) = list((root / "runs" / "hang-up").iterdir())
    results = read_results(folder)
    assert results.status == "interrupted" and "SIGHUP" in (results.reason or "")
    record = json.loads((root / "hang-up.json").read_text())
    assert record["runs"][-1]["status"] == "interrupted"
