"""Each fused op of the numba backend against the two ops it stands for, as numba's step runs them
apart, at xl shapes.

    python benchmarks/fused_ops.py                 # 1 thread, 15 interleaved rounds
    python benchmarks/fused_ops.py --threads 2 --rounds 25

Apart is what the step does without the fused op: numba's own op where the backend provides it
(layernorm, GELU) and NumPy's where it does not (the residual add, the bias). A call is the
forward then the backward on the parity gate's inputs (``ptreg/engine/op_parity.py``);
bias_gelu's call first restores the pre-activation its forward biases in place. In each round,
fused and apart alternate which goes first; the figure is the median over rounds of each
round's median call, and the speedup the median of each round's ratio. Nothing is written: it
prints, with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from ptreg.engine import op_parity
from ptreg.engine.workloads import layers
from ptreg.records.configs import CONFIGS
from ptreg.records.measured import FUSED_OPS
from ptreg_backends.numba_step import NumbaStepOps


class Apart:
    """Each fused op's methods as numba's step runs them without it: the two ops one after the other."""

    def __init__(self, ops: NumbaStepOps):
        self.ops = ops

    def residual_layernorm_forward(self, x: Any, branch: Any, w: Any, b: Any) -> Any:
        stream = layers.residual_add(x, branch)
        out, cache = self.ops.layernorm_forward(stream, w, b)
        return stream, out, cache

    def residual_layernorm_backward(self, dout: Any, cache: Any, dstream: Any) -> Any:
        dx, dw, db = self.ops.layernorm_backward(dout, cache)
        return layers.residual_add(dstream, dx), dw, db

    def bias_gelu_forward(self, out: Any, b: Any) -> Any:
        layers.bias_forward(out, b)
        return self.ops.gelu_forward(out)

    def bias_gelu_backward(self, dout: Any, x: Any, db: Any) -> Any:
        dx = self.ops.gelu_backward(dout, x)
        layers.bias_backward(dx, db)
        return dx


def call_of(op: str, owner: Any, inputs: dict[str, Any]) -> Callable[[], None]:
    """Forward then backward on the parity gate's inputs. bias_gelu's forward biases its input in
    place, so its call first restores it (a copy of one (B·T, 4C) array, in both ways alike)."""
    i = inputs
    if op == "residual_layernorm":

        def call() -> None:
            _, _, cache = owner.residual_layernorm_forward(i["x"], i["branch"], i["w"], i["b"])
            owner.residual_layernorm_backward(i["dout"], cache, i["dstream"])

        return call
    if op == "bias_gelu":
        pre, db = i["out"].copy(), i["db"].copy()

        def call() -> None:
            pre[...] = i["out"]
            owner.bias_gelu_forward(pre, i["b"])
            owner.bias_gelu_backward(i["dout"], pre, db)

        return call
    raise ValueError(f"no fused op {op!r}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10, help="calls per (op, way) in a round")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    fused = NumbaStepOps()
    fused.load_ops()
    fused.threads = numba.get_num_threads()
    apart = Apart(fused)
    xl = CONFIGS["xl"]
    calls = {}
    for op in FUSED_OPS:
        inputs = op_parity.op_inputs(op, xl, np.random.default_rng(len(op)))
        calls[op] = {"fused": call_of(op, fused, inputs), "apart": call_of(op, apart, inputs)}
    for by_way in calls.values():  # compilation, page faults and pools waking are not timed
        for call in by_way.values():
            call()
    seconds: dict[str, dict[str, list[float]]] = {op: {"fused": [], "apart": []} for op in calls}
    for r in range(args.rounds):
        for op, by_way in calls.items():
            for way in ("fused", "apart") if r % 2 == 0 else ("apart", "fused"):
                took = []
                for _ in range(args.calls):
                    start = time.perf_counter()
                    by_way[way]()
                    took.append(time.perf_counter() - start)
                seconds[op][way].append(statistics.median(took))
    print(f"xl, {fused.threads} thread(s), {args.rounds} rounds: ms per call (forward and backward), median (min-max)")
    for op, by_way in seconds.items():
        shown = {
            w: f"{1e3 * statistics.median(s):.3f} ({1e3 * min(s):.3f}-{1e3 * max(s):.3f})" for w, s in by_way.items()
        }
        ratios = [a / f for a, f in zip(by_way["apart"], by_way["fused"], strict=True)]
        speedup = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
        print(f"  {op:<20} fused {shown['fused']:>22}  apart {shown['apart']:>22}  fused's speedup {speedup}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
