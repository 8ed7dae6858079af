"""Stage ``train`` (once per arm and seed): train ptreg's tiny GPT on the frozen text and save
a checkpoint.

    python3 examples/staged-gpt/train.py --lr 1e-3 --seed 0 --out examples/staged-gpt/out/a-0 [--steps 300]

The model, AdamW and kernels are ptreg's own (``ptreg.engine.workloads.tinygpt``). The seed
sets the initial weights and the order of the training batches. It reports, through
``ptreg.harness``, the mean training loss of the last 10% of steps (``train_loss``, nats per
byte); run by hand, it prints what it would report.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from checkpoint import read_split, save

from ptreg.engine.workloads.tinygpt import AdamW, ReferenceKernels, TinyGPT
from ptreg.harness import report
from ptreg.records.configs import CONFIGS


def main() -> None:
    parser = argparse.ArgumentParser(description="Train the tiny GPT and save a checkpoint.")
    parser.add_argument("--lr", type=float, required=True, help="learning rate (constant)")
    parser.add_argument("--seed", type=int, required=True, help="initial weights and batch order")
    parser.add_argument("--out", type=Path, required=True, help="the checkpoint's folder")
    parser.add_argument("--steps", type=int, default=300, help="training steps")
    parser.add_argument("--config", default="small", choices=sorted(CONFIGS), help="model size (ptreg's table)")
    args = parser.parse_args()
    if args.steps < 1 or not args.lr > 0:
        parser.error("need steps >= 1 and lr > 0")

    config = CONFIGS[args.config]
    train = read_split("train")
    B, T = config.batch, config.context
    model = TinyGPT(config, ReferenceKernels(), seed=args.seed)
    optimizer = AdamW(lr=args.lr)
    rng = np.random.default_rng(args.seed + 1_000_003)  # batches: a stream apart from the init's
    losses = []
    for _ in range(args.steps):
        starts = rng.integers(0, len(train) - T, size=B)
        index = starts[:, None] + np.arange(T)
        losses.append(model.forward(train[index].astype(np.int64), train[index + 1].astype(np.int64)))
        optimizer.update(model.params, model.backward())
    tail = losses[-max(1, args.steps // 10) :]
    train_loss = sum(tail) / len(tail)
    if not math.isfinite(train_loss):
        sys.exit(f"train.py: training diverged at lr {args.lr}: its loss is not finite")  # no checkpoint saved
    meta = {"config": config.name, "lr": args.lr, "steps": args.steps, "seed": args.seed, "train_loss": train_loss}
    save(args.out, model, meta)
    report(train_loss=train_loss)


if __name__ == "__main__":
    main()
