"""The largest error each of numba's ops shows against the NumPy reference, over many inputs.

    python benchmarks/op_tolerances.py              # seeds 0-11, every config and the odd shape
    python benchmarks/op_tolerances.py --seeds 30

The parity gate's own check (``ptreg/engine/op_parity.py``) with every tolerance opened up, so
that it reports the error instead of failing, on one thread (serial kernels) and two (parallel
kernels for every size): what each op's declared tolerance in
``NumbaStepOps.op_tolerances`` is chosen from (about twice the worst, one significant digit).
"""

from __future__ import annotations

import argparse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=12)
    args = parser.parse_args()

    import numba

    from ptreg.engine import op_parity
    from ptreg.records.configs import CONFIGS
    from ptreg_backends.numba_step import NumbaStepOps

    ops = NumbaStepOps()
    ops.load_ops()
    declared = dict(NumbaStepOps.op_tolerances)
    # measured, not gated: 0.5 lets every finite error through; 0.0 ops stay held to the bits
    ops.op_tolerances = {op: 0.0 if tolerance == 0.0 else 0.5 for op, tolerance in declared.items()}
    worst: dict[str, float] = dict.fromkeys(declared, 0.0)
    failures = 0
    for threads in (1, 2):
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        ops.threads, ops.parallel_min = threads, 0 if threads > 1 else 1 << 62
        for seed in range(args.seeds):
            for check in op_parity.check_ops(ops, list(CONFIGS), seed=seed):
                if not check.passed:
                    failures += 1
                    print(f"FAILED {check.op} at {check.shape}, seed {seed}, {threads} threads: {check.detail}")
                if check.max_relative_error is not None:
                    worst[check.op] = max(worst[check.op], check.max_relative_error)
    print(f"{'op':<13} {'worst seen':>12} {'declared':>10}")
    for op, error in worst.items():
        print(f"{op:<13} {error:>12.3g} {declared[op]:>10g}")
    return 1 if failures or any(error > declared[op] for op, error in worst.items()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
