"""`--executor ray` on a real Ray cluster of this machine, held to loopback.

One cluster serves the whole module: ``ray_scenarios.py`` runs inside a network namespace that
holds only a loopback interface (``unshare -n``), starts a head and two worker nodes (a third
later, pinned to one core), drives ``ptreg run`` and ``ptreg bench`` against it, stops it, and
reports what it saw; the tests below judge the report. Without Ray the tests skip; without a
namespace they skip too, except in CI (``CI`` or ``PTREG_REQUIRE_SHARED`` set), where they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import (
    SCHEMAS,
    assert_one_line_error,
    complete_record,
    freeze_evaluator,
    propose_for_run,
    snapshot,
    write_registry,
)

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from ray_cluster import Cluster, namespace_command, namespace_problem  # noqa: E402

from ptreg.engine.plan import round_order  # noqa: E402

TWO_CONFIGS = {
    "workload": "tinygpt-train",
    "metric": "ms-per-step",
    "configs": ["tiny", "small"],
    "backends": ["naive", "numpy-blas"],
    "baseline": "naive",
    "warmup_steps": 0,
    "timed_steps": 1,
    "repeats": 2,
    "threads": 1,
    "tolerance": {"rtol": 1e-4, "atol": 1e-6},
    "max_relative_spread": 10.0,
}
LONG_TINY = {**TWO_CONFIGS, "configs": ["tiny"], "timed_steps": 2000, "repeats": 3}
COMMAND = {
    "name": "ray-command",
    "workload": "command",
    "command": [sys.executable, "arm.py", "{value}"],
    "arms": {"low": {"value": "0.25"}, "high": {"value": "0.75"}},
    "baseline": "low",
    "metrics": {"score": {"better": "higher", "unit": "fraction"}},
    "repeats": 2,
    "seed": 0,
    "timeout_seconds": 60,
}


def _required() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("PTREG_REQUIRE_SHARED"))


@pytest.fixture(scope="module")
def report() -> Iterator[dict[str, Any]]:
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (pip install '.[test,numba,ray]')")
    problem = namespace_problem()
    if problem is not None:
        if _required():
            pytest.fail(f"CI requires the Ray tests, but {problem}", pytrace=False)
        pytest.skip(problem)
    # short, whatever pytest's own temporary folders are (xdist adds a level): a socket's path in
    # Ray's session folder has at most 107 bytes
    work = Path(tempfile.mkdtemp(prefix="ptreg-ray-"))
    try:
        yield _report(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _report(work: Path) -> dict[str, Any]:
    root = write_registry(work / "reg", [complete_record("seed-record")])
    attempts = {"spread": "ray-spread", "sigint": "ray-sigint", "unlike": "ray-unlike"}
    specs = {"spread": TWO_CONFIGS, "sigint": LONG_TINY, "unlike": TWO_CONFIGS}
    for number, (key, attempt_id) in enumerate(attempts.items()):
        ref = freeze_evaluator(root, name=f"ray-{key}", **specs[key])
        propose_for_run(root, ref, attempt_id, f"#{90 + number}")
    # a command evaluator, frozen (and so consented to) in a configuration of the module's own
    config = work / "config"
    (work / "arm.py").write_text(
        "import json, os, sys\n"
        "open(os.environ['PTREG_METRICS'], 'w').write(json.dumps({'score': float(sys.argv[1])}) + '\\n')\n"
    )
    (work / "command.json").write_text(json.dumps(COMMAND))
    saved = os.environ.get("PTREG_CONFIG_HOME")
    os.environ["PTREG_CONFIG_HOME"] = str(config)
    try:
        from ptreg.gate.freezing import freeze

        command_ref = freeze(root, work / "command.json").evaluator.ref
    finally:
        if saved is None:
            os.environ.pop("PTREG_CONFIG_HOME")
        else:
            os.environ["PTREG_CONFIG_HOME"] = saved
    propose_for_run(root, command_ref, "ray-command", "#99")
    attempts["command"] = "ray-command"
    (work / "setup.json").write_text(json.dumps({"root": str(root), **attempts}))
    env = {k: v for k, v in os.environ.items() if k not in ("PTREG_CRASH_AT", "PTREG_LOCK_TIMEOUT", "RAY_ADDRESS")}
    env["PTREG_CONFIG_HOME"] = str(config)
    done = subprocess.run(
        namespace_command([sys.executable, str(HERE / "ray_scenarios.py"), str(work)]),
        capture_output=True,
        text=True,
        env=env,
        cwd=HERE,
        timeout=600,
    )
    found_file = work / "report.json"
    assert found_file.exists(), done.stderr[-3000:]
    found: dict[str, Any] = json.loads(found_file.read_text())
    assert "error" not in found, found["error"]
    found["root"] = root
    found["attempts"] = attempts
    return found


def _results(root: Path, attempt_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    folders = sorted((root / "runs" / attempt_id).iterdir())
    assert len(folders) == 1, folders
    return (
        json.loads((folders[0] / "results.json").read_text()),
        json.loads((folders[0] / "environment.json").read_text()),
    )


def _nodes_by_config(results: dict[str, Any]) -> dict[str, set[str]]:
    nodes: dict[str, set[str]] = {}
    for cell in results["cells"]:
        nodes.setdefault(cell["config"], set()).add(cell["worker"]["node"]["id"])
    return nodes


def _bench(result: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(result["out"])
    return found


def test_every_socket_the_cluster_listens_on_is_loopback(report: dict[str, Any]) -> None:
    assert report["listening"], "no listening socket seen: the cluster did not start"
    assert report["all_loopback"], report["listening"]


def test_each_node_s_dashboard_agent_serves_on_a_port_of_its_own(report: dict[str, Any]) -> None:
    # on Ray's one default port only the head's agent could bind; the others' waited and gave up
    ports = report["agent_ports"]
    assert len(ports) == 3, ports  # the head, a and b
    assert all(port > 0 for port in ports.values()) and len(set(ports.values())) == 3, ports


def test_a_cluster_without_a_benchmark_node_is_refused_in_one_line(report: dict[str, Any]) -> None:
    found = report["no_bench_node"]
    assert found["code"] == 2, found
    lines = found["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ptreg: error: ") and "ptreg_bench" in lines[0], found["err"]


def test_a_run_spreads_its_configs_over_the_nodes_and_only_the_driver_writes(report: dict[str, Any]) -> None:
    import jsonschema

    assert report["run"]["code"] == 0, report["run"]["err"][-2000:]
    results, environment = _results(report["root"], report["attempts"]["spread"])
    schema = json.loads((SCHEMAS / "run-results.schema.json").read_text())
    jsonschema.validate(results, schema)
    assert results["status"] == "complete"
    assert {c["status"] for c in results["cells"]} == {"measured"}
    nodes = _nodes_by_config(results)
    # each config's rounds on one node, the two configs on two nodes at once
    assert all(len(ids) == 1 for ids in nodes.values()), nodes
    assert nodes["tiny"] != nodes["small"]
    assert all(c["vs_naive_ratio"] is not None for c in results["cells"] if c["backend"] == "numpy-blas")
    # environment.json: the driver's, plus one entry per machine (here one, with both nodes)
    assert environment["executor"]["kind"] == "ray"
    assert environment["git"] is not None
    assert len(environment["machines"]) == 1
    assert {n["id"] for n in environment["machines"][0]["nodes"]} == nodes["tiny"] | nodes["small"]
    record = json.loads((report["root"] / f"{report['attempts']['spread']}.json").read_text())
    assert [r["run_id"] for r in record["runs"]] == [results["run_id"]]
    assert "every config ran on like machines" in report["run"]["out"]


def test_a_command_run_goes_to_a_node_like_a_config(report: dict[str, Any]) -> None:
    assert report["command"]["code"] == 0, report["command"]["err"][-2000:]
    results, environment = _results(report["root"], report["attempts"]["command"])
    assert results["status"] == "complete" and environment["executor"]["kind"] == "ray"
    cells = {c["backend"]: c for c in results["cells"]}
    assert all("node" in c["worker"] for c in cells.values())
    assert cells["high"]["versus"]["low"]["score"]["estimate"] == 0.5


def test_remote_results_have_the_shape_of_local_ones(report: dict[str, Any]) -> None:
    local, remote = _bench(report["local"]), _bench(report["remote"])
    assert report["local"]["code"] == 0 and report["remote"]["code"] == 0, report["remote"]["err"][-2000:]
    assert set(local) == set(remote)
    assert [(c["config"], c["backend"], c["status"]) for c in local["cells"]] == [
        (c["config"], c["backend"], c["status"]) for c in remote["cells"]
    ]
    for mine, theirs in zip(local["cells"], remote["cells"], strict=True):
        assert {k for k, v in mine.items() if v is not None} == {k for k, v in theirs.items() if v is not None}
        assert set(theirs["worker"]) == set(mine["worker"]) | {"node"}
        assert len(theirs["step_samples"]) == len(mine["step_samples"])
    for found in (local, remote):  # each run draws its own order seed, and records it
        [taken] = found["rounds"][:1]
        names = [c["backend"] for c in found["cells"] if c["config"] == taken["config"]]
        assert taken["orders"] == [
            round_order(taken["order_seed"], taken["config"], r, names) for r in range(len(taken["orders"]))
        ]


def test_the_budget_cancels_the_units_kills_their_workers_and_keeps_the_samples(report: dict[str, Any]) -> None:
    found = report["budget"]
    assert found["code"] == 1, found["err"][-2000:]
    results = _bench(found)
    assert results["status"] == "budget-exhausted"
    assert not [c for c in results["cells"] if c["status"] == "measured"]
    assert {c["status"] for c in results["cells"]} == {"budget-exhausted"}
    # each config's first repeat was under way on its node: its steps so far are kept (the
    # backend after it in the round had not begun)
    for config in ("tiny", "small"):
        assert any(c["step_samples"] for c in results["cells"] if c["config"] == config), config
    assert report["budget_workers_alive"] == []


def test_ctrl_c_writes_an_interrupted_run_with_the_samples_that_arrived(report: dict[str, Any]) -> None:
    found = report["sigint"]
    assert found["matched"], found["err"][-2000:]
    assert found["code"] == 130, found["err"][-2000:]
    assert "Traceback" not in found["err"]
    results, _ = _results(report["root"], report["attempts"]["sigint"])
    assert results["status"] == "interrupted" and "SIGINT" in results["reason"]
    assert {c["status"] for c in results["cells"]} == {"interrupted"}
    assert any(c["step_samples"] for c in results["cells"])
    record = json.loads((report["root"] / f"{report['attempts']['sigint']}.json").read_text())
    assert [r["status"] for r in record["runs"]] == ["interrupted"]


def test_sigterm_stops_a_ray_run_as_it_stops_a_local_one(report: dict[str, Any]) -> None:
    found = report["sigterm"]
    assert found["matched"], found["err"][-2000:]
    assert found["code"] == 143, found["err"][-2000:]
    results = _bench(found)
    assert results["status"] == "interrupted" and "SIGTERM" in results["reason"]
    assert {c["status"] for c in results["cells"]} == {"interrupted"}


def test_a_lost_node_fails_only_its_own_cells_and_keeps_their_samples(report: dict[str, Any]) -> None:
    found = report["lost"]
    assert found["matched"] and report["lost_node"].get("name"), found["err"][-2000:]
    assert found["code"] == 1, found["err"][-2000:]
    results = _bench(found)
    assert results["status"] == "failed"
    by_config = {(c["config"], c["backend"]): c for c in results["cells"]}
    for backend in ("naive", "numpy-blas"):
        assert by_config[("tiny", backend)]["status"] == "measured"
        lost = by_config[("small", backend)]
        assert lost["status"] == "failed" and "lost" in lost["reason"], lost["reason"]
        assert lost["worker"]["node"]["id"].startswith(report["lost_node"]["node_prefix"])
        # round 2 had begun, so round 1's samples had arrived and are kept
        assert {s["repeat"] for s in lost["step_samples"]} >= {0}
    assert report["lost_workers_alive"] == []


def test_unlike_machines_are_named_and_no_ratio_crosses_them(report: dict[str, Any]) -> None:
    assert report["unlike"]["code"] == 0, report["unlike"]["err"][-2000:]
    results, environment = _results(report["root"], report["attempts"]["unlike"])
    machines = environment["machines"]
    assert len(machines) == 2
    assert len({m["fingerprint"] for m in machines}) == 2
    assert sorted(m["environment"]["cpu"]["usable_cores"] for m in machines) == [1, 2]
    for config in ("tiny", "small"):
        cells = [c for c in results["cells"] if c["config"] == config]
        # the ratio's two sides come from one node, so from one machine
        assert len({c["worker"]["node"]["fingerprint"] for c in cells}) == 1
        assert all(c["vs_naive_ratio"] is not None for c in cells if c["backend"] == "numpy-blas")
    assert len({c["worker"]["node"]["fingerprint"] for c in results["cells"]}) == 2
    assert "unlike" in report["unlike"]["out"]
    shown = subprocess.run(
        [sys.executable, "-m", "ptreg", "-r", str(report["root"]), "show", report["attempts"]["unlike"]],
        capture_output=True,
        text=True,
    )
    assert "Measured on a Ray cluster, 2 machine(s)" in shown.stdout, shown.stdout[-3000:] + shown.stderr


def test_no_ray_process_is_left_running(report: dict[str, Any]) -> None:
    assert report["left_running"] == []
    raylets = subprocess.run(["pgrep", "-f", str(report["root"].parent / ".ray")], capture_output=True, text=True)
    assert raylets.stdout.strip() == ""


# ------------------------------------------------------------------ no cluster needed


def test_a_cluster_is_only_the_processes_of_its_own_network_namespace(tmp_path: Path) -> None:
    # another session's cluster, in a namespace of its own, has the same address: its processes
    # are not this one's to end
    problem = namespace_problem()
    if problem is not None:
        pytest.skip(problem)
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", Cluster(tmp_path).address])
    try:
        listing = (
            "import json, sys; from pathlib import Path; from ray_cluster import Cluster; "
            "print(json.dumps(Cluster(Path(sys.argv[1])).processes()))"
        )
        inside = subprocess.run(
            namespace_command([sys.executable, "-c", listing, str(tmp_path)]),
            capture_output=True,
            text=True,
            cwd=HERE,
            timeout=60,
        )
        assert inside.returncode == 0, inside.stderr
        assert decoy.pid not in json.loads(inside.stdout)
        assert decoy.pid in Cluster(tmp_path).processes()  # where the decoy lives, it is found
    finally:
        decoy.kill()
        decoy.wait()


def test_address_without_the_ray_executor_is_refused(cli: Any, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    result = cli("bench", "-b", "naive", "--address", "127.0.0.1:6379")
    assert_one_line_error(result, 2, "--address")
    assert snapshot(tmp_path) == before


def test_an_address_where_nothing_listens_is_refused_at_once(cli: Any, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    import socket

    with socket.socket() as placeholder:  # a loopback port that is free: nothing listens there
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    result = cli("bench", "-b", "naive", "--executor", "ray", "--address", f"127.0.0.1:{port}")
    assert_one_line_error(result, 2, f"--address 127.0.0.1:{port}", "nothing answers")


def test_a_cluster_run_is_compared_by_the_machine_its_cells_ran_on() -> None:
    from ptreg.engine.environment import measuring_environment

    driver = {"cpu": {"model": "driver CPU"}}
    node = {"cpu": {"model": "node CPU"}}
    assert measuring_environment(driver) == driver
    one = {**driver, "machines": [{"fingerprint": "a", "nodes": [], "environment": node}]}
    assert measuring_environment(one) == node
    two = {**one, "machines": [*one["machines"], {"fingerprint": "b", "nodes": [], "environment": driver}]}
    assert measuring_environment(two) is None
    assert measuring_environment(None) is None


def test_an_unknown_executor_is_refused(cli: Any) -> None:
    assert_one_line_error(cli("bench", "-b", "naive", "--executor", "slurm"), 2, "--executor", "slurm")


def test_what_ray_prints_goes_to_stderr_until_the_executor_leaves_the_cluster(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ray's thread prints a node it marked dead on stdout at any moment, between two units too;
    # stdout is the results (--json)
    ray = pytest.importorskip("ray")
    from ptreg.engine import ray_executor

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **_: None)
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": {"ptreg_bench": 1, "CPU": 1}}])
    monkeypatch.setattr(ray, "shutdown", lambda: print("(raylet) leaving"))
    monkeypatch.setattr(ray_executor, "_reachable", lambda _: None)
    executor = ray_executor.RayExecutor(address="127.0.0.1:6399")
    executor.start()
    print("(raylet) The node with node id: 0123 has been marked dead")
    executor.close()
    print('{"status": "failed"}')
    out, err = capsys.readouterr()
    assert out == '{"status": "failed"}\n'
    assert "marked dead" in err and "leaving" in err
