"""Run inside a loopback-only network namespace by ``test_ray_job.py``: a Ray head with its
dashboard (which serves the Job API), then `ptreg run --detach --executor ray` of the project in
``argv[1]``, `ptreg runs` while the job's run waits on a file, and again once it is made; the
report goes to ``report.json`` beside the project. The cluster's processes are ended by id."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ray_cluster import Cluster

DASHBOARD = "http://127.0.0.1:8265"


def ptreg(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptreg", *args], capture_output=True, text=True, cwd=project, timeout=120
    )


def listed(project: Path) -> list[dict[str, Any]]:
    done = ptreg(project, "runs", "--json")
    return json.loads(done.stdout) if done.returncode == 0 else [{"error": done.stderr}]


def main(work: Path) -> None:
    project = work / "project"
    report: dict[str, Any] = {}
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="ptreg-rj-")))  # short: a socket's path has at most 107 bytes
    # seconds per phase, for whoever asks why the test is slow (never judged: timings vary)
    phases: dict[str, float] = {}
    report["phases"] = phases
    last = [time.monotonic()]

    def mark(name: str) -> None:
        now = time.monotonic()
        phases[name], last[0] = round(now - last[0], 2), now

    try:
        cluster._start(
            "head",
            [
                "--head",
                *("--port", str(cluster.port), "--num-cpus", "2"),
                *("--resources", json.dumps({"ptreg_bench": 1}), "--include-dashboard=true"),
                *("--dashboard-host", "127.0.0.1", "--dashboard-port", "8265", "--temp-dir", str(cluster.temp_dir)),
            ],
            None,
            [],
        )
        mark("start head")
        detached = ptreg(project, "run", "wait-a", "--detach", "--executor", "ray", "--address", DASHBOARD, "--json")
        report["detached"] = {"code": detached.returncode, "out": detached.stdout, "err": detached.stderr}
        mark("submit")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            runs = listed(project)
            if runs and runs[0].get("last_line") == "waiting for go":
                report["running"] = runs
                break
            time.sleep(1)
        mark("until running")
        (work / "go").write_text("")
        while time.monotonic() < deadline:
            runs = listed(project)
            if runs == []:
                break
            time.sleep(1)
        mark("until ended")
        report["after"] = runs
    except Exception as exc:  # said in the report, where the test reads it
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        cluster.stop()
        mark("stop")
        report["left"] = cluster.processes()
        shutil.rmtree(cluster.temp_dir, ignore_errors=True)
        (work / "report.json").write_text(json.dumps(report))


if __name__ == "__main__":
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    main(Path(sys.argv[1]))
