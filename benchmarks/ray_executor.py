"""The Ray executor on this machine: against the local executor, and over one and two nodes.

Runs itself inside a network namespace that holds only loopback (``unshare -n``, as root), so
that the cluster it starts sends nothing beyond this machine; the cluster helper is the tests'
(``tests/engine/ray_cluster.py``).

``--agreement``: the same plan measured by the local executor and by a one-node Ray cluster
(the head offers one ``ptreg_bench``), alternating trial by trial: each cell's median with its
95% interval from both, the wall time of the whole measurement, and what Ray adds per unit.

``--overhead``: what going through Ray costs a whole ``ptreg bench`` command, on a plan so small
(naive on tiny: one parity unit, one config unit of one timed step) that the rest is little
more than starting processes: the local executor against a one-node cluster, alternating.

``--scaling``: a sweep with one, then two worker nodes, each pinned to a core of its own
(taskset) and offering one CPU: its wall time, each unit's time on its node, and the wall time
the unit times predict for two nodes (longest-first onto the least-loaded node).

    python benchmarks/ray_executor.py --agreement --trials 3
    python benchmarks/ray_executor.py --overhead --trials 5
    python benchmarks/ray_executor.py --scaling --trials 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "engine"))

from ray_cluster import Cluster, namespace_command  # noqa: E402

from ptreg.engine.environment import cpu_model, usable_cores  # noqa: E402
from ptreg.engine.executor import Executor  # noqa: E402
from ptreg.engine.measurement import measure  # noqa: E402
from ptreg.engine.plan import bench_spec  # noqa: E402
from ptreg.records.evaluator import EvaluatorSpec  # noqa: E402


def spec_of(configs: list[str], args: argparse.Namespace) -> EvaluatorSpec:
    return bench_spec(
        workload="tinygpt-train",
        configs=configs,
        backends=args.backends,
        baseline=None,
        warmup_steps=args.warmup,
        timed_steps=args.steps,
        repeats=args.repeats,
        seed=0,
        threads=1,
    )


def in_namespace() -> bool:
    lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    return [line.split(":")[0].strip() for line in lines] == ["lo"]


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def on_ray(spec: EvaluatorSpec, address: str) -> tuple[float, Any, dict[str, Any]]:
    from ptreg.engine.ray_executor import RayExecutor

    executor = RayExecutor(address=address)
    begun = time.perf_counter()
    found = measure(spec, executor)
    return time.perf_counter() - begun, found, executor.provenance()


def locally(spec: EvaluatorSpec) -> tuple[float, Any]:
    begun = time.perf_counter()
    found = measure(spec, Executor())
    return time.perf_counter() - begun, found


def cell_line(cell: Any) -> str:
    ms = cell.ms_per_step
    if ms is None or ms.ci is None:
        return "unknown"
    return f"{ms.median:,.1f} ({ms.ci.low:,.1f}-{ms.ci.high:,.1f})"


def ratio_line(cell: Any) -> str:
    r = cell.vs_naive_ratio
    if r is None or r.ci is None:
        return "-"
    return f"{r.median:.2f}x ({r.ci.low:.2f}-{r.ci.high:.2f})"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def agreement(args: argparse.Namespace, work: Path) -> None:
    spec = spec_of(["tiny", "small"], args)
    cluster = Cluster(work / "ray", port=6420)
    walls: dict[str, list[float]] = {"local": [], "ray": []}
    extra: list[dict[str, Any]] = []
    try:
        cluster.start_head(bench=True, cpus=1)
        for trial in range(args.trials):
            order = ("local", "ray") if trial % 2 == 0 else ("ray", "local")
            for name in order:
                before = load()
                if name == "local":
                    wall, found = locally(spec)
                else:
                    wall, found, provenance = on_ray(spec, cluster.address)
                    extra.append(provenance["executor"])
                walls[name].append(wall)
                print(f"trial {trial + 1} {name}: {wall:.1f} s, {found.status}, load {before}->{load()}", flush=True)
                for cell in found.cells:
                    print(f"  {cell.config} {cell.backend}: {cell_line(cell)} ms/step, vs naive {ratio_line(cell)}")
    finally:
        cluster.stop()
    units = len(extra[0]["units"])
    print(f"\nwall: local {spread(walls['local'])}, ray {spread(walls['ray'])}")
    difference = statistics.median(walls["ray"]) - statistics.median(walls["local"])
    connect = statistics.median(e["connect_seconds"] for e in extra)
    queued = [u["queued_seconds"] for e in extra for u in e["units"] if u["queued_seconds"] is not None]
    print(f"ray - local: {difference:.1f} s over {units} units; joining the cluster {connect:.1f} s")
    print(f"per unit beyond joining: {(difference - connect) / units:.2f} s")
    print(f"submit to first word from the node: median {statistics.median(queued):.2f} s, max {max(queued):.2f} s")
    print(json.dumps(extra, indent=1))


def overhead(args: argparse.Namespace, work: Path) -> None:
    cluster = Cluster(work / "ray", port=6430)
    command = [sys.executable, "-m", "ptreg", "bench", "-b", "naive", "-c", "tiny", "--warmup-steps", "0"]
    command += ["--timed-steps", "1", "--repeats", "1"]
    walls: dict[str, list[float]] = {"local": [], "ray": []}
    try:
        cluster.start_head(bench=True, cpus=1)
        for trial in range(args.trials):
            for name in ("local", "ray") if trial % 2 == 0 else ("ray", "local"):
                extra = ["--executor", "ray", "--address", cluster.address] if name == "ray" else []
                begun = time.perf_counter()
                subprocess.run([*command, *extra], check=True, capture_output=True)
                walls[name].append(time.perf_counter() - begun)
                print(f"trial {trial + 1} {name}: {walls[name][-1]:.2f} s, load {load()}", flush=True)
    finally:
        cluster.stop()
    begun = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import ray"], check=True)
    imported = time.perf_counter() - begun
    difference = statistics.median(walls["ray"]) - statistics.median(walls["local"])
    print(f"\nwall: local {spread(walls['local'])}, ray {spread(walls['ray'])}")
    print(f"ray - local: {difference:.2f} s for 2 units (a python -c 'import ray' takes {imported:.2f} s)")


def predicted(unit_seconds: list[float], nodes: int) -> float:
    """Longest unit first, each onto the node that frees first: the makespan of the units."""
    loads = [0.0] * nodes
    for seconds in sorted(unit_seconds, reverse=True):
        loads[loads.index(min(loads))] += seconds
    return max(loads)


def scaling(args: argparse.Namespace, work: Path) -> None:
    spec = spec_of(["tiny", "small", "medium"], args)
    cluster = Cluster(work / "ray", port=6440)
    counts = sorted(set(args.nodes))
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
    try:
        cluster.start_head(bench=False, cpus=0)
        for nodes in counts:
            while len(cluster.nodes) - 1 < nodes:  # the head is not a benchmark node
                cluster.add_node(f"node{len(cluster.nodes)}", cores=str(len(cluster.nodes) - 1))
            for trial in range(args.trials):
                before = load()
                wall, found, provenance = on_ray(spec, cluster.address)
                units = provenance["executor"]["units"]
                runs[nodes].append({"wall": wall, "units": units, "connect": provenance["executor"]["connect_seconds"]})
                print(f"{nodes} node(s), trial {trial + 1}: {wall:.1f} s, {found.status}, load {before}->{load()}")
                for unit in units:
                    print(
                        f"  {unit['unit']}: {unit['seconds']:.1f} s on {str(unit['node'])[:8]}, queued {unit['queued_seconds']:.1f} s"
                    )
    finally:
        cluster.stop()
    for nodes in counts:
        walls = [r["wall"] for r in runs[nodes]]
        print(f"\n{nodes} node(s): wall {spread(walls)}")
    for run in runs.get(1, []):
        parity = [u["seconds"] for u in run["units"] if u["unit"].startswith("parity")]
        configs = [u["seconds"] for u in run["units"] if not u["unit"].startswith("parity")]
        one = run["connect"] + sum(parity) + sum(configs)
        two = run["connect"] + predicted(parity, 2) + predicted(configs, 2)
        print(
            f"from a 1-node run's units: sum {one:.1f} s (its wall {run['wall']:.1f} s), "
            f"predicted on 2 nodes {two:.1f} s, bounds: longest unit {max(configs):.1f} s, "
            f"half the work {sum(configs) / 2:.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agreement", action="store_true")
    parser.add_argument("--overhead", action="store_true")
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2], help="--scaling: node counts, in turn")
    parser.add_argument("--backends", nargs="+", default=["naive", "numpy-blas"])
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not in_namespace():
        done = subprocess.run(namespace_command([sys.executable, *sys.argv]), env=os.environ)
        sys.exit(done.returncode)
    print(f"machine: {cpu_model()}, {usable_cores()} usable cores; load at start {load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ptreg-ray-") as work:
        if args.agreement:
            agreement(args, Path(work))
        if args.overhead:
            overhead(args, Path(work))
        if args.scaling:
            scaling(args, Path(work))


if __name__ == "__main__":
    main()
