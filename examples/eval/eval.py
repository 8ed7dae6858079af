"""Evaluate a character n-gram language model on the frozen cloze items; one run of one arm.

    python3 examples/eval/eval.py --model {bigram|trigram} --seed K

The models are real and small: byte-level n-gram language models with interpolated
Witten-Bell smoothing down to a uniform distribution over the 256 bytes, the baseline of
order 2 (bigram) and the candidate of order 3 (trigram), the same smoother for both. Each is
trained on half the sentences of the warm-up corpus's train split (examples/warmup/data/
train.txt), the half drawn by the seed; both arms of a round get the same seed, so the same
half. An item is answered by likelihood: each option is put into the blank, the whole line is
scored (from a newline, through the line's own closing newline), and the most likely option
is the answer; ties go to an option drawn by the seed.

Output, one JSON object per line:
    $PTREG_ITEMS (appended; skipped when unset): {"item": id, "score": 0|1} for each primary
        item, {"item": id, "breadth": 0|1} for each breadth item
    $PTREG_METRICS (appended; stdout when unset): {"score": mean over primary items,
        "breadth": mean over breadth items}
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDERS = {"bigram": 2, "trigram": 3}
BLANK = "___"
VOCAB = 256


class NGramModel:
    """Interpolated Witten-Bell n-gram model over bytes.

    P(c | h) = (C(h c) + N1+(h ·) · P(c | h')) / (C(h) + N1+(h ·)), with h' the history
    without its oldest byte, down to the uniform 1/256; a history never seen passes its
    whole mass to the shorter one. Lines are padded with newlines on the left, so every
    position has a full history.
    """

    def __init__(self, order: int, lines: list[bytes]):
        self.order = order
        # counts[k][history of k bytes][next byte]
        self.counts: list[dict[bytes, Counter[int]]] = [defaultdict(Counter) for _ in range(order)]
        for line in lines:
            padded = b"\n" * (order - 1) + line + b"\n"
            for i in range(order - 1, len(padded)):
                for k in range(order):
                    self.counts[k][padded[i - k : i]][padded[i]] += 1
        # per history: total count and number of distinct next bytes
        self.totals = [{h: (sum(c.values()), len(c)) for h, c in table.items()} for table in self.counts]

    def logprob(self, history: bytes, byte: int) -> float:
        p = 1.0 / VOCAB
        for k in range(self.order):
            h = history[len(history) - k :] if k else b""
            seen = self.totals[k].get(h)
            if seen is None:
                continue
            total, distinct = seen
            p = (self.counts[k][h][byte] + distinct * p) / (total + distinct)
        return math.log(p)

    def score(self, line: bytes) -> float:
        """Log-likelihood of the line and its closing newline, from a newline history."""
        padded = b"\n" * (self.order - 1) + line + b"\n"
        return sum(self.logprob(padded[i - self.order + 1 : i], padded[i]) for i in range(self.order - 1, len(padded)))


def write_lines(variable: str, rows: list[dict[str, object]], fallback: bool) -> None:
    """Append JSON lines to the file an environment variable names; stdout if unset and asked."""
    text = "".join(json.dumps(row) + "\n" for row in rows)
    target = os.environ.get(variable)
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(text)
    elif fallback:
        sys.stdout.write(text)


def main() -> None:
    parser = argparse.ArgumentParser(description="Answer the cloze items with a character n-gram model.")
    parser.add_argument("--model", required=True, choices=sorted(ORDERS))
    parser.add_argument("--seed", type=int, required=True, help="which half of the training sentences; ties")
    parser.add_argument("--items", type=Path, default=HERE / "items.jsonl")
    parser.add_argument("--train", type=Path, default=HERE.parent / "warmup" / "data" / "train.txt")
    parser.add_argument("--limit", type=int, default=None, help="only the first N items (for quick tests)")
    args = parser.parse_args()

    sentences = args.train.read_bytes().splitlines()
    rng = random.Random(args.seed)
    half = rng.sample(sentences, len(sentences) // 2)
    model = NGramModel(ORDERS[args.model], half)
    ties = random.Random(args.seed + 1_000_003)  # a stream of its own, the same for both arms

    items = [json.loads(line) for line in args.items.read_text(encoding="utf-8").splitlines()]
    if args.limit is not None:
        items = items[: args.limit]
    per_item: list[dict[str, object]] = []
    results: dict[str, list[int]] = {"score": [], "breadth": []}
    for item in items:
        scores = [model.score(item["text"].replace(BLANK, option, 1).encode("ascii")) for option in item["options"]]
        best = max(scores)
        choice = ties.choice([i for i, s in enumerate(scores) if s == best])
        correct = int(choice == item["answer"])
        metric = "score" if item["group"] == "primary" else "breadth"
        results[metric].append(correct)
        per_item.append({"item": item["id"], metric: correct})
    write_lines("PTREG_ITEMS", per_item, fallback=False)
    # a group with no items has no mean: left out, not written as zero
    write_lines("PTREG_METRICS", [{name: sum(v) / len(v) for name, v in results.items() if v}], fallback=True)


if __name__ == "__main__":
    main()
