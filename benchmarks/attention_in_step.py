"""Attention inside the xl training step: numba's kernels against NumPy's reference, one process.

    python benchmarks/attention_in_step.py              # 1 thread, 6 interleaved rounds
    python benchmarks/attention_in_step.py --threads 2

Alone, an earlier numba attention was faster than NumPy's on one thread; inside the step it was
not (NumPy's attention is about twice as fast inside the step as alone). This runs two trainers of the xl GPT side by side in one process, every op numba's and the matmuls
np.matmul (BLAS) in both, one with numba's attention and one with NumPy's, and times whole steps
and the attention calls in them: rounds of two steps each, alternating which trainer goes first.
Figures are medians over every timed step.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()

    import numba
    from threadpoolctl import threadpool_limits

    from ptreg.engine.workloads import layers
    from ptreg.engine.workloads.tinygpt import ReferenceKernels, Trainer
    from ptreg.records.configs import CONFIGS
    from ptreg_backends.numba_step import NumbaStepOps

    limiter = threadpool_limits(limits=args.threads)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))

    class Ops(NumbaStepOps, ReferenceKernels):
        pass

    class OpsButAttention(Ops):
        attention_forward = staticmethod(layers.attention_forward)
        attention_backward = staticmethod(layers.attention_backward)

    trainers: dict[str, tuple[Any, dict[str, float]]] = {}
    for name, kind in (("numba's attention", Ops), ("NumPy's attention", OpsButAttention)):
        ops = kind()
        ops.load_ops()
        ops.warm_up_ops()
        ops.threads = args.threads
        trainer = Trainer(CONFIGS["xl"], ops, seed=0)
        spent = {"attention_forward": 0.0, "attention_backward": 0.0}
        for method in spent:
            inner = getattr(trainer.model.ops, method)

            def timed(*call: Any, inner: Any = inner, spent: dict[str, float] = spent, method: str = method) -> Any:
                start = time.perf_counter()
                try:
                    return inner(*call)
                finally:
                    spent[method] += time.perf_counter() - start

            setattr(trainer.model.ops, method, timed)
        trainer.step()  # first step untimed: allocations, pools
        trainers[name] = (trainer, spent)
    steps: dict[str, list[float]] = {name: [] for name in trainers}
    forward: dict[str, list[float]] = {name: [] for name in trainers}
    backward: dict[str, list[float]] = {name: [] for name in trainers}
    for r in range(args.rounds):
        order = list(trainers) if r % 2 == 0 else list(reversed(trainers))
        for name in order:
            trainer, spent = trainers[name]
            for _ in range(2):
                spent.update(attention_forward=0.0, attention_backward=0.0)
                start = time.perf_counter()
                trainer.step()
                steps[name].append(time.perf_counter() - start)
                forward[name].append(spent["attention_forward"])
                backward[name].append(spent["attention_backward"])
    for name in trainers:
        print(
            f"{name}: step {statistics.median(steps[name]) * 1e3:.1f} ms, attention forward "
            f"{statistics.median(forward[name]) * 1e3:.1f} and backward {statistics.median(backward[name]) * 1e3:.1f} ms "
            f"(medians of {len(steps[name])} steps)"
        )
    del limiter
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
