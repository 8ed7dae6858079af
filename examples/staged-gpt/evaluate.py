"""Stage ``evaluate`` (each repeat): the held-out loss and next-byte accuracy of a checkpoint,
item by item.

    python3 examples/staged-gpt/evaluate.py examples/staged-gpt/out/a-0 [--windows 400]

Each item is one window of the held-out split (non-overlapping, from its first byte, the
model's context long: 127 of them for the small config): its mean cross-entropy in nats per
byte (``heldout_loss``) and the fraction of its bytes the model predicts exactly, as the most
probable next byte (``accuracy``). The two means over the windows are reported as the repeat's
metrics. Reported through ``ptreg.harness``; run by hand, it prints what it would report.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from checkpoint import heldout_windows, load, read_split

from ptreg.harness import item, report


def main() -> None:
    parser = argparse.ArgumentParser(description="Evaluate a checkpoint on the held-out windows.")
    parser.add_argument("checkpoint", type=Path, help="the checkpoint's folder (train.py --out)")
    parser.add_argument("--windows", type=int, default=400, help="at most this many held-out windows")
    args = parser.parse_args()
    model, _ = load(args.checkpoint)
    config = model.config
    inputs, targets = heldout_windows(read_split("heldout"), config.context, args.windows)
    losses, accuracies = [], []
    for lo in range(0, len(inputs), config.batch):
        batch = targets[lo : lo + config.batch]
        model.forward(inputs[lo : lo + config.batch], batch)
        assert model.cache is not None
        probs = model.cache["probs"].reshape(*batch.shape, -1)  # (windows, T, vocab)
        picked = np.take_along_axis(probs, batch[..., None], axis=-1)[..., 0]
        losses.extend((-np.log(np.maximum(picked, 1e-30))).mean(axis=1).tolist())
        accuracies.extend((probs.argmax(axis=-1) == batch).mean(axis=1).tolist())
    for n, (loss, accuracy) in enumerate(zip(losses, accuracies, strict=True)):
        item(f"w{n:03d}", heldout_loss=loss, accuracy=accuracy)
    report(heldout_loss=sum(losses) / len(losses), accuracy=sum(accuracies) / len(accuracies))


if __name__ == "__main__":
    main()
