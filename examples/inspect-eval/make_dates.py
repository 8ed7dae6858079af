"""Writes dates.jsonl: 300 dates drawn from 1700-2299 with a fixed seed, each asking which day of
the week it fell (or falls) on, the answer taken from Python's proleptic Gregorian calendar.

Deterministic: running it again rewrites the same file."""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path

FIRST, LAST = datetime.date(1700, 1, 1), datetime.date(2299, 12, 31)
SAMPLES = 300
SEED = 48


def dates() -> list[datetime.date]:
    draw = random.Random(SEED)
    span = (LAST - FIRST).days
    return [FIRST + datetime.timedelta(days=draw.randrange(span + 1)) for _ in range(SAMPLES)]


def main() -> None:
    lines = [
        json.dumps(
            {"id": f"d{n:03d}", "input": f"Which day of the week is {day.isoformat()}?", "target": day.strftime("%A")}
        )
        for n, day in enumerate(dates())
    ]
    (Path(__file__).parent / "dates.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
