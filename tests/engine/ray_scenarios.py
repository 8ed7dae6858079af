"""The Ray executor's scenarios on one real cluster, run by tests/engine/test_ray.py inside a
loopback-only network namespace: ``python ray_scenarios.py WORK_DIR``.

The registries are prepared by the test before; this script starts the cluster (a head that
offers no ``ptreg_bench``, and worker nodes that offer one each), runs ptreg against it, and
writes what it saw to ``WORK_DIR/report.json`` for the test to judge. The cluster is stopped,
its processes ended by id, whatever happens.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from ray_cluster import Cluster, is_loopback, listening_addresses

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for helpers
from helpers import wait_for_timed_steps

PTREG = [sys.executable, "-m", "ptreg"]
BENCH = ["-b", "naive", "-b", "numpy-blas", "--warmup-steps", "0", "--threads", "1"]


def ptreg(args: list[str], timeout: float = 300) -> dict[str, Any]:
    done = subprocess.run([*PTREG, *args], capture_output=True, text=True, timeout=timeout)
    return {"code": done.returncode, "out": done.stdout, "err": done.stderr}


def follow(args: list[str], until: tuple[str, ...], then: Any, timeout: float = 240) -> dict[str, Any]:
    """Run ptreg, read its progress log until a line holds every part of ``until``, call
    ``then(process, line)``, and let it finish."""
    process = subprocess.Popen([*PTREG, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    assert process.stderr is not None
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        if all(part in line for part in until):
            then(process, line)
            break
    else:
        line = ""
    out, err = process.communicate(timeout=timeout)
    matched = all(part in line for part in until)
    return {"code": process.returncode, "out": out, "err": "".join(seen) + err, "matched": matched}


def bench_json(result: dict[str, Any]) -> Any:
    try:
        return json.loads(result["out"])
    except ValueError:
        return None


def alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    try:
        return "zombie" not in status.read_text().lower()
    except OSError:
        return False


def survivors(pids: list[int], seconds: float = 2.0) -> list[int]:
    """Those of ``pids`` still alive once they have had ``seconds`` to die; found sooner when
    all are gone already."""
    deadline = time.monotonic() + seconds
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def worker_pids(results: Any) -> list[int]:
    return [c["worker"]["pid"] for c in results["cells"] if (c.get("worker") or {}).get("pid")] if results else []


def main(work: Path) -> int:
    setup = json.loads((work / "setup.json").read_text())
    report: dict[str, Any] = {}
    # beside arm.py under a name no import can take: what consent freezes there is code, and Ray's
    # session folder (with its symlinks) is not
    cluster = Cluster(work / ".ray")
    started = time.monotonic()
    # seconds per phase, for whoever asks why the module is slow (never judged: timings vary)
    phases: dict[str, float] = {}
    report["phases"] = phases
    last = [started]

    def mark(name: str) -> None:
        now = time.monotonic()
        phases[name], last[0] = round(now - last[0], 2), now

    try:
        cluster.start_head()
        mark("start head")
        # No node offers ptreg_bench yet: refused before anything is measured.
        report["no_bench_node"] = ptreg(["bench", "--executor", "ray", "--address", cluster.address, "-b", "naive"])
        mark("no_bench_node")
        cluster.add_node("a")
        mark("start node a")
        cluster.add_node("b")
        mark("start node b")
        report["listening"] = listening_addresses()
        report["all_loopback"] = all(is_loopback(a) for a in report["listening"])
        report["agent_ports"] = cluster.agent_ports()

        # A complete run of an attempt: cells spread over both nodes, the registry written here.
        report["run"] = ptreg(
            ["-r", setup["root"], "run", setup["spread"], "--executor", "ray", "--address", cluster.address]
        )
        mark("run")

        # A command evaluator's arms, on a node as a config's cells are.
        report["command"] = ptreg(
            ["-r", setup["root"], "run", setup["command"], "--executor", "ray", "--address", cluster.address]
        )
        mark("command")

        # The same measurement locally, for the shape of its results.
        on_ray = ["--executor", "ray", "--address", cluster.address]
        short = ["bench", *BENCH, "-c", "tiny", "--timed-steps", "1", "--repeats", "2", "--json"]
        report["local"] = ptreg(short)
        mark("local")
        report["remote"] = ptreg([*short, *on_ray])
        mark("remote")

        # The budget: cut mid-cell; the deadline cancels the units and their workers die.
        report["budget"] = ptreg(
            [
                "bench",
                *BENCH,
                "-c",
                "tiny",
                "-c",
                "small",
                "--timed-steps",
                "2000",
                "--repeats",
                "3",
                "--json",
                *on_ray,
                "--seconds",
                "14",
            ]
        )
        report["budget_workers_alive"] = survivors(worker_pids(bench_json(report["budget"])))
        mark("budget")

        # Ctrl-C: once the second round of tiny has begun, so that samples have arrived.
        def interrupt(process: subprocess.Popen[str], line: str) -> None:
            # once a step's sample has reached the driver, however slow the machine
            wait_for_timed_steps(Path(setup["root"]), setup["sigint"], process)
            process.send_signal(signal.SIGINT)

        report["sigint"] = follow(
            ["-r", setup["root"], "run", setup["sigint"], "--executor", "ray", "--address", cluster.address],
            ("tiny rounds on node",),
            interrupt,
        )
        mark("sigint")

        # SIGTERM too: Ray's own handler (exit at once) must not replace ptreg's.
        def terminate(process: subprocess.Popen[str], line: str) -> None:
            time.sleep(2)
            process.send_signal(signal.SIGTERM)

        report["sigterm"] = follow(
            ["bench", *BENCH, "-c", "tiny", "--timed-steps", "2000", "--repeats", "3", "--json", *on_ray],
            ("tiny rounds on node",),
            terminate,
        )
        report["sigint_runs"] = [str(p) for p in sorted((Path(setup["root"]) / "runs" / setup["sigint"]).glob("*"))]
        mark("sigterm")

        # A lost node: kill the raylet of the node that runs small, mid-round.
        lost: dict[str, Any] = {}

        def kill_node(process: subprocess.Popen[str], line: str) -> None:
            node_prefix = line.split("on node ")[1].split(":")[0].strip()
            lost["node_prefix"] = node_prefix
            for name in ("a", "b"):
                if _node_id(cluster, name).startswith(node_prefix):
                    lost["name"] = name
                    os.kill(cluster.raylet_pid(name), signal.SIGKILL)

        # rounds long enough that the kill lands mid-run on a loaded machine: at 3 steps a round,
        # the last four rounds could end before the log line reached this process, and at 10 one
        # run (the suite in two workers) ended whole before the kill was felt; 30 has not
        report["lost"] = follow(
            ["bench", *BENCH, "-c", "tiny", "-c", "small", "--timed-steps", "30", "--repeats", "6", "--json", *on_ray],
            ("small rounds on node", "round 2 "),
            kill_node,
        )
        report["lost_node"] = lost
        report["lost_workers_alive"] = survivors(worker_pids(bench_json(report["lost"])))
        mark("lost")

        # Unlike machines: a node pinned to one core (a real difference of the machine its
        # workers see: usable cores) beside the node left with both.
        cluster.add_node("c", cores="0")
        mark("start node c")
        report["unlike"] = ptreg(
            ["-r", setup["root"], "run", setup["unlike"], "--executor", "ray", "--address", cluster.address]
        )
        mark("unlike")
    except Exception:
        report["error"] = traceback.format_exc()
    finally:
        cluster.stop()
        mark("stop")
        report["left_running"] = cluster.processes()
        report["seconds"] = time.monotonic() - started
        (work / "report.json").write_text(json.dumps(report, indent=1))
    return 0


def _node_id(cluster: Cluster, name: str) -> str:
    """The id of a node, read from ``ray list``-free means: its raylet's command line."""
    from ray_cluster import _cmdline

    text = _cmdline(cluster.raylet_pid(name))
    for part in text.split():
        if part.startswith("--node_id="):
            return part.split("=", 1)[1]
    raise LookupError(f"no node id on the command line of node {name}'s raylet")


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
