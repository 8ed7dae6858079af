"""`ptreg run --detach --executor ray` against a real Ray head, whose dashboard serves the Job
Submission API: the run goes as a job, `ptreg runs` shows the job's state and the run's progress
while it waits on a file, and the run folder is written by the job. The dashboard needs
`ray[default]` (`ptreg[ray-jobs]`): without it, or without a network namespace, the test skips.
About 20 s, most of it the head starting."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ray_cluster import namespace_command, namespace_problem

HERE = Path(__file__).parent
WAITER = """\
import os, pathlib, time
print("waiting for go", flush=True)
go = pathlib.Path(__file__).resolve().parent.parent / "go"
while not go.exists():
    time.sleep(0.05)
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
    "timeout_seconds": 120,
}


def _ptreg(project: Path, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "ptreg", *args], capture_output=True, text=True, cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_detached_run_goes_to_the_cluster_as_a_job_and_is_followed_to_its_end(tmp_path: Path) -> None:
    if importlib.util.find_spec("ray") is None or importlib.util.find_spec("aiohttp") is None:
        pytest.skip("a Ray head's Job API needs ray[default] (its dashboard), not installed here")
    problem = namespace_problem()
    if problem is not None:
        pytest.skip(problem)
    project = tmp_path / "project"
    project.mkdir()
    (project / "wait.py").write_text(WAITER)
    (project / "spec.json").write_text(json.dumps(SPEC))
    _ptreg(project, "init")
    _ptreg(project, "evaluator", "freeze", "spec.json")
    _ptreg(
        project,
        *("new", "--no-input", "--id", "wait-a", "--name", "wait-a", "--family", "eval", "--kind", "model-evaluation"),
        *("--question", "Does the waiter wait?", "--method", "vendor-blas", "--objective", "command-latency"),
        *("--evaluator", "waiter", "--budget-seconds", "300", "--tracking-issue", "me/toy#1"),
        *("--worked-if", "diff(score, arm=candidate, over=baseline) > 0"),
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PTREG_REGISTRY", "RAY_ADDRESS", "PTREG_CRASH_AT")}
    done = subprocess.run(
        namespace_command([sys.executable, str(HERE / "ray_job_scenario.py"), str(tmp_path)]),
        capture_output=True,
        text=True,
        env=env,
        cwd=HERE,
        timeout=600,
    )
    assert (tmp_path / "report.json").exists(), done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert "error" not in report, report["error"]
    assert report["left"] == []
    detached = report["detached"]
    assert detached["code"] == 0, detached["err"]
    run_id = json.loads(detached["out"])["run_id"]
    job_id = f"ptreg-wait-a-{run_id}"
    assert json.loads(detached["out"])["job_id"] == job_id
    (running,) = report["running"]
    assert running["run_id"] == run_id and running["state"] == "running"
    assert running["job"] == {"job_id": job_id, "address": "http://127.0.0.1:8265", "state": "RUNNING"}
    assert running["round"] == 1 and running["total"] == 1
    assert report["after"] == []
    results = json.loads((project / "attempts" / "runs" / "wait-a" / run_id / "results.json").read_text())
    assert results["status"] == "complete"
    assert results["command"][-4:] == ["--run-id", run_id, "--executor", "ray"]
