"""Each of the step's ops alone, the NumPy reference against the numba backend's, at xl shapes.

    python benchmarks/step_ops.py                       # 1 and 2 threads, 7 interleaved rounds
    python benchmarks/step_ops.py --rounds 9 --threads 2 --json out.json

An op's call is its forward then its backward (as the parity gate runs it, on the inputs it
builds: ``ptreg/engine/op_parity.py``) at the xl configuration's shapes; AdamW's is one update
of every xl parameter tensor, as the optimizer makes it each step. Each thread count runs in a
fresh process, BLAS limited to it for both (the reference's attention products are BLAS's) and
numba set to it. In each round every (op, implementation) is timed as the median of ``--calls``
calls, in an order that alternates between rounds, so drift lands on both alike; the figure is
the median over rounds, with the min-max, and the speedup is the median of each round's ratio.
Results go to ``benchmarks/results/step_ops_xl_<machine>.json`` unless ``--json`` says where.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ptreg.engine.environment import blas_pools, cpu_model, usable_cores, worker_variables
from ptreg.store.jsonio import atomic_write_text

OPS = (
    "encoder",
    "layernorm",
    "attention",
    "gelu",
    "residual",
    "residual_layernorm",
    "bias",
    "bias_gelu",
    "crossentropy",
    "adamw",
)
IMPLEMENTATIONS = ("numpy", "numba")


def _adamw_call(owner: Any, params: dict[str, Any], grads: dict[str, Any], m: dict[str, Any], v: dict[str, Any]) -> Any:
    def call() -> None:
        for name, param in params.items():
            owner.adamw_update(param, grads[name], m[name], v[name], 3e-4, 0.9, 0.999, 1e-8, 0.0, 0.1, 0.001)

    return call


def child(threads: int, rounds: int, calls: int, ops: list[str]) -> dict[str, Any]:
    """In the fresh process: per op and implementation, the median seconds of a call in each round."""
    import numba
    import numpy as np
    from threadpoolctl import threadpool_limits

    from ptreg.engine import op_parity
    from ptreg.engine.workloads import layers
    from ptreg.engine.workloads.tinygpt import parameter_shapes
    from ptreg.records.configs import CONFIGS
    from ptreg_backends.numba_step import NumbaStepOps

    limiter = threadpool_limits(limits=threads)
    # every op's methods, those the backend does not provide too (and not its matmuls)
    numba_ops = NumbaStepOps()
    numba_ops.load_ops()
    numba_ops.warm_up_ops()
    used = min(threads, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(used)
    numba_ops.threads = used
    owners = {"numpy": layers, "numba": numba_ops}
    xl = CONFIGS["xl"]
    rng = np.random.default_rng(0)
    runs: dict[tuple[str, str], Any] = {}
    for op in ops:
        for impl, owner in owners.items():
            if op == "adamw":
                shapes = parameter_shapes(xl)
                params = {k: rng.standard_normal(s, dtype=np.float32) * 0.02 for k, s in shapes.items()}
                grads = {k: rng.standard_normal(s, dtype=np.float32) for k, s in shapes.items()}
                m = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
                v = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
                runs[op, impl] = _adamw_call(owner, params, grads, m, v)
            else:
                inputs = op_parity.op_inputs(op, xl, np.random.default_rng(len(op)))
                run = op_parity.RUNS[op]
                runs[op, impl] = lambda run=run, owner=owner, inputs=inputs: run(owner, inputs)
    for call in runs.values():  # first calls (page faults, pools waking) are not timed
        call()
    seconds: dict[str, dict[str, list[float]]] = {op: {impl: [] for impl in IMPLEMENTATIONS} for op in ops}
    for r in range(rounds):
        order = IMPLEMENTATIONS if r % 2 == 0 else tuple(reversed(IMPLEMENTATIONS))
        for op in ops:
            for impl in order:
                call = runs[op, impl]
                took = []
                for _ in range(calls):
                    start = time.perf_counter()
                    call()
                    took.append(time.perf_counter() - start)
                seconds[op][impl].append(statistics.median(took))
    del limiter
    return {"threads": threads, "numba_threads": used, "seconds": seconds}


def summary(found: dict[str, Any]) -> dict[str, Any]:
    ops = {}
    for op, by_impl in found["seconds"].items():
        ratios = [a / b for a, b in zip(by_impl["numpy"], by_impl["numba"], strict=True)]
        ops[op] = {
            **{
                impl: {
                    "median_ms": statistics.median(s) * 1e3,
                    "min_ms": min(s) * 1e3,
                    "max_ms": max(s) * 1e3,
                }
                for impl, s in by_impl.items()
            },
            "speedup_median": statistics.median(ratios),
            "speedup_min": min(ratios),
            "speedup_max": max(ratios),
        }
    return {"threads": found["threads"], "numba_threads": found["numba_threads"], "ops": ops}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=10, help="calls per (op, implementation) in a round")
    parser.add_argument("--threads", type=int, action="append", help="repeatable; default 1 and 2")
    parser.add_argument("--op", action="append", choices=OPS, help="repeatable; default every op")
    parser.add_argument("--json", type=Path, help="where to write the results")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    ops = args.op or list(OPS)
    if args.child is not None:
        print(json.dumps(child(args.child, args.rounds, args.calls, ops)))
        return 0
    results = []
    for threads in args.threads or [1, 2]:
        command = [sys.executable, __file__, "--child", str(threads), "--rounds", str(args.rounds)]
        command += ["--calls", str(args.calls), *(f"--op={op}" for op in ops)]
        # the variables every ptreg worker starts with (the thread rule), before NumPy loads
        environ = {**os.environ, **worker_variables()}
        done = subprocess.run(command, capture_output=True, text=True, check=True, env=environ)
        result = summary(json.loads(done.stdout.strip().splitlines()[-1]))
        results.append(result)
        print(f"threads {threads} (numba {result['numba_threads']}): ms per call, median over rounds (min-max)")
        print(f"  {'op':<13} {'numpy':>22} {'numba':>22} {'speedup':>18}")
        for op, row in result["ops"].items():
            cells = [
                f"{row[i]['median_ms']:.3f} ({row[i]['min_ms']:.3f}-{row[i]['max_ms']:.3f})" for i in IMPLEMENTATIONS
            ]
            ratio = f"{row['speedup_median']:.2f}x ({row['speedup_min']:.2f}-{row['speedup_max']:.2f})"
            print(f"  {op:<13} {cells[0]:>22} {cells[1]:>22} {ratio:>18}")
    path = args.json or Path(__file__).parent / "results" / f"step_ops_xl_{_machine_name()}.json"
    document = {
        "benchmark": "step_ops",
        "command": " ".join(["python", "benchmarks/step_ops.py", *sys.argv[1:]]),
        "settings": {"rounds": args.rounds, "calls": args.calls, "ops": ops, "config": "xl"},
        "machine": {"cpu": cpu_model(), "usable_cores": usable_cores(), "blas": blas_pools()},
        "worker_variables": worker_variables(),
        "load_average_at_end": os.getloadavg(),
        "results": results,
    }
    atomic_write_text(path, json.dumps(document, indent=2, default=str) + "\n")
    print(f"wrote {path}")
    return 0


def _machine_name() -> str:
    """A short name of this CPU for the file name: its model name's first words, lower case."""
    words = [w.lower() for w in (cpu_model() or platform.machine() or "unknown").split()[:3] if w.isalnum()]
    return "-".join(words) or "unknown"


if __name__ == "__main__":
    sys.exit(main())
