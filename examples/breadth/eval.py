"""Score a byte n-gram model on the breadth items alone; one run of one arm.

    python3 examples/breadth/eval.py --model {bigram|trigram} --seed K

The breadth half of the cloze evaluation (examples/eval/eval.py), on a larger set of items of
the same kind (examples/breadth/items.jsonl): the same models, trained and asked the same way,
written again here so that this script reads nothing from examples/eval/.

- The model: a byte n-gram of order 2 (bigram) or 3 (trigram) with interpolated Witten-Bell
  smoothing down to the uniform 1/256, trained on the half of the sentences of
  examples/warmup/data/train.txt that ``random.Random(seed).sample`` draws; both arms of a
  round get the same seed, so the same half.
- An item: each option is put into the blank, the line is scored from a history of newlines
  through its own closing newline, and the most likely option is the answer. Ties go to the
  option that ``random.Random(seed + 1_000_003).choice`` draws among the tied ones, one
  draw per item in the order of the file.

Output, one JSON object per line:
    $PTREG_ITEMS (appended; skipped when unset): {"item": id, "breadth": 0|1} per item
    $PTREG_METRICS (appended; stdout when unset): {"breadth": fraction of the items right}

An items file that is not what make_items.py writes (a line that is not an item, a second item
of one id, an item of another group) is refused in one line naming it, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
from pathlib import Path
from typing import NoReturn

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
ORDERS = {"bigram": 2, "trigram": 3}
BYTES = 256
BLANK = "___"
TIE_STREAM = 1_000_003  # the cloze evaluation's offset: a stream of its own, the same for both arms


class WittenBell:
    """P(c | h) = (C(h c) + T(h) P(c | h')) / (C(h) + T(h)), T(h) the distinct bytes seen after h.

    h' is h without its oldest byte; below the empty history lies the uniform 1/256, and a
    history never seen hands all its mass to the shorter one. The probability is built from the
    empty history up, with the cloze evaluation's operations in its order: likelihoods decide
    ties only when they are equal to the last bit, so the same arithmetic must give the same bits.
    """

    def __init__(self, order: int, lines: list[bytes]):
        self.order = order
        # per history length k: history -> (count of each next byte, C(h), T(h))
        tallies: list[dict[bytes, dict[int, int]]] = [{} for _ in range(order)]
        for line in lines:
            padded = b"\n" * (order - 1) + line + b"\n"
            for i in range(order - 1, len(padded)):
                for k in range(order):
                    following = tallies[k].setdefault(padded[i - k : i], {})
                    following[padded[i]] = following.get(padded[i], 0) + 1
        self.levels = [
            {history: (following, sum(following.values()), len(following)) for history, following in level.items()}
            for level in tallies
        ]

    def prob(self, history: bytes, byte: int) -> float:
        p = 1.0 / BYTES
        for k, level in enumerate(self.levels):
            seen = level.get(history[len(history) - k :] if k else b"")
            if seen is None:
                continue
            following, total, distinct = seen
            p = (following.get(byte, 0) + distinct * p) / (total + distinct)
        return p

    def line_logprob(self, line: bytes) -> float:
        """Log-likelihood of the line and its closing newline, from a history of newlines."""
        width = self.order - 1
        padded = b"\n" * width + line + b"\n"
        # sum(), as the cloze evaluation adds: from Python 3.12 it compensates, and a loop would not
        return sum(math.log(self.prob(padded[i - width : i], padded[i])) for i in range(width, len(padded)))


def unusable(problem: str) -> NoReturn:
    """One line on stderr and exit 2, the command workload's code for unusable input."""
    print(f"eval.py: {problem}", file=sys.stderr)
    sys.exit(2)


def training_half(train: Path, seed: int) -> list[bytes]:
    """The half of the training sentences the seed draws, as the cloze evaluation draws it."""
    try:
        sentences = train.read_bytes().splitlines()
    except OSError as error:
        unusable(f"{train}: cannot read: {error}")
    return random.Random(seed).sample(sentences, len(sentences) // 2)


def answer(model: WittenBell, item: dict[str, object], ties: random.Random) -> int:
    """The index of the option the model finds most likely; one draw from the tie stream."""
    text, options = item["text"], item["options"]
    assert isinstance(text, str) and isinstance(options, list)
    scores = [model.line_logprob(text.replace(BLANK, option, 1).encode("ascii")) for option in options]
    best = max(scores)
    return ties.choice([i for i, score in enumerate(scores) if score == best])


def read_items(path: Path) -> list[dict[str, object]]:
    """The breadth items of the file, each checked; a problem ends the run in one line (exit 2)."""

    def refuse(where: str, problem: str) -> NoReturn:
        unusable(f"{path}:{where}: {problem}")

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        unusable(f"{path}: cannot read: {error}")
    items: list[dict[str, object]] = []
    ids: set[object] = set()
    for number, line in enumerate(lines, start=1):
        where = str(number)
        try:
            item = json.loads(line)
        except ValueError:
            refuse(where, "not JSON")
        if not isinstance(item, dict):
            refuse(where, "not a JSON object")
        ident, text, options, right = item.get("id"), item.get("text"), item.get("options"), item.get("answer")
        if not isinstance(ident, str) or not ident or ident in ids:
            refuse(where, f"id {ident!r} is missing or given twice")
        if item.get("group") != "breadth":
            refuse(where, f"item {ident} is of group {item.get('group')!r}, not breadth")
        if not isinstance(text, str) or not text.isascii() or text.count(BLANK) != 1:
            refuse(where, f"item {ident}: text must be ASCII with exactly one {BLANK}")
        if (
            not isinstance(options, list)
            or len(options) < 2
            or not all(isinstance(o, str) and o.isascii() and o for o in options)
            or len(set(options)) != len(options)
        ):
            refuse(where, f"item {ident}: options must be two or more distinct ASCII strings")
        if type(right) is not int or not 0 <= right < len(options):
            refuse(where, f"item {ident}: answer must be the index of an option")
        ids.add(ident)
        items.append(item)
    return items


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
    parser = argparse.ArgumentParser(description="Answer the breadth items with a byte n-gram model.")
    parser.add_argument("--model", required=True, choices=sorted(ORDERS))
    parser.add_argument("--seed", type=int, required=True, help="which half of the training sentences; ties")
    parser.add_argument("--items", type=Path, default=HERE / "items.jsonl")
    parser.add_argument("--train", type=Path, default=EXAMPLES / "warmup" / "data" / "train.txt")
    parser.add_argument("--limit", type=int, default=None, help="only the first N items (quick checks)")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")

    items = read_items(args.items)[: args.limit]
    if not items:
        unusable(f"{args.items}: no items")  # no mean to write, and none is made up
    model = WittenBell(ORDERS[args.model], training_half(args.train, args.seed))
    ties = random.Random(args.seed + TIE_STREAM)
    right = [int(answer(model, item, ties) == item["answer"]) for item in items]

    append_lines("PTREG_ITEMS", [{"item": i["id"], "breadth": r} for i, r in zip(items, right, strict=True)], False)
    append_lines("PTREG_METRICS", [{"breadth": sum(right) / len(right)}], stdout_if_unset=True)


if __name__ == "__main__":
    main()
