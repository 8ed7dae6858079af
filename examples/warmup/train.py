"""Train ptreg's tiny GPT on the warm-up corpus for a fixed number of steps; report held-out loss.

The question (examples/README.md): does a linear learning-rate warm-up lower the held-out
loss after a fixed number of steps? This script is one run of one arm:

    python3 examples/warmup/train.py --warmup-steps N --steps S --seed K [--config small] [--lr LR]

The model, its AdamW and its kernels are ptreg's own (ptreg.engine.workloads.tinygpt), not
a copy. The learning rate of step t (0-based) is lr·(t+1)/N while t < N, then lr; N = 0 is
no warm-up. The seed sets the initial weights and the order of the training batches; the
held-out windows are the same for every seed and arm: consecutive, non-overlapping windows of
the held-out split from its first byte, ``context`` bytes each plus the next byte as target.

Metrics, one JSON object per line, to the file named by $PTREG_METRICS (appended), or to
stdout when it is unset:
    heldout_loss       mean cross-entropy in nats per byte over every held-out target byte
    train_loss         mean training loss of the last 10% of steps (at least one), nats/byte
    tokens_per_second  tokens trained / seconds spent in the training steps (no setup, no eval)

Threads: the script does not set them. NumPy's BLAS uses as many as its environment allows;
set OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (ptreg's command workload passes only a minimal
environment, so the evaluator's command sets them with ``env`` when it wants a fixed count).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from ptreg.engine.workloads.tinygpt import AdamW, ReferenceKernels, TinyGPT
from ptreg.records.configs import CONFIGS

DATA = Path(__file__).resolve().parent / "data"


def write_metrics(values: dict[str, float]) -> None:
    """One JSON line to $PTREG_METRICS, or to stdout when the script runs on its own."""
    line = json.dumps(values) + "\n"
    target = os.environ.get("PTREG_METRICS")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(line)
    else:
        sys.stdout.write(line)


def learning_rate(step: int, lr: float, warmup_steps: int) -> float:
    """Linear from lr/N at step 0 to lr at step N-1, then constant."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    return lr


def heldout_windows(data: np.ndarray, context: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping windows from byte 0: inputs data[i·T : i·T+T], targets shifted by one."""
    count = min((len(data) - 1) // context, limit)
    starts = np.arange(count) * context
    index = starts[:, None] + np.arange(context)
    return data[index].astype(np.int64), data[index + 1].astype(np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description="Train the tiny GPT with or without a learning-rate warm-up.")
    parser.add_argument("--warmup-steps", type=int, required=True, help="steps of linear warm-up (0: none)")
    parser.add_argument("--steps", type=int, required=True, help="training steps in all, warm-up included")
    parser.add_argument("--seed", type=int, required=True, help="initial weights and batch order")
    parser.add_argument("--config", default="small", choices=sorted(CONFIGS), help="model size (ptreg's table)")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--heldout-windows", type=int, default=128, help="at most this many held-out windows")
    parser.add_argument("--data", type=Path, default=DATA, help="folder with train.txt and heldout.txt")
    args = parser.parse_args()
    if args.steps < 1 or not 0 <= args.warmup_steps <= args.steps or args.heldout_windows < 1:
        parser.error("need steps >= 1, 0 <= warmup-steps <= steps and heldout-windows >= 1")

    config = CONFIGS[args.config]
    train = np.frombuffer((args.data / "train.txt").read_bytes(), dtype=np.uint8)
    heldout = np.frombuffer((args.data / "heldout.txt").read_bytes(), dtype=np.uint8)
    B, T = config.batch, config.context

    model = TinyGPT(config, ReferenceKernels(), seed=args.seed)
    optimizer = AdamW(lr=args.lr)
    rng = np.random.default_rng(args.seed + 1_000_003)  # batches: a stream apart from the init's
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(args.steps):
        starts = rng.integers(0, len(train) - T, size=B)  # start + T is still a valid index
        index = starts[:, None] + np.arange(T)
        loss = model.forward(train[index].astype(np.int64), train[index + 1].astype(np.int64))
        grads = model.backward()
        optimizer.lr = learning_rate(step, args.lr, args.warmup_steps)
        optimizer.update(model.params, grads)
        losses.append(loss)
    seconds = time.perf_counter() - started

    inputs, targets = heldout_windows(heldout, T, args.heldout_windows)
    total = 0.0
    for lo in range(0, len(inputs), B):
        # forward() returns the batch mean; weight it by the batch's bytes for the overall mean
        part = model.forward(inputs[lo : lo + B], targets[lo : lo + B])
        total += part * targets[lo : lo + B].size
    heldout_loss = total / targets.size

    tail = losses[-max(1, args.steps // 10) :]
    values = {
        "heldout_loss": heldout_loss,
        "train_loss": sum(tail) / len(tail),
        "tokens_per_second": args.steps * config.tokens_per_step / seconds,
    }
    # A diverged run has no loss to report: the finite values are written, the rest left
    # unknown (JSON has no NaN), and the exit status says the run failed.
    write_metrics({name: value for name, value in values.items() if math.isfinite(value)})
    diverged = sorted(name for name, value in values.items() if not math.isfinite(value))
    if diverged:
        sys.exit(f"train.py: training diverged: {', '.join(diverged)} not finite (lr {args.lr})")


if __name__ == "__main__":
    main()
