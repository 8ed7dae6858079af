"""Ship or reject: the frozen champion or its challenger on the cloze items; one run of one model.

    python3 examples/challenger/challenger.py --model {champion|challenger} --seed K

Both models read the same inputs as the cloze evaluation (examples/eval/): the primary items of
examples/eval/items.jsonl and, for training, the half of the sentences of
examples/warmup/data/train.txt that the seed draws. Both are byte models of order 3 that score
a line from a newline history through its own closing newline; an item is answered by the
likelihood of its line with each option in the blank, ties going to an option the seed draws.

- champion: the trigram the cloze evaluation found best, interpolated Witten-Bell down to the
  uniform 1/256. Its arithmetic is the cloze evaluation's, step for step, so that it gives the
  same answer on every item for the same seed (tests/examples/test_harnesses.py holds it to
  that).
- challenger: an interpolated Kneser-Ney trigram (Chen and Goodman's form). The top order
  keeps raw counts; the two lower orders count how many distinct bytes precede a context
  rather than how often it occurs; each order subtracts one discount D = n1 / (n1 + 2 n2),
  with n1 and n2 the numbers of that order's counts equal to 1 and to 2 in the training half,
  and hands the mass it frees to the order below. Nothing is fitted on the items.

Metrics, one JSON object to $PTREG_METRICS (appended; stdout when unset):
    score             fraction of the primary items answered right
    latency_ms        median milliseconds per item, timed around the item's scoring only
    items_per_second  items scored / seconds of the whole scoring loop (training excluded)
Per item, to $PTREG_ITEMS (appended; skipped when unset): {"item": id, "score": 0|1}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
ORDER = 3
BYTES = 256
BLANK = "___"
# The tie stream of the cloze evaluation: its own generator, the same for both arms.
TIE_STREAM = 1_000_003


def ngram_counts(lines: list[bytes]) -> list[dict[bytes, Counter[int]]]:
    """counts[k][history of k bytes][next byte], over lines padded on the left with newlines."""
    counts: list[dict[bytes, Counter[int]]] = [defaultdict(Counter) for _ in range(ORDER)]
    for line in lines:
        padded = b"\n" * (ORDER - 1) + line + b"\n"
        for i in range(ORDER - 1, len(padded)):
            for k in range(ORDER):
                counts[k][padded[i - k : i]][padded[i]] += 1
    return counts


class WittenBell:
    """P(c | h) = (C(h c) + T(h) P(c | h')) / (C(h) + T(h)), T(h) the distinct bytes seen after h.

    h' drops the oldest byte of h; below the empty history lies the uniform 1/256, and a
    history never seen hands its whole mass to the shorter one. Evaluated from the shortest
    history up, in the order and with the operations the cloze evaluation uses, so that equal
    likelihoods (which decide ties) come out equal here too.
    """

    def __init__(self, lines: list[bytes]):
        # per order: history -> (counts of the next byte, C(h), T(h))
        self.levels = [
            {h: (dict(nxt), sum(nxt.values()), len(nxt)) for h, nxt in table.items()} for table in ngram_counts(lines)
        ]

    def prob(self, history: bytes, byte: int) -> float:
        p = 1.0 / BYTES
        for k, level in enumerate(self.levels):
            seen = level.get(history[len(history) - k :] if k else b"")
            if seen is None:
                continue
            counts, total, distinct = seen
            p = (counts.get(byte, 0) + distinct * p) / (total + distinct)
        return p


def discount(counts: list[int]) -> float:
    """Ney, Essen and Kneser's estimate n1 / (n1 + 2 n2), from one order's counts."""
    tally = Counter(counts)
    ones, twos = tally[1], tally[2]
    if ones + twos == 0:
        return 0.0  # no singletons and no pairs: nothing to estimate unseen mass from
    return ones / (ones + 2 * twos)


class KneserNey:
    """P(c | h) = max(N(h c) - D, 0) / N(h) + D T(h) / N(h) P(c | h'), interpolated Kneser-Ney.

    N is the raw count at the top order and, below it, the continuation count: the number of
    distinct bytes seen just before h c. T(h) is the number of bytes c with N(h c) > 0, D the
    order's discount. As for the champion, below the empty history lies the uniform 1/256 and
    a history never seen hands its whole mass to the shorter one. Each history keeps the
    discounted probabilities of its next bytes and its back-off weight, so a byte costs one
    look-up per order, as the champion's does.
    """

    def __init__(self, lines: list[bytes]):
        raw = ngram_counts(lines)
        # continuation counts, from the top order down: how many distinct bytes precede h c
        orders: list[dict[bytes, Counter[int]]] = [raw[ORDER - 1]]
        for _ in range(ORDER - 1):
            above = orders[0]
            below: dict[bytes, Counter[int]] = defaultdict(Counter)
            for history, nxt in above.items():
                for byte in nxt:
                    below[history[1:]][byte] += 1
            orders.insert(0, below)
        self.discounts = [discount([n for nxt in table.values() for n in nxt.values()]) for table in orders]
        # per order: history -> (discounted probability of each next byte, back-off weight)
        self.levels: list[dict[bytes, tuple[dict[int, float], float]]] = []
        for d, table in zip(self.discounts, orders, strict=True):
            level = {}
            for history, nxt in table.items():
                total = sum(nxt.values())
                kept = {byte: max(n - d, 0.0) / total for byte, n in nxt.items()}
                level[history] = (kept, d * len(nxt) / total)
            self.levels.append(level)

    def prob(self, history: bytes, byte: int) -> float:
        p = 1.0 / BYTES
        for k, level in enumerate(self.levels):
            seen = level.get(history[len(history) - k :] if k else b"")
            if seen is None:
                continue
            kept, weight = seen
            p = kept.get(byte, 0.0) + weight * p
        return p


MODELS: dict[str, type[WittenBell] | type[KneserNey]] = {"champion": WittenBell, "challenger": KneserNey}


def line_logprob(model: WittenBell | KneserNey, line: bytes) -> float:
    """Log-likelihood of the line and its closing newline, from a history of newlines."""
    padded = b"\n" * (ORDER - 1) + line + b"\n"
    return sum(math.log(model.prob(padded[i - ORDER + 1 : i], padded[i])) for i in range(ORDER - 1, len(padded)))


def append_lines(variable: str, rows: list[dict[str, object]], stdout_if_unset: bool) -> None:
    """JSON lines appended to the file an environment variable names, or to stdout if asked."""
    text = "".join(json.dumps(row) + "\n" for row in rows)
    target = os.environ.get(variable)
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(text)
    elif stdout_if_unset:
        sys.stdout.write(text)


def main() -> None:
    parser = argparse.ArgumentParser(description="Answer the primary cloze items with the champion or the challenger.")
    parser.add_argument("--model", required=True, choices=sorted(MODELS))
    parser.add_argument("--seed", type=int, required=True, help="which half of the training sentences; ties")
    parser.add_argument("--items", type=Path, default=EXAMPLES / "eval" / "items.jsonl")
    parser.add_argument("--train", type=Path, default=EXAMPLES / "warmup" / "data" / "train.txt")
    parser.add_argument("--limit", type=int, default=None, help="only the first N primary items (quick checks)")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")

    sentences = args.train.read_bytes().splitlines()
    half = random.Random(args.seed).sample(sentences, len(sentences) // 2)
    model = MODELS[args.model](half)
    ties = random.Random(args.seed + TIE_STREAM)

    rows = [json.loads(line) for line in args.items.read_text(encoding="utf-8").splitlines()]
    items = [item for item in rows if item["group"] == "primary"][: args.limit]
    if not items:
        sys.exit(f"challenger.py: {args.items} holds no primary items")

    correct: list[int] = []
    millis: list[float] = []
    loop_start = time.perf_counter()
    for item in items:
        start = time.perf_counter()
        scores = [
            line_logprob(model, item["text"].replace(BLANK, option, 1).encode("ascii")) for option in item["options"]
        ]
        best = max(scores)
        choice = ties.choice([i for i, s in enumerate(scores) if s == best])
        millis.append(1000 * (time.perf_counter() - start))
        correct.append(int(choice == item["answer"]))
    loop_seconds = time.perf_counter() - loop_start

    per_item: list[dict[str, object]] = [
        {"item": item["id"], "score": right} for item, right in zip(items, correct, strict=True)
    ]
    append_lines("PTREG_ITEMS", per_item, stdout_if_unset=False)
    metrics: dict[str, object] = {
        "score": sum(correct) / len(correct),
        "latency_ms": statistics.median(millis),
        "items_per_second": len(items) / loop_seconds,
    }
    append_lines("PTREG_METRICS", [metrics], stdout_if_unset=True)


if __name__ == "__main__":
    main()
